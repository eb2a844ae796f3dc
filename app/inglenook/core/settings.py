"""The user's settings: what the window remembers between runs, stored as one JSON file.

Reading never fails: a missing file gives the defaults, and a file that cannot be parsed is
moved aside (settings.json.bad-<timestamp>) so the user's data is kept for inspection while
the app starts with defaults. Writing is atomic, so a crash mid-save cannot leave half a file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from inglenook import paths
from inglenook.core.load import KV_CACHE_TYPES, LoadParams, ModelDefaults
from inglenook.core.sampling import SamplingParams

log = logging.getLogger(__name__)

DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant."


@dataclass
class Settings:
    sampling: SamplingParams = field(default_factory=SamplingParams)
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    # Load options: they apply the next time a model is loaded.
    n_ctx: int = 0
    n_gpu_layers: int = -1
    n_threads: int = 0
    n_batch: int = 512
    flash_attn: bool = False
    kv_cache_type: str = "f16"
    use_mmap: bool = True
    use_mlock: bool = False
    # Window state.
    last_model: str = ""
    window_geometry: str = ""  # base64 of QWidget.saveGeometry()
    side_panel_visible: bool = True
    model_defaults: dict = field(default_factory=dict)  # model path -> ModelDefaults.to_dict()

    def defaults_for(self, model_path: str) -> ModelDefaults:
        return ModelDefaults.from_dict(self.model_defaults.get(model_path))

    def set_defaults(self, model_path: str, defaults: ModelDefaults) -> None:
        if defaults.empty:
            self.model_defaults.pop(model_path, None)
        else:
            self.model_defaults[model_path] = defaults.to_dict()

    def load_params(self, model_path: str) -> LoadParams:
        return LoadParams(
            model_path=model_path,
            n_ctx=self.n_ctx,
            n_gpu_layers=self.n_gpu_layers,
            n_threads=self.n_threads,
            n_batch=self.n_batch,
            flash_attn=self.flash_attn,
            kv_cache_type=self.kv_cache_type,
            use_mmap=self.use_mmap,
            use_mlock=self.use_mlock,
        )

    def to_dict(self) -> dict:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["sampling"] = self.sampling.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Settings:
        """Build from stored JSON: unknown keys and values of the wrong type are ignored,
        numbers are clamped, and load options that cannot work together are repaired."""
        defaults = cls()
        values: dict[str, object] = {}
        sampling = data.get("sampling")
        if isinstance(sampling, dict):
            values["sampling"] = SamplingParams.from_dict(sampling)
        for f in dataclasses.fields(cls):
            if f.name == "sampling" or f.name not in data:
                continue
            raw = data[f.name]
            kind = type(getattr(defaults, f.name))
            # bool is an int subclass, and a str is not a bool: accept only the exact type
            # (ints may come as whole floats from hand-edited files).
            if kind is int and isinstance(raw, float) and raw.is_integer():
                raw = int(raw)
            if type(raw) is not kind:
                continue
            values[f.name] = raw
        settings = cls(**values)  # type: ignore[arg-type]
        return _repaired(settings)


def _repaired(s: Settings) -> Settings:
    """Clamp load options into what LoadParams.validate() accepts."""
    s.n_ctx = max(0, s.n_ctx)
    s.n_gpu_layers = max(-1, s.n_gpu_layers)
    s.n_threads = max(0, s.n_threads)
    s.n_batch = max(1, s.n_batch)
    if s.kv_cache_type not in KV_CACHE_TYPES:
        s.kv_cache_type = "f16"
    if s.kv_cache_type != "f16":
        # A quantized V cache needs flash attention; the user asked for the cache type.
        s.flash_attn = True
    return s


def load_settings(path: Path | None = None) -> Settings:
    """The stored settings, or the defaults. Never raises."""
    try:
        path = path or paths.settings_file()
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Settings()
    except (OSError, UnicodeDecodeError) as exc:
        log.warning("Could not read settings %s: %s", path, exc)
        if path is not None:
            _move_aside(path)
        return Settings()
    try:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("settings file does not hold a JSON object")
    except ValueError as exc:
        log.warning("Settings file %s is corrupt (%s); using defaults", path, exc)
        _move_aside(path)
        return Settings()
    return Settings.from_dict(data)


def _move_aside(path: Path) -> None:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    bad = path.with_name(f"{path.name}.bad-{stamp}")
    n = 1
    while bad.exists():  # never overwrite an earlier bad file kept for inspection
        n += 1
        bad = path.with_name(f"{path.name}.bad-{stamp}-{n}")
    try:
        os.replace(path, bad)
    except OSError as exc:
        log.warning("Could not move %s aside: %s", path, exc)


def save_settings(settings: Settings, path: Path | None = None) -> None:
    """Write atomically: a temporary file in the same folder, fsynced, then renamed over."""
    path = path or paths.settings_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(settings.to_dict(), indent=2, ensure_ascii=False) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    # Make the rename itself durable; not every platform lets a folder be opened.
    with contextlib.suppress(OSError):
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
