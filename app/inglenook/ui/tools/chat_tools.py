"""Tools in the chats: what a reply offers the model, the cards of its calls, the user's
answers, the calls running, and the model going on once every call has its answer.

A reply offers the tools of the servers its chat uses, and only to a model whose template can
call tools (ModelInfo.tool_format). Calls run only once approved, on the ToolController's
thread, with its timeout; their answers come back here on the GUI thread. A chat that is not on
screen keeps its tool round (Sessions keeps busy sessions) and shows it when opened again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QWidget

from inglenook.chat import tool_round
from inglenook.chat.session import ChatSession, ReplyOptions
from inglenook.core.load import ModelInfo
from inglenook.store import StoredMessage, StoreError
from inglenook.tools.approval import DECISIONS, Decision
from inglenook.tools.catalog import ToolCatalog
from inglenook.tools.results import ToolResult
from inglenook.ui.tools.card_view import card_list
from inglenook.ui.tools.tool_controller import ToolController
from inglenook.ui.widgets.banner import Banner

T = TypeVar("T")
NO_TOOL_SUPPORT = ("This model's chat template has no tool support that Inglenook can read, "
                   "so it cannot call tools.")


class ChatTools(QObject):
    """`bubble_of(session, message_id)` finds a reply's bubble when its chat is on screen;
    `continue_reply(session)` asks for the model's reply to the results."""

    def __init__(self, tools: ToolController, banner: Banner,
                 bubble_of: Callable[[ChatSession, int], QWidget | None],
                 continue_reply: Callable[[ChatSession], None], parent: QObject) -> None:
        super().__init__(parent)
        self.tools, self.banner = tools, banner
        self._bubble_of, self._continue = bubble_of, continue_reply

    def prepare(self, session: ChatSession, model: ModelInfo | None,
                go: Callable[[ReplyOptions], None]) -> None:
        """`go(options)` with the chat's tools listed (at once when it uses none)."""
        traits = model.traits if model is not None else ReplyOptions().traits
        fmt = model.tool_format if model is not None else ""
        n_ctx = model.n_ctx if model is not None else 0
        vision = model is not None and model.vision
        servers = self.tools.usable(session.settings.tools) if fmt else []
        if not servers:
            go(ReplyOptions(traits, fmt, n_ctx=n_ctx, vision=vision))
            return

        def listed(catalog: ToolCatalog, errors: Mapping[str, str]) -> None:
            if errors:
                self.banner.show_message("Some tools are not available: " + "; ".join(
                    f"{name}: {why}" if name else why for name, why in errors.items()))
            go(ReplyOptions(traits, fmt, catalog, n_ctx, vision=vision))

        self.tools.catalog(servers, listed)

    def show(self, bubble: QWidget, session: ChatSession, message: StoredMessage) -> None:
        """A reply's cards: as its tool round has them while it runs, else as stored."""
        tools = session.tool_round
        cards = tools.cards if tools is not None and tools.message_id == message.id \
            else message.tool_cards
        if cards:
            card_list(bubble, lambda i, d: self.decide(session, message.id, i, d)).set_cards(
                cards)

    def reply_ended(self, session: ChatSession) -> None:
        """Run what the chat allows without asking; go on if nothing is left to ask."""
        if session.tool_round is None:
            return
        allowed: list[int] = self._write(session, session.allow_calls, [])
        for index in allowed:
            self._run(session, index)
        self._settled(session)

    def decide(self, session: ChatSession, message_id: int, index: int, answer: str) -> None:
        tools = session.tool_round
        if tools is None or tools.message_id != message_id or answer not in DECISIONS:
            return
        decision: Decision = answer
        self._write(session, lambda: session.decide_call(index, decision), None)
        if decision != "deny" and tools.cards[index].state == "running":
            self._run(session, index)
        self._settled(session)

    def stop(self, session: ChatSession) -> None:
        """Esc while calls wait: none of them runs, and the model does not go on."""
        tools = session.tool_round
        if tools is not None:
            self._write(session, session.stop_calls, None)
            self._redraw(session, tools.message_id)

    def _run(self, session: ChatSession, index: int) -> None:
        tools = session.tool_round
        if tools is None:
            return
        card = tools.cards[index]

        def done(result: ToolResult) -> None:
            if session.tool_round is not tools:
                return  # the user moved on or stopped meanwhile
            self._write(session, lambda: session.call_finished(index, result), None)
            self._settled(session)

        self.tools.call(card.server, card.tool, card.call.arguments, done)

    def _settled(self, session: ChatSession) -> None:
        tools = session.tool_round
        if tools is None:
            return
        self._redraw(session, tools.message_id)
        if not tools.done:
            return
        if not session.tools_may_go_on():
            self.banner.show_message(
                f"«{session.title}» stopped after {tool_round.MAX_TOOL_ROUNDS} replies in a row "
                "that called tools. Send a message to let the model go on.", "info")
            return
        self._continue(session)

    def _redraw(self, session: ChatSession, message_id: int) -> None:
        bubble = self._bubble_of(session, message_id)
        message = session.path.find(message_id) if bubble is not None else None
        if bubble is not None and message is not None:
            self.show(bubble, session, message)

    def _write(self, session: ChatSession, action: Callable[[], T], failed: T) -> T:
        try:
            return action()
        except StoreError as exc:
            self.banner.show_message(f"Could not save the tool call in «{session.title}»: "
                                     f"{exc}")
            return failed
