"""Every load option of LOAD_SPECS has its editor in the side panel (and, when it is a per-model
option, in the defaults dialog), with the spec's range and words, and what the user sets there
is what the model loads with."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QCheckBox, QComboBox, QLineEdit, QSpinBox, QWidget
from pytestqt.qtbot import QtBot

from inglenook.core.load import LOAD_SPECS, LoadOptions, LoadParams, LoadSpec, ModelDefaults
from inglenook.core.settings import Settings
from inglenook.ui.models.defaults_dialog import ModelDefaultsDialog
from inglenook.ui.side.sampling_panel import SamplingPanel
from tests.unit.core.test_load_specs import other_value

pytestmark = pytest.mark.gui
EDITORS: dict[str, type[QWidget]] = {"int": QSpinBox, "choice": QComboBox, "bool": QCheckBox,
                                     "path": QLineEdit}
SUFFIX = {"int": "spin", "choice": "combo", "bool": "check", "path": "edit"}


def user_sets(editor: QWidget, value: object) -> None:
    """What a user does to the editor (its own signals fire, as they do for a user)."""
    if isinstance(editor, QSpinBox):
        assert isinstance(value, int)
        editor.setValue(value)
    elif isinstance(editor, QComboBox):
        editor.setCurrentText(str(value))
    elif isinstance(editor, QCheckBox):
        editor.setChecked(bool(value))
    elif isinstance(editor, QLineEdit):
        editor.setText(str(value))
        editor.editingFinished.emit()


def find_editor(parent: QWidget, spec: LoadSpec, prefix: str = "") -> QWidget:
    editor = parent.findChild(EDITORS[spec.kind], f"{prefix}{spec.name}_{SUFFIX[spec.kind]}")
    assert editor is not None, spec.name
    return editor


PANEL = [n for n, s in LOAD_SPECS.items() if s.group != "model"]  # the rest: per model only


@pytest.mark.parametrize("name", PANEL)
def test_every_load_option_has_a_panel_editor_that_reaches_load_params(
        qtbot: QtBot, name: str) -> None:
    panel = SamplingPanel()
    qtbot.addWidget(panel)
    spec = LOAD_SPECS[name]
    editor = find_editor(panel, spec)
    assert editor.toolTip() == spec.tooltip
    if isinstance(editor, QSpinBox):  # the range and "automatic" as the spec says them
        assert (editor.minimum(), editor.maximum()) == (spec.minimum, spec.maximum)
        assert editor.specialValueText() == spec.special_value_text
    value = other_value(spec)
    with qtbot.waitSignal(panel.settings_changed):
        user_sets(editor, value)
    assert getattr(LoadParams.of("/m.gguf", panel.load_options()), name) == value
    assert getattr(panel.apply_to(Settings()).load, name) == value
    shown = SamplingPanel()
    qtbot.addWidget(shown)
    shown.set_settings(Settings(load=LoadOptions().replace(
        **({name: value, "flash_attn": True} if name == "kv_cache_type" else {name: value}))))
    assert getattr(LoadParams.of("/m.gguf", shown.load_options()), name) == value


def test_the_panel_has_no_load_editor_without_a_spec(qtbot: QtBot) -> None:
    panel = SamplingPanel()
    qtbot.addWidget(panel)
    assert set(panel.load.fields) == set(PANEL)


def test_a_models_own_options_are_offered_per_model_only(qtbot: QtBot) -> None:
    """A vision projector belongs to one model: in the panel it would load with every one."""
    own = [n for n, s in LOAD_SPECS.items() if s.group == "model"]
    assert own == ["mmproj_path", "template_name"] and all(LOAD_SPECS[n].per_model
                                                           for n in own)
    panel = SamplingPanel()
    qtbot.addWidget(panel)
    assert not set(own) & set(panel.load.fields)


# The chat template has a row of its own (named built-ins, the file's own, your Jinja):
# tests/gui/test_templates_window.py.
@pytest.mark.parametrize("name", [n for n, s in LOAD_SPECS.items()
                                  if s.per_model and n != "template_name"])
def test_every_per_model_option_has_a_dialog_row(qtbot: QtBot, name: str) -> None:
    spec = LOAD_SPECS[name]
    dialog = ModelDefaultsDialog("/m/a.gguf", ModelDefaults(), [], gpu_offload=True)
    qtbot.addWidget(dialog)
    tick = dialog.findChild(QCheckBox, f"defaults_{name}_override")
    assert tick is not None and not tick.isChecked() and tick.text() == spec.label
    editor = dialog.fields[name].editor
    assert not editor.isEnabled()  # the side panel's, until ticked
    spin = dialog.findChild(QSpinBox, f"defaults_{name}_spin")
    if spin is not None:  # the panel's range: no -2 or 1000 of its own
        assert (spin.minimum(), spin.maximum()) == (spec.minimum, spec.maximum)
    assert dialog.defaults().empty
    value = other_value(spec)
    tick.setChecked(True)
    assert editor.isEnabled()
    dialog.fields[name].set_value(value)
    own = dialog.defaults()
    assert getattr(own.apply(LoadParams("/m/a.gguf")), name) == value
    settings = Settings()
    settings.set_defaults("/m/a.gguf", own)
    assert Settings.parse(settings.to_dict())[0].defaults_for("/m/a.gguf") == own
    again = ModelDefaultsDialog("/m/a.gguf", own, [], gpu_offload=True)
    qtbot.addWidget(again)
    assert again.overrides[name].isChecked() and again.fields[name].value() == value


def test_dialog_says_gpu_layers_cannot_be_set_on_a_cpu_build(qtbot: QtBot) -> None:
    dialog = ModelDefaultsDialog("/m/a.gguf", ModelDefaults(), [], gpu_offload=False)
    qtbot.addWidget(dialog)
    assert not dialog.overrides["n_gpu_layers"].isEnabled()
    assert "CPU only" in dialog.overrides["n_gpu_layers"].toolTip()


def test_the_pool_size_is_off_with_a_kv_cache_per_reply(qtbot: QtBot) -> None:
    """The shared pool is the default; with a KV cache per reply its size means nothing."""
    panel = SamplingPanel()
    qtbot.addWidget(panel)
    pool = find_editor(panel, LOAD_SPECS["kv_pool"])
    per_reply = find_editor(panel, LOAD_SPECS["kv_per_reply"])
    assert isinstance(per_reply, QCheckBox) and isinstance(pool, QSpinBox)
    assert pool.isEnabled() and not per_reply.isChecked()
    assert pool.specialValueText() == "Context length"
    user_sets(per_reply, True)
    assert not pool.isEnabled() and panel.load_options().kv_per_reply
    user_sets(per_reply, False)
    assert pool.isEnabled()
