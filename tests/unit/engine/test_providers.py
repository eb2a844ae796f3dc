"""Remote engine settings: providers.json (never settings.json), keys in the keyring, and what
happens without one (plain text only with consent, or this session only)."""

from __future__ import annotations

import json
import stat

import pytest

from inglenook import paths
from inglenook.engine import remote_keys
from inglenook.engine.providers import (
    ProviderError,
    ProviderStore,
    is_remote_ref,
    model_name_of,
    model_ref,
    parse_model_ref,
)
from tests.helpers import keyrings
from tests.helpers.keyrings import BrokenKeyring, MemoryKeyring

memory_keyring = keyrings.memory_keyring
no_keyring = keyrings.no_keyring
broken_keyring = keyrings.broken_keyring
KEY = "sk-test-0123456789"


def file_text() -> str:
    return paths.providers_file().read_text(encoding="utf-8")


def test_model_references_round_trip_any_model_id() -> None:
    for model in ("Qwen/Qwen2.5-32B-Instruct", "llama3:8b", "a b/c%d", "/models/x.gguf"):
        ref = model_ref("gpu-server", model)
        assert is_remote_ref(ref) and parse_model_ref(ref) == ("gpu-server", model)
        assert model_name_of(ref) == model
    assert parse_model_ref("/home/me/models/x.gguf") is None
    assert parse_model_ref("remote://Bad Id/x") is None
    assert model_name_of("plain-name") == "plain-name"


def test_a_key_goes_to_the_keyring_not_to_any_file(memory_keyring: MemoryKeyring) -> None:
    store = ProviderStore()
    saved = store.save("GPU server", "gpu-box:8000", KEY)
    assert (saved.id, saved.base_url, saved.key_place) == ("gpu-server", "http://gpu-box:8000/v1",
                                                          "keyring")
    assert memory_keyring.passwords == {(remote_keys.SERVICE, "provider:gpu-server"): KEY}
    assert KEY not in file_text()
    assert not paths.settings_file().exists()
    again = ProviderStore().get("gpu-server")
    assert again == saved and store.api_key(again) == KEY
    assert store.endpoint(again).api_key == KEY


def test_editing_keeps_or_replaces_or_removes_the_key(memory_keyring: MemoryKeyring) -> None:
    store = ProviderStore()
    first = store.save("vLLM", "http://a:8000", KEY)
    renamed = store.save("vLLM big", "http://b:8000/v1", provider_id=first.id)
    assert renamed.id == first.id and store.api_key(renamed) == KEY
    store.save("vLLM big", "http://b:8000/v1", "new-key", provider_id=first.id)
    assert store.api_key(store.get(first.id)) == "new-key"  # type: ignore[arg-type]
    cleared = store.save("vLLM big", "http://b:8000/v1", "", provider_id=first.id)
    assert cleared.key_place == "none" and memory_keyring.passwords == {}
    assert [p.name for p in store.providers()] == ["vLLM big"]


def test_names_are_unique_and_addresses_checked(memory_keyring: MemoryKeyring) -> None:
    store = ProviderStore()
    store.save("Box", "http://box:8000")
    with pytest.raises(ProviderError, match="already an endpoint named"):
        store.save("box", "http://other:8000")
    with pytest.raises(ProviderError, match="http:// or https://"):
        store.save("Other", "ftp://other")
    with pytest.raises(ProviderError, match="name"):
        store.save("   ", "http://other:8000")
    second = store.save("Box 2", "http://box2:8000")
    assert second.id == "box-2" and store.find("BOX 2") == second and store.find("box-2")


def test_removing_forgets_the_key_too(memory_keyring: MemoryKeyring) -> None:
    store = ProviderStore()
    saved = store.save("Box", "http://box:8000", KEY)
    store.remove(saved.id)
    assert store.providers() == [] and memory_keyring.passwords == {}


def test_without_a_keyring_saving_a_key_asks_first(no_keyring: None) -> None:
    store = ProviderStore()
    with pytest.raises(remote_keys.NoKeyring, match="No system keyring"):
        store.save("Box", "http://box:8000", KEY)
    assert store.providers() == []  # nothing saved before the user answers
    assert not paths.providers_file().exists() or KEY not in file_text()


def test_plain_text_only_with_consent_and_only_the_users_to_read(no_keyring: None) -> None:
    store = ProviderStore()
    saved = store.save("Box", "http://box:8000", KEY, key_place="file")
    assert saved.key_place == "file" and store.api_key(saved) == KEY
    stored = json.loads(file_text())["providers"][0]
    assert stored["plain_key"] == KEY and stored["key_place"] == "file"
    assert stat.S_IMODE(paths.providers_file().stat().st_mode) & 0o077 == 0
    assert KEY not in repr(saved) and KEY not in repr(store.endpoint(saved))  # not in logs
    # Back to no key: the plain text is gone from the file.
    store.save("Box", "http://box:8000", "", provider_id=saved.id)
    assert KEY not in file_text()


def test_a_session_key_is_kept_in_memory_only(no_keyring: None) -> None:
    store = ProviderStore()
    saved = store.save("Box", "http://box:8000", KEY, key_place="session")
    assert KEY not in file_text() and store.api_key(saved) == KEY
    remote_keys.forget_for_session(saved.account)  # as after a restart
    with pytest.raises(remote_keys.KeyStoreError, match="one session only"):
        store.api_key(saved)


def test_a_keyring_that_fails_is_reported(broken_keyring: BrokenKeyring) -> None:
    with pytest.raises(remote_keys.KeyStoreError, match=r"did not store the key.*locked"):
        ProviderStore().save("Box", "http://box:8000", KEY)


def test_a_damaged_file_is_reported_and_its_good_entries_kept(
        memory_keyring: MemoryKeyring) -> None:
    path = paths.providers_file()
    path.write_text(json.dumps({"providers": [
        {"id": "ok", "name": "OK", "base_url": "http://ok:1/v1"},
        {"id": "Bad Id", "name": "x", "base_url": "http://x/v1"},
        {"id": "nourl", "name": "x", "base_url": "ftp://x"},
        {"id": "sneaky", "name": "S", "base_url": "http://s/v1", "plain_key": "leak"}]}))
    store = ProviderStore()
    found = store.providers()
    assert [p.id for p in found] == ["ok", "sneaky"] and "not usable" in store.problem
    assert found[1].plain_key == ""  # a key in the file counts only with key_place "file"
    path.write_text("{not json")
    assert store.providers() == [] and "could not be read" in store.problem
