"""Remote engines in the window: the Remote engines dialog (add, test, keys, remove) and the
model picker listing remote models next to local files, against Inglenook's own API server on
loopback over a fake engine host."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from inglenook import paths
from inglenook.core.load import LoadParams
from inglenook.engine.client import EngineClient
from inglenook.engine.providers import ProviderStore
from inglenook.ui.models.picker import REMOTE_ITEM, ModelPicker
from inglenook.ui.models.providers_dialog import KeyChoice, ProvidersDialog
from tests.helpers import keyrings
from tests.helpers.api import Served, serving
from tests.helpers.keyrings import MemoryKeyring
from tests.helpers.peer_server import free_port

pytestmark = pytest.mark.gui
memory_keyring = keyrings.memory_keyring
no_keyring = keyrings.no_keyring
TOKEN = "dialog-test-token-0123456789"
WAIT_MS = 20_000


@pytest.fixture(scope="module")
def served(bundled_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("providers-fake")
    script = folder / "script.json"
    script.write_text(json.dumps({"default": {"text": "Echo: {last}", "token_ms": 0}}))
    client = EngineClient(log_path=folder / "engine.log",
                          command=[sys.executable, "-m", "tests.helpers.fake_host", str(script)])
    client.load(LoadParams(str(bundled_model)))
    with serving(client, token=TOKEN) as s:
        yield s
    client.close()


@pytest.fixture
def dialog(qtbot: QtBot) -> ProvidersDialog:
    d = ProvidersDialog()
    qtbot.addWidget(d)
    d.show()
    return d


def fill(d: ProvidersDialog, name: str, url: str, key: str = "") -> None:
    d.new_provider()
    d.name.setText(name)
    d.url.setText(url)
    d.key.setText(key)


def test_add_test_and_keep_the_key_in_the_keyring(qtbot: QtBot, dialog: ProvidersDialog,
                                                  served: Served,
                                                  memory_keyring: MemoryKeyring) -> None:
    fill(dialog, "Other Inglenook", served.url, TOKEN)  # /v1 is added
    with qtbot.waitSignal(dialog.tested, timeout=WAIT_MS) as tested:
        dialog.test_button.click()
    assert tested.args[0].startswith("Connected in ")
    assert "Inglenook · 1 model:" in dialog.status_line.text()
    with qtbot.waitSignal(dialog.providers_changed):
        assert dialog.save()
    assert dialog.providers_list.count() == 1
    assert dialog.providers_list.currentItem().text() == "Other Inglenook"
    assert list(memory_keyring.passwords.values()) == [TOKEN]
    assert TOKEN not in paths.providers_file().read_text()
    assert dialog.key.text() == "" and "system keyring" in dialog.key_note.text()
    # The stored key is used when the field is left empty.
    with qtbot.waitSignal(dialog.tested, timeout=WAIT_MS) as tested:
        dialog.test_button.click()
    assert tested.args[0].startswith("Connected in ")


def test_a_failed_test_says_why(qtbot: QtBot, dialog: ProvidersDialog, served: Served,
                                memory_keyring: MemoryKeyring) -> None:
    fill(dialog, "Box", served.base_url, "wrong-key")
    with qtbot.waitSignal(dialog.tested, timeout=WAIT_MS) as tested:
        dialog.test_button.click()
    assert "refused the model list (HTTP 401). Check the API key." in tested.args[0]
    fill(dialog, "Box", f"http://127.0.0.1:{free_port()}/v1")
    with qtbot.waitSignal(dialog.tested, timeout=WAIT_MS) as tested:
        dialog.test_button.click()
    assert "Cannot connect to 127.0.0.1" in tested.args[0]
    fill(dialog, "Box", "ftp://box")
    dialog.test_button.click()  # refused before any connection
    assert "http:// or https://" in dialog.status_line.text()


def test_without_a_keyring_the_user_is_asked(dialog: ProvidersDialog, served: Served,
                                             no_keyring: None) -> None:
    questions: list[str] = []
    answers: Iterator[KeyChoice] = iter(["", "file"])

    def ask(message: str) -> KeyChoice:
        questions.append(message)
        return next(answers)

    dialog.ask_key_place = ask
    fill(dialog, "Box", served.base_url, TOKEN)
    assert not dialog.save()  # cancelled: nothing stored
    assert "No system keyring is available" in questions[0]
    assert ProviderStore().providers() == [] and dialog.status_line.text() == "Not saved."
    assert dialog.save()  # plain text, as agreed
    (saved,) = ProviderStore().providers()
    assert saved.key_place == "file" and "plain text" in dialog.key_note.text()


def test_remove_forgets_the_endpoint_and_its_key(dialog: ProvidersDialog, served: Served,
                                                 memory_keyring: MemoryKeyring) -> None:
    fill(dialog, "Box", served.base_url, TOKEN)
    assert dialog.save()
    dialog.confirm_remove = lambda name: name == "Box"
    dialog.remove_button.click()
    assert dialog.providers_list.count() == 0 and memory_keyring.passwords == {}
    assert ProviderStore().providers() == []


def test_the_picker_lists_remote_models_next_to_local_files(
        qtbot: QtBot, served: Served, bundled_model: Path,
        memory_keyring: MemoryKeyring) -> None:
    store = ProviderStore()
    provider = store.save("Other Inglenook", served.base_url, TOKEN)
    store.save("Down", f"http://127.0.0.1:{free_port()}/v1")
    picker = ModelPicker(providers=store)
    qtbot.addWidget(picker)
    picker.refresh(str(bundled_model))
    with qtbot.waitSignal(picker.remote_listed, timeout=WAIT_MS):
        picker.refresh_remote()
    items = [(picker.itemText(i), picker.itemData(i)) for i in range(picker.count())]
    ref = provider.ref(bundled_model.stem)
    assert (f"{bundled_model.stem}  ·  Other Inglenook", ref) in items
    assert items[0][1] == str(bundled_model)  # local files first
    down = next(i for i, (text, _) in enumerate(items) if text == "Down: not reachable")
    assert "Cannot connect" in picker.itemData(down, Qt.ItemDataRole.ToolTipRole)
    assert not picker.model().flags(picker.model().index(down, 0)) & Qt.ItemFlag.ItemIsEnabled
    assert picker.path() == str(bundled_model)  # the current model stays chosen

    with qtbot.waitSignal(picker.model_chosen) as chosen:
        picker.activated.emit(picker.findData(ref))
    assert chosen.args == [ref]
    with qtbot.waitSignal(picker.providers_requested):
        picker.activated.emit(picker.findData(REMOTE_ITEM))
    assert picker.path() == str(bundled_model)


def test_the_picker_shows_a_remote_model_not_listed_yet(qtbot: QtBot) -> None:
    picker = ModelPicker(providers=ProviderStore())
    qtbot.addWidget(picker)
    picker.refresh()
    picker.select("remote://gpu/Qwen%2FQwen2.5-32B")
    assert picker.currentText() == "Qwen/Qwen2.5-32B  ·  remote"
    assert picker.path() == "remote://gpu/Qwen%2FQwen2.5-32B"
