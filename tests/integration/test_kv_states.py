"""KV-cache states per conversation and context overflow, on the real bundled model: a restored
conversation continues exactly as if it had never been switched away from."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from inglenook import paths
from inglenook.core.load import LoadParams
from inglenook.core.messages import GenerationRequest, Message, OverflowPolicy
from inglenook.core.replies import Stats
from inglenook.engine import protocol as p
from inglenook.engine.client import EngineClient
from tests.integration.conftest import GREEDY, finish_of, stats_of

REPLY = GREEDY.replace(max_tokens=24)
RIVERS = " ".join(f"Fact {i}: river number {i} flows north." for i in range(30))
PEAKS = " ".join(f"Note {i}: mountain number {i} is tall." for i in range(30))
A1 = (Message("user", RIVERS + " Which way does river 3 flow?"),)
B1 = (Message("user", PEAKS + " How tall is mountain 2?"),)


@pytest.fixture
def client(tmp_path: Path) -> Iterator[EngineClient]:
    """A host of its own: started after INGLENOOK_HOME points at this test's folder."""
    engine = EngineClient(log_path=tmp_path / "engine.log")
    yield engine
    engine.close()


def load(client: EngineClient, bundled_model: Path, n_ctx: int = 2048,
         ram_mb: int = -1) -> None:
    """One slot: another conversation then takes the only KV cells there are (with more, it
    takes a free slot, tests/integration/test_batching.py)."""
    client.load(LoadParams(str(bundled_model), n_ctx=n_ctx, kv_state_ram_mb=ram_mb, n_slots=1))


def say(client: EngineClient, conversation: str, messages: tuple[Message, ...],
        overflow: OverflowPolicy = "middle") -> tuple[str, Stats]:
    events = list(client.generate(GenerationRequest(
        len(messages) * 1000 + len(conversation), messages, REPLY, conversation, overflow)))
    assert finish_of(events).finish.reason in ("stop", "length"), events[-1]
    return "".join(e.text for e in events if isinstance(e, p.Delta)), stats_of(events).stats


def follow_up(first: tuple[Message, ...], reply: str, question: str) -> tuple[Message, ...]:
    return (*first, Message("assistant", reply), Message("user", question))


def spilled() -> list[Path]:
    return sorted(paths.kv_state_dir().glob("*/*.kv"))


@pytest.mark.parametrize(("ram_mb", "source"), [(-1, "ram"), (0, "disk")])
def test_a_conversation_continues_after_another_exactly_as_without_switching(
        client: EngineClient, bundled_model: Path, ram_mb: int, source: str) -> None:
    load(client, bundled_model)
    first, turn1 = say(client, "chat:1", A1)
    a2 = follow_up(A1, first, "And river 7?")
    straight, _ = say(client, "chat:1", a2)

    load(client, bundled_model, ram_mb=ram_mb)  # a fresh cache, states kept as asked
    client.forget_states()  # (chat:1 was kept on disk for this model and layout)
    assert say(client, "chat:2", A1)[0] == first
    b_reply, b_turn1 = say(client, "chat:3", B1)  # a long chat overwrites the KV cache
    assert b_turn1.cached_tokens < 50
    _, b_turn2 = say(client, "chat:3", follow_up(B1, b_reply, "And mountain 5?"))
    assert b_turn2.cache_source == "live" and b_turn2.cached_tokens >= b_turn1.prompt_tokens
    switched, stats = say(client, "chat:2", a2)
    assert stats.cache_source == source and stats.state_restore_s > 0
    assert stats.cached_tokens >= turn1.prompt_tokens + turn1.generated_tokens - 1
    assert switched == straight
    report = client.state_report()
    kept = report.in_ram if source == "ram" else report.on_disk
    assert kept == 2 and (len(spilled()) == 2) == (source == "disk")


def test_a_damaged_spilled_state_is_ignored_and_the_prompt_evaluated(
        client: EngineClient, bundled_model: Path) -> None:
    def scenario(conversation: str, damage: str) -> tuple[str, Stats]:
        load(client, bundled_model, ram_mb=0)
        client.forget_states()
        reply, _ = say(client, conversation, A1)
        say(client, "chat:9", B1)
        if damage:
            (path,) = spilled()
            data = path.read_bytes()
            middle = len(data) // 2
            path.write_bytes(data[:middle] if damage == "truncate" else
                             data[:middle] + bytes([data[middle] ^ 0x40]) + data[middle + 1:])
        else:
            client.drop_state(conversation)  # the reference: no state to restore at all
        return say(client, conversation, follow_up(A1, reply, "And river 7?"))

    reference, cold = scenario("chat:1", "")
    for n, damage in enumerate(["truncate", "corrupt"], 2):
        after_damage, stats = scenario(f"chat:{n}", damage)
        assert stats.cache_source in ("", "live"), damage
        assert stats.cached_tokens == cold.cached_tokens < 50, damage  # evaluated again
        assert after_damage == reference, damage
        assert client.state_report().on_disk == 1 and len(spilled()) == 1, damage  # bad: gone


def test_states_are_dropped_when_the_model_is_loaded_again(
        client: EngineClient, bundled_model: Path) -> None:
    load(client, bundled_model)
    reply, _ = say(client, "chat:1", A1)
    say(client, "chat:2", B1)
    report = client.state_report()
    assert report.in_ram == 1 and report.ram_bytes > 1_000_000
    assert client.model is not None and client.model.kv_state_ram_budget == report.ram_budget > 0
    load(client, bundled_model, n_ctx=1024)  # other load settings
    after = client.state_report()
    assert (after.in_ram, after.on_disk, after.ram_bytes, after.disk_bytes) == (0, 0, 0, 0)
    _, stats = say(client, "chat:1", follow_up(A1, reply, "And river 7?"))
    assert stats.cache_source == "" and stats.cached_tokens == 0


def test_a_new_chat_with_a_long_system_prompt_starts_from_its_state(
        client: EngineClient, bundled_model: Path) -> None:
    load(client, bundled_model)
    system = Message("system", "You answer questions about this list. " + RIVERS)
    _, first = say(client, "chat:1", (system, Message("user", "Which way does river 3 flow?")))
    assert first.cached_tokens == 0
    say(client, "chat:2", B1)  # another chat, another prompt: the KV cache is overwritten
    _, new_chat = say(client, "chat:3", (system, Message("user", "Is river 9 long?")))
    assert new_chat.cache_source == "ram"
    assert new_chat.cached_tokens > 300 and new_chat.prompt_tokens - new_chat.cached_tokens < 20


def test_a_forgotten_conversation_leaves_nothing_behind(
        client: EngineClient, bundled_model: Path) -> None:
    load(client, bundled_model, ram_mb=0)
    say(client, "chat:1", A1)
    say(client, "chat:2", B1)
    assert len(spilled()) == 1
    client.drop_state("chat:1")
    assert client.state_report().on_disk == 0 and not spilled()
    client.close()  # chat:2 is kept for the next engine; "Forget cached states" removes it
    assert [p.parent.name[:2] for p in spilled()] == ["v-"]
    client.forget_states()
    assert not spilled()


# -- states that outlive the engine ---------------------------------------------------------------
def restarted(client: EngineClient, bundled_model: Path, **load_options: int) -> EngineClient:
    """The engine quit (its states written to disk) and a new one loads the model."""
    client.close()
    again = EngineClient(log_path=paths.log_dir() / "engine-again.log")
    again.load(LoadParams(str(bundled_model), n_ctx=load_options.get("n_ctx", 2048),
                          n_slots=1))
    return again


def test_a_chat_reopened_after_a_restart_reads_only_what_is_new(
        client: EngineClient, bundled_model: Path) -> None:
    load(client, bundled_model)
    first, turn1 = say(client, "chat:1", A1)
    a2 = follow_up(A1, first, "And river 7?")
    straight, _ = say(client, "chat:1-straight", a2)
    again = restarted(client, bundled_model)
    try:
        reply, stats = say(again, "chat:1", a2)
        assert stats.cache_source == "disk"
        assert stats.cached_tokens >= turn1.prompt_tokens + turn1.generated_tokens - 1
        assert stats.prompt_tokens - stats.cached_tokens < 20  # only the new turn is read
        assert reply == straight
        # The engine's own slot then continues it: a third turn reads only its new message.
        _, turn3 = say(again, "chat:1", follow_up(a2, reply, "And river 9?"))
        assert turn3.cache_source == "live"
    finally:
        again.close()


def test_a_state_on_disk_survives_a_crash(client: EngineClient, bundled_model: Path) -> None:
    """What was spilled before the engine was killed is found by the next one (what was
    only in RAM is lost with the process)."""
    load(client, bundled_model, ram_mb=0)  # every state saved goes to disk at once
    first, turn1 = say(client, "chat:1", A1)
    say(client, "chat:2", B1)  # takes the only slot: chat:1 is saved (to disk)
    assert client.state_report().on_disk == 1
    client.kill()
    again = EngineClient(log_path=paths.log_dir() / "engine-again.log")
    try:
        again.load(LoadParams(str(bundled_model), n_ctx=2048, n_slots=1))
        _, stats = say(again, "chat:1", follow_up(A1, first, "And river 7?"))
        assert stats.cache_source == "disk"
        assert stats.cached_tokens >= turn1.prompt_tokens
    finally:
        again.close()


@pytest.mark.parametrize("change", ["tampered", "other key"])
def test_a_kept_state_that_is_tampered_or_foreign_is_refused_and_the_prompt_read(
        client: EngineClient, bundled_model: Path, change: str) -> None:
    load(client, bundled_model)
    first, _ = say(client, "chat:1", A1)
    a2 = follow_up(A1, first, "And river 7?")
    straight, _ = say(client, "chat:1-other", a2)
    client.drop_state("chat:1-other")
    client.close()
    (kept,) = spilled()
    if change == "tampered":
        data = bytearray(kept.read_bytes())
        data[-100] ^= 0x01  # one bit of the KV data: the HMAC no longer matches
        kept.write_bytes(bytes(data))
    else:  # signed with another key (another user's, or written by anything else)
        paths.kv_state_key_path().unlink()
    again = EngineClient(log_path=paths.log_dir() / "engine-again.log")
    try:
        again.load(LoadParams(str(bundled_model), n_ctx=2048, n_slots=1))
        reply, stats = say(again, "chat:1", a2)
        assert stats.cache_source == "" and stats.cached_tokens == 0
        assert reply == straight
        assert not kept.exists()  # refused: deleted
    finally:
        again.close()


def test_a_kept_state_of_other_load_settings_is_not_read(
        client: EngineClient, bundled_model: Path) -> None:
    load(client, bundled_model)
    first, _ = say(client, "chat:1", A1)
    again = restarted(client, bundled_model, n_ctx=1024)
    try:
        _, stats = say(again, "chat:1", follow_up(A1, first, "And river 7?"))
        assert stats.cached_tokens == 0 and again.state_report().on_disk == 0
    finally:
        again.close()


# -- overflow ------------------------------------------------------------------------------------
SYSTEM = Message("system", "You are a helpful assistant who answers briefly.")


def question(turn: int) -> Message:
    return Message("user", f"Question {turn}: tell me one fact about the number {turn * 7}, "
                           "please, in a sentence or two.")


@pytest.mark.parametrize(("overflow", "kept_before"), [("middle", 3), ("rolling", 1)])
def test_a_full_context_leaves_history_out_and_keeps_its_cache(
        client: EngineClient, bundled_model: Path, overflow: OverflowPolicy,
        kept_before: int) -> None:
    load(client, bundled_model, n_ctx=512)
    messages: tuple[Message, ...] = (SYSTEM,)
    overflowed = shifted = 0
    turn = 0
    while overflowed < 3:
        messages = (*messages, question(turn))
        reply, stats = say(client, "chat:1", messages, overflow)
        if stats.dropped_messages:
            overflowed += 1
            # The system prompt (and under "middle" the first exchange) are kept; what was
            # left out is one run right after them.
            assert stats.dropped_start == kept_before
            # Only the new question (and the markup around it) is evaluated.
            assert stats.prompt_tokens - stats.cached_tokens < 60, stats
            shifted += stats.shifted_tokens
        messages = (*messages, Message("assistant", reply))
        turn += 1
        assert turn < 20
    assert shifted > 0
    view = client.inspect(GenerationRequest(1, (*messages, question(turn)), REPLY,
                                            overflow=overflow))
    assert view.prompt.startswith(f"<|im_start|>system\n{SYSTEM.content}<|im_end|>")
    assert (messages[1].content in view.prompt) == (overflow == "middle")
    assert view.dropped_start == kept_before and view.dropped_messages > 0


def test_a_full_context_under_stop_ends_the_reply_with_a_message(
        client: EngineClient, bundled_model: Path) -> None:
    load(client, bundled_model, n_ctx=512)
    messages: tuple[Message, ...] = (SYSTEM,)
    for turn in range(20):
        messages = (*messages, question(turn))
        events = list(client.generate(GenerationRequest(turn, messages, REPLY, "chat:1",
                                                        "stop")))
        finish = finish_of(events).finish
        if finish.reason == "error":
            break
        messages = (*messages, Message("assistant", "".join(
            e.text for e in events if isinstance(e, p.Delta))))
    assert finish.context_full and "context holds 512" in finish.message
    assert not [e for e in events if isinstance(e, (p.Delta, p.ReplyStats))]
    assert say(client, "chat:1", (SYSTEM, question(0)), "stop")[0]  # the engine carries on
