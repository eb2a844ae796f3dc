"""Speed in the window (issue 12): the speculation and thread options reach the load, Tune
keeps the fastest settings, and a smaller copy is made from the Library."""

from __future__ import annotations

import functools
import shutil
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QCheckBox, QSpinBox
from pytestqt.qtbot import QtBot

from inglenook import paths
from inglenook.ui.main_window import MainWindow
from inglenook.ui.models.quantize_dialog import QuantizeDialog
from tests.gui.conftest import LOAD_TIMEOUT_MS, Script, greedy_settings, open_window, start_reply


def test_speed_options_reach_the_load(qtbot: QtBot, window: MainWindow) -> None:
    window.panel.findChild(QCheckBox, "prompt_lookup_check").setChecked(False)
    window.panel.findChild(QSpinBox, "n_threads_batch_spin").setValue(3)
    params = window.side.load_params(window.models.path)
    assert params.prompt_lookup is False and params.n_threads_batch == 3
    window.close()
    from inglenook.core.settings import load_settings

    stored = load_settings()
    assert stored.load.prompt_lookup is False and stored.load.n_threads_batch == 3


def test_tune_shows_before_and_after_and_asks_before_keeping(
        qtbot: QtBot, window: MainWindow) -> None:
    """Tune shows its progress, then the figures before and after; nothing changes until Keep,
    which loads the model with them; Restore previous goes back."""
    speed, panel = window.panel.speed, window.panel
    before = (panel.n_threads_spin.value(), speed.threads_batch.value(),
              panel.n_batch_spin.value())
    progress: list[tuple[int, int]] = []
    window.worker.tune_progress.connect(lambda done, total: progress.append((done, total)))
    qtbot.mouseClick(speed.tune_button, Qt.MouseButton.LeftButton)
    assert speed.tune_button.text() == "Stop tuning" and not speed.tune_progress.isHidden()
    qtbot.waitUntil(lambda: not speed.keep_button.isHidden()
                    or "Could not" in speed.tune_note.text(), timeout=LOAD_TIMEOUT_MS)
    assert progress[-1] == (4, 4)
    note = speed.tune_note.text()
    assert "Replies: 1 thread → 2 threads, 80.0 → 100.0 tok/s (+25%)" in note
    assert "Prompts: 1 thread, batch 512 → 2 threads, batch 256, 900 → 1,000 tok/s" in note
    assert not speed.dismiss_button.isHidden() and speed.tune_progress.isHidden()
    assert (panel.n_threads_spin.value(), speed.threads_batch.value(),
            panel.n_batch_spin.value()) == before  # asked, not kept
    with qtbot.waitSignal(window.model_ready, timeout=LOAD_TIMEOUT_MS):
        qtbot.mouseClick(speed.keep_button, Qt.MouseButton.LeftButton)
    assert (panel.n_threads_spin.value(), speed.threads_batch.value(),
            panel.n_batch_spin.value()) == (2, 2, 256)
    assert not speed.restore_button.isHidden() and "Restore previous" in speed.restore_button.text()
    with qtbot.waitSignal(window.model_ready, timeout=LOAD_TIMEOUT_MS):
        qtbot.mouseClick(speed.restore_button, Qt.MouseButton.LeftButton)
    assert (panel.n_threads_spin.value(), speed.threads_batch.value(),
            panel.n_batch_spin.value()) == (1, 1, 512)
    assert "Restored" in speed.tune_note.text()


def test_tune_not_kept_changes_nothing(qtbot: QtBot, window: MainWindow) -> None:
    speed, panel = window.panel.speed, window.panel
    threads = panel.n_threads_spin.value()
    qtbot.mouseClick(speed.tune_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not speed.dismiss_button.isHidden(), timeout=LOAD_TIMEOUT_MS)
    qtbot.mouseClick(speed.dismiss_button, Qt.MouseButton.LeftButton)
    assert "nothing was changed" in speed.tune_note.text()
    assert speed.keep_button.isHidden() and panel.n_threads_spin.value() == threads


def test_a_tune_cancelled_while_it_waits_changes_nothing(
        qtbot: QtBot, window: MainWindow, script: Script) -> None:
    """A tune queued behind a reply and dropped before it ran still answers the window."""
    script.write(default={"text": "word " * 300, "token_ms": 20})
    start_reply(qtbot, window, "A long one, please.")
    speed, threads = window.panel.speed, window.panel.n_threads_spin.value()
    qtbot.mouseClick(speed.tune_button, Qt.MouseButton.LeftButton)
    assert speed.tune_button.text() == "Stop tuning"
    qtbot.mouseClick(speed.tune_button, Qt.MouseButton.LeftButton)  # Stop
    qtbot.waitUntil(lambda: "cancelled" in speed.tune_note.text(), timeout=LOAD_TIMEOUT_MS)
    assert speed.tune_button.isEnabled() and window.panel.n_threads_spin.value() == threads


def test_a_smaller_copy_is_made_checked_and_listed(
        qtbot: QtBot, real_window: MainWindow, bundled_model: Path) -> None:
    source = paths.models_dir() / "Copy-Q4_1.gguf"
    shutil.copyfile(bundled_model, source)
    dialog = QuantizeDialog(str(source), real_window)
    qtbot.addWidget(dialog)
    dialog.type.setCurrentText("Q4_K_M")  # its rows fall back to bigger types: not smaller
    assert "would not be smaller" in dialog.note.text() and "Q4_0 (92 MB)" in dialog.note.text()
    assert not dialog.start_button.isEnabled()
    dialog.type.setCurrentText("Q4_0")
    assert "Copy-Q4_0.gguf" in dialog.note.text() and "loses a little more" in dialog.note.text()
    assert "about 92 MB (now 98 MB" in dialog.note.text() and dialog.start_button.isEnabled()
    with qtbot.waitSignal(dialog.made, timeout=120_000) as made:
        dialog.start()
    made_path = Path(made.args[0])
    assert made_path.is_file() and made_path.parent == paths.models_dir()
    assert not list(paths.models_dir().glob("*.quantizing"))


@pytest.mark.parametrize("kind", ["Q4_1"])
def test_a_copy_of_the_same_type_is_refused_before_starting(
        qtbot: QtBot, bundled_model: Path, kind: str) -> None:
    source = paths.models_dir() / "Same.gguf"
    shutil.copyfile(bundled_model, source)
    dialog = QuantizeDialog(str(source))
    qtbot.addWidget(dialog)
    dialog.type.addItem(kind)
    dialog.type.setCurrentText(kind)
    assert "already" in dialog.note.text() and not dialog.start_button.isEnabled()


def test_model_loading_says_how_much_of_recent_chats_is_kept(
        qtbot: QtBot, real_window: MainWindow) -> None:
    note = real_window.panel.speed.state_note
    assert not note.isHidden() and "in memory" in note.text() and "on disk" in note.text()


@pytest.mark.integration
def test_tune_for_this_machine_in_the_real_window(qtbot: QtBot,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The real wiring: the window's engine is the router in front of the real host (issue 16:
    it once had no tune, and the button always failed with "Remote engines tune themselves")."""
    # The wiring is what is tested here, with the shortest tune: a batch of 64 (no smaller
    # ones to try) and trials of 50 ms, as tests/integration/test_tune.py's. The window's
    # 512 and 0.5 s made 12 trials, 15 s of the suite.
    settings = greedy_settings()
    settings.load = settings.load.replace(n_batch=64)
    real_window = open_window(qtbot, None, settings)
    router = real_window.worker.client
    monkeypatch.setattr(router, "tune", functools.partial(router.tune, seconds_per_trial=0.05))
    speed = real_window.panel.speed
    assert real_window.worker.client.can_tune
    model = real_window.worker.client.model
    assert model is not None
    progress: list[tuple[int, int]] = []
    real_window.worker.tune_progress.connect(lambda done, total: progress.append((done, total)))
    qtbot.mouseClick(speed.tune_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not speed.keep_button.isHidden() or "Could not" in
                    speed.tune_note.text() or "Already" in speed.tune_note.text(),
                    timeout=180_000)
    note = speed.tune_note.text()
    assert "Replies: " in note or "Already the fastest here" in note, note
    assert progress and progress[-1][0] == progress[-1][1]  # every trial reported
    assert real_window.worker.client.model == model  # measured, not applied: it asks first
    real_window.close()


def test_a_load_reads_the_settings_and_the_panel_follows_them(
        qtbot: QtBot, window: MainWindow) -> None:
    """A model loads with the options in AppSettings (once read from the panel's widgets, on
    the worker's thread too for the API's loads); a change made elsewhere shows in the panel."""
    window.app_settings.set_load(n_batch=64, n_threads_batch=2)
    assert window.panel.findChild(QSpinBox, "n_batch_spin").value() == 64
    params = window.side.load_params(window.models.path)
    assert (params.n_batch, params.n_threads_batch) == (64, 2)
    window.panel.findChild(QSpinBox, "n_batch_spin").setValue(128)  # and back, once settled
    qtbot.waitUntil(lambda: window.app_settings.value.load.n_batch == 128)


def test_keep_chats_ready_sets_the_disk_budget_and_forget_empties_it(
        qtbot: QtBot, window: MainWindow) -> None:
    """Settings: "Keep chats ready: up to N GB on disk" reaches the load and is kept; Forget
    cached states deletes what engines kept on disk, off the GUI thread."""
    speed = window.panel.speed
    assert speed.keep_chats.value() == 8  # the default
    speed.keep_chats.setValue(3)
    qtbot.waitUntil(lambda: window.app_settings.value.keep_chats_gb == 3)
    assert window.side.load_params(window.models.path).kv_state_disk_mb == 3 * 1024
    kept = paths.kv_state_dir() / "v-0123456789abcdef" / "0badcafe-1.kv"
    kept.parent.mkdir(parents=True)
    kept.write_bytes(b"a state an earlier engine kept")
    qtbot.mouseClick(speed.forget_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not kept.parent.exists(), timeout=LOAD_TIMEOUT_MS)
    assert "forgotten" in window.status_bar.notice.label.text()
    window.close()
    from inglenook.core.settings import load_settings

    assert load_settings().keep_chats_gb == 3
