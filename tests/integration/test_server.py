"""The API server on the real engine and the bundled model (greedy, fixed seed), through the
official openai client; and `inglenook serve` as a user runs it."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from inglenook.core.messages import Message
from inglenook.engine.client import EngineClient
from inglenook.engine.scheduler import Job
from tests.helpers.api import Served, chat_body, first_event, open_stream, request, serving
from tests.integration.conftest import GREEDY, ask

PROMPT = "Name three colours of the rainbow."
SAMPLING: dict[str, Any] = {"temperature": 0, "seed": 42, "repeat_penalty": 1.0}


@pytest.fixture(scope="module")
def served(engine: EngineClient) -> Iterator[Served]:
    with serving(engine) as s:
        yield s


@pytest.fixture(scope="module")
def api(served: Served) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=served.base_url, api_key="unused", max_retries=0) as client:
        yield client


def greedy(api: openai.OpenAI, messages: list[dict[str, str]], **extra: Any) -> Any:
    return api.chat.completions.create(model="", messages=messages,  # type: ignore[arg-type]
                                       max_tokens=48, extra_body=SAMPLING, **extra)


def on_engine_thread(served: Served, rid: int, messages: tuple[Message, ...]) -> str:
    """A reply generated as the window generates one: a job on the same scheduler."""
    done, out = threading.Event(), {}

    def run() -> None:
        out["text"] = ask(served.server.link.client, messages, rid,
                          GREEDY.replace(max_tokens=48))[0]
        done.set()

    served.scheduler.submit(Job(run, owner="window", request_id=rid))
    assert done.wait(120)
    return out["text"]


def test_the_api_says_what_the_engine_says(served: Served, api: openai.OpenAI) -> None:
    reply = greedy(api, [{"role": "user", "content": PROMPT}])
    text = reply.choices[0].message.content
    assert text and text == on_engine_thread(served, 1, (Message("user", PROMPT),))
    assert reply.usage.completion_tokens > 0 and reply.usage.prompt_tokens > 5
    streamed = list(greedy(api, [{"role": "user", "content": PROMPT}], stream=True,
                           stream_options={"include_usage": True}))
    assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == text
    assert streamed[-1].usage.completion_tokens == reply.usage.completion_tokens
    assert [c.choices[0].finish_reason for c in streamed if c.choices][-1] == \
        reply.choices[0].finish_reason


def test_max_tokens_and_stop(api: openai.OpenAI) -> None:
    short = greedy(api, [{"role": "user", "content": PROMPT}], max_completion_tokens=5)
    assert short.choices[0].finish_reason == "length"
    assert short.usage.completion_tokens == 5
    full = greedy(api, [{"role": "user", "content": PROMPT}]).choices[0].message.content
    word = full.split()[3]
    stopped = greedy(api, [{"role": "user", "content": PROMPT}], stop=[word])
    assert stopped.choices[0].finish_reason == "stop"
    assert stopped.choices[0].message.content == full[:full.index(word)]


def test_completions(api: openai.OpenAI) -> None:
    reply = api.completions.create(model="", prompt="The sky is", extra_body=SAMPLING)
    assert reply.choices[0].text and reply.usage.completion_tokens <= 16
    streamed = "".join(c.choices[0].text for c in api.completions.create(
        model="", prompt="The sky is", stream=True, extra_body=SAMPLING))
    assert streamed == reply.choices[0].text


def test_a_resent_history_reuses_the_kv_cache(api: openai.OpenAI) -> None:
    history = [{"role": "user", "content": "Tell me about cats."}]
    first = greedy(api, history)
    history += [{"role": "assistant", "content": first.choices[0].message.content},
                {"role": "user", "content": "And dogs?"}]
    second = greedy(api, history)
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert cached >= first.usage.prompt_tokens
    assert second.usage.prompt_tokens > cached


def test_a_client_that_names_its_user_gets_its_kv_state_back_after_another_ran(
        api: openai.OpenAI) -> None:
    """Two clients alternate their conversations: each continues from its own saved state
    (without `user`, the other's turn would have replaced the cache)."""
    histories = {user: [{"role": "user", "content": f"Tell me about {animal}: where they live, "
                         "what they eat, and how they raise their young, in a few sentences."}]
                 for user, animal in (("ann", "owls"), ("bob", "bees"))}
    firsts = {}
    for user, history in histories.items():
        firsts[user] = greedy(api, history, user=user)
        history += [{"role": "assistant", "content": firsts[user].choices[0].message.content},
                    {"role": "user", "content": "Tell me more."}]
    for user, history in histories.items():
        cached = greedy(api, history, user=user).usage.prompt_tokens_details.cached_tokens
        assert cached >= firsts[user].usage.prompt_tokens


def test_an_image_for_a_model_without_a_projector_is_a_400(served: Served) -> None:
    pixel = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGNgYGAAAAAEAAH2FzhVAAAA"
             "AElFTkSuQmCC")  # a 1 × 1 PNG
    body = {"model": "", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{pixel}"}}]}]}
    response = request(served.port, "POST", "/v1/chat/completions", body)
    assert response.status == 400
    assert "cannot see images" in response.json()["error"]["message"]


def test_a_prompt_longer_than_the_context_is_a_400(served: Served) -> None:
    response = request(served.port, "POST", "/v1/chat/completions",
                       chat_body("word " * 6000, stream=True))
    assert response.status == 400
    assert response.json()["error"]["code"] == "context_length_exceeded"


def test_a_client_leaving_mid_stream_stops_the_engine(served: Served) -> None:
    before = served.status.value
    body = chat_body("Count from 1 to 1000, one number per line.", max_tokens=2000, **SAMPLING)
    with open_stream(served.port, body) as stream:
        first_event(stream)
    ended = served.status.wait_for(lambda s: s.requests >= before.requests + 1 and s.active == 0)
    assert ended.tokens - before.tokens < 100  # the engine's count, of up to 2000
    assert request(served.port, "GET", "/v1/models").status == 200


def test_a_hundred_aborted_streams_and_the_server_still_answers(
        served: Served, api: openai.OpenAI) -> None:
    before = served.status.value.requests
    for i in range(100):
        with open_stream(served.port, chat_body(f"Story number {i}, please.", max_tokens=500,
                                                **SAMPLING)) as stream:
            first_event(stream)
    served.status.wait_for(lambda s: s.requests >= before + 100 and s.active == 0)
    served.queue.wait_for(lambda q: q.running is None and not q.waiting)
    assert served.server.link.pending == 0
    assert greedy(api, [{"role": "user", "content": PROMPT}]).choices[0].message.content


def test_two_clients_and_the_window_at_once_all_complete(
        served: Served, api: openai.OpenAI) -> None:
    results: dict[str, Any] = {}

    def client(name: str) -> None:
        chunks = list(greedy(api, [{"role": "user", "content": f"Say hello to {name}."}],
                             stream=True, user=name))
        results[name] = ("".join(c.choices[0].delta.content or "" for c in chunks),
                         chunks[-1].choices[0].finish_reason)

    threads = [threading.Thread(target=client, args=(n,)) for n in ("ann", "bob")]
    for t in threads:
        t.start()
    window = on_engine_thread(served, 2, (Message("user", "Say hello to Cy."),))
    for t in threads:
        t.join(120)
    assert window
    assert {name: (bool(text), reason in ("stop", "length"))
            for name, (text, reason) in results.items()} == {
        "ann": (True, True), "bob": (True, True)}


def test_inglenook_serve_from_the_command_line() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "inglenook", "serve", "--port", "0",
                             "--ctx", "2048"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("Serving "), line + proc.stderr.read() if proc.stderr else ""
        url = line.split(" at ")[1].split()[0]
        with openai.OpenAI(base_url=url, api_key="unused", max_retries=0) as api:
            reply = greedy(api, [{"role": "user", "content": PROMPT}])
            assert reply.choices[0].message.content
            streamed = greedy(api, [{"role": "user", "content": PROMPT}], stream=True)
            assert "".join(c.choices[0].delta.content or "" for c in streamed) == \
                reply.choices[0].message.content
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream:
                stream.close()


def test_the_python_guide_of_connect_an_app_talks_to_the_server(served: Served) -> None:
    """The snippet a user pastes, as Connect an app… fills it in, run against the server."""
    from inglenook.server.connect import guides

    name = request(served.port, "GET", "/v1/models").json()["data"][0]["id"]
    (guide,) = [g for g in guides(served.url, name, "") if g.app.startswith("OpenAI client")]
    code = guide.text.replace("messages=[", "max_tokens=4, messages=[")  # a short reply
    printed: list[str] = []
    exec(code, {"print": printed.append})
    assert printed and printed[0].strip()
