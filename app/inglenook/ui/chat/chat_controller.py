"""The chat on screen, and every reply in flight.

Binds the visible ChatSession to the chat view, the composer and the context meter, and routes
the engine's events to the session each reply belongs to — on screen or not. Switching chats
changes which session the views show; replies keep going, queued one at a time by the engine's
scheduler, and the sidebar marks the chats that are writing or waiting. A reply shows what the
model thought above its answer (live, then folded), and the cards of the tools it called
(ui/tools/chat_tools.py: approvals, runs, and the model going on afterwards).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QWidget

from inglenook.chat import knowledge_turn, reply_edits
from inglenook.chat.knowledge_turn import recorded
from inglenook.chat.session import ChatSession, ChatSettings, conversation_of
from inglenook.chat.sessions import RETRY_UNSAVED_S, Sessions
from inglenook.chat.turn import Gathered, Turn, options_for
from inglenook.chat.unread import Unread
from inglenook.core.attachments import Attachment, message_tokens
from inglenook.core.load import ModelInfo
from inglenook.core.messages import GenerationRequest
from inglenook.core.replies import Finish, Stats
from inglenook.engine.client import EngineError
from inglenook.engine.providers import is_remote_ref
from inglenook.engine.scheduler import QueueState
from inglenook.engine.worker import EngineWorker
from inglenook.store import Preset, Store, StoredMessage, StoreError
from inglenook.ui import tasks, theme
from inglenook.ui.chat.attachment_chips import add_to_bubble
from inglenook.ui.chat.attachment_dialog import AttachmentDialog
from inglenook.ui.chat.chat_view import ChatView, MessageBubble
from inglenook.ui.chat.composer import Composer
from inglenook.ui.chat.context_meter import ContextMeter, will_not_fit
from inglenook.ui.chat.image_dialog import ImageDialog
from inglenook.ui.chat.markdown import render_head
from inglenook.ui.chat.message_actions import MessageActions
from inglenook.ui.chat.passage_dialog import PassageDialog
from inglenook.ui.chat.presenter import present
from inglenook.ui.chat.queue_notice import QueueNotice
from inglenook.ui.chat.read_aloud_control import ReadAloudControl
from inglenook.ui.chat.reply_on_screen import ReplyOnScreen
from inglenook.ui.chat.source_chips import show_sources
from inglenook.ui.chat.voice_conversation import VoiceConversation
from inglenook.ui.tools.chat_tools import ChatTools
from inglenook.ui.tools.tool_controller import ToolController
from inglenook.ui.widgets.banner import Banner

CLOSED = "Stopped: Inglenook was closed while this reply was being written."


@dataclass(frozen=True)
class ChatWidgets:
    """The window's widgets a chat is shown in; `meter`, the status bar's context meter."""

    view: ChatView
    composer: Composer
    queue_notice: QueueNotice
    banner: Banner
    meter: ContextMeter


class ChatController(QObject):
    """`model()` gives the loaded model and its sha256 (or None, ""); `new_settings()` what a
    new chat starts with; `presets()` the presets a stored chat may name; `tools` runs the MCP
    servers the chats call.

    Signals:
        reply_started(int): a reply was queued for the engine; its request id.
        reply_finished(int, object): a reply ended (any chat); its id and Finish.
        session_changed(object): another ChatSession is on screen.
        conversations_changed(): a conversation was created or retitled.
        activity_changed(object): {conversation id: "generating" | "waiting"}.
        unread_changed(object): the frozenset of chats with a reply not seen yet.
        notice(str): a passing notice for the status bar ("Copied the last reply.").
    """

    reply_started = Signal(int)
    reply_finished = Signal(int, object)
    session_changed = Signal(object)
    conversations_changed = Signal()
    activity_changed = Signal(object)
    unread_changed = Signal(object)
    notice = Signal(str)

    def __init__(self, worker: EngineWorker, store: Store, widgets: ChatWidgets,
                 tools: ToolController,
                 model: Callable[..., tuple[ModelInfo | None, str]],
                 new_settings: Callable[[], ChatSettings],
                 presets: Callable[[], Sequence[Preset]], parent: QWidget) -> None:
        super().__init__(parent)
        self.worker, self.store, self.tools = worker, store, tools
        # The engine a chat's reply runs on ("": the window's model; ChatModels sets it).
        self.engine_group: Callable[[ChatSession], str] = lambda _session: ""
        self.view, self.composer = view, composer = widgets.view, widgets.composer
        self.banner = widgets.banner
        self.model, self._new_settings, self._presets = model, new_settings, presets
        self.window = parent
        self.sessions = Sessions()
        # Replies the store refused (a full disk) are written again on this beat (chat/).
        self._unsaved_timer = QTimer(self, interval=RETRY_UNSAVED_S * 1000)
        self._unsaved_timer.timeout.connect(self.save_unsaved)
        self.unread = Unread(store)  # the marks kept in the store
        self.session = ChatSession(store, new_settings())
        self.sessions.show(self.session)
        self._next_id = 0
        self.last_request: GenerationRequest | None = None  # what was last sent (tests, Details)
        self._preparing: set[ChatSession] = set()  # chats whose turn is gathering
        # A reply searches its chat's collections with their embedding model's vectors too,
        # loaded beside the chat model by the worker's engines.
        self.open_index = knowledge_turn.index_with_vectors(
            worker.embedder)
        self.calls = ChatTools(tools, self.banner, self._bubble_of,
                               lambda s: self.request_reply(s, continuing=True), self)
        self.reply = ReplyOnScreen(view, widgets.queue_notice, self.sessions, self)
        self.can_send = False
        self.actions = MessageActions(self)
        self.read_aloud = ReadAloudControl(view.bubble_of, self)
        self.read_aloud.failed.connect(lambda message: self.banner.show_message(
            f"Could not read aloud: {message}"))
        self.voice = VoiceConversation(self.read_aloud, composer,
                                       lambda: self.session.reply is None and self.can_send,
                                       self.banner, self, self.stop)
        composer.edit.escape.connect(self.voice.stop)  # Esc in the message box too
        composer.edit.escape.connect(self.read_aloud.stop)
        self.context = widgets.meter
        meter = tasks.debounce(150, self.show_context, self)
        composer.edit.textChanged.connect(meter.call)  # typing counts, throttled
        composer.attachments_changed.connect(meter.call)  # and so do files
        composer.set_model_limits(self._n_ctx, self._vision, self._image_tokens, self._remote)
        composer.set_image_counter(self._count_images, self._projector)
        composer.send_requested.connect(self.send)
        view.empty.starter_chosen.connect(self._use_starter)
        composer.stop_requested.connect(self.stop)
        composer.edit.page.connect(view.page)
        widgets.queue_notice.stop_own.connect(self.stop)
        widgets.queue_notice.stop_other.connect(self._stop_running)
        worker.generation_started.connect(self._on_started)
        worker.prompt_progress.connect(self._on_prompt_progress)
        worker.token_delta.connect(self._on_delta)
        worker.generation_stats.connect(self._on_stats)
        worker.generation_finished.connect(self._on_finished)
        worker.queue_changed.connect(self._on_queue)
        worker.prompt_inspected.connect(self.actions.prompt_inspected)
        self.render()  # the empty chat, with the view making its bubbles through this controller

    # ---- which chat -----------------------------------------------------------------------
    @property
    def conv_id(self) -> int | None:
        return self.session.conv_id

    def new_chat(self) -> None:
        """An empty chat on screen; replies elsewhere keep going."""
        self._show(ChatSession(self.store, self._new_settings()))
        self.composer.edit.setFocus()

    def open(self, conv_id: int, message_id: int = 0, words: Sequence[str] = ()) -> None:
        """Show a conversation (at `message_id`, on its branch, when given, with the first of
        `words` found there selected: a search hit)."""
        if conv_id == self.session.conv_id and not message_id:
            return
        try:
            session = self.sessions.find(conv_id) or ChatSession.open(
                self.store, conv_id, self._presets(), self._new_settings())
            if message_id and session.reply is None:
                session.show_message(message_id)
        except (StoreError, KeyError) as exc:
            self.banner.show_message(f"Could not open the conversation: {exc}")
            return
        self._show(session)
        if message_id:
            self.view.scroll_to_message(message_id, words)

    def _show(self, session: ChatSession) -> None:
        self.reply.flush()
        self.session = session
        self.sessions.show(session)
        if self.unread.viewed(session.conv_id):
            self.unread_changed.emit(self.unread.ids)
        self.session_changed.emit(session)
        self.render()

    def render(self, keep_position: bool = False) -> None:
        """Show the branch of the chat on screen, with its reply in flight if it has one: at
        its end, or (`keep_position`: another version of a message) where the view is."""
        session = self.session
        self.reply.reset(session)
        self.view.set_rows(session.path.outline,
                           lambda index, parent: self._make_bubble(session, index, parent),
                           keep_position, lambda index: self._prepare(session, index))
        self.view.set_writing(session.reply is not None)
        self._update_controls()
        self.reply.show_queue()
        self.show_context()
        outline = session.path.outline
        last_reply = next((outline.ids[i] for i in range(len(outline) - 1, -1, -1)
                           if outline.roles[i] == "assistant"), None)
        model = self.model()[0]
        self.reply.mark_left_out(last_reply, model.n_ctx if model is not None else 0)

    # ---- the user -------------------------------------------------------------------------
    def set_can_send(self, can_send: bool) -> None:
        """False while no model is loaded (or one is loading)."""
        self.can_send = can_send
        self._update_controls()

    def send(self, text: str, attachments: Sequence[Attachment] = ()) -> None:
        session = self.session
        if not self.can_send or session.reply is not None or session in self._preparing:
            self.composer.restore(text, attachments)  # never lose what was typed
            return
        model = self.model()[0]
        problem = will_not_fit(self.session, model, message_tokens(
            text, attachments, model.image_tokens if model is not None else 0))
        if problem:
            self.composer.restore(text, attachments)
            self.banner.show_message(problem)
            return
        created = session.conv_id is None
        try:
            message = session.add_user(text, attachments)
        except StoreError as exc:
            self.composer.restore(text, attachments)
            self.banner.show_message(f"Your message could not be saved, so it was not sent: "
                                     f"{exc}")
            return
        if self.banner.kind == "error":
            self.banner.clear()  # an old failure; this message went through
        self.sessions.keep(session)
        self._append(message.id)
        if created:
            self.conversations_changed.emit()
        self.request_reply()

    def _use_starter(self, prompt: str) -> None:
        self.composer.edit.setPlainText(prompt)
        self.composer.edit.setFocus()

    def regenerate(self) -> None:
        session = self.session
        if session.reply is not None or not self.can_send or not session.path:
            return
        if session.path.outline.roles[-1] == "assistant":
            self.view.remove_last()
        self.request_reply()

    def continue_reply(self) -> None:
        """Continue: the last reply, cut or stopped, goes on as a new version of it."""
        session = self.session
        if session.reply is None and self.can_send and session.path and \
                reply_edits.can_continue(session.path[-1]):
            self.view.remove_last()
            self.request_reply(extend=True)

    def request_reply(self, session: ChatSession | None = None,
                      continuing: bool = False, extend: bool = False) -> None:
        """Ask for a reply in this chat (the one on screen by default): to its last question,
        or, `continuing`, to the results of the tools the last reply called, or, `extend`,
        going on from the last reply (Continue). Its turn gathers what it needs off the GUI
        thread first (chat/turn.py): one trip there and back, none when it needs nothing."""
        session = session or self.session
        if session in self._preparing:
            return
        reply_turn = Turn.take(session, options_for(self.model(session)[0], extend),
                               self.tools.enabled(), continuing=continuing)
        if reply_turn.idle:
            self._begin(session, reply_turn.gather())
            return
        self._preparing.add(session)
        if reply_turn.collections and reply_turn.kept is None and session is self.session:
            self.reply.searching()
        tasks.run(reply_turn.gather, self.tools.listing, self.open_index, owner=self,
                  name="reply-turn", on_done=lambda got: self._begin(session, got),
                  on_failed=lambda exc: self._begin(session, Gathered(
                      reply_turn.options, continuing, (f"Could not prepare the reply: {exc}",))))

    def _begin(self, session: ChatSession, gathered: Gathered) -> None:
        self._preparing.discard(session)
        if gathered.notices:
            self.banner.show_message(" ".join(gathered.notices))
        if not self.can_send:  # the model went while the turn gathered
            return
        try:
            request = session.begin_reply(self.next_request_id(), gathered.options,
                                          continuing=gathered.continuing)
        except (StoreError, OSError) as exc:  # OSError: an image not written for the engine
            self.banner.show_message(f"Could not start the reply: {exc}")
            return
        if request is None:
            return
        given = session.reply.knowledge if session.reply is not None else None
        if given is not None and (given.notice or given.note):
            self.banner.show_message(given.notice or given.note)  # goes on without them
        self.last_request = request
        self.sessions.keep(session)
        if session is self.session:
            self._append(session.path.outline.ids[-1])
            self.view.set_writing(True)
            self._update_controls()
        self.worker.generate(request, session.owner, self.engine_group(session))
        self.reply_started.emit(request.request_id)

    def next_request_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def copy_last_reply(self) -> None:
        outline = self.session.path.outline
        last = next((outline.ids[i] for i in range(len(outline) - 1, -1, -1)
                     if outline.roles[i] == "assistant"), None)
        reply = self.session.path.find(last) if last is not None else None
        if reply is not None and reply.content:
            QGuiApplication.clipboard().setText(reply.content)
            self.notice.emit("Copied the last reply.")

    def escape(self) -> None:
        """Esc: reading aloud stops; else a message waiting for the model becomes editable
        again; else the reply stops."""
        if not self.voice.stop() and not self.read_aloud.stop() \
                and not self.composer.cancel_pending():
            self.stop()

    def model_loading(self, _path: str) -> None:
        """Another model is loading: every reply stops; what is typed waits for it."""
        self.stop_all()
        self.set_can_send(False)
        self.composer.set_loading(True)

    def conversation_deleted(self, conv_id: int) -> None:
        if self.conv_id == conv_id:
            self.new_chat()

    def stop(self) -> None:
        """Stop the reply of the chat on screen (waiting or being written), or the tool calls
        it waits on."""
        if self.session.reply is not None:
            self.worker.cancel(self.session.reply.request_id)
        else:
            self.calls.stop(self.session)

    def show_tools(self) -> None:
        """The Tools dialog: servers, their tools, and which this chat uses."""
        from inglenook.ui.tools.tools_dialog import ToolsDialog

        self.tools.reload()  # mcp.json may have been edited by hand (or by another app)
        dialog = ToolsDialog(self.tools, self.session, self.model()[0], self.window)
        dialog.chat_tools_changed.connect(lambda: self.session_changed.emit(self.session))
        dialog.open()

    def stop_conversation(self, conv_id: int) -> None:
        session = self.sessions.find(conv_id)
        if session is not None and session.reply is not None:
            self.worker.cancel(session.reply.request_id)

    def stop_all(self) -> None:
        """Every reply, waiting or running (a new model is being loaded)."""
        for session in self.sessions.replying():
            if session.reply is not None:
                self.worker.cancel(session.reply.request_id)

    def _stop_running(self) -> None:
        rid = self.reply.stop_running()
        if rid is not None:
            self.worker.cancel(rid)

    # ---- the view -------------------------------------------------------------------------
    def _append(self, message_id: int) -> None:
        """A message just added to the chat on screen: at the end of the view, followed."""
        path = self.session.path
        for bubble in self.view.bubbles:
            bubble.regenerate_button.hide()  # only the last reply can be regenerated
            bubble.set_continuable(False)  # or continued
        self.view.append(path.outline[path.index_of(message_id) or 0])

    def _make_bubble(self, session: ChatSession, index: int, parent: QWidget) -> MessageBubble:
        """The bubble of message `index` of the chat on screen (the view asks for those in and
        near its view)."""
        message = session.path[index]
        bubble = self._bubble(message, parent)
        if index < len(session.path) - 1:
            bubble.regenerate_button.hide()
        elif session.reply is None or session.reply.message_id != message.id:
            bubble.set_continuable(reply_edits.can_continue(message))
        if session is self.session:
            self.reply.dress(bubble, message)
        return bubble

    def _prepare(self, session: ChatSession, index: int) -> None:
        """A message soon in view, read and rendered ahead (markdown.render_head keeps it)."""
        if index >= len(session.path):
            return
        message = session.path[index]
        palette = theme.current().markdown
        render_head(message.content, palette)
        if message.reasoning:
            render_head(message.reasoning, palette)

    def _bubble(self, message: StoredMessage, parent: QWidget) -> MessageBubble:
        bubble = MessageBubble(message.role, message.content, parent)
        bubble.message_id = message.id
        bubble.set_siblings(message.sibling_index, message.sibling_count)
        bubble.sibling_requested.connect(lambda step, b=bubble: self.actions.show_sibling(b, step))
        bubble.delete_requested.connect(lambda b=bubble: self.actions.delete_from(b))
        bubble.edit_requested.connect(lambda b=bubble: self.actions.edit_message(b))
        if message.role == "user":
            if message.attachments:
                add_to_bubble(bubble, message.attachments, self._open_attachment)
            return bubble
        model, _ = self.model()
        present(bubble, message, model.name if model else "")
        self._show_sources(bubble, message)
        self.calls.show(bubble, self.session, message)
        bubble.stop_requested.connect(self.stop)
        bubble.regenerate_requested.connect(self.regenerate)
        bubble.continue_requested.connect(self.continue_reply)
        bubble.details_requested.connect(lambda b=bubble: self.actions.show_details(b))
        bubble.speak_requested.connect(lambda b=bubble: self.read_aloud.toggle(b))
        bubble.set_speaking(message.id == self.read_aloud.reader.reading)
        bubble.regenerate_button.setEnabled(self.can_send)
        return bubble

    def _open_attachment(self, attachment: Attachment) -> None:
        dialog = ImageDialog if attachment.kind == "image" else AttachmentDialog
        dialog(attachment, self.window).open()

    def _show_sources(self, bubble: MessageBubble, message: StoredMessage) -> None:
        """A reply's sources: as recorded, or as its reply in flight was given them."""
        reply = self.session.reply
        turn = reply.knowledge if reply is not None and reply.message_id == message.id \
            else recorded(message.provenance)
        show_sources(bubble, turn, lambda t, s: PassageDialog(t, s, self.window).open())

    def _bubble_of(self, session: ChatSession, message_id: int) -> MessageBubble | None:
        return self.view.bubble_of(message_id) if session is self.session else None

    def _update_controls(self) -> None:
        replying = self.session.reply is not None
        self.composer.set_generating(replying)
        self.composer.set_can_send(self.can_send)
        outline = self.session.path.outline
        last = self.view.bubble_of(outline.ids[-1]) if outline and not replying else None
        if last is not None:
            last.regenerate_button.setEnabled(self.can_send)

    def _n_ctx(self) -> int:
        model, _ = self.model()
        return model.n_ctx if model is not None else 0

    def _vision(self) -> bool:
        model, _ = self.model()
        return model is not None and model.vision

    def _remote(self) -> bool:
        model, _ = self.model()
        return model is not None and is_remote_ref(model.path)

    def _image_tokens(self) -> int:
        model, _ = self.model()
        return model.image_tokens if model is not None and model.vision else 0

    def _projector(self) -> str:
        model, _ = self.model()
        return model.projector if model is not None and model.vision else ""

    def _count_images(self, sizes: Sequence[tuple[int, int]]
                      ) -> tuple[str, tuple[int, ...]] | None:
        """Off the GUI thread: what images of these sizes cost with the loaded projector (the
        engine preprocesses a blank image of each size); None when it cannot say."""
        try:
            answer = self.worker.count_images(sizes)
        except EngineError:  # no projector, a remote engine, the engine gone: estimated
            return None
        return answer.projector, answer.tokens

    def show_context(self) -> None:
        model, _ = self.model()
        self.context.show(self.session, model, self.composer.draft_tokens())

    # ---- the engine -----------------------------------------------------------------------
    def _on_queue(self, state: QueueState) -> None:
        activity = {conv_id: kind for owner, kind in state.activity().items()
                    if (conv_id := conversation_of(owner)) is not None}
        self.activity_changed.emit(activity)
        self.reply.show_queue(state)

    def _on_started(self, rid: int) -> None:
        event = self.sessions.started(rid)
        if event is not None and event.on_screen:
            self.reply.started()
            if event.session.reply is not None:
                self.read_aloud.reply_started(rid, event.session.reply.message_id)
                self.voice.turns.reply_started(rid, event.session.reply.message_id)

    def _on_prompt_progress(self, rid: int, done: int, total: int) -> None:
        event = self.sessions.prompt_read(rid, done, total)
        if event is not None and event.on_screen:
            self.reply.prompt_read(done, total)

    def _on_delta(self, rid: int, text: str) -> None:
        event = self.sessions.delta(rid, text)
        if event is None:
            return
        if event.problem:
            self.banner.show_message(event.problem)
        if event.on_screen:
            self.reply.text_arrived()
            self.read_aloud.reply_delta(rid, text)
            self.voice.turns.reply_delta(rid, text)

    def _on_stats(self, rid: int, stats: Stats) -> None:
        event = self.sessions.stats(rid, stats)
        reply = event.session.reply if event is not None and event.on_screen else None
        if reply is not None and self.reply.stats(reply):
            self.show_context()

    def _on_finished(self, rid: int, finish: Finish) -> None:
        session = self.sessions.by_request(rid)
        if session is None:
            return
        visible = session is self.session
        self.read_aloud.reply_ended(rid, finish.reason in ("stop", "length"))
        self.voice.turns.reply_ended(rid, finish.reason in ("stop", "length"))
        if visible:
            self.reply.flush()
        reply_id = session.reply.message_id if session.reply is not None else 0
        event = self.sessions.finished(rid, finish, *self.model(session))
        assert event is not None
        if event.problem:
            self.banner.show_message(event.problem)
        if session.unsaved is not None:
            self._unsaved_timer.start()
        if visible:
            bubble = self.reply.finished(session, reply_id, finish, event.message)
            if bubble is not None and event.message is not None:
                bubble.set_continuable(reply_edits.can_continue(event.message))
                self._show_sources(bubble, event.message)
                self.calls.show(bubble, session, event.message)
            self._update_controls()
            self.show_context()
        elif finish.reason == "error":
            self.banner.show_message(f"The reply in «{session.title}» failed: {finish.message}")
        if visible and finish.context_full and session.settings.overflow == "stop":
            self.banner.show_message(finish.message, "error",
                                     ("Leave out the middle", self._leave_out_middle))
        if self.unread.reply_finished(session.conv_id, visible, finish.reason):
            self.unread_changed.emit(self.unread.ids)
        self.reply_finished.emit(rid, finish)
        self.calls.reply_ended(session)  # its tool calls: asked about, run, then go on

    def save_unsaved(self) -> None:
        """Try again to write the replies the store refused; say when they are saved."""
        saved, problem = self.sessions.save_unsaved()
        if not self.sessions.unsaved():
            self._unsaved_timer.stop()
        if saved and not problem:
            titles = ", ".join(f"«{session.title}»" for session, _ in saved)
            self.banner.show_message(f"The reply in {titles} is saved now.", "info")
        if any(session is self.session for session, _ in saved):
            self.render(keep_position=True)

    def _leave_out_middle(self) -> None:
        """The fix offered when a chat set to stop is full: leave history out, and retry."""
        self.session.set_settings(self.session.settings.replace(overflow="middle"))
        self.session_changed.emit(self.session)  # the side panel shows (and saves) it
        self.regenerate()

    def shutdown(self) -> None:
        """The window is closing: every reply in flight is saved as it stands, marked stopped."""
        self.reply.flush()
        model, sha256 = self.model()
        for session in self.sessions.replying():
            if session.reply is None:
                continue
            rid = session.reply.request_id
            self.worker.cancel(rid)
            with contextlib.suppress(StoreError):  # kept in memory, tried again below
                session.finish_reply(Finish("cancelled", CLOSED), model, sha256)
            self.sessions.reply_ended(rid)
        self._unsaved_timer.stop()
        self.sessions.save_unsaved()  # a last try; else marked interrupted on next start
