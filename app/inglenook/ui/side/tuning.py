"""The panel's Tune: measure with the loaded model (through the worker), show the progress and the
figures before and after, and on Keep set the panel's threads and batch size and load the model
again with them; after Keep, a way back. Nothing changes until Keep."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject

from inglenook.engine import protocol as p
from inglenook.engine.tune import compare
from inglenook.engine.worker import EngineWorker
from inglenook.ui.side.sampling_panel import SamplingPanel


class Tuning(QObject):
    """Binds the panel's Tune buttons (SpeedOptions' tune_requested, tune_kept, tune_dismissed,
    tune_restore_requested) to the worker. `loaded()`: whether a model is loaded; `reload()`
    loads it again (threads and batch size take effect at a load)."""

    def __init__(self, worker: EngineWorker, panel: SamplingPanel, loaded: Callable[[], bool],
                 reload: Callable[[], None], parent: QObject) -> None:
        super().__init__(parent)
        self.worker, self.panel, self._loaded, self._reload = worker, panel, loaded, reload
        self._tune_id = -1  # tune requests count down: they never meet a reply's id
        self._tuning = False
        self._tuned: p.TuneResult | None = None  # found, not kept or dismissed yet
        self._untuned: tuple[int, int, int] | None = None  # before the tune kept: the way back
        speed = panel.speed
        speed.tune_requested.connect(self.tune)
        speed.tune_kept.connect(self.keep)
        speed.tune_dismissed.connect(self.dismiss)
        speed.tune_restore_requested.connect(self.restore)

    def tune(self) -> None:
        """Tune (or, while it measures, stop it)."""
        speed = self.panel.speed
        if self._tuning:
            self.worker.cancel(self._tune_id)
            return
        if not self._loaded():
            speed.show_tune("Load a model first: tuning measures it.")
            return
        self._tuning = True
        speed.show_tune("Measuring… (about ten seconds; longer on a busy machine)", busy=True)

        def progress(done: int, total: int) -> None:
            speed.show_tune_progress(done, total, f"Measuring… {done} of {total} trials "
                                                  "(longer on a busy machine)")

        def done(result: p.TuneResult | str) -> None:
            self.worker.tuned.disconnect(done)
            self.worker.tune_progress.disconnect(progress)
            self._tuning = False
            if isinstance(result, str) or result.error:
                why = result if isinstance(result, str) else result.error
                speed.show_tune(f"Could not tune: {why}")
                return
            if result.cancelled:
                speed.show_tune("Stopped: nothing was changed.")
                return
            text, changed = compare(result)
            if changed:
                self._tuned = result
                speed.offer_tuned(text + "\nKeep these? The model is loaded again with them.")
            else:
                speed.show_tune(text + " Nothing to change.")

        self.worker.tuned.connect(done)
        self.worker.tune_progress.connect(progress)
        self._tune_id -= 1
        self.worker.tune(self._tune_id, apply=False)

    def keep(self) -> None:
        """Tune's answer kept: the panel takes its settings, the model loads with them, and
        the way back is offered."""
        best = self._tuned
        if best is None:
            return
        self._tuned = None
        before = (best.before_n_threads, best.before_n_threads_batch or best.before_n_threads,
                  best.before_n_batch)
        self._untuned = before
        self._set_speed(best.n_threads, best.n_threads_batch, best.n_batch)
        self.panel.speed.offer_restore(
            f"Kept: {best.n_threads} threads for replies, {best.n_threads_batch} and batch "
            f"{best.n_batch} for prompts.", f"{before[0]} / {before[1]} threads, batch {before[2]}")

    def dismiss(self) -> None:
        self._tuned = None
        self.panel.speed.show_tune("Not kept: nothing was changed.")

    def restore(self) -> None:
        """Back to the threads and batch size from before the tune that was kept."""
        if self._untuned is None:
            return
        threads, batch_threads, batch = self._untuned
        self._untuned = None
        self._set_speed(threads, batch_threads, batch)
        self.panel.speed.show_tune(f"Restored: {threads} threads for replies, {batch_threads} "
                                   f"and batch {batch} for prompts.")

    def _set_speed(self, threads: int, batch_threads: int, batch: int) -> None:
        panel = self.panel
        panel.n_threads_spin.setValue(threads)
        panel.speed.threads_batch.setValue(batch_threads)
        panel.n_batch_spin.setValue(batch)
        if self._loaded():
            self._reload()
