"""A chat with an image, through the real engine host: the bundled model with the tiny projector
of tests/mmproj_tools.py (replies are nonsense: random weights; quality is not judged). What is
checked: the stored image reaches the engine as a content-addressed file, the second turn
continues from the conversation's saved KV state with the image in it (restored, not encoded
again), replies stream, and a stop ends a reply in a chat with an image in its history."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

from PIL import Image

from inglenook import paths
from inglenook.chat.chat_settings import ChatSettings
from inglenook.chat.session import ChatSession, ReplyOptions
from inglenook.core.attachments import Attachment
from inglenook.core.load import LoadParams, ModelInfo
from inglenook.core.messages import GenerationRequest, Message
from inglenook.core.replies import Finish
from inglenook.core.sampling import SamplingParams
from inglenook.engine import protocol as p
from inglenook.engine.client import EngineClient
from inglenook.store import Store
from tests.mmproj_tools import IMAGE_TOKENS, model_n_embd, write_mmproj

SHORT = SamplingParams(temperature=0.0, seed=42, repeat_penalty=1.0, max_tokens=6)
LONG = SamplingParams(temperature=0.0, seed=42, repeat_penalty=1.0, max_tokens=400)


def png(color: tuple[int, int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (48, 32), color).save(out, "PNG")
    return out.getvalue()


def run(client: EngineClient, session: ChatSession, request: GenerationRequest,
        info: ModelInfo, stop_after: int = 0) -> list[object]:
    """Stream the reply into the session as the window does; stop it after `stop_after`
    pieces of text (0: never)."""
    events: list[object] = []
    deltas = 0
    for event in client.generate(request):
        events.append(event)
        if isinstance(event, p.Delta):
            session.reply_delta(event.text)
            deltas += 1
            if deltas == stop_after:
                client.cancel(request.request_id)
        elif isinstance(event, p.ReplyStats):
            session.reply_stats(event.stats)
        elif isinstance(event, p.Finished):
            session.finish_reply(event.finish, info)
    return events


def finish(events: list[object]) -> Finish:
    last = events[-1]
    assert isinstance(last, p.Finished)
    return last.finish


def test_a_chat_with_an_image_continues_from_its_state_and_stops(
        bundled_model: Path, tmp_path: Path) -> None:
    mmproj = write_mmproj(tmp_path / "mmproj-tiny.gguf", model_n_embd(bundled_model))
    client = EngineClient(log_path=tmp_path / "engine.log")
    store = Store(tmp_path / "chats.db")
    try:
        # One thread: on a shared machine llama.cpp's spinning threads wait on each other.
        info = client.load(LoadParams(str(bundled_model), n_ctx=1024, n_slots=1, n_threads=1,
                                      n_threads_batch=1, mmproj_path=str(mmproj)))
        assert info.vision and info.image_tokens == IMAGE_TOKENS  # the window's chip cost
        session = ChatSession(store, ChatSettings(system_prompt="", sampling=SHORT))
        data = png((200, 30, 30))
        photo = Attachment("red.png", "image", len(data), mime="image/png", data=data)
        # Long enough that its state is kept (kv_reuse.MIN_SAVE_TOKENS).
        session.add_user("Describe the colours, the shapes and the light of this. " * 3, [photo])
        options = ReplyOptions(info.traits, n_ctx=info.n_ctx, vision=True)
        request = session.begin_reply(1, options)
        assert request is not None
        (ref,) = request.messages[-1].images
        assert ref.sha256 == hashlib.sha256(data).hexdigest()
        assert Path(ref.path).parent == paths.image_cache_dir()
        assert Path(ref.path).read_bytes() == data  # written from the stored bytes
        assert "[Image" not in request.messages[-1].content
        first = run(client, session, request, info)
        assert finish(first).reason in ("stop", "length")
        assert any(isinstance(e, p.Delta) for e in first)  # streamed
        (stats,) = [e.stats for e in first if isinstance(e, p.ReplyStats)]
        # Another conversation between, so the next turn finds its cells in a saved state.
        list(client.generate(GenerationRequest(2, (Message("user", "Hi."),), SHORT,
                                               conversation="chat:other")))
        session.add_user("And the light?")
        again = session.begin_reply(3, options)
        assert again is not None and again.messages[0].images == (ref,)  # from the store
        second = run(client, session, again, info)
        (restored,) = [e.stats for e in second if isinstance(e, p.ReplyStats)]
        assert restored.cache_source in ("ram", "disk")
        assert restored.cached_tokens >= stats.prompt_tokens  # the image was not read again
        # A stop in a chat with an image in its history ends the reply, kept as stopped.
        session.set_settings(ChatSettings(system_prompt="", sampling=LONG))
        session.add_user("Go on, at length.")
        third = session.begin_reply(4, ReplyOptions(info.traits, n_ctx=info.n_ctx, vision=True))
        assert third is not None
        stopped = run(client, session, third, info, stop_after=2)
        assert finish(stopped).reason == "cancelled"
        assert session.path[-1].role == "assistant" and session.path[-1].content
    finally:
        store.close()
        client.close()
