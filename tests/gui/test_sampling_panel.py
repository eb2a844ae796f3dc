"""The side panel: values shown and read back, controls kept in step, load options kept valid."""

from __future__ import annotations

import itertools
from typing import TypeVar

import pytest
from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSlider,
    QSpinBox,
)
from pytestqt.qtbot import QtBot

from inglenook.core.load import KV_CACHE_TYPES, LoadOptions, LoadParams
from inglenook.core.sampling import SamplingParams
from inglenook.core.settings import DEFAULT_SYSTEM_PROMPT, Settings
from inglenook.ui.side.load_section import KV_NOTE_RESET
from inglenook.ui.side.sampling_panel import SamplingPanel
from inglenook.ui.widgets.controls import format_stop_strings, parse_stop_strings

pytestmark = pytest.mark.gui


@pytest.fixture
def panel(qtbot: QtBot) -> SamplingPanel:
    widget = SamplingPanel()
    qtbot.addWidget(widget)
    return widget


W = TypeVar("W", bound=QObject)


def find(panel: SamplingPanel, kind: type[W], name: str) -> W:
    widget = panel.findChild(kind, name)
    assert widget is not None, name
    return widget


def test_set_settings_shows_values(panel: SamplingPanel) -> None:
    s = Settings(
        sampling=SamplingParams(temperature=1.3, top_k=12, seed=7, max_tokens=256,
                                mirostat_mode=2, stop=("###", "\nUser:")),
        system_prompt="Talk like a pirate.",
        load=LoadOptions(n_ctx=4096, n_gpu_layers=10, n_threads=3, n_batch=256,
                         flash_attn=True, kv_cache_type="q4_0", use_mmap=False, use_mlock=True),
    )
    panel.set_settings(s)
    assert find(panel, QDoubleSpinBox, "temperature_spin").value() == pytest.approx(1.3)
    assert find(panel, QSlider, "temperature_slider").value() == 130
    assert find(panel, QSpinBox, "top_k_spin").value() == 12
    assert find(panel, QSpinBox, "seed_spin").value() == 7
    assert find(panel, QComboBox, "mirostat_mode_combo").currentText() == "Mirostat 2.0"
    assert find(panel, QPlainTextEdit, "stop_edit").toPlainText() == "###\n\\nUser:"
    assert find(panel, QPlainTextEdit, "system_prompt_edit").toPlainText() == s.system_prompt
    assert find(panel, QComboBox, "kv_cache_type_combo").currentText() == "q4_0"
    assert find(panel, QCheckBox, "use_mlock_check").isChecked()
    assert panel.sampling() == s.sampling
    assert panel.system_prompt() == s.system_prompt
    assert panel.apply_to(Settings(last_model="/m.gguf")) == s.__class__(
        **{**s.__dict__, "last_model": "/m.gguf"})


def test_set_settings_emits_nothing(panel: SamplingPanel, qtbot: QtBot) -> None:
    with qtbot.assertNotEmitted(panel.settings_changed), \
            qtbot.assertNotEmitted(panel.sampling_changed), \
            qtbot.assertNotEmitted(panel.system_prompt_changed):
        panel.set_settings(Settings(sampling=SamplingParams(temperature=0.1), system_prompt="x",
                                    load=LoadOptions(kv_cache_type="q8_0", flash_attn=True)))


def test_slider_updates_spin_and_emits(panel: SamplingPanel, qtbot: QtBot) -> None:
    slider = find(panel, QSlider, "temperature_slider")
    with qtbot.waitSignal(panel.sampling_changed) as blocker, \
            qtbot.waitSignal(panel.settings_changed):
        slider.setValue(150)
    assert find(panel, QDoubleSpinBox, "temperature_spin").value() == pytest.approx(1.5)
    assert blocker.args[0].temperature == pytest.approx(1.5)


def test_slider_keyboard(panel: SamplingPanel, qtbot: QtBot) -> None:
    slider = find(panel, QSlider, "top_k_slider")
    with qtbot.waitSignal(panel.sampling_changed) as blocker:
        qtbot.keyClick(slider, Qt.Key.Key_Right)
    assert blocker.args[0].top_k == SamplingParams().top_k + 1


def test_spin_updates_slider(panel: SamplingPanel, qtbot: QtBot) -> None:
    spin = find(panel, QDoubleSpinBox, "top_p_spin")
    with qtbot.waitSignal(panel.sampling_changed) as blocker:
        spin.setValue(0.42)
    assert find(panel, QSlider, "top_p_slider").value() == 42
    assert blocker.args[0].top_p == pytest.approx(0.42)


def test_seed_random_and_dice(panel: SamplingPanel, qtbot: QtBot) -> None:
    spin = find(panel, QSpinBox, "seed_spin")
    assert spin.value() == -1
    assert spin.text() == "Random"
    assert panel.findChild(QSlider, "seed_slider") is None
    with qtbot.waitSignal(panel.sampling_changed) as blocker:
        qtbot.mouseClick(find(panel, type(panel.seed_dice_button), "seed_dice_button"),
                         Qt.MouseButton.LeftButton)
    assert 0 <= blocker.args[0].seed == spin.value()
    spin.setValue(-1)
    assert panel.sampling().seed == -1
    assert find(panel, QSpinBox, "max_tokens_spin").text() == "Unlimited"


def test_stop_strings_one_per_line(panel: SamplingPanel, qtbot: QtBot) -> None:
    edit = find(panel, QPlainTextEdit, "stop_edit")
    with qtbot.waitSignal(panel.sampling_changed):
        edit.setPlainText("###\n\n   \n\\nUser:\nEND\n")
    assert panel.sampling().stop == ("###", "\nUser:", "END")


@pytest.mark.parametrize("stop", [(), ("a",), ("\n\n", "x\\ny", "tab\there", "\\")])
def test_stop_strings_round_trip(stop: tuple[str, ...]) -> None:
    assert parse_stop_strings(format_stop_strings(stop)) == stop


def test_mirostat_disables_ignored_samplers(panel: SamplingPanel, qtbot: QtBot) -> None:
    combo = find(panel, QComboBox, "mirostat_mode_combo")
    tau = find(panel, QDoubleSpinBox, "mirostat_tau_spin")
    top_k = find(panel, QSpinBox, "top_k_spin")
    assert not tau.isEnabled()
    assert top_k.isEnabled()
    with qtbot.waitSignal(panel.sampling_changed) as blocker:
        combo.setCurrentIndex(1)
    assert blocker.args[0].mirostat_mode == 1
    assert tau.isEnabled()
    assert find(panel, QSlider, "mirostat_eta_slider").isEnabled()
    for name in ("top_k", "top_p", "min_p", "typical_p"):
        for suffix, kind in (("_spin", (QSpinBox, QDoubleSpinBox)), ("_slider", QSlider),
                             ("_label", QLabel)):
            widget = next(w for k in (kind if isinstance(kind, tuple) else (kind,))
                          if (w := panel.findChild(k, name + suffix)) is not None)
            assert not widget.isEnabled(), name + suffix
            assert "Mirostat is on" in widget.toolTip()
    assert find(panel, QDoubleSpinBox, "temperature_spin").isEnabled()
    combo.setCurrentIndex(0)
    assert top_k.isEnabled()
    assert "Mirostat is on" not in top_k.toolTip()
    assert not tau.isEnabled()


def test_quantized_kv_forces_flash_attention(panel: SamplingPanel, qtbot: QtBot) -> None:
    kv = find(panel, QComboBox, "kv_cache_type_combo")
    fa = find(panel, QCheckBox, "flash_attn_check")
    note = find(panel, QLabel, "kv_note_label")
    assert not fa.isChecked()
    assert note.isHidden()
    with qtbot.waitSignal(panel.settings_changed):
        kv.setCurrentText("q8_0")
    assert fa.isChecked()
    assert not note.isHidden()
    assert "flash attention" in note.text()
    LoadParams.of("/m.gguf", panel.load_options()).validate()

    fa.setChecked(False)
    assert kv.currentText() == "f16"
    assert note.text() == KV_NOTE_RESET
    assert not note.isHidden()
    params = LoadParams.of("/m.gguf", panel.load_options())
    assert (params.kv_cache_type, params.flash_attn) == ("f16", False)
    params.validate()


def test_invalid_stored_kv_combination_shown_loadable(panel: SamplingPanel) -> None:
    panel.set_settings(Settings(load=LoadOptions(kv_cache_type="q4_0", flash_attn=False)))
    assert find(panel, QCheckBox, "flash_attn_check").isChecked()
    LoadParams.of("/m.gguf", panel.load_options()).validate()


def test_reset_to_defaults(panel: SamplingPanel, qtbot: QtBot) -> None:
    panel.set_settings(Settings(sampling=SamplingParams(temperature=1.9, mirostat_mode=1,
                                                        stop=("x",)),
                                system_prompt="custom", load=LoadOptions(n_ctx=2048, n_batch=64)))
    with qtbot.waitSignals([panel.sampling_changed, panel.system_prompt_changed,
                            panel.settings_changed]):
        qtbot.mouseClick(find(panel, QPushButton, "reset_button"), Qt.MouseButton.LeftButton)
    assert panel.sampling() == SamplingParams()
    assert panel.system_prompt() == DEFAULT_SYSTEM_PROMPT
    assert find(panel, QSpinBox, "top_k_spin").isEnabled()
    # Load options are not sampling settings: they stay.
    assert (panel.load_options().n_ctx, panel.load_options().n_batch) == (2048, 64)


def test_system_prompt_edit_emits(panel: SamplingPanel, qtbot: QtBot) -> None:
    edit = find(panel, QPlainTextEdit, "system_prompt_edit")
    edit.clear()
    with qtbot.waitSignal(panel.system_prompt_changed, check_params_cb=lambda t: t == "Hi"), \
            qtbot.waitSignal(panel.settings_changed):
        qtbot.keyClicks(edit, "Hi")
    assert panel.system_prompt() == "Hi"


def test_gpu_offload_unsupported(panel: SamplingPanel) -> None:
    reason = ("This build of llama.cpp cannot offload to a GPU (CPU-only build). "
              "See docs/building.md.")
    spin = find(panel, QSpinBox, "n_gpu_layers_spin")
    label = find(panel, QLabel, "gpu_unsupported_label")
    assert spin.isEnabled()
    assert spin.text() == "All"
    assert label.isHidden()
    panel.set_gpu_offload_supported(False, reason)
    assert not spin.isEnabled()
    assert not find(panel, QLabel, "n_gpu_layers_label").isEnabled()
    assert reason in spin.toolTip()
    assert not label.isHidden()
    assert label.text() == reason
    panel.set_gpu_offload_supported(True, "")
    assert spin.isEnabled()
    assert label.isHidden()


def test_physical_cores_and_context_default(panel: SamplingPanel) -> None:
    threads = find(panel, QSpinBox, "n_threads_spin")
    panel.set_physical_cores(8)
    assert threads.text() == "All physical cores (8)"
    ctx = find(panel, QSpinBox, "n_ctx_spin")
    assert ctx.text() == "Model default"
    assert "min(trained context, 8192)" in ctx.toolTip()


def test_reload_button(panel: SamplingPanel, qtbot: QtBot) -> None:
    with qtbot.waitSignal(panel.reload_requested):
        qtbot.mouseClick(find(panel, QPushButton, "reload_button"), Qt.MouseButton.LeftButton)


def test_load_params_always_valid(panel: SamplingPanel) -> None:
    kv = find(panel, QComboBox, "kv_cache_type_combo")
    fa = find(panel, QCheckBox, "flash_attn_check")
    spins = [find(panel, QSpinBox, f"{n}_spin") for n in ("n_ctx", "n_threads", "n_batch")]
    for kv_type, fa_on, extreme in itertools.product(KV_CACHE_TYPES, (True, False),
                                                     ("minimum", "maximum")):
        kv.setCurrentText(kv_type)
        fa.setChecked(fa_on)
        for spin in spins:
            spin.setValue(getattr(spin, extreme)())
        LoadParams.of("/m.gguf", panel.load_options()).validate()
    fa.setChecked(True)
    for kv_type in KV_CACHE_TYPES:  # choosing a type last keeps it, with flash attention
        kv.setCurrentText(kv_type)
        assert LoadParams.of("/m.gguf", panel.load_options()).kv_cache_type == kv_type
        LoadParams.of("/m.gguf", panel.load_options()).validate()


def test_collapsing_a_section(panel: SamplingPanel, qtbot: QtBot) -> None:
    edit = find(panel, QPlainTextEdit, "stop_edit")
    assert edit.isVisibleTo(panel)
    header = find(panel, type(panel.seed_dice_button), "samplingSection_header")
    qtbot.mouseClick(header, Qt.MouseButton.LeftButton)
    assert not edit.isVisibleTo(panel)
    assert find(panel, QPlainTextEdit, "system_prompt_edit").isVisibleTo(panel)
    qtbot.mouseClick(header, Qt.MouseButton.LeftButton)
    assert edit.isVisibleTo(panel)
