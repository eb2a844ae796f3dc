"""What the user does to messages already in the chat on screen: edit a question or a reply in
place, step through versions, delete from here on, and see how a reply was made (Details, the
prompt).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, cast

from PySide6.QtWidgets import QBoxLayout, QMessageBox, QWidget

from inglenook.chat import images as chat_images
from inglenook.chat.history import images_sent
from inglenook.engine.protocol import PromptView
from inglenook.store import StoreError
from inglenook.ui import tasks
from inglenook.ui.chat.attachment_chips import AttachmentStrip
from inglenook.ui.chat.bubble import MessageBubble
from inglenook.ui.chat.details import DetailsDialog
from inglenook.ui.chat.inline_edit import InlineEdit
from inglenook.ui.chat.prompt_dialog import PromptDialog

if TYPE_CHECKING:
    from inglenook.chat.session import ChatSession
    from inglenook.core.load import ModelInfo
    from inglenook.engine.worker import EngineWorker
    from inglenook.ui.chat.chat_view import ChatView
    from inglenook.ui.widgets.banner import Banner


class ChatOnScreen(Protocol):
    """What the actions use of the chat on screen (ChatController has it): ten things, named
    here rather than passed one by one, so that this module needs no import of its owner."""

    session: ChatSession
    can_send: bool
    view: ChatView
    banner: Banner
    window: QWidget
    worker: EngineWorker  # the prompt inspector's request
    model: Callable[[], tuple[ModelInfo | None, str]]

    def render(self, keep_position: bool = False) -> None: ...
    def request_reply(self) -> None: ...
    def next_request_id(self) -> int: ...


class MessageActions:
    def __init__(self, chats: ChatOnScreen) -> None:
        self.chats = chats
        self._inspecting = 0  # the request id of the prompt asked for last

    def edit_message(self, bubble: MessageBubble) -> None:
        """Edit a question (sent again as a new version) or a reply (saved as a new version
        that what follows builds on; no model is needed for that)."""
        chats = self.chats
        if chats.session.reply is not None or bubble.message_id is None:
            return
        message = chats.session.path.find(bubble.message_id)
        reply = message is not None and message.role == "assistant"
        if not reply and not chats.can_send:
            return
        # In place of the text, until sent or cancelled; its files can be left out.
        sent = [s for s in bubble.findChildren(AttachmentStrip) if s.isVisibleTo(bubble)]
        editor = InlineEdit(bubble.text, bubble, message.attachments if message else (),
                            reply=reply)
        bubble.body.hide()
        for strip in sent:  # the editor shows them, removable
            strip.hide()
        layout = cast(QBoxLayout, bubble.layout())
        layout.insertWidget(layout.indexOf(bubble.body) if reply else 0, editor)
        editor.editor.setFocus()
        message_id = bubble.message_id
        self.chats.view.pin(message_id)  # scrolling away must not lose what is being typed

        def done() -> None:
            self.chats.view.pin(message_id, False)
            editor.deleteLater()
            bubble.body.show()
            for strip in sent:
                strip.show()

        def send(text: str) -> None:
            done()
            kept = editor.attachments
            if reply:
                if self.chats.session.reply is None and self._write(
                        lambda: self.chats.session.edit_reply(message_id, text)):
                    self.chats.render(keep_position=True)
            elif self.chats.can_send and self.chats.session.reply is None and self._write(
                    lambda: self.chats.session.edit_user(message_id, text, kept)):
                self.chats.render()
                self.chats.request_reply()

        editor.submitted.connect(send)
        editor.cancelled.connect(done)

    def show_sibling(self, bubble: MessageBubble, step: int) -> None:
        message_id = bubble.message_id
        if self.chats.session.reply is None and message_id is not None and self._write(
                lambda: self.chats.session.select_sibling(message_id, step)):
            self.chats.render(keep_position=True)

    def delete_from(self, bubble: MessageBubble) -> None:
        """Delete a message and everything after it on this branch, after asking."""
        if self.chats.session.reply is not None or bubble.message_id is None:
            return
        answer = QMessageBox.question(
            self.chats.window, "Delete messages", "Delete this message and everything after it?")
        message_id = bubble.message_id
        if answer == QMessageBox.StandardButton.Yes and self._write(
                lambda: self.chats.session.delete_from(message_id)):
            self.chats.render(keep_position=True)

    def show_details(self, bubble: MessageBubble) -> None:
        message = self.chats.session.path.find(bubble.message_id) if bubble.message_id else None
        if message is not None:
            dialog = DetailsDialog(message, self.chats.window)
            dialog.prompt_requested.connect(lambda: self.show_prompt(message.id))
            dialog.open()

    def show_prompt(self, message_id: int) -> None:
        """The exact prompt a reply was made from, as the loaded model would see it now (the
        history's images made ready off the GUI thread first, as before a reply)."""
        model = self.chats.model()[0]
        if model is None:
            self.chats.banner.show_message("Load a model to see the prompt it is sent.", "info")
            return
        images = images_sent(self.chats.session.path) if model.vision else []
        if not images:
            self._inspect(message_id)
            return
        tasks.run(chat_images.ready, images, owner=self.chats.view, name="image-files",
                  on_done=lambda _: self._inspect(message_id),
                  on_failed=lambda _: self._inspect(message_id))

    def _inspect(self, message_id: int) -> None:
        model = self.chats.model()[0]
        if model is None:  # unloaded meanwhile
            return
        try:
            request = self.chats.session.request_for(
                message_id, self.chats.next_request_id(), model.n_ctx, model.vision)
        except OSError as exc:  # an image could not be written for the engine to read
            self.chats.banner.show_message(f"Could not show the prompt: {exc}")
            return
        if request is not None:
            self._inspecting = request.request_id
            self.chats.worker.inspect(request, self.chats.session.owner)

    def prompt_inspected(self, rid: int, view: PromptView | str) -> None:
        if rid != self._inspecting:
            return
        if isinstance(view, str):
            self.chats.banner.show_message(f"Could not show the prompt: {view}")
        else:
            PromptDialog(view, self.chats.window).open()

    def _write(self, action: Callable[[], object]) -> bool:
        try:
            action()
        except StoreError as exc:
            self.chats.banner.show_message(f"Could not save the conversation: {exc}")
            return False
        return True
