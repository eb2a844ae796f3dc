"""Files without a chat template, on the real engine: the template is chosen from what the file
has, and the reply stops (at the model's end-of-generation tokens and at the template's end of
turn) instead of running on to max_tokens."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from inglenook.core.load import LoadParams
from inglenook.core.messages import GenerationRequest, Message, RawPrompt
from inglenook.engine import protocol as p
from inglenook.engine.client import EngineClient
from tests.gguf_tools import TOKEN_TYPE_CONTROL, replace_tokens, rewrite_metadata
from tests.integration.conftest import GREEDY, ask, finish_of

QUESTION = (Message("user", "What is the capital of France?"),)
# Long enough that a reply running on (the old ChatML fallback on Gemma: the question over and
# over) ends at max_tokens, not at a stop.
RUN_ON = GREEDY.replace(max_tokens=300)
MARKERS = ("<end_of_turn>", "<start_of_turn>", "<|im_end|>", "<|im_start|>", "USER:",
           "ASSISTANT:")


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineClient]:
    engine = EngineClient(log_path=tmp_path_factory.mktemp("logs") / "engine.log")
    yield engine
    engine.close()


def stops(client: EngineClient, messages: tuple[Message, ...], rid: int) -> str:
    reply, events = ask(client, messages, rid, RUN_ON)
    assert finish_of(events).finish.reason == "stop", reply
    assert reply.strip() and not any(m in reply for m in MARKERS), reply
    return reply


def test_the_gemma_base_model_without_a_template_answers_and_stops(
        client: EngineClient, gemma_model: Path) -> None:
    info = client.load(LoadParams(str(gemma_model), n_ctx=2048))
    assert info.template_source == "detected"
    # A base model has not learnt Gemma's turn tokens (given them it repeats the question):
    # it continues a plain transcript, and starts the next USER: line when it is done.
    assert info.template_name == "Plain text (USER: / ASSISTANT:)"
    assert "base model" in info.template_reason and "Gemma" in info.template_reason
    assert "Paris" in stops(client, QUESTION, 1)
    stops(client, (Message("system", "You are a helpful assistant."),
                   Message("user", "Hello! Who are you?")), 2)
    stops(client, (Message("user", "Write a haiku about the sea."),), 3)


def test_gemmas_own_turns_can_be_chosen_and_end_at_its_end_of_turn(
        client: EngineClient, gemma_model: Path) -> None:
    info = client.load(LoadParams(str(gemma_model), n_ctx=2048, template_name="gemma"))
    assert (info.template_source, info.template_name) == ("chosen", "Gemma")
    request = GenerationRequest(4, QUESTION, GREEDY.replace(max_tokens=8))
    view = client.inspect(request)
    assert "<start_of_turn>user\nWhat is the capital of France?<end_of_turn>\n" \
        "<start_of_turn>model\n" in view.prompt
    assert sum(t.special for t in view.tokens) >= 4  # the turn markers are control tokens


def test_a_file_with_a_template_also_stops_at_its_end_of_turn_text(
        client: EngineClient, gemma_model: Path, tmp_path: Path) -> None:
    """The file's own template written in the plain format: its family is read from it, and
    the reply ends at the next USER: line as with the built-in one."""
    from inglenook.core.builtin_templates import BUILTINS

    own = rewrite_metadata(gemma_model, tmp_path / "gemma-with-template.gguf",
                           {"tokenizer.chat_template": BUILTINS["plain"].source})
    info = client.load(LoadParams(str(own), n_ctx=2048))
    assert info.template_source == "gguf"
    assert "Paris" in stops(client, QUESTION, 5)
    # A plain completion is not a chat turn: only max_tokens ends it.
    raw = GenerationRequest(6, (), GREEDY.replace(max_tokens=40),
                            raw=RawPrompt("USER: What is the capital of France?\nASSISTANT:"))
    events = list(client.generate(raw))
    text = "".join(e.text for e in events if isinstance(e, p.Delta))
    assert finish_of(events).finish.reason == "length" and "USER:" in text


def test_the_bundled_model_without_its_template_picks_chatml_and_stops(
        client: EngineClient, bundled_model: Path, tmp_path: Path) -> None:
    bare = rewrite_metadata(bundled_model, tmp_path / "bare.gguf",
                            {"tokenizer.chat_template": None})
    info = client.load(LoadParams(str(bare), n_ctx=2048))
    assert (info.template_source, info.template_name) == ("detected", "ChatML")
    assert info.template_reason == "chosen from its <|im_start|> and <|im_end|> tokens"
    stops(client, QUESTION, 7)


def test_a_vocabulary_with_llama3_header_tokens_picks_llama3(
        client: EngineClient, bundled_model: Path, tmp_path: Path) -> None:
    llama3 = replace_tokens(
        bundled_model, tmp_path / "llama3-vocab.gguf",
        {3: ("<|begin_of_text|>", TOKEN_TYPE_CONTROL), 4: ("<|start_header_id|>",
                                                           TOKEN_TYPE_CONTROL),
         5: ("<|end_header_id|>", TOKEN_TYPE_CONTROL), 6: ("<|eot_id|>", TOKEN_TYPE_CONTROL)},
        {"tokenizer.chat_template": None, "tokenizer.ggml.bos_token_id": 3,
         "tokenizer.ggml.eos_token_id": 6})
    info = client.load(LoadParams(str(llama3), n_ctx=2048))
    assert (info.template_source, info.template_name) == ("detected", "Llama 3")
    assert "<|start_header_id|>" in info.template_reason
    view = client.inspect(GenerationRequest(8, QUESTION, GREEDY.replace(max_tokens=4)))
    assert view.prompt.startswith("<|begin_of_text|><|start_header_id|>user<|end_header_id|>")
    assert {4, 5, 6} <= {t.id for t in view.tokens if t.special}
    # It still ends: at <|eot_id|> (end of generation) or at the next header.
    _, events = ask(client, QUESTION, 9, GREEDY.replace(max_tokens=16))
    assert finish_of(events).finish.reason in ("stop", "length")
