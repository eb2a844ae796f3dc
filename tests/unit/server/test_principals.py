"""Issue 39 #9 and #14 over HTTP on a fake engine host, with the official openai client: one
token's stored Responses never push out another's, and what a client sends is escaped before
it reaches `serve`'s log or terminal."""

from __future__ import annotations

import functools
import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from inglenook.core.load import LoadParams
from inglenook.engine.client import EngineClient
from inglenook.server import openai_responses
from inglenook.server.response_store import ResponseStore
from tests.helpers.api import serving

TOKENS = ("token-of-the-first-tool", "token-of-the-second-tool")


@pytest.fixture(scope="module")
def engine(bundled_model: Path, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[EngineClient]:
    folder = tmp_path_factory.mktemp("fake-principals")
    script = folder / "script.json"
    script.write_text(json.dumps({"default": {"text": "Echo: {last}", "token_ms": 0}}))
    client = EngineClient(log_path=folder / "engine.log",
                          command=[sys.executable, "-m", "tests.helpers.fake_host", str(script)])
    client.load(LoadParams(str(bundled_model)))
    yield client
    client.close()


def test_one_tokens_responses_never_push_out_anothers_previous_response(
        engine: EngineClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second tool stores more responses than a store keeps (512, here 4); the first
    tool's one is still there (on main one LRU for all tokens: it was gone)."""
    monkeypatch.setattr(openai_responses, "ResponseStore",
                        functools.partial(ResponseStore, max_responses=4))
    with serving(engine, token=" ".join(TOKENS)) as served, \
            openai.OpenAI(base_url=served.base_url, api_key=TOKENS[0], max_retries=0) as first, \
            openai.OpenAI(base_url=served.base_url, api_key=TOKENS[1], max_retries=0) as busy:
        kept = first.responses.create(model="", input="remember the owl")
        for n in range(5):
            busy.responses.create(model="", input=f"n{n}")
        later = first.responses.create(model="", input="and then?",
                                       previous_response_id=kept.id)
        assert later.usage is not None and kept.usage is not None
        assert later.usage.input_tokens > kept.usage.input_tokens  # the history came back
        with pytest.raises(openai.BadRequestError, match="not found"):  # still each its own
            busy.responses.create(model="", input="x", previous_response_id=kept.id)


def test_a_clients_user_field_never_forges_a_log_line_nor_reaches_the_terminal(
        engine: EngineClient, caplog: pytest.LogCaptureFixture) -> None:
    forged = "ann\n12:00:00 api:admin /v1/chat/completions: 200\x1b[2J\x1b]0;pwned\x07"
    # The level outlives the server: the access line may be logged after the client has its
    # reply, until the server stops (with the level restored first, it was sometimes lost).
    with caplog.at_level(logging.INFO, "inglenook.server"), serving(engine) as served, \
            openai.OpenAI(base_url=served.base_url, api_key="x", max_retries=0) as oai:
        oai.chat.completions.create(model="", user=forged,
                                    messages=[{"role": "user", "content": "hi"}])
    (line,) = [r.getMessage() for r in caplog.records if "/v1/chat/completions" in
               r.getMessage()]
    assert "\n" not in line and "\x1b" not in line and "\x07" not in line
    assert "ann\\n12:00:00 api:admin" in line and "\\x1b[2J\\x1b]0;pwned\\x07" in line


def test_serves_log_lines_stay_one_line_whoever_logs() -> None:
    from inglenook.cli.serve import OneLine  # imported here: main had none

    formatter = OneLine("%(message)s")
    record = logging.LogRecord("uvicorn", logging.INFO, __file__, 1, "peer %s said %s",
                               ("10.0.0.1", "a\rb\x1b[1A\u202eevil"), None)
    assert formatter.format(record) == "peer 10.0.0.1 said a\\rb\\x1b[1A\\u202eevil"
    try:
        raise ValueError("boom")
    except ValueError:
        failed = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", (),
                                   sys.exc_info())
    assert formatter.format(failed).startswith("failed\nTraceback")  # the app's own lines
