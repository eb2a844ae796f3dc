"""Which sampling settings each kind of OpenAI-compatible server takes, and the request body.

The OpenAI fields go to every server. The llama.cpp-style extensions (top_k, min_p, repeat
penalty, Mirostat…) go only where the server is known to read them: OpenAI itself answers 400
to a field it does not know, and vLLM spells the repeat penalty `repetition_penalty`. The kind
of server is read from the model list (`owned_by`), which every one of them fills in its own way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inglenook.core.images import data_url
from inglenook.core.messages import GenerationRequest, Message
from inglenook.core.sampling import SamplingParams

# Sent to every server (the OpenAI API's own names).
STANDARD: tuple[str, ...] = ("temperature", "top_p", "presence_penalty", "frequency_penalty",
                             "seed", "max_tokens", "stop")
OPENAI_MAX_STOP = 4  # OpenAI refuses more; servers that mimic it closely may too


@dataclass(frozen=True)
class Dialect:
    server: str  # an id, stored nowhere: recomputed from every listing
    label: str  # for the user: "vLLM", "llama.cpp server"
    # Inglenook's SamplingParams name -> the request field this server reads it from.
    extensions: Mapping[str, str] = field(default_factory=dict)
    max_stop: int | None = None  # None: no limit we know of (ours is 32)

    @property
    def accepted(self) -> frozenset[str]:
        """The SamplingParams fields this server gets (for the sampling panel)."""
        return frozenset(STANDARD) | frozenset(self.extensions)


_LLAMA = {"top_k": "top_k", "min_p": "min_p", "repeat_penalty": "repeat_penalty"}
DIALECTS: dict[str, Dialect] = {d.server: d for d in (
    Dialect("inglenook", "Inglenook", _LLAMA),
    Dialect("llama-cpp-python", "llama-cpp-python server",
            {**_LLAMA, "mirostat_mode": "mirostat_mode", "mirostat_tau": "mirostat_tau",
             "mirostat_eta": "mirostat_eta"}),
    Dialect("llama.cpp", "llama.cpp server",
            {**_LLAMA, "typical_p": "typical_p", "repeat_last_n": "repeat_last_n",
             "mirostat_mode": "mirostat", "mirostat_tau": "mirostat_tau",
             "mirostat_eta": "mirostat_eta"}),
    Dialect("vllm", "vLLM", {"top_k": "top_k", "min_p": "min_p",
                             "repeat_penalty": "repetition_penalty"}),
    Dialect("lm-studio", "LM Studio", _LLAMA),
    Dialect("ollama", "Ollama"),  # its OpenAI API reads the standard fields only
    Dialect("openai", "OpenAI-compatible", max_stop=OPENAI_MAX_STOP),
)}
GENERIC = DIALECTS["openai"]

# What each server writes in `owned_by`.
_OWNERS = {"inglenook": "inglenook", "me": "llama-cpp-python", "llamacpp": "llama.cpp",
           "vllm": "vllm", "organization_owner": "lm-studio", "library": "ollama"}


def detect_server(owners: Iterable[str], server_header: str = "") -> str:
    """The kind of server a model list came from (its models' `owned_by`, its Server
    header); "openai" (standard fields only) when nothing identifies it."""
    for owner in owners:
        if owner in _OWNERS:
            return _OWNERS[owner]
    if "ollama" in server_header.lower():
        return "ollama"
    return GENERIC.server


def dialect(server: str) -> Dialect:
    return DIALECTS.get(server, GENERIC)


def chat_body(request: GenerationRequest, model: str, server: str) -> dict[str, Any]:
    """The streaming /chat/completions body for a request to this kind of server."""
    d = dialect(server)
    s = request.sampling
    body: dict[str, Any] = {
        "model": model,
        "messages": [_message(m) for m in request.messages],
        "stream": True,
        # Token counts in the last chunk (servers that do not know the option ignore it).
        "stream_options": {"include_usage": True},
        "temperature": s.temperature,
        "top_p": s.top_p,
        "presence_penalty": s.presence_penalty,
        "frequency_penalty": s.frequency_penalty,
    }
    if s.seed >= 0:
        body["seed"] = s.seed
    if s.max_tokens > 0:
        body["max_tokens"] = s.max_tokens
    if s.stop:
        body["stop"] = list(s.stop[:d.max_stop] if d.max_stop else s.stop)
    for name, wire in d.extensions.items():
        value = getattr(s, name)
        if server == "vllm" and name == "top_k" and value == 0:
            value = -1  # vLLM's "off"; older releases refuse 0
        body[wire] = value
    return body


def _message(m: Message) -> dict[str, Any]:
    """A message in OpenAI's shape; its images first, as `data:` URLs (nothing is fetched).
    Raises core.images.ImageRefused when an image file cannot be sent."""
    if not m.images:
        return {"role": m.role, "content": m.content}
    parts: list[dict[str, Any]] = [
        {"type": "image_url", "image_url": {"url": data_url(Path(i.path), i.sha256)}}
        for i in m.images]
    if m.content:
        parts.append({"type": "text", "text": m.content})
    return {"role": m.role, "content": parts}


def unsendable(request: GenerationRequest) -> str:
    """What a request asks that no remote engine is sent ("" when nothing): the reply would
    otherwise come back without it, as if it had been honoured."""
    asked = [("a reply format (JSON)", request.reply_format), ("logprobs", request.logprobs >= 0),
             ("logit_bias", request.logit_bias), ("a forced tool call", request.forced_call),
             ("a raw completion", request.raw), ("continuing a reply", request.prefill)]
    return ", ".join(name for name, wanted in asked if wanted)


def unsent_settings(server: str, sampling: SamplingParams) -> list[str]:
    """Settings changed from their defaults that this server will not get (to tell the
    user why a change has no effect)."""
    d = dialect(server)
    defaults = SamplingParams()
    unsent = [name for name in sampling.to_dict()
              if name not in d.accepted and getattr(sampling, name) != getattr(defaults, name)]
    if d.max_stop is not None and len(sampling.stop) > d.max_stop:
        unsent.append("stop")
    return unsent
