"""Requests of the OpenAI API, checked field by field into Inglenook's own types.

Everything a client sends is untrusted: a wrong type, NaN, a value out of range or an unknown
role is a 400 naming the field, never an exception further in. Fields the engine cannot honour
(logprobs, JSON mode) are refused rather than silently ignored; fields that change nothing
here (tools, metadata) are ignored, as other local servers do.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from inglenook.core.messages import Message
from inglenook.core.sampling import MAX_STOP_LENGTH, MAX_STOP_STRINGS, SPECS, SamplingParams
from inglenook.server.errors import ApiError

ROLES = ("system", "user", "assistant", "tool")
MAX_USER_LENGTH = 64
MAX_CHOICES = 8  # `n`: that many sequences of one prompt, decoded side by side
MAX_KEEP_ALIVE_S = 7 * 24 * 3600
_DURATION = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}
COMPLETION_MAX_TOKENS = 16  # OpenAI's default for /v1/completions
_SAMPLING_NUMBERS = ("temperature", "top_p", "top_k", "min_p", "presence_penalty",
                     "frequency_penalty", "repeat_penalty")


@dataclass(frozen=True)
class ApiCall:
    """One request for a reply, whichever endpoint it came from."""

    messages: tuple[Message, ...]
    sampling: SamplingParams
    stream: bool = False
    include_usage: bool = False
    model: str = ""
    user: str = ""
    n: int = 1
    keep_alive: float | None = None  # seconds a model loaded for it stays idle; -1: always


def parse_json(body: bytes) -> Any:
    """JSON as the standard defines it: NaN and Infinity (which Python accepts) are refused."""
    def no_constants(name: str) -> Any:
        raise ValueError(f"{name} is not valid JSON")

    try:
        return json.loads(body, parse_constant=no_constants)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise ApiError(400, f"The body is not valid JSON ({_short(exc)}).",
                       code="invalid_json") from None


def parse_chat(data: Any) -> ApiCall:
    body = _object(data)
    messages = _messages(body.get("messages"))
    max_tokens = _first_present(body, "max_completion_tokens", "max_tokens")
    return _call(body, messages, max_tokens, default_max=-1)


def parse_completion(data: Any) -> ApiCall:
    """The prompt goes to the model as one user turn: the engine takes conversations, always
    through the chat template (see the README's API section)."""
    body = _object(data)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1:
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise ApiError(400, "'prompt' must be a string (one prompt per request).",
                       param="prompt")
    if body.get("echo"):
        raise ApiError(400, "'echo' is not supported.", param="echo")
    if body.get("suffix"):
        raise ApiError(400, "'suffix' is not supported.", param="suffix")
    if body.get("best_of") not in (None, 1):
        raise ApiError(400, "'best_of' must be 1.", param="best_of")
    if body.get("logprobs") is not None:
        raise ApiError(400, "'logprobs' is not supported.", param="logprobs")
    return _call(body, (Message("user", prompt),), "max_tokens",
                 default_max=COMPLETION_MAX_TOKENS)


def _call(body: dict[str, Any], messages: tuple[Message, ...], max_tokens_field: str,
          default_max: int) -> ApiCall:
    n = _number(body, "n", 1, MAX_CHOICES, integer=True)
    if body.get("logprobs") not in (None, False):
        raise ApiError(400, "'logprobs' is not supported.", param="logprobs")
    response_format = body.get("response_format")
    if response_format is not None and response_format != {"type": "text"}:
        raise ApiError(400, "Only {\"type\": \"text\"} responses are supported.",
                       param="response_format")
    stream = _bool(body, "stream")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise ApiError(400, "'stream_options' must be an object.", param="stream_options")
    include_usage = _bool(options or {}, "include_usage", "stream_options.include_usage")
    model = _text(body, "model", 256)
    user = _text(body, "user", MAX_USER_LENGTH)
    return ApiCall(messages, _sampling(body, max_tokens_field, default_max), stream,
                   include_usage, model, user, int(n or 1), _keep_alive(body.get("keep_alive")))


def _keep_alive(raw: Any) -> float | None:
    """Ollama's `keep_alive`: seconds, or a duration such as "5m"; negative: always; 0: unload
    as soon as the reply ends."""
    if raw is None:
        return None
    value: float | None = None
    if isinstance(raw, (int, float)) and not isinstance(raw, bool) and math.isfinite(raw):
        value = float(raw)
    elif isinstance(raw, str) and (found := _DURATION.match(raw)):
        value = float(found[1]) * _UNIT_S[found[2]]
    if value is None:
        raise ApiError(400, "'keep_alive' must be seconds or a duration such as \"5m\".",
                       param="keep_alive", code="invalid_value")
    return -1.0 if value < 0 else min(value, MAX_KEEP_ALIVE_S)


def _sampling(body: dict[str, Any], max_tokens_field: str, default_max: int) -> SamplingParams:
    values: dict[str, Any] = {}
    for name in _SAMPLING_NUMBERS:
        spec = SPECS[name]
        integer = name == "top_k"
        value = _number(body, name, spec.minimum, spec.maximum, integer)
        if value is not None:
            values[name] = value
    seed = _number(body, "seed", -(2**63), 2**64 - 1, integer=True)
    if seed is not None:
        # OpenAI takes any 64-bit seed; llama.cpp takes 31 bits. -1 (llama.cpp's "random") and
        # other negatives keep their meaning of "random".
        values["seed"] = int(seed) % 2**31 if seed >= 0 else -1
    max_tokens = _number(body, max_tokens_field, 1, 2**31 - 1, integer=True)
    # Beyond the panel's maximum the context fills first anyway.
    values["max_tokens"] = (default_max if max_tokens is None
                            else min(int(max_tokens), int(SPECS["max_tokens"].maximum)))
    values["stop"] = _stop(body.get("stop"))
    return SamplingParams(**values)


def _messages(raw: Any) -> tuple[Message, ...]:
    if not isinstance(raw, list) or not raw:
        raise ApiError(400, "'messages' must be a non-empty list.", param="messages")
    messages = []
    for i, item in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(item, dict):
            raise ApiError(400, f"'{where}' must be an object.", param=where)
        role = item.get("role")
        if role == "developer":  # OpenAI's newer name for the system role
            role = "system"
        if role not in ROLES:
            raise ApiError(400, f"'{where}.role' must be one of {', '.join(ROLES)}.",
                           param=f"{where}.role")
        messages.append(Message(role, _content(item.get("content"), role, where)))
    return tuple(messages)


def _content(raw: Any, role: str, where: str) -> str:
    if isinstance(raw, str):
        return raw
    if raw is None and role == "assistant":  # an assistant turn that only called tools
        return ""
    if isinstance(raw, list):
        parts = []
        for j, part in enumerate(raw):
            if not (isinstance(part, dict) and part.get("type") == "text"
                    and isinstance(part.get("text"), str)):
                raise ApiError(400, f"'{where}.content[{j}]' must be a text part: only text "
                               "is supported.", param=f"{where}.content")
            parts.append(part["text"])
        return "".join(parts)
    raise ApiError(400, f"'{where}.content' must be text.", param=f"{where}.content")


def _stop(raw: Any) -> tuple[str, ...]:
    if raw is None:
        return ()
    stops = [raw] if isinstance(raw, str) else raw
    if (not isinstance(stops, list) or len(stops) > MAX_STOP_STRINGS
            or not all(isinstance(s, str) and len(s) <= MAX_STOP_LENGTH for s in stops)):
        raise ApiError(400, f"'stop' must be a string or a list of at most {MAX_STOP_STRINGS} "
                       f"strings of at most {MAX_STOP_LENGTH} characters.", param="stop")
    return tuple(s for s in stops if s)


def _number(body: dict[str, Any], name: str, minimum: float, maximum: float,
            integer: bool = False) -> float | int | None:
    value = body.get(name)
    if value is None:
        return None
    if integer and isinstance(value, float) and value.is_integer():
        value = int(value)
    kind = "an integer" if integer else "a number"
    ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
    if (isinstance(value, bool) or not ok_type or not math.isfinite(value)
            or not minimum <= value <= maximum):
        raise ApiError(400, f"'{name}' must be {kind} from {_show(minimum)} to {_show(maximum)}.",
                       param=name, code="invalid_value")
    return value


def _bool(body: dict[str, Any], name: str, shown: str | None = None) -> bool:
    value = body.get(name)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ApiError(400, f"'{shown or name}' must be true or false.", param=shown or name)
    return value


def _text(body: dict[str, Any], name: str, limit: int) -> str:
    value = body.get(name)
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > limit:
        raise ApiError(400, f"'{name}' must be text of at most {limit} characters.", param=name)
    return value


def _object(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ApiError(400, "The body must be a JSON object.")
    return data


def _first_present(body: dict[str, Any], *names: str) -> str:
    return next((n for n in names if body.get(n) is not None), names[-1])


def _show(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _short(exc: BaseException) -> str:
    return str(exc)[:200] or type(exc).__name__
