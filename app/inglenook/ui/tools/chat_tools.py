"""Tools in the chats, on screen: the cards of a reply's calls, the user's answers, and the
calls running.

What follows a reply that called tools is decided by its turn (chat/turn.py: which calls run,
whether the user is asked, whether the model goes on); this binds it. A reply offers the tools of
the servers its chat uses, and only to a model whose template can call tools
(ModelInfo.tool_format): the turn lists them before the reply starts. Calls run only once
approved, on the ToolController's thread, with its timeout; their answers come back here on the
GUI thread. A chat that is not on screen keeps its tool round (Sessions keeps busy sessions) and
shows it when opened again.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QWidget

from inglenook.chat import turn
from inglenook.chat.session import ChatSession
from inglenook.chat.tool_round import ToolRound
from inglenook.store import StoredMessage
from inglenook.tools.results import ToolResult
from inglenook.ui.tools.card_view import card_list
from inglenook.ui.tools.tool_controller import ToolController
from inglenook.ui.widgets.banner import Banner

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
        self._follow(session, session.tool_round, turn.after_reply(session))

    def decide(self, session: ChatSession, message_id: int, index: int, answer: str) -> None:
        self._follow(session, session.tool_round,
                     turn.decided(session, message_id, index, answer))

    def stop(self, session: ChatSession) -> None:
        """Esc while calls wait: none of them runs, and the model does not go on."""
        tools = session.tool_round
        if tools is not None:
            problem = turn.stop_calls(session)
            if problem:
                self.banner.show_message(problem)
            self._redraw(session, tools.message_id)

    def _follow(self, session: ChatSession, tools: ToolRound | None,
                next_step: turn.Next) -> None:
        """Do what the turn decided about the round `tools` (taken before it decided: at the
        limit the round ends, and its cards are still redrawn)."""
        if next_step.notice:
            self.banner.show_message(next_step.notice, next_step.kind)
        for index in next_step.run:
            self._run(session, index)
        if tools is not None:
            self._redraw(session, tools.message_id)
        if next_step.then == "continue":
            self._continue(session)

    def _run(self, session: ChatSession, index: int) -> None:
        tools = session.tool_round
        if tools is None:
            return
        card = tools.cards[index]

        def done(result: ToolResult) -> None:
            self._follow(session, tools, turn.call_finished(session, tools, index, result))

        self.tools.call(card.server, card.tool, card.call.arguments, done)

    def _redraw(self, session: ChatSession, message_id: int) -> None:
        bubble = self._bubble_of(session, message_id)
        message = session.path.find(message_id) if bubble is not None else None
        if bubble is not None and message is not None:
            self.show(bubble, session, message)
