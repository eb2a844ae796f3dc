"""AppSettings, the window's one owner of settings.json: changed(name), one debounced save."""

from __future__ import annotations

import pytest
from pytestqt.qtbot import QtBot

from inglenook import paths
from inglenook.core.load import LoadOptions, ModelDefaults
from inglenook.core.settings import Settings, SettingsFile, SettingsSaveError, SettingsValueError
from inglenook.ui.app_settings import AppSettings


class CountingFile(SettingsFile):
    """The real settings file, counting its writes."""

    def __init__(self) -> None:
        super().__init__()
        self.saves = 0

    def save(self, settings: Settings) -> Settings:
        self.saves += 1
        return super().save(settings)


@pytest.fixture
def app(qtbot: QtBot) -> AppSettings:
    return AppSettings(file=CountingFile())


def changes_of(app: AppSettings) -> list[str]:
    names: list[str] = []
    app.changed.connect(names.append)
    return names


def test_changed_fires_once_per_field_that_really_changed(app: AppSettings) -> None:
    names = changes_of(app)
    assert app.set_load(n_ctx=4096) and names == ["load"]
    assert not app.set_load(n_ctx=4096) and names == ["load"]  # the same value: no news
    assert app.update(load=app.value.load, theme="dark", welcomed=True) == ["theme",
                                                                            "welcomed"]
    assert names == ["load", "theme", "welcomed"]
    assert app.value.theme == "dark" and app.value.load.n_ctx == 4096


def test_a_burst_of_changes_is_saved_once_and_reloads_equal(
        qtbot: QtBot, app: AppSettings) -> None:
    file = app.file
    assert isinstance(file, CountingFile)
    for n_ctx in range(1024, 1034):
        app.set_load(n_ctx=n_ctx)
    app.set_model_defaults("/models/a.gguf", ModelDefaults({"n_ctx": 512}, preset="Precise"))
    assert file.saves == 0 and app.save_pending
    qtbot.waitUntil(lambda: file.saves > 0, timeout=5_000)
    assert file.saves == 1 and not app.save_pending  # nothing left to write later
    reloaded = SettingsFile(paths.settings_file()).load()
    assert reloaded == app.value and reloaded.load.n_ctx == 1033
    assert reloaded.defaults_for("/models/a.gguf").preset == "Precise"


def test_a_bad_value_is_refused_with_a_message_and_nothing_is_lost(
        app: AppSettings) -> None:
    app.update(load=LoadOptions(n_ctx=4096), system_prompt="Be brief.")
    app.save_now()
    names = changes_of(app)
    before = app.value
    with pytest.raises(SettingsValueError, match=r"n_ctx: -5 is outside 0…"):
        app.update(load=LoadOptions(n_ctx=-5), theme="dark")  # refused together: no theme
    with pytest.raises(SettingsValueError, match="kv_cache_type: 'bf13' is not one of"):
        app.set_load(kv_cache_type="bf13")
    with pytest.raises(SettingsValueError, match="colour is not a setting"):
        app.set("colour", "red")
    assert app.value == before and names == [] and not app.save_pending
    assert SettingsFile(paths.settings_file()).load() == before


def test_a_save_that_fails_says_so_and_keeps_the_settings(
        qtbot: QtBot, app: AppSettings, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(_settings: Settings) -> Settings:
        raise SettingsSaveError("Could not save settings: the disk is full.")

    monkeypatch.setattr(app.file, "save", full)
    app.set("system_prompt", "Kept.")
    with qtbot.waitSignal(app.save_failed, timeout=5_000) as failed:
        pass  # the debounced save
    assert "disk is full" in failed.args[0]
    assert app.value.system_prompt == "Kept."
    monkeypatch.delattr(app.file, "save")  # the file's own save again (the class's)
    assert app.save_now() and SettingsFile(paths.settings_file()).load().system_prompt == "Kept."


def test_what_another_window_saved_meanwhile_is_reported_as_changed(
        app: AppSettings) -> None:
    app.save_now()
    other = AppSettings()
    other.set("theme", "light")
    other.save_now()
    names = changes_of(app)
    app.set_load(n_ctx=2048)
    assert app.save_now()
    assert app.value.theme == "light" and app.value.load.n_ctx == 2048
    assert names == ["load", "theme"]
