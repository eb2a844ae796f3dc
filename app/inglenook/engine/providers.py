"""Remote engines the user added: name, base URL and where the API key is kept.

Stored in their own file (paths.providers_file()), not in settings.json, and the key is not in
it: it is in the system keyring (remote_keys.py), unless the user agreed to plain text here
(no keyring on the system) or chose to keep it for this session only. A remote model is named
everywhere a model path goes by a reference, `remote://<provider id>/<model id, %-quoted>`, so
settings (last model, per-model defaults) and provenance treat it like a file path.
"""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from collections.abc import Iterable
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Literal
from urllib.parse import quote, unquote

from inglenook import paths
from inglenook.core.filelock import file_lock
from inglenook.core.files import write_atomic
from inglenook.core.jsonload import JsonLoadError, load_json
from inglenook.engine import remote_keys
from inglenook.engine.remote_api import Endpoint, normalize_base_url

KeyPlace = Literal["none", "keyring", "file", "session"]
KEY_PLACES: tuple[str, ...] = ("none", "keyring", "file", "session")
REF_SCHEME = "remote://"
MAX_NAME = 80
MAX_MARKED = 512  # models marked as reading images, per endpoint
MAX_MODEL_ID = 256
_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,47}$")


class ProviderError(ValueError):
    """A provider that cannot be saved or used as given; the message is for the user."""


@dataclass(frozen=True)
class Provider:
    id: str  # stable: model references and the keyring entry use it
    name: str
    base_url: str  # normalized (remote_api.normalize_base_url)
    key_place: KeyPlace = "none"
    # Only with key_place "file": the user agreed to plain text. Never in a repr.
    plain_key: str = field(default="", repr=False)
    # Model ids the user marked as reading images, for servers that do not say (remote_vision).
    vision_models: tuple[str, ...] = ()

    @property
    def account(self) -> str:
        """Its entry in the keyring."""
        return f"provider:{self.id}"

    def ref(self, model: str) -> str:
        return model_ref(self.id, model)


# -- model references -----------------------------------------------------------------------
def model_ref(provider_id: str, model: str) -> str:
    return f"{REF_SCHEME}{provider_id}/{quote(model, safe='')}"


def parse_model_ref(path: str) -> tuple[str, str] | None:
    """(provider id, model id) of a remote reference; None for anything else (a file path)."""
    if not path.startswith(REF_SCHEME):
        return None
    provider_id, sep, model = path[len(REF_SCHEME):].partition("/")
    if not sep or not _ID.match(provider_id):
        return None
    return provider_id, unquote(model)


def is_remote_ref(path: str) -> bool:
    return parse_model_ref(path) is not None


def model_name_of(path: str) -> str:
    """The model id a reference names; anything else is taken as a model id already."""
    parsed = parse_model_ref(path)
    return parsed[1] if parsed else path


# -- the file -------------------------------------------------------------------------------
class ProviderStore:
    """Reads the file at every call (another window may have changed it); writes under a lock.

    `problem` says why the file could not be read at the last read ("" when it could).
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or paths.providers_file()
        self.problem = ""

    def providers(self) -> list[Provider]:
        self.problem = ""
        try:
            data = load_json(self.path)
        except FileNotFoundError:
            return []
        except (OSError, JsonLoadError) as exc:
            self.problem = f"{self.path.name} could not be read ({exc})."
            return []
        items = data.get("providers") if isinstance(data, dict) else None
        found = [p for p in map(_from_dict, items if isinstance(items, list) else []) if p]
        if len(found) != (len(items) if isinstance(items, list) else -1):
            self.problem = f"{self.path.name}: some entries were not usable and are ignored."
        return found

    def get(self, provider_id: str) -> Provider | None:
        return next((p for p in self.providers() if p.id == provider_id), None)

    def find(self, name_or_id: str) -> Provider | None:
        """By id, or by name (case-insensitive): what a user types after --endpoint."""
        wanted = name_or_id.strip().casefold()
        return next((p for p in self.providers()
                     if p.id == name_or_id or p.name.casefold() == wanted), None)

    def save(self, name: str, base_url: str, api_key: str | None = None, *,
             provider_id: str = "",
             key_place: Literal["auto", "file", "session"] = "auto") -> Provider:
        """Add (no provider_id) or change a provider. `api_key`: None keeps the stored key,
        "" removes it, anything else is stored: in the keyring ("auto"; NoKeyring when there is
        none, KeyStoreError when it fails: ask the user, then save again with "file" or
        "session"). Raises ProviderError for a bad name or address."""
        name = " ".join(name.split())
        if not name or len(name) > MAX_NAME:
            raise ProviderError(f"Give the endpoint a name of 1 to {MAX_NAME} characters.")
        try:
            url = normalize_base_url(base_url)
        except ValueError as exc:
            raise ProviderError(str(exc)) from None
        with self._locked():
            current = self.providers()
            if any(p.name.casefold() == name.casefold() and p.id != provider_id
                   for p in current):
                raise ProviderError(f"There is already an endpoint named {name!r}.")
            old = next((p for p in current if p.id == provider_id), None)
            if provider_id and old is None:
                raise ProviderError("This endpoint was removed meanwhile.")
            provider = old or Provider(_new_id(name, {p.id for p in current}), name, url)
            provider = replace(provider, name=name, base_url=url)
            if api_key is not None:
                provider = _store_key(provider, api_key, key_place)
            kept = [p for p in current if p.id != provider.id]
            self._write([*kept, provider] if old is None else
                        [provider if p.id == provider.id else p for p in current])
        return provider

    def mark_vision(self, provider_id: str, models: Iterable[str]) -> Provider:
        """Keep which of this endpoint's models read images (those its server does not say
        about); ProviderError when the endpoint is gone."""
        marked = _marked(models)
        with self._locked():
            current = self.providers()
            old = next((p for p in current if p.id == provider_id), None)
            if old is None:
                raise ProviderError("This endpoint was removed meanwhile.")
            provider = replace(old, vision_models=marked)
            self._write([provider if p.id == provider_id else p for p in current])
        return provider

    def remove(self, provider_id: str) -> None:
        """Forget a provider and its key (a keyring that fails to delete it is not fatal)."""
        with self._locked():
            current = self.providers()
            gone = [p for p in current if p.id == provider_id]
            self._write([p for p in current if p.id != provider_id])
        for provider in gone:
            # The entry is gone from Inglenook; the keyring's own tools can remove the key.
            with contextlib.suppress(remote_keys.KeyStoreError):
                remote_keys.delete(provider.account)

    def api_key(self, provider: Provider) -> str:
        """The provider's key ("" when it has none). Raises KeyStoreError when the keyring
        fails, or when a session-only key was not given in this session."""
        if provider.key_place == "keyring":
            return remote_keys.read(provider.account)
        if provider.key_place == "file":
            return provider.plain_key
        if provider.key_place == "session":
            key = remote_keys.session_key(provider.account)
            if not key:
                raise remote_keys.KeyStoreError(
                    f"The API key of {provider.name} is kept for one session only: enter it "
                    "again in Remote engines….")
            return key
        return ""

    def endpoint(self, provider: Provider) -> Endpoint:
        return Endpoint(provider.base_url, self.api_key(provider), provider.name)

    # -- the file itself ---------------------------------------------------------------------
    def _locked(self) -> AbstractContextManager[None]:
        return file_lock(self.path.with_name(self.path.name + ".lock"))

    def _write(self, providers: list[Provider]) -> None:
        data = {"version": 1, "providers": [_to_dict(p) for p in providers]}
        # write_atomic's temporary file is created readable by this user only (mkstemp), which
        # matters when a key is kept here in plain text.
        write_atomic(self.path, (json.dumps(data, ensure_ascii=False, indent=2) + "\n").encode())


def _store_key(provider: Provider, key: str, place: str) -> Provider:
    account = provider.account
    if not key:
        if provider.key_place == "keyring":
            remote_keys.delete(account)
        remote_keys.forget_for_session(account)
        return replace(provider, key_place="none", plain_key="")
    if place == "file":
        kept = replace(provider, key_place="file", plain_key=key)
    elif place == "session":
        remote_keys.keep_for_session(account, key)
        kept = replace(provider, key_place="session", plain_key="")
    else:
        remote_keys.store(account, key)  # NoKeyring / KeyStoreError: the caller asks the user
        kept = replace(provider, key_place="keyring", plain_key="")
    if provider.key_place == "keyring" and kept.key_place != "keyring":
        with contextlib.suppress(remote_keys.KeyStoreError):  # it stays there, unused
            remote_keys.delete(account)
    return kept


def _new_id(name: str, taken: set[str]) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", name.casefold()).strip("-")[:32].strip("-") or "endpoint"
    candidate = slug
    while candidate in taken:
        candidate = f"{slug[:32]}-{uuid.uuid4().hex[:6]}"
    return candidate


def _to_dict(provider: Provider) -> dict[str, object]:
    data = asdict(provider)
    if provider.key_place != "file":
        data.pop("plain_key")
    data["vision_models"] = list(provider.vision_models)
    if not provider.vision_models:
        data.pop("vision_models")
    return data


def _marked(models: Iterable[object]) -> tuple[str, ...]:
    """Model ids as kept: strings of a sane length, each once, in order, at most MAX_MARKED."""
    kept = dict.fromkeys(m for m in models if isinstance(m, str) and 0 < len(m) <= MAX_MODEL_ID)
    return tuple(kept)[:MAX_MARKED]


def _from_dict(raw: object) -> Provider | None:
    if not isinstance(raw, dict):
        return None
    pid, name, url = raw.get("id"), raw.get("name"), raw.get("base_url")
    place, key = raw.get("key_place", "none"), raw.get("plain_key", "")
    if not (isinstance(pid, str) and _ID.match(pid) and isinstance(name, str) and name.strip()
            and isinstance(url, str) and place in KEY_PLACES and isinstance(key, str)):
        return None
    try:
        url = normalize_base_url(url)
    except ValueError:
        return None
    marked = raw.get("vision_models", [])
    return Provider(pid, name.strip()[:MAX_NAME], url, place,
                    key if place == "file" else "",
                    _marked(marked[:MAX_MARKED * 2] if isinstance(marked, list) else []))
