"""What the user does to messages already in the chat on screen: edit a question in place,
step through versions, delete from here on, and see how a reply was made (Details, the prompt).

A part of ChatController (a mixin, for the size of one module), working on its attributes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from PySide6.QtWidgets import QBoxLayout, QMessageBox, QWidget

from inglenook.chat.session import ChatSession
from inglenook.core.load import ModelInfo
from inglenook.store import StoreError
from inglenook.ui.chat.bubble import MessageBubble
from inglenook.ui.chat.details import DetailsDialog
from inglenook.ui.chat.inline_edit import InlineEdit
from inglenook.ui.chat.prompt_dialog import PromptDialog

if TYPE_CHECKING:
    from inglenook.engine.worker import EngineWorker
    from inglenook.ui.chat.chat_view import ChatView
    from inglenook.ui.widgets.banner import Banner


class MessageActions:
    session: ChatSession
    worker: EngineWorker
    banner: Banner
    _parent: QWidget
    _can_send: bool
    _next_id: int
    _inspecting: int
    _model: Callable[[], tuple[ModelInfo | None, str]]

    view: ChatView

    def render(self, keep_position: bool = False) -> None:
        raise NotImplementedError

    def _request_reply(self, session: ChatSession | None = None,
                       continuing: bool = False) -> None:
        raise NotImplementedError

    def edit_message(self, bubble: MessageBubble) -> None:
        if self.session.reply is not None or bubble.message_id is None or not self._can_send:
            return
        editor = InlineEdit(bubble.text, bubble)  # in place of the text, until sent or cancelled
        bubble.body.hide()
        cast(QBoxLayout, bubble.layout()).insertWidget(0, editor)
        editor.editor.setFocus()
        message_id = bubble.message_id
        self.view.pin(message_id)  # scrolling away must not lose what is being typed

        def done() -> None:
            self.view.pin(message_id, False)
            editor.deleteLater()
            bubble.body.show()

        def send(text: str) -> None:
            done()
            if self._can_send and self.session.reply is None and self._write(
                    lambda: self.session.edit_user(message_id, text)):
                self.render()
                self._request_reply()

        editor.submitted.connect(send)
        editor.cancelled.connect(done)

    def show_sibling(self, bubble: MessageBubble, step: int) -> None:
        message_id = bubble.message_id
        if self.session.reply is None and message_id is not None and self._write(
                lambda: self.session.select_sibling(message_id, step)):
            self.render(keep_position=True)

    def delete_from(self, bubble: MessageBubble) -> None:
        """Delete a message and everything after it on this branch, after asking."""
        if self.session.reply is not None or bubble.message_id is None:
            return
        answer = QMessageBox.question(
            self._parent, "Delete messages", "Delete this message and everything after it?")
        message_id = bubble.message_id
        if answer == QMessageBox.StandardButton.Yes and self._write(
                lambda: self.session.delete_from(message_id)):
            self.render(keep_position=True)

    def show_details(self, bubble: MessageBubble) -> None:
        message = self.session.path.find(bubble.message_id) if bubble.message_id else None
        if message is not None:
            dialog = DetailsDialog(message, self._parent)
            dialog.prompt_requested.connect(lambda: self.show_prompt(message.id))
            dialog.open()

    def show_prompt(self, message_id: int) -> None:
        """The exact prompt a reply was made from, as the loaded model would see it now."""
        if self._model()[0] is None:
            self.banner.show_message("Load a model to see the prompt it is sent.", "info")
            return
        self._next_id += 1
        model = self._model()[0]
        request = self.session.request_for(message_id, self._next_id,
                                           model.n_ctx if model is not None else 0)
        if request is not None:
            self._inspecting = request.request_id
            self.worker.inspect(request, self.session.owner)

    def _on_inspected(self, rid: int, view: object) -> None:
        if rid != self._inspecting:
            return
        if isinstance(view, str):
            self.banner.show_message(f"Could not show the prompt: {view}")
        else:
            PromptDialog(view, self._parent).open()  # type: ignore[arg-type]

    def _write(self, action: Callable[[], object]) -> bool:
        try:
            action()
        except StoreError as exc:
            self.banner.show_message(f"Could not save the conversation: {exc}")
            return False
        return True
