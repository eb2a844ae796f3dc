"""Issue 39 #15: on a server without a token, clients share one prompt cache (a side channel:
how much of a guessed prompt is cached tells what another sent) unless it keeps them apart
(`--isolate-clients`, the dialog's switch). The real engine and the bundled model, through the
official openai client; and `inglenook serve`'s first lines, which say so."""

from __future__ import annotations

import signal
import subprocess
import sys
from typing import Any

import openai

from inglenook.engine.client import EngineClient
from tests.helpers.api import Served, serving

SECRET = [{"role": "user", "content": "My bank PIN is 4821 and my password is tulip-harbour; "
           "keep both safe and tell me a short word about owls."}]
SAMPLING: dict[str, Any] = {"temperature": 0, "seed": 42}


def cached(served: Served, **extra: Any) -> tuple[int, int]:
    """(prompt tokens, cached tokens) of the secret prompt, sent by a new client (its own
    connection)."""
    with openai.OpenAI(base_url=served.base_url, api_key="x", max_retries=0) as client:
        reply = client.chat.completions.create(model="", messages=SECRET,  # type: ignore[arg-type]
                                               max_tokens=1, extra_body=SAMPLING, **extra)
    assert reply.usage is not None and reply.usage.prompt_tokens_details is not None
    return reply.usage.prompt_tokens, reply.usage.prompt_tokens_details.cached_tokens or 0


def test_clients_kept_apart_never_read_one_anothers_prompt_cache(engine: EngineClient) -> None:
    with serving(engine) as shared:
        prompt, _ = cached(shared, user="victim")
        _, guessed = cached(shared)  # another client guesses the prompt right
    assert guessed >= prompt - 1  # the side channel, without the switch
    with serving(engine, isolate_clients=True) as apart:
        prompt, _ = cached(apart, user="victim")
        _, guessed = cached(apart)  # another connection, no user: a principal of its own
        assert guessed == 0
        _, guessed = cached(apart, user="someone")
        assert guessed == 0
        _, again = cached(apart, user="victim")  # the same client comes back: its cache
    assert again >= prompt - 1


def test_serve_says_that_tokenless_clients_share_a_cache() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "inglenook", "serve", "--port", "0",
                             "--ctx", "1024"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("Serving ")
        proc.send_signal(signal.SIGINT)  # its first lines are printed before it waits
        rest = proc.stdout.read()
        assert proc.wait(60) == 0
        assert rest.startswith("Note: clients without a token share one prompt cache")
        assert "--isolate-clients" in rest.splitlines()[0]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout:
            proc.stdout.close()
