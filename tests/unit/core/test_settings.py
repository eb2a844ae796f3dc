"""Settings: stored as JSON, read back forgivingly, written atomically."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from inglenook import paths
from inglenook.core.load import LoadOptions, LoadParams, ModelDefaults
from inglenook.core.sampling import MAX_STOP_STRINGS, SamplingParams
from inglenook.core.settings import (
    DEFAULT_SYSTEM_PROMPT,
    MAX_CTX,
    Settings,
    SettingsFile,
    SettingsSaveError,
    load_settings,
    load_settings_report,
    save_settings,
)
from tests.helpers.tmpfs import fill, set_read_only, tmpfs


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("INGLENOOK_HOME", str(tmp_path))
    return tmp_path


def test_defaults() -> None:
    s = Settings()
    assert s.sampling == SamplingParams()
    assert s.system_prompt == DEFAULT_SYSTEM_PROMPT == "You are a helpful assistant."
    load = s.load
    assert (load.n_ctx, load.n_gpu_layers, load.n_threads, load.n_batch) == (0, -1, 0, 512)
    assert (load.flash_attn, load.kv_cache_type, load.use_mmap, load.use_mlock) == (
        False, "f16", True, False)
    # The side panel is closed until asked for; the welcome shows on the first run.
    assert (s.last_model, s.window_geometry, s.side_panel_visible) == ("", "", False)
    assert (s.welcomed, s.overflow, s.splitter_state) == (False, "middle", "")


def test_round_trip(home: Path) -> None:
    s = Settings(
        sampling=SamplingParams(temperature=0.2, top_k=10, seed=42, stop=("###", "\nUser:")),
        system_prompt="Be brief.\nVery brief.",
        load=LoadOptions(n_ctx=4096, n_gpu_layers=20, n_threads=6, n_batch=256,
                         flash_attn=True, kv_cache_type="q8_0", use_mmap=False, use_mlock=True),
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
    assert (s.load.n_ctx, s.load.n_batch, s.load.n_gpu_layers) == (0, 1, -1)
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
    assert s.load.use_mmap is True
    assert s.load.n_threads == 0
    assert s.load.n_batch == 1024
    assert s.last_model == "/m.gguf"


def test_inconsistent_load_options_repaired(home: Path) -> None:
    paths.settings_file().write_text(json.dumps({"kv_cache_type": "q4_0", "flash_attn": False,
                                                 "kv_per_reply": True}))
    s = load_settings()
    assert (s.load.kv_cache_type, s.load.flash_attn) == ("q4_0", True)
    # In the shared pool (the default) flash attention is on whatever the switch says.
    paths.settings_file().write_text(json.dumps({"kv_cache_type": "q4_0", "flash_attn": False}))
    s = load_settings()
    assert (s.load.kv_cache_type, s.load.flash_attn, s.load.kv_per_reply) == ("q4_0", False,
                                                                              False)
    paths.settings_file().write_text(json.dumps({"kv_cache_type": "bf13"}))
    assert load_settings().load.kv_cache_type == "f16"


def test_atomic_write_leaves_no_temp_files(home: Path) -> None:
    path = paths.settings_file()
    for i in range(3):
        save_settings(Settings(load=LoadOptions(n_batch=100 + i)))
    assert [p.name for p in path.parent.iterdir()] == ["settings.json"]
    assert json.loads(path.read_text())["load"]["n_batch"] == 102


def test_failed_write_keeps_old_file(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = paths.settings_file()
    save_settings(Settings(system_prompt="old"))

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    with monkeypatch.context() as m, pytest.raises(OSError):
        m.setattr("inglenook.core.files.os.replace", broken_replace)
        save_settings(Settings(system_prompt="new"))
    assert [p.name for p in path.parent.iterdir()] == ["settings.json"]
    assert load_settings(path).system_prompt == "old"


def test_load_params() -> None:
    s = Settings(load=LoadOptions(n_ctx=2048, n_gpu_layers=0, n_threads=4, n_batch=128,
                                  flash_attn=True, kv_cache_type="q4_0", use_mmap=False,
                                  use_mlock=True))
    p = s.load_params("/m.gguf")
    assert p == LoadParams("/m.gguf", n_ctx=2048, n_gpu_layers=0, n_threads=4, n_batch=128,
                           flash_attn=True, kv_cache_type="q4_0", use_mmap=False,
                           use_mlock=True,
                           kv_state_disk_mb=8 * 1024)  # Keep chats ready: 8 GB by default
    p.validate()
    assert Settings(keep_chats_gb=0).load_params("/m.gguf").kv_state_disk_mb == 0


def test_model_defaults_round_trip_and_apply(tmp_path: Path) -> None:
    settings = Settings()
    settings.load = LoadOptions(n_ctx=8192, n_gpu_layers=-1, n_batch=256)
    settings.set_defaults("/m/a.gguf", ModelDefaults({"n_ctx": 2048, "n_gpu_layers": 10},
                                                     preset="Code", chat_template="{{ x }}"))
    settings.set_defaults("/m/b.gguf", ModelDefaults())  # empty: nothing stored
    save_settings(settings, tmp_path / "s.json")
    loaded = load_settings(tmp_path / "s.json")
    assert list(loaded.model_defaults) == ["/m/a.gguf"]
    params = loaded.load_params("/m/a.gguf")
    assert (params.n_ctx, params.n_gpu_layers, params.chat_template) == (2048, 10, "{{ x }}")
    assert params.n_batch == 256  # the options for every model, under its own
    other = loaded.load_params("/m/other.gguf")
    assert (other.n_ctx, other.n_gpu_layers, other.chat_template) == (8192, -1, None)


def test_malformed_model_defaults_fall_back_to_the_panel() -> None:
    odd = ModelDefaults.from_dict({"n_ctx": "big", "n_gpu_layers": "all", "preset": 3,
                                   "chat_template": None})
    assert odd == ModelDefaults() and odd.empty
    assert ModelDefaults.from_dict("nonsense") == ModelDefaults()


# -- hostile files: every unusable value repaired, reported, and the original kept -----------

def strict_json(path: Path) -> dict:
    """Parse as standard JSON: NaN and Infinity are not allowed."""
    def refuse(name: str) -> None:
        raise ValueError(f"{name} in {path}")
    return json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse)


def kept_aside(path: Path) -> list[Path]:
    return sorted(path.parent.glob(f"{path.name}.bad-*"))


@pytest.mark.parametrize(("text", "field", "expected"), [
    ('{"n_ctx": 1e999}', "n_ctx", 0),
    ('{"n_batch": Infinity}', "n_batch", 512),
    ('{"n_threads": -Infinity}', "n_threads", 0),
    ('{"n_gpu_layers": NaN}', "n_gpu_layers", -1),
    ('{"n_ctx": 1' + "0" * 5000 + '}', "n_ctx", 0),  # int() of 5,000 digits raises
    ('{"sampling": {"temperature": NaN}}', "temperature", 0.7),
    ('{"sampling": {"top_k": 1e999}}', "top_k", 40),
    ('{"sampling": {"seed": 1e300}}', "seed", 2**31 - 1),  # finite: clamped
    ('{"sampling": {"top_p": Infinity}}', "top_p", 0.95),
    ('{"sampling": {"max_tokens": 2.5}}', "max_tokens", -1),
    ('{"sampling": {"temperature": "0.2"}}', "temperature", 0.7),
    ('{"sampling": {"min_p": true}}', "min_p", 0.05),
])
def test_unusable_numbers_are_repaired_reported_and_kept(home: Path, text: str, field: str,
                                                         expected: float) -> None:
    path = paths.settings_file()
    content = text[:-1] + ', "system_prompt": "mine"}'
    path.write_text(content)
    file = SettingsFile()
    settings = file.load()
    value = getattr(settings.sampling if "sampling" in text else settings.load, field)
    assert value == expected and type(value) is type(expected)
    assert settings.system_prompt == "mine"  # the usable values are kept
    assert len(file.problems) == 1 and field in file.problems[0]
    assert file.notice is not None and field in file.notice and str(file.kept_at) in file.notice
    assert kept_aside(path) == [file.kept_at]
    assert file.kept_at.read_text() == content
    assert strict_json(path)["system_prompt"] == "mine"  # rewritten, repaired and valid
    again = SettingsFile()
    assert again.load() == settings and again.problems == [] and again.notice is None
    settings.load_params("m.gguf").validate()


def test_a_valid_file_is_neither_reported_nor_rewritten(home: Path) -> None:
    save_settings(Settings(load=LoadOptions(n_ctx=4096), system_prompt="x"))
    path = paths.settings_file()
    before = (path.read_bytes(), path.stat().st_mtime_ns, path.stat().st_ino)
    settings, problems = load_settings_report()
    assert problems == [] and settings.load.n_ctx == 4096
    assert (path.read_bytes(), path.stat().st_mtime_ns, path.stat().st_ino) == before
    assert kept_aside(path) == []


def test_a_100000_deep_file_is_refused_without_recursion(home: Path) -> None:
    path = paths.settings_file()
    content = '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"
    path.write_text(content)
    settings, problems = load_settings_report()
    assert settings == Settings()
    assert "nests deeper" in problems[0] and "kept as" in problems[-1]
    assert not path.exists() and kept_aside(path)[0].read_text() == content


def test_brackets_inside_text_are_not_nesting(home: Path) -> None:
    paths.settings_file().write_text(json.dumps({"system_prompt": "[{" * 1000}))
    assert load_settings_report() == (Settings(system_prompt="[{" * 1000), [])


def test_a_multi_megabyte_file_is_refused(home: Path) -> None:
    path = paths.settings_file()
    path.write_text(json.dumps({"system_prompt": "x" * (3 * 1024 * 1024)}))
    file = SettingsFile()
    assert file.load() == Settings()
    assert "larger than" in file.unusable and file.notice is not None
    assert "back to its default" in file.notice
    assert file.kept_at is not None and file.kept_at.stat().st_size > 3 * 1024 * 1024


def test_stop_must_be_a_list_of_strings(home: Path) -> None:
    paths.settings_file().write_text(json.dumps({"sampling": {"stop": "abc"}}))
    settings, problems = load_settings_report()
    assert settings.sampling.stop == () and "sampling.stop" in problems[0]
    paths.settings_file().write_text(json.dumps(
        {"sampling": {"stop": ["###", 5, "", None, "\nUser:", {"a": 1}]}}))
    settings, problems = load_settings_report()
    assert settings.sampling.stop == ("###", "\nUser:")
    assert "3 of 6 entries" in problems[0]
    assert SamplingParams.from_dict({"stop": "abc"}).stop == ()
    assert len(SamplingParams.from_dict({"stop": ["s"] * 1000}).stop) == MAX_STOP_STRINGS


def test_sampling_parse_reports_for_imported_values() -> None:
    params, problems = SamplingParams.parse(
        {"temperature": float("nan"), "top_k": 10**400, "repeat_penalty": 1.3}, "preset")
    assert params == SamplingParams(top_k=200, repeat_penalty=1.3)
    assert [p.split(":")[0] for p in problems] == ["preset.temperature", "preset.top_k"]
    assert SamplingParams.parse("nonsense")[0] == SamplingParams()


def test_load_options_have_upper_bounds(home: Path) -> None:
    paths.settings_file().write_text(json.dumps(
        {"n_ctx": 10**9, "n_batch": 10**6, "n_threads": 10**5, "n_gpu_layers": 10**4}))
    settings, problems = load_settings_report()
    load = settings.load
    assert (load.n_ctx, load.n_batch, load.n_threads, load.n_gpu_layers) == (
        MAX_CTX, 8192, 512, 999)
    assert len(problems) == 5  # four clamped, and where the original was kept


def test_text_fields_hold_text(home: Path) -> None:
    path = paths.settings_file()
    path.write_text('{"system_prompt": "\\ud800 broken", "last_model": ["/m.gguf"],'
                    ' "kv_cache_type": "f16\\u0000", "window_geometry": 7}')
    settings, problems = load_settings_report()
    assert (settings.system_prompt, settings.last_model, settings.load.kv_cache_type,
            settings.window_geometry) == (DEFAULT_SYSTEM_PROMPT, "", "f16", "")
    assert len(problems) == 5
    strict_json(path)


def test_text_that_cannot_be_encoded_does_not_stop_saving(home: Path) -> None:
    save_settings(Settings(system_prompt="half a pair: \ud83d."))
    assert load_settings().system_prompt == "half a pair: \ufffd."


def test_model_defaults_are_validated_per_model(home: Path) -> None:
    path = paths.settings_file()
    path.write_text('{"model_defaults": {'
                    '"/m/a.gguf": {"n_ctx": 1e999, "n_gpu_layers": 12, "preset": "Code"},'
                    '"/m/b.gguf": "big",'
                    '"/m/c.gguf": {"n_ctx": 4096, "n_gpu_layers": null, "chat_template": 3},'
                    '"/m/d.gguf": {"n_ctx": 99999999999, "n_gpu_layers": -5},'
                    '"": {"n_ctx": 512}}}')
    settings, problems = load_settings_report()
    assert settings.defaults_for("/m/a.gguf") == ModelDefaults({"n_gpu_layers": 12},
                                                               preset="Code")
    assert "/m/b.gguf" not in settings.model_defaults
    assert settings.defaults_for("/m/c.gguf") == ModelDefaults({"n_ctx": 4096})
    assert settings.defaults_for("/m/d.gguf") == ModelDefaults({"n_ctx": MAX_CTX,
                                                                "n_gpu_layers": -1})
    assert sorted(settings.model_defaults) == ["/m/a.gguf", "/m/c.gguf", "/m/d.gguf"]
    assert len(problems) == 7
    assert any("a.gguf" in p and "n_ctx" in p for p in problems)


def test_keys_from_a_newer_version_are_kept(home: Path) -> None:
    path = paths.settings_file()
    path.write_text(json.dumps({"palette": {"accent": "teal"}, "n_ctx": 2048}))
    file = SettingsFile()
    settings = file.load()
    settings.load = settings.load.replace(n_ctx=4096)
    file.save(settings)
    assert json.loads(path.read_text())["palette"] == {"accent": "teal"}
    assert load_settings().load.n_ctx == 4096


def test_a_file_that_cannot_be_repaired_is_still_read(home: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    path = paths.settings_file()
    path.write_text('{"n_ctx": NaN, "system_prompt": "mine"}')

    def read_only(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr("inglenook.core.settings.file_lock", read_only)
    file = SettingsFile()
    assert file.load().system_prompt == "mine"
    assert file.kept_at is None and "could not be written" in file.problems[-1]
    assert path.read_text() == '{"n_ctx": NaN, "system_prompt": "mine"}'


# -- two windows on one profile: each writes only what it changed -----------------------------

def test_two_windows_keep_each_others_changes(home: Path) -> None:
    save_settings(Settings(system_prompt="first", load=LoadOptions(n_ctx=2048)))
    a, b = SettingsFile(), SettingsFile()
    in_a, in_b = a.load(), b.load()
    in_a.load = in_a.load.replace(n_ctx=4096)
    in_a.sampling = in_a.sampling.replace(temperature=0.2)
    a.save(in_a)
    in_b.system_prompt = "second"
    in_b.sampling = in_b.sampling.replace(top_k=7)
    written = b.save(in_b)
    stored = load_settings()
    assert (stored.load.n_ctx, stored.system_prompt) == (4096, "second")
    assert (stored.sampling.temperature, stored.sampling.top_k) == (0.2, 7)
    assert written == stored
    a.save(in_a)  # the first window closes with its stale copy of the prompt
    b.save(in_b)
    assert load_settings() == stored


def test_the_last_change_to_one_key_wins(home: Path) -> None:
    a, b = SettingsFile(), SettingsFile()
    in_a, in_b = a.load(), b.load()
    in_a.load, in_b.load = in_a.load.replace(n_batch=128), in_b.load.replace(n_batch=256)
    a.save(in_a)
    b.save(in_b)
    assert load_settings().load.n_batch == 256
    in_a.load = in_a.load.replace(n_batch=64)
    a.save(in_a)
    assert load_settings().load.n_batch == 64


def test_model_defaults_merge_per_model(home: Path) -> None:
    first = Settings()
    first.set_defaults("/m/old.gguf", ModelDefaults({"n_ctx": 1024}))
    first.set_defaults("/m/gone.gguf", ModelDefaults({"n_ctx": 512}))
    save_settings(first)
    a, b = SettingsFile(), SettingsFile()
    in_a, in_b = a.load(), b.load()
    in_a.set_defaults("/m/a.gguf", ModelDefaults({"n_ctx": 2048}))
    in_a.set_defaults("/m/gone.gguf", ModelDefaults())  # removed in the first window
    a.save(in_a)
    in_b.set_defaults("/m/b.gguf", ModelDefaults(preset="Code"))
    in_b.set_defaults("/m/old.gguf", ModelDefaults({"n_ctx": 8192}))
    b.save(in_b)
    stored = load_settings().model_defaults
    assert sorted(stored) == ["/m/a.gguf", "/m/b.gguf", "/m/old.gguf"]
    assert stored["/m/old.gguf"]["load"] == {"n_ctx": 8192}


def test_a_deleted_file_gets_everything_back(home: Path) -> None:
    file = SettingsFile()
    settings = file.load()
    settings.load = settings.load.replace(n_ctx=4096)
    file.save(settings)
    paths.settings_file().unlink()
    settings.system_prompt = "changed"
    file.save(settings)
    assert load_settings() == settings


def test_a_file_spoiled_while_open_is_kept_and_replaced(home: Path) -> None:
    file = SettingsFile()
    settings = file.load()
    path = paths.settings_file()
    path.write_text("{spoiled")
    settings.load = settings.load.replace(n_ctx=4096)
    file.save(settings)
    assert load_settings() == settings
    assert [p.read_text() for p in kept_aside(path)] == ["{spoiled"]


WRITER = """
import sys
from pathlib import Path
from inglenook.core.load import ModelDefaults
from inglenook.core.settings import SettingsFile
file = SettingsFile(Path(sys.argv[1]))
settings = file.load()
for i in range(int(sys.argv[3])):
    settings.set_defaults(f"/{sys.argv[2]}/{i}.gguf", ModelDefaults({"n_ctx": 1024 + i}))
    file.save(settings)
"""


def test_two_processes_saving_at_once_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    save_settings(Settings(), path)
    saves = 25
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), name, str(saves)])
               for name in ("a", "b")]
    assert [w.wait(timeout=120) for w in writers] == [0, 0]
    stored = load_settings(path).model_defaults
    assert sorted(stored) == sorted(f"/{n}/{i}.gguf" for n in "ab" for i in range(saves))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["settings.json"]


# -- saving fails: a clear error, the file as it was ---------------------------------------------

def test_a_lock_left_by_a_dead_window_is_taken_over(home: Path) -> None:
    lock = paths.settings_file().with_name("settings.json.lock")
    lock.write_text("999999999\n")
    os.utime(lock, (time.time() - 3600, time.time() - 3600))
    save_settings(Settings(load=LoadOptions(n_ctx=4096)))
    assert load_settings().load.n_ctx == 4096 and not lock.exists()


def test_a_lock_held_too_long_gives_a_clear_error(home: Path) -> None:
    save_settings(Settings(system_prompt="before"))
    lock = paths.settings_file().with_name("settings.json.lock")
    lock.write_text(f"{os.getpid()}\n")  # alive and fresh
    file = SettingsFile()
    file.lock_timeout = 0.05
    with pytest.raises(SettingsSaveError, match="locked"):
        file.save(Settings(system_prompt="after"))
    assert lock.exists()
    lock.unlink()
    assert load_settings().system_prompt == "before"


def test_a_full_disk_gives_a_clear_error(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    save_settings(Settings(system_prompt="before"))
    path = paths.settings_file()

    def no_space(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr("inglenook.core.files.os.fsync", no_space)
        with pytest.raises(SettingsSaveError, match="disk is full") as info:
            save_settings(Settings(system_prompt="after"))
    assert str(path) in str(info.value) and "unchanged" in str(info.value)
    assert sorted(p.name for p in path.parent.iterdir()) == ["settings.json"]
    assert load_settings().system_prompt == "before"


def test_a_really_full_disk(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "small", "64k") as disk:
        path = disk / "settings.json"
        save_settings(Settings(system_prompt="before"), path)
        filler = fill(disk)
        big = Settings(system_prompt="after " * 2000)
        with pytest.raises(SettingsSaveError, match="disk is full"):
            save_settings(big, path)
        assert sorted(p.name for p in disk.iterdir()) == ["filler", "settings.json"]
        assert load_settings(path).system_prompt == "before"
        filler.unlink()
        save_settings(big, path)
        assert load_settings(path) == big


def test_a_read_only_folder(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "ro") as disk:
        path = disk / "settings.json"
        save_settings(Settings(system_prompt="before"), path)
        set_read_only(disk, True)
        file = SettingsFile(path)
        settings = file.load()
        assert settings.system_prompt == "before" and file.problems == []
        settings.system_prompt = "after"
        with pytest.raises(SettingsSaveError, match="read-only"):
            file.save(settings)
        assert load_settings(path).system_prompt == "before"


def test_settings_too_large_to_read_back_are_not_written(home: Path) -> None:
    settings = Settings()
    for i in range(40):
        settings.set_defaults(f"/m/{i}.gguf", ModelDefaults(chat_template="{{ x }}" * 9000))
    with pytest.raises(SettingsSaveError, match="more than"):
        save_settings(settings)
    assert not paths.settings_file().exists()


def test_save_settings_writes_exactly_what_it_is_given(home: Path) -> None:
    both = Settings()
    both.set_defaults("/m/a.gguf", ModelDefaults({"n_ctx": 1024}))
    both.set_defaults("/m/b.gguf", ModelDefaults({"n_ctx": 2048}))
    save_settings(both)
    one = Settings()
    one.set_defaults("/m/b.gguf", ModelDefaults({"n_ctx": 2048}))
    save_settings(one)
    assert load_settings() == one


def test_a_checked_change_refuses_a_bad_value_naming_it() -> None:
    from inglenook.core.settings import SettingsValueError, with_changes

    settings = Settings()
    assert with_changes(settings, {"load": LoadOptions(n_ctx=4096)}).load.n_ctx == 4096
    assert settings.load.n_ctx == 0  # a copy: the original is left as it was
    for changes, words in (({"load": {"n_ctx": -5}}, "n_ctx: -5 is outside"),
                           ({"theme": "pink"}, "theme: 'pink'"),
                           ({"api_port": "80"}, "api_port: '80' is not a number"),
                           ({"load": {"kv_cache_type": "q8_0", "kv_per_reply": True}},
                            "needs flash attention"),
                           ({"colour": "red"}, "colour is not a setting")):
        with pytest.raises(SettingsValueError, match="Settings not changed") as caught:
            with_changes(settings, changes)
        assert words in str(caught.value) and "reset to" not in str(caught.value)
    assert with_changes(settings, {"load": LoadOptions(kv_cache_type="q8_0", flash_attn=True)}
                        ).load.flash_attn


# -- settings.json as older versions wrote it: load options flat, every per-model field named --

OLD_FORMAT = {  # written by Inglenook before Settings.load (main at 1cbcf56), abridged
    "sampling": {"temperature": 0.7, "top_k": 40}, "system_prompt": "Be brief.",
    "n_ctx": 4096, "n_gpu_layers": 12, "n_threads": 4, "n_batch": 256, "flash_attn": True,
    "kv_cache_type": "q8_0", "use_mmap": True, "use_mlock": False,
    "allow_beyond_trained": False, "n_threads_batch": 0, "prompt_lookup": False,
    "draft_model_path": "", "mmproj_path": "", "template_name": "auto", "n_slots": 2,
    "overflow": "middle", "last_model": "/m/a.gguf", "theme": "dark",
    "model_defaults": {
        "/m/a.gguf": {"n_ctx": 2048, "n_gpu_layers": None, "preset": "Code",
                      "chat_template": "", "template_name": "", "prompt_lookup": True,
                      "draft_model_path": "", "mmproj_path": "/m/mmproj-a.gguf"},
        "/m/b.gguf": {"n_ctx": 0, "n_gpu_layers": -1, "preset": "", "chat_template": "",
                      "template_name": "gemma", "prompt_lookup": None,
                      "draft_model_path": "", "mmproj_path": ""}},
}


def test_a_settings_file_of_an_older_version_loads_as_it_did(home: Path) -> None:
    path = paths.settings_file()
    path.write_text(json.dumps(OLD_FORMAT))
    file = SettingsFile()
    settings = file.load()
    assert file.problems == [] and settings.theme == "dark"
    assert settings.load == LoadOptions(n_ctx=4096, n_gpu_layers=12, n_threads=4, n_batch=256,
                                        flash_attn=True, kv_cache_type="q8_0",
                                        prompt_lookup=False, n_slots=2)
    # Per model, an empty value was "the side panel's": only what the model set is its own.
    a = settings.load_params("/m/a.gguf")
    assert (a.n_ctx, a.n_gpu_layers, a.prompt_lookup, a.mmproj_path) == (
        2048, 12, True, "/m/mmproj-a.gguf")
    assert settings.defaults_for("/m/a.gguf").preset == "Code"
    b = settings.load_params("/m/b.gguf")
    assert (b.n_ctx, b.n_gpu_layers, b.template_name, b.prompt_lookup) == (
        4096, -1, "gemma", False)
    settings.system_prompt = "Be briefer."  # the next save writes the new shape, all of it
    file.save(settings)
    written = json.loads(path.read_text())
    assert written["load"]["n_ctx"] == 4096 and "n_ctx" not in written
    assert written["model_defaults"]["/m/b.gguf"] == {
        "load": {"n_gpu_layers": -1, "template_name": "gemma"}, "preset": "",
        "chat_template": ""}
    again = load_settings()
    assert again == settings and again.load_params("/m/a.gguf") == a


def test_a_models_own_value_may_be_the_automatic_one(home: Path) -> None:
    """Now that a model's entry names what it sets, "Model default" (0) for one model is a
    value of its own, over a panel set to 8,192."""
    settings = Settings(load=LoadOptions(n_ctx=8192))
    settings.set_defaults("/m/a.gguf", ModelDefaults({"n_ctx": 0}))
    save_settings(settings)
    assert load_settings().load_params("/m/a.gguf").n_ctx == 0
    assert load_settings().load_params("/m/b.gguf").n_ctx == 8192


def test_a_saved_pool_of_0_reads_as_the_pool_now_the_default(home: Path) -> None:
    """Before the pool was the default a saved kv_pool of 0 meant "off, a KV cache per
    reply": it was written for every user, set or not. Now 0 is the automatic pool (the
    context length), what a user who never touched it gets; a size set stays that size, and
    the way back to a cache per reply is its own switch."""
    paths.settings_file().write_text(json.dumps({"load": {"kv_pool": 0, "n_ctx": 8192}}))
    load = load_settings().load
    assert (load.kv_per_reply, load.pool_tokens(8192)) == (False, 8192)
    paths.settings_file().write_text(json.dumps({"load": {"kv_pool": 16384}}))
    assert load_settings().load.pool_tokens(8192) == 16384
    paths.settings_file().write_text(json.dumps({"load": {"kv_pool": 16384,
                                                          "kv_per_reply": True}}))
    assert load_settings().load.pool_tokens(8192) == 0
