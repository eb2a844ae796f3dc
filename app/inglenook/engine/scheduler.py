"""Many askers, a few lanes: the window's chats and API clients share the engines.

Qt-free. A reply takes a lane of the engine it runs on (`Job.group`: "" the window's model, or
the model an API request named); each engine has as many lanes as it decodes replies at once
(`lanes(group)`, its slots). Replies are admitted in turn across owners (round-robin, so one busy
asker cannot starve a chat), each running on a thread of its own, so several stream at once.
A load, an unload or a tune of an engine (`exclusive`) waits until none of that engine's replies
runs and goes before any reply that waits for it, as it changes what they run on. Other work
(a prompt view, forgetting a state) runs at once, after the exclusive jobs of its engine.
A job's callbacks run on its thread.

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
    """Work for an engine. `request_id` is set for replies (what cancel() names) and for a
    tune; a reply (a job with a request id, not exclusive) takes a lane of `group`."""

    run: Callable[[], None]
    owner: str = ""
    request_id: int | None = None
    dropped: Callable[[], None] = field(default=lambda: None)  # cancelled before it ran
    exclusive: bool = False  # a load, unload or tune: runs alone on its engine
    group: str = ""  # the engine it runs on: "" the window's model, else a model's key

    @property
    def takes_lane(self) -> bool:
        return self.request_id is not None and not self.exclusive


@dataclass(frozen=True)
class QueueState:
    running: tuple[str, int | None] | None  # (owner, request id) of the first job running
    waiting: tuple[tuple[str, int | None], ...]  # in the order they will run
    busy: tuple[tuple[str, int | None], ...] = ()  # every reply running, the first first
    lanes: int = 1  # replies the window's engine runs at once

    def activity(self) -> dict[str, str]:
        """owner -> "generating" (a job of it runs) or "waiting" (it has jobs in line)."""
        marks = {owner: "waiting" for owner, _rid in self.waiting}
        for owner, _rid in self.busy or ((self.running,) if self.running else ()):
            marks[owner] = "generating"
        return marks

    def ahead_of(self, owner: str, request_id: int) -> tuple[str, int] | None:
        """(owner of the reply it waits for, how many jobs run before this one) while this
        reply waits for another owner's; None when it runs, is next of its own, or is gone."""
        if (owner, request_id) not in self.waiting or self.running is None:
            return None
        others = [o for o, _rid in self.busy or (self.running,) if o != owner]
        if not others:
            return None
        return others[0], self.waiting.index((owner, request_id)) + 1


class Scheduler:
    """`cancel_running(request_id)` is how a running reply is stopped (the engine's cancel),
    `lanes(group)` how many replies an engine runs at once; both given by the engine's owner.

    on_change(QueueState) is called (on whichever thread changed it) whenever a job is queued,
    starts, ends or is dropped: the window shows who is waiting for whom.
    """

    def __init__(self, cancel_running: Callable[[int], None],
                 on_change: Callable[[QueueState], None] | None = None,
                 lanes: Callable[[str], int] = lambda _group: 1) -> None:
        self._cancel_running = cancel_running
        self._on_change = on_change or (lambda _state: None)
        self._lanes = lanes
        self._lock = threading.Condition()
        self._urgent: deque[Job] = deque()  # exclusive jobs, in order
        self._queues: OrderedDict[str, deque[Job]] = OrderedDict()  # owner -> jobs, in turn
        self._running: list[Job] = []
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
            self._lock.notify_all()
        self._changed()

    def cancel(self, request_id: int) -> bool:
        """Stop a reply wherever it is. True if it was waiting (and is now dropped)."""
        with self._lock:
            running = any(job.request_id == request_id for job in self._running)
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

    def running_ids(self) -> list[int]:
        with self._lock:
            return [job.request_id for job in self._running if job.request_id is not None]

    def close(self, timeout: float = 10.0) -> bool:
        """Drop what waits, let the running jobs end, stop. True if everything stopped."""
        self.drop_waiting()
        with self._lock:
            self._closed = True
            self._urgent.clear()
            self._lock.notify_all()
        self._thread.join(timeout)
        with self._lock:
            self._lock.wait_for(lambda: not self._running, timeout)
            still = bool(self._running)
        return not self._thread.is_alive() and not still

    @property
    def busy(self) -> bool:
        with self._lock:
            return bool(self._running)

    def busy_in(self, group: str) -> int:
        """Replies running on one engine now."""
        with self._lock:
            return sum(1 for job in self._running if job.group == group and job.takes_lane)

    # ---- dispatching ------------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            with self._lock:
                started = self._start_what_can()
                while not started and not self._closed:
                    self._lock.wait()
                    started = self._start_what_can()
                if self._closed and not started:
                    return
            for job in started:
                threading.Thread(target=self._run, args=(job,), daemon=True,
                                 name=f"engine-job-{job.owner or 'engine'}").start()
            self._changed()

    def _start_what_can(self) -> list[Job]:
        """Under the lock: the jobs that may start now, taken from the queues."""
        started: list[Job] = []
        if self._closed:
            return started
        blocked: set[str] = set()  # engines with an exclusive job waiting or running
        blocked.update(job.group for job in self._running if job.exclusive)
        for job in list(self._urgent):
            if job.group in blocked:
                continue
            if any(r.group == job.group for r in self._running):
                blocked.add(job.group)  # it waits for the engine's jobs to end
                continue
            self._urgent.remove(job)
            self._running.append(job)
            started.append(job)
            blocked.add(job.group)
        progress = True
        while progress:  # in turn: one job per owner per round
            progress = False
            for owner in list(self._queues):
                jobs = self._queues[owner]
                job = jobs[0]
                if job.group in blocked or (job.takes_lane and self._full(job.group)):
                    continue
                jobs.popleft()
                del self._queues[owner]
                if jobs:  # the owner goes to the back of the line with what it has left
                    self._queues[owner] = jobs
                self._running.append(job)
                started.append(job)
                progress = True
        return started

    def _full(self, group: str) -> bool:
        busy = sum(1 for job in self._running if job.group == group and job.takes_lane)
        try:
            lanes = max(1, int(self._lanes(group)))
        except Exception:  # an engine that cannot say has one lane
            log.exception("lanes() failed")
            lanes = 1
        return busy >= lanes

    def _run(self, job: Job) -> None:
        try:
            job.run()
        except Exception:  # a job must never take the scheduler down with it
            log.exception("engine job failed")
        finally:
            with self._lock:
                self._running.remove(job)
                self._lock.notify_all()
            self._changed()

    def _take(self, request_id: int) -> Job | None:
        for job in self._urgent:
            if job.request_id == request_id:
                self._urgent.remove(job)
                return job
        for owner, jobs in self._queues.items():
            for job in jobs:
                if job.request_id == request_id:
                    jobs.remove(job)
                    if not jobs:
                        del self._queues[owner]
                    return job
        return None

    def _state(self) -> QueueState:
        lanes = [job for job in self._running if job.takes_lane or job.exclusive]
        busy = tuple((job.owner, job.request_id) for job in lanes)
        waiting = tuple((job.owner, job.request_id) for job in self._urgent) + tuple(
            (job.owner, job.request_id) for job in self._round_robin_order())
        try:
            window_lanes = max(1, int(self._lanes("")))
        except Exception:
            window_lanes = 1
        return QueueState(busy[0] if busy else None, waiting, busy, window_lanes)

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
