"""Settings: stored as JSON, read back forgivingly, written atomically."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inglenook import paths
from inglenook.core.load import LoadParams, ModelDefaults
from inglenook.core.sampling import SamplingParams
from inglenook.core.settings import (
    DEFAULT_SYSTEM_PROMPT,
    Settings,
    load_settings,
    save_settings,
)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("INGLENOOK_HOME", str(tmp_path))
    return tmp_path


def test_defaults() -> None:
    s = Settings()
    assert s.sampling == SamplingParams()
    assert s.system_prompt == DEFAULT_SYSTEM_PROMPT == "You are a helpful assistant."
    assert (s.n_ctx, s.n_gpu_layers, s.n_threads, s.n_batch) == (0, -1, 0, 512)
    assert (s.flash_attn, s.kv_cache_type, s.use_mmap, s.use_mlock) == (False, "f16", True, False)
    assert (s.last_model, s.window_geometry, s.side_panel_visible) == ("", "", True)


def test_round_trip(home: Path) -> None:
    s = Settings(
        sampling=SamplingParams(temperature=0.2, top_k=10, seed=42, stop=("###", "\nUser:")),
        system_prompt="Be brief.\nVery brief.",
        n_ctx=4096, n_gpu_layers=20, n_threads=6, n_batch=256,
        flash_attn=True, kv_cache_type="q8_0", use_mmap=False, use_mlock=True,
        last_model="/models/a.gguf", window_geometry="AdnQywADAAA=", side_panel_visible=False,
    )
    save_settings(s)
    assert paths.settings_file().is_file()
    assert load_settings() == s


def test_explicit_path(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "s.json"
    save_settings(Settings(system_prompt="x"), path)
    assert load_settings(path).system_prompt == "x"


def test_missing_file_gives_defaults(home: Path) -> None:
    assert load_settings() == Settings()
    assert not paths.settings_file().exists()


@pytest.mark.parametrize("content", [b"{not json", b"[1, 2]", b"\xff\xfe\x00garbage", b""])
def test_corrupt_file_moved_aside(home: Path, content: bytes) -> None:
    path = paths.settings_file()
    path.write_bytes(content)
    assert load_settings() == Settings()
    assert not path.exists()
    kept = list(path.parent.glob("settings.json.bad-*"))
    assert len(kept) == 1
    assert kept[0].read_bytes() == content


def test_second_corrupt_file_does_not_overwrite_first(home: Path) -> None:
    path = paths.settings_file()
    for content in ("{one", "{two"):
        path.write_text(content)
        load_settings()
    kept = sorted(p.read_text() for p in path.parent.glob("settings.json.bad-*"))
    assert kept == ["{one", "{two"]


def test_out_of_range_values_clamped(home: Path) -> None:
    paths.settings_file().write_text(json.dumps({
        "sampling": {"temperature": 9.0, "top_p": -1, "top_k": 100000, "seed": -50},
        "n_ctx": -5, "n_batch": 0, "n_gpu_layers": -7,
    }))
    s = load_settings()
    assert s.sampling.temperature == 2.0
    assert s.sampling.top_p == 0.0
    assert s.sampling.top_k == 200
    assert s.sampling.seed == -1
    assert (s.n_ctx, s.n_batch, s.n_gpu_layers) == (0, 1, -1)
    s.load_params("m.gguf").validate()


def test_unknown_keys_and_wrong_types_ignored(home: Path) -> None:
    paths.settings_file().write_text(json.dumps({
        "from_the_future": 1,
        "sampling": {"temperature": 0.3, "quantum_p": 0.5, "top_k": "many"},
        "system_prompt": 12,
        "use_mmap": "no",
        "n_threads": True,
        "n_batch": 1024.0,
        "last_model": "/m.gguf",
    }))
    s = load_settings()
    assert s.sampling == SamplingParams(temperature=0.3)
    assert s.system_prompt == DEFAULT_SYSTEM_PROMPT
    assert s.use_mmap is True
    assert s.n_threads == 0
    assert s.n_batch == 1024
    assert s.last_model == "/m.gguf"


def test_inconsistent_load_options_repaired(home: Path) -> None:
    paths.settings_file().write_text(json.dumps({"kv_cache_type": "q4_0", "flash_attn": False}))
    s = load_settings()
    assert (s.kv_cache_type, s.flash_attn) == ("q4_0", True)
    paths.settings_file().write_text(json.dumps({"kv_cache_type": "bf13"}))
    assert load_settings().kv_cache_type == "f16"


def test_atomic_write_leaves_no_temp_files(home: Path) -> None:
    path = paths.settings_file()
    for i in range(3):
        save_settings(Settings(n_batch=100 + i))
    assert [p.name for p in path.parent.iterdir()] == ["settings.json"]
    assert json.loads(path.read_text())["n_batch"] == 102


def test_failed_write_keeps_old_file(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = paths.settings_file()
    save_settings(Settings(system_prompt="old"))

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    with monkeypatch.context() as m, pytest.raises(OSError):
        m.setattr("inglenook.core.settings.os.replace", broken_replace)
        save_settings(Settings(system_prompt="new"))
    assert [p.name for p in path.parent.iterdir()] == ["settings.json"]
    assert load_settings(path).system_prompt == "old"


def test_load_params() -> None:
    s = Settings(n_ctx=2048, n_gpu_layers=0, n_threads=4, n_batch=128, flash_attn=True,
                 kv_cache_type="q4_0", use_mmap=False, use_mlock=True)
    p = s.load_params("/m.gguf")
    assert p == LoadParams("/m.gguf", 2048, 0, 4, 128, True, "q4_0", False, True)
    p.validate()


def test_model_defaults_round_trip_and_apply(tmp_path: Path) -> None:
    settings = Settings()
    settings.set_defaults("/m/a.gguf", ModelDefaults(n_ctx=2048, n_gpu_layers=10,
                                                     preset="Code", chat_template="{{ x }}"))
    settings.set_defaults("/m/b.gguf", ModelDefaults())  # empty: nothing stored
    save_settings(settings, tmp_path / "s.json")
    loaded = load_settings(tmp_path / "s.json")
    assert list(loaded.model_defaults) == ["/m/a.gguf"]
    defaults = loaded.defaults_for("/m/a.gguf")
    params = defaults.apply(LoadParams("/m/a.gguf", n_ctx=8192, n_gpu_layers=-1))
    assert (params.n_ctx, params.n_gpu_layers, params.chat_template) == (2048, 10, "{{ x }}")
    assert loaded.defaults_for("/m/other.gguf").apply(params) == params


def test_malformed_model_defaults_fall_back_to_the_panel() -> None:
    odd = ModelDefaults.from_dict({"n_ctx": "big", "n_gpu_layers": -7, "preset": 3,
                                   "chat_template": None})
    assert odd == ModelDefaults() and odd.empty
    assert ModelDefaults.from_dict("nonsense") == ModelDefaults()
