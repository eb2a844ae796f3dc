"""The engine host's loop: what arrives while a message is handled joins the same step."""

from __future__ import annotations

import io
import queue
from typing import Any

from inglenook.engine import protocol as p
from inglenook.engine.host.process import EngineHost


class Recording(EngineHost):
    """Records what it handles and when it steps; the first message brings a second one, as a
    request sent together with it reaches the pipe while the first is rendered."""

    def __init__(self, inbox: queue.Queue[Any]) -> None:
        super().__init__(io.BytesIO())
        self.inbox, self.order = inbox, []  # type: ignore[var-annotated]

    @property
    def busy(self) -> bool:
        return bool(self.order)

    def handle(self, message: Any) -> None:
        self.order.append(message.request_id)
        if message.request_id == 1:
            self.inbox.put(p.Cancel(2))

    def step(self) -> None:
        self.order.append("step")
        self.inbox.put(p.Shutdown())


def test_messages_that_arrive_while_one_is_handled_are_handled_before_the_next_step() -> None:
    inbox: queue.Queue[Any] = queue.Queue()
    inbox.put(p.Cancel(1))
    host = Recording(inbox)
    host.run(inbox)
    assert host.order == [1, 2, "step"]


def test_shutdown_ends_the_loop_before_what_came_with_it() -> None:
    inbox: queue.Queue[Any] = queue.Queue()
    for message in (p.Cancel(1), p.Shutdown()):
        inbox.put(message)
    host = Recording(inbox)
    host.run(inbox)
    assert host.order == []
