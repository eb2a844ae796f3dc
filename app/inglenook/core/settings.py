"""The user's settings: what the window remembers between runs, stored as one JSON file.

Reading never fails and never loses anything. A missing file gives the defaults; a file that
cannot be used at all (not JSON, too large, nested absurdly deep) is moved aside as
settings.json.bad-<timestamp>; a file with some unusable values (NaN, 1e999, text where a
number belongs, a number out of range) is copied aside the same way and rewritten with those
values repaired. Every repair is reported in SettingsFile.problems so the window can say so.

Writing is atomic (a crash mid-save cannot leave half a file) and merges: several windows on one
profile each write only the keys they changed since they loaded or last saved, into what is on
disk now, under a lock file (core/filelock.py). Failures raise SettingsSaveError with a message
for the user.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inglenook import paths
from inglenook.core.filelock import TIMEOUT_S, LockTimeout, file_lock
from inglenook.core.files import keep_aside, write_atomic
from inglenook.core.jsonload import MAX_BYTES, JsonLoadError, load_json
from inglenook.core.load import (
    LOAD_SPECS,
    MAX_CTX,  # noqa: F401  (re-exported: the settings' limits are the load options')
    MAX_PATH,
    LoadOptions,
    LoadParams,
    ModelDefaults,
)
from inglenook.core.messages import DEFAULT_OVERFLOW, OVERFLOW_POLICIES
from inglenook.core.sampling import SamplingParams
from inglenook.core.values import (
    MAX_TEXT,
    Number,
    check_bool,
    check_number,
    check_text,
    is_text,
    parse_fields,
    show,
)

log = logging.getLogger(__name__)

DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant."

# The other numbers' ranges (the load options' are in LOAD_SPECS).
LIMITS: dict[str, Number] = {
    "api_port": Number(int, 1, 65535),
    "model_idle_minutes": Number(int, -1, 7 * 24 * 60),
    "text_zoom": Number(int, 50, 300),
}
MAX_GEOMETRY = 8192  # base64 of QWidget.saveGeometry() is about 100 characters
MAX_PRESET_NAME = 256
MAX_MODEL_DEFAULTS = 1000
THEMES = ("system", "light", "dark")  # "system" follows the desktop's light or dark scheme
LEGACY_LOAD_KEYS = frozenset(LOAD_SPECS)  # stored flat, before Settings.load


@dataclass
class Settings:
    sampling: SamplingParams = field(default_factory=SamplingParams)
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    # Load options (core/load.py LoadOptions, LOAD_SPECS): they apply at the next load; a
    # model's own over them are in model_defaults. Older versions stored them flat (read too).
    load: LoadOptions = field(default_factory=LoadOptions)
    overflow: str = DEFAULT_OVERFLOW  # what a new chat leaves out when it outgrows the context
    # Window state.
    last_model: str = ""
    window_geometry: str = ""  # base64 of QWidget.saveGeometry()
    side_panel_visible: bool = False  # closed until asked for: the chat comes first
    sidebar_visible: bool = True
    splitter_state: str = ""  # base64 of QSplitter.saveState(): the panels' widths
    welcomed: bool = False  # the first-run welcome was shown
    theme: str = "system"
    text_zoom: int = 100  # the chat's text size, percent (View ▸ Larger / Smaller text)
    # The local API server (inglenook serve, from the window).
    api_enabled: bool = False  # serving when the window last closed: served again at start
    api_host: str = "127.0.0.1"
    api_port: int = 8080
    api_token: str = ""
    api_cors_origins: str = ""  # space-separated browser origins allowed to call it
    api_ollama: bool = False  # Ollama's /api/* routes too (a second open door: off by default)
    api_fetch_images: bool = False  # images requests name by http(s) URL are fetched (opt-in)
    api_allow_pull: bool = False  # Ollama's /api/pull downloads from the Hub for a client (opt-in)
    api_isolate_clients: bool = False  # each tokenless client's KV cache its own (not shared)
    # A model an API request named (loaded for it) is unloaded when idle this long; -1: never.
    model_idle_minutes: int = 5
    model_defaults: dict = field(default_factory=dict)  # model path -> ModelDefaults.to_dict()
    # Voice: replies on screen read aloud sentence by sentence as they are written.
    read_replies_aloud: bool = False
    # The installed speech models used (Models → Library): a whisper folder's name, a voice's
    # name; "": the first installed (speech/catalog.py).
    speech_model: str = ""
    speech_voice: str = ""
    speech_language: str = ""  # what dictation listens for: a whisper code; "": detected

    def defaults_for(self, model_path: str) -> ModelDefaults:
        return ModelDefaults.from_dict(self.model_defaults.get(model_path))

    def set_defaults(self, model_path: str, defaults: ModelDefaults) -> None:
        if defaults.empty:
            self.model_defaults.pop(model_path, None)
        else:
            self.model_defaults[model_path] = defaults.to_dict()

    def load_params(self, model_path: str) -> LoadParams:
        """What a model loads with: the options for every model, its own over them. Safe on
        any thread (the API's loads read it on the worker's): the window replaces its Settings
        whole on every change, never edits one in place."""
        own = self.defaults_for(model_path)
        return LoadParams.of(model_path, own.apply(self.load),
                             own.chat_template if own.chat_template.strip() else None)

    def to_dict(self) -> dict:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["sampling"] = self.sampling.to_dict()
        data["load"] = self.load.to_dict()
        data["model_defaults"] = dict(self.model_defaults)
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Settings:
        """Build from stored JSON, repairing what cannot be used (see parse). Never raises."""
        return cls.parse(data)[0]

    @classmethod
    def parse(cls, data: object) -> tuple[Settings, list[str]]:
        """Settings from stored JSON and a sentence for every value not used as stored: values
        of the wrong type or not finite go back to their defaults, numbers out of range are
        clamped, load options that cannot work together are repaired. Unknown keys (from a
        newer version, say) are ignored without a word."""
        if not isinstance(data, dict):
            return cls(), [f"the file holds {show(data)}, not settings (reset to the defaults)"]
        if "load" not in data:  # written by an older version: the load options flat
            data = {**data, "load": {k: v for k, v in data.items() if k in LEGACY_LOAD_KEYS}}
        return parse_fields(cls, _FIELD_NAMES, data, _check_field)


_FIELD_NAMES = tuple(f.name for f in dataclasses.fields(Settings))
_TEXT_LIMITS = {"last_model": MAX_PATH, "window_geometry": MAX_GEOMETRY,
                "splitter_state": MAX_GEOMETRY}


def _check_field(name: str, raw: object, default: Any) -> tuple[object, str | list[str] | None]:
    """One stored field of Settings: the value to use and what was wrong with the stored one."""
    if name == "sampling":
        return SamplingParams.parse(raw)
    if name == "model_defaults":
        return _parse_model_defaults(raw)
    if name == "load":
        return LoadOptions.parse(raw)
    if name in LIMITS:
        return check_number(name, raw, LIMITS[name], default)
    if isinstance(default, bool):
        return check_bool(name, raw, default)
    if name == "overflow":
        return check_text(name, raw, default, 16, OVERFLOW_POLICIES)
    if name == "theme":
        return check_text(name, raw, default, 16, THEMES)
    return check_text(name, raw, default, _TEXT_LIMITS.get(name, MAX_TEXT))


def _parse_model_defaults(raw: object) -> tuple[dict[str, dict], list[str]]:
    if not isinstance(raw, dict):
        return {}, [f"model_defaults: {show(raw)} is not a set of models (none kept)"]
    out: dict[str, dict] = {}
    problems: list[str] = []
    for path, entry in raw.items():
        if len(out) >= MAX_MODEL_DEFAULTS:
            problems.append(f"model_defaults: more than {MAX_MODEL_DEFAULTS} models "
                            "(the rest left out)")
            break
        if not path or not is_text(path, MAX_PATH):
            problems.append(f"model_defaults: {show(path)} is not a model path (left out)")
            continue
        where = f"model_defaults[{Path(path).name or show(path)}]"
        if not isinstance(entry, dict):
            problems.append(f"{where}: {show(entry)} is not a set of values (left out)")
            continue
        defaults, found = ModelDefaults.parse(entry, where)
        problems += found
        if not defaults.empty:
            out[path] = defaults.to_dict()
    return out, problems


class SettingsValueError(ValueError):
    """A change to the settings that cannot be used; str() says which value and why."""


def with_changes(settings: Settings, changes: dict[str, object]) -> Settings:
    """A copy of `settings` with `changes` (field name -> value), checked as settings.json
    is; raises SettingsValueError, naming the values, for an unknown field or a value that
    would be repaired (wrong type, out of range, load options that cannot work together).
    `settings` itself is never changed."""
    unknown = [name for name in changes if name not in _FIELDS]
    if unknown:
        raise SettingsValueError(f"Settings not changed: {', '.join(sorted(unknown))} "
                                 "is not a setting.")
    data = settings.to_dict()
    for name, value in changes.items():
        data[name] = value.to_dict() if isinstance(value, (SamplingParams, LoadOptions)) \
            else value
    result, problems = Settings.parse(data)
    if problems:  # "(reset to …)" says what a file would get; here nothing changes
        found = "; ".join(re.sub(r" \([^()]*\)$", "", problem) for problem in problems)
        raise SettingsValueError(f"Settings not changed: {found}.")
    return result


# ---- the file ----------------------------------------------------------------------------

_FIELDS = frozenset(_FIELD_NAMES)
_NESTED = ("sampling", "load", "model_defaults")  # merged key by key (models per path)
Key = tuple[str, ...]


class SettingsSaveError(OSError):
    """Settings could not be written; str() is a message for the user. The file on disk is
    left as it was."""


@dataclass
class _Disk:
    """What settings.json holds now."""

    settings: Settings | None = None  # None: no file, or one that could not be used at all
    unknown: dict = field(default_factory=dict)  # keys this version does not know: kept as is
    problems: list[str] = field(default_factory=list)
    unusable: str = ""  # why the file could not be used at all

    def flat(self) -> dict[Key, object] | None:
        if self.settings is None:
            return None
        flat = _flatten(self.settings.to_dict())
        flat.update({(k,): v for k, v in self.unknown.items()})
        return flat


def _read(path: Path) -> _Disk:
    try:
        data = load_json(path)
    except FileNotFoundError:
        return _Disk()
    except OSError as exc:
        return _Disk(unusable=f"it could not be read: {exc.strerror or exc}")
    except JsonLoadError as exc:
        return _Disk(unusable=str(exc))
    if not isinstance(data, dict):
        return _Disk(unusable=f"it holds {show(data)}, not settings")
    settings, problems = Settings.parse(data)
    unknown = {k: v for k, v in data.items() if k not in _FIELDS and k not in LEGACY_LOAD_KEYS}
    return _Disk(settings, unknown, problems)


def _flatten(data: dict) -> dict[Key, object]:
    flat: dict[Key, object] = {}
    for key, value in data.items():
        if key in _NESTED and isinstance(value, dict):
            flat.update({(key, sub): v for sub, v in value.items()})
        else:
            flat[(key,)] = value
    return flat


def _unflatten(flat: dict[Key, object]) -> dict:
    data: dict = {key: {} for key in _NESTED}
    for key, value in flat.items():
        if len(key) == 2:
            data[key[0]][key[1]] = value
        else:
            data[key[0]] = value
    return data


def _printable(value: object) -> object:
    """Text as it can be written in UTF-8: a lone surrogate (pasted from a broken source)
    becomes U+FFFD rather than making every save fail."""
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, dict):
        return {_printable(k): _printable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_printable(v) for v in value]
    return value


def _encode(settings: Settings, unknown: dict) -> bytes:
    data = settings.to_dict()
    data.update({k: v for k, v in unknown.items() if k not in data})
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _save_error(exc: OSError, path: Path) -> SettingsSaveError:
    if isinstance(exc, LockTimeout):
        why = "another Inglenook window kept the settings file locked. Try again in a moment"
    elif exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
        why = "the disk is full. Free some space and try again"
    elif exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        why = f"the folder {path.parent} is read-only"
    else:
        why = exc.strerror or str(exc)
    return SettingsSaveError(f"Could not save settings to {path}: {why}. "
                             "The settings saved before are unchanged.")


class SettingsFile:
    """settings.json as one window sees it: load() once, save() whenever it changes.

    After load(), `problems` lists every value that was repaired (or why the whole file could
    not be used, which is also in `unusable`), and `kept_at` is where the original was kept
    (None when nothing was wrong or it could not be kept); `notice` is all of it as one
    message for a banner, or None.
    """

    lock_timeout = TIMEOUT_S  # another window holds the lock for milliseconds

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or paths.settings_file()
        self.problems: list[str] = []
        self.kept_at: Path | None = None
        self.unusable = ""
        self._base: dict[Key, object] | None = None  # what this window last loaded or saved

    @property
    def _lock(self) -> Path:
        return self.path.with_name(self.path.name + ".lock")

    def load(self) -> Settings:
        """The stored settings, repaired where needed, or the defaults. Never raises."""
        self.problems, self.kept_at, self.unusable = [], None, ""
        disk = _read(self.path)
        if disk.problems or disk.unusable:
            try:
                with file_lock(self._lock, self.lock_timeout):
                    disk = _read(self.path)  # again, now that no other window can write
                    self._repair(disk)
            except OSError as exc:
                log.warning("Could not repair %s: %s", self.path, exc)
                disk.problems.append(f"the repaired settings could not be written "
                                     f"({exc.strerror or exc})")
        self.unusable = disk.unusable
        if disk.unusable:
            self.problems.append(f"{self.path.name} could not be used: {disk.unusable} "
                                 "(every setting reset to its default)")
        self.problems += disk.problems
        settings = disk.settings or Settings()
        self._base = _flatten(settings.to_dict())
        return settings

    def _repair(self, disk: _Disk) -> None:
        """Keep the file aside and, when some of it was usable, write it back repaired."""
        if disk.unusable:
            log.warning("Settings file %s is unusable (%s); using defaults", self.path,
                        disk.unusable)
            self.kept_at = keep_aside(self.path, move=True)
        elif disk.problems and disk.settings is not None:
            log.warning("Settings file %s repaired: %s", self.path, "; ".join(disk.problems))
            self.kept_at = keep_aside(self.path, move=False)
            write_atomic(self.path, _encode(disk.settings, disk.unknown))

    @property
    def notice(self) -> str | None:
        if not self.problems:
            return None
        if self.unusable:
            text = (f"Your settings file could not be used ({self.unusable}), so every setting "
                    "is back to its default.")
        else:
            shown = "; ".join(self.problems[:4])
            more = f"; and {len(self.problems) - 4} more" if len(self.problems) > 4 else ""
            text = f"Some settings could not be used and were repaired: {shown}{more}."
        if self.kept_at is not None:
            text += f" The original file was kept as {self.kept_at}."
        return text

    def save(self, settings: Settings) -> Settings:
        """Write the keys that changed since load() or the last save() into the file as it is
        now; when this was never loaded, or the file is gone or unusable, write all of them.
        Keys a newer version added are kept. Returns what was written: these settings plus
        what other windows saved meanwhile. Raises SettingsSaveError; the file is then as
        it was."""
        new = _flatten(_printable(settings.to_dict()))  # type: ignore[arg-type]
        base = self._base
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with file_lock(self._lock, self.lock_timeout):
                disk = _read(self.path)
                if disk.unusable or disk.problems:  # edited by hand meanwhile: keep it too
                    self.kept_at = keep_aside(self.path, move=False)
                on_disk = disk.flat() or {}
                if base is None or disk.settings is None:  # all of it is ours to write
                    merged = {k: v for k, v in on_disk.items() if k[0] not in _FIELDS}
                    merged.update(new)
                else:
                    merged = dict(on_disk)
                    merged.update({k: v for k, v in new.items() if base.get(k, _MISSING) != v})
                    for key in base.keys() - new.keys():  # removed here: a model's defaults
                        merged.pop(key, None)
                result, _ = Settings.parse(_unflatten(merged))
                unknown = {k[0]: v for k, v in merged.items() if k[0] not in _FIELDS}
                data = _encode(result, unknown)
                if len(data) > MAX_BYTES:
                    raise SettingsSaveError(
                        f"Could not save settings to {self.path}: they would take "
                        f"{len(data) // 1024:,} KB, more than the {MAX_BYTES // 1024:,} KB "
                        "allowed (a very long system prompt or chat template?). The settings "
                        "saved before are unchanged.")
                write_atomic(self.path, data)
        except SettingsSaveError:
            raise
        except OSError as exc:
            log.warning("Could not save settings to %s: %s", self.path, exc)
            raise _save_error(exc, self.path) from exc
        self._base = new
        return result


_MISSING = object()


def load_settings_report(path: Path | None = None) -> tuple[Settings, list[str]]:
    """The stored settings and what was repaired; the last entry says where the original
    was kept, when it was."""
    file = SettingsFile(path)
    settings = file.load()
    kept = [f"The original file was kept as {file.kept_at}."] if file.kept_at else []
    return settings, file.problems + kept


def load_settings(path: Path | None = None) -> Settings:
    """The stored settings, or the defaults. Never raises."""
    return SettingsFile(path).load()


def save_settings(settings: Settings, path: Path | None = None) -> None:
    """Write exactly these settings, whatever is on disk (keys a newer version added are
    kept). Windows use SettingsFile.save, which merges. Raises SettingsSaveError."""
    SettingsFile(path).save(settings)
