"""One engine, many askers: the window's chats (and later API clients) take turns.

Qt-free. The engine client is single-threaded, so one thread — the scheduler's — runs every job:
loads, unloads and replies. Replies are served one at a time, in turn across owners (round-robin,
so one busy asker cannot starve a chat); loads and unloads go first, as they change what every
later reply runs on. A job's callbacks run on the scheduler's thread.

Cancel is safe from any thread and returns at once: a job still waiting leaves the queue (its
`dropped` callback runs on the caller's thread), a running reply is stopped in the engine.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)


@dataclass(eq=False)
class Job:
    """Work for the engine thread. `request_id` is set for replies (what cancel() names)."""

    run: Callable[[], None]
    owner: str = ""
    request_id: int | None = None
    dropped: Callable[[], None] = field(default=lambda: None)  # cancelled before it ran
    exclusive: bool = False  # a load or unload: runs before waiting replies


@dataclass(frozen=True)
class QueueState:
    running: tuple[str, int | None] | None  # (owner, request id) of the job running
    waiting: tuple[tuple[str, int | None], ...]  # in the order they will run

    def activity(self) -> dict[str, str]:
        """owner -> "generating" (its job runs) or "waiting" (it has jobs in line)."""
        marks = {owner: "waiting" for owner, _rid in self.waiting}
        if self.running is not None:
            marks[self.running[0]] = "generating"
        return marks

    def ahead_of(self, owner: str, request_id: int) -> tuple[str, int] | None:
        """(owner of the job running, how many jobs run before this one) while this reply
        waits behind another owner's; None when it runs, is next of its own, or is gone."""
        if (owner, request_id) not in self.waiting or self.running is None:
            return None
        if self.running[0] == owner:
            return None
        return self.running[0], self.waiting.index((owner, request_id)) + 1


class Scheduler:
    """Runs jobs one at a time on its own thread. `cancel_running(request_id)` is how a running
    reply is stopped (the engine client's cancel), given by the owner of the client.

    on_change(QueueState) is called (on whichever thread changed it) whenever a job is queued,
    starts, ends or is dropped: the window shows who is waiting for whom.
    """

    def __init__(self, cancel_running: Callable[[int], None],
                 on_change: Callable[[QueueState], None] | None = None) -> None:
        self._cancel_running = cancel_running
        self._on_change = on_change or (lambda _state: None)
        self._lock = threading.Condition()
        self._urgent: deque[Job] = deque()
        self._queues: OrderedDict[str, deque[Job]] = OrderedDict()  # owner -> jobs, in turn
        self._running: Job | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._loop, daemon=True, name="engine-scheduler")
        self._thread.start()

    # ---- asking -------------------------------------------------------------------------
    def submit(self, job: Job) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("the scheduler is closed")
            if job.exclusive:
                self._urgent.append(job)
            else:
                self._queues.setdefault(job.owner, deque()).append(job)
            self._lock.notify()
        self._changed()

    def cancel(self, request_id: int) -> bool:
        """Stop a reply wherever it is. True if it was waiting (and is now dropped)."""
        with self._lock:
            running = self._running is not None and self._running.request_id == request_id
            waiting = None if running else self._take(request_id)
        if running:
            self._cancel_running(request_id)
            return False
        if waiting is None:
            return False
        self._changed()
        _safely(waiting.dropped)
        return True

    def drop_waiting(self, owner: str | None = None) -> list[int]:
        """Drop every waiting reply (of one owner, or all); returns their request ids."""
        with self._lock:
            owners = [owner] if owner is not None else list(self._queues)
            jobs = [job for o in owners for job in self._queues.pop(o, ())]
        if jobs:
            self._changed()
        for job in jobs:
            _safely(job.dropped)
        return [job.request_id for job in jobs if job.request_id is not None]

    def state(self) -> QueueState:
        with self._lock:
            return self._state()

    def close(self, timeout: float = 10.0) -> bool:
        """Drop what waits, let the running job end, stop the thread. True if it stopped."""
        self.drop_waiting()
        with self._lock:
            self._closed = True
            self._urgent.clear()
            self._lock.notify()
        self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def busy(self) -> bool:
        with self._lock:
            return self._running is not None

    # ---- the engine thread ----------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            with self._lock:
                while not self._closed and not self._urgent and not self._queues:
                    self._lock.wait()
                if self._closed:
                    return
                job = self._next()
                self._running = job
            self._changed()
            try:
                job.run()
            except Exception:  # a job must never take the engine thread down with it
                log.exception("engine job failed")
            finally:
                with self._lock:
                    self._running = None
                self._changed()

    def _next(self) -> Job:
        if self._urgent:
            return self._urgent.popleft()
        owner, jobs = next(iter(self._queues.items()))
        job = jobs.popleft()
        del self._queues[owner]
        if jobs:  # the owner goes to the back of the line with what it has left
            self._queues[owner] = jobs
        return job

    def _take(self, request_id: int) -> Job | None:
        for owner, jobs in self._queues.items():
            for job in jobs:
                if job.request_id == request_id:
                    jobs.remove(job)
                    if not jobs:
                        del self._queues[owner]
                    return job
        return None

    def _state(self) -> QueueState:
        running = self._running
        waiting = tuple((job.owner, job.request_id) for job in self._urgent) + tuple(
            (job.owner, job.request_id) for job in self._round_robin_order())
        return QueueState((running.owner, running.request_id) if running else None, waiting)

    def _round_robin_order(self) -> list[Job]:
        queues = [list(jobs) for jobs in self._queues.values()]
        order: list[Job] = []
        while any(queues):
            for jobs in queues:
                if jobs:
                    order.append(jobs.pop(0))
        return order

    def _changed(self) -> None:
        _safely(lambda: self._on_change(self.state()))


def _safely(callback: Callable[[], None]) -> None:
    try:
        callback()
    except Exception:  # a listener's bug must not stop the engine thread
        log.exception("scheduler callback failed")
