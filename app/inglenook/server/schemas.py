"""Requests of the OpenAI API, checked field by field into Inglenook's own types.

Everything a client sends is untrusted: a wrong type, NaN, a value out of range or an unknown
role is a 400 naming the field, never an exception further in. Every field is honoured or
refused by name (a field this server does not know included): never silently ignored.
Omitted sampling values take OpenAI's defaults (API_SAMPLING), not the window's.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from inglenook.core.messages import (
    JSON_OBJECT,
    ForcedCall,
    ImageRef,
    Message,
    RawPrompt,
    ToolCallTurn,
)
from inglenook.core.replies import MAX_TOP_LOGPROBS
from inglenook.core.sampling import MAX_STOP_LENGTH, MAX_STOP_STRINGS, SPECS, SamplingParams
from inglenook.server.errors import ApiError
from inglenook.server.fields import (
    boolean,
    number,
    obj,
    only_known,
    parse_json,
    text,
)
from inglenook.server.images import image_part
from inglenook.server.tool_specs import (
    name_of_call,
    openai_calls,
    openai_tool_choice,
    openai_tools,
)

__all__ = ["API_SAMPLING", "ApiCall", "parse_chat", "parse_completion", "parse_json"]

ROLES = ("system", "user", "assistant", "tool")
MAX_USER_LENGTH = 64
MAX_LOGIT_BIASES = 1024
MAX_COMPLETION_LOGPROBS = 5  # as OpenAI's legacy completions
MAX_CHOICES = 8  # `n`: that many sequences of one prompt, decoded side by side
MAX_KEEP_ALIVE_S = 7 * 24 * 3600
_DURATION = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}
COMPLETION_MAX_TOKENS = 16  # OpenAI's default for /v1/completions
# Fields that only name, cache or tag a request and never change what the model writes:
# accepted and left unused (llama.cpp's cache_prompt: prompts are always cached here, per
# principal; OpenAI's prompt_cache_key and safety_identifier). Fields that would change a
# reply are refused by name (fields.only_known).
NAMING_FIELDS = ("cache_prompt", "prompt_cache_key", "safety_identifier")
_SAMPLING_NUMBERS = ("temperature", "top_p", "top_k", "min_p", "presence_penalty",
                     "frequency_penalty", "repeat_penalty")
# OpenAI's defaults for what a request leaves out: temperature 1, top_p 1, no penalties; the
# samplers OpenAI lacks (top_k, min_p, repeat penalty) off.
API_SAMPLING = SamplingParams(temperature=1.0, top_p=1.0, top_k=0, min_p=0.0,
                              repeat_penalty=1.0)
EFFORTS = ("none", "minimal", "low", "medium", "high")
_COMMON = {"model", "stream", "stream_options", "user", "n", "seed", "stop", "max_tokens",
           "temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty",
           "repeat_penalty", "logprobs", "logit_bias", "keep_alive",
           "metadata", "store", "service_tier", *NAMING_FIELDS, "repetition_penalty"}
CHAT_FIELDS = _COMMON | {"messages", "max_completion_tokens", "response_format", "tools",
                         "tool_choice", "parallel_tool_calls", "reasoning_effort",
                         "chat_template_kwargs", "modalities", "top_logprobs", "verbosity",
                         "audio"}
COMPLETION_FIELDS = _COMMON | {"prompt", "echo", "suffix", "best_of"}
_MESSAGE_FIELDS = {"role", "content", "name", "tool_calls", "tool_call_id",
                   "reasoning_content", "refusal"}


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
    tools: tuple[dict[str, Any], ...] = ()  # given to the chat template; calls parsed back
    parallel_tool_calls: bool = True  # False: only a reply's first call is returned
    enable_thinking: bool | None = None  # None: the template's default
    reasoning_effort: str = ""
    thinking_field: str = "reasoning_effort"  # the field enable_thinking came from (errors)
    reply_format: str = ""  # GenerationRequest.reply_format: "", JSON_OBJECT or a JSON schema
    logit_bias: tuple[tuple[int, float], ...] = ()  # GenerationRequest.logit_bias
    logprobs: int = -1  # GenerationRequest.logprobs: -1 none, else that many alternatives
    forced_call: ForcedCall | None = None  # GenerationRequest.forced_call
    raw: RawPrompt | None = None  # GenerationRequest.raw: a plain completion
    echo: bool = False  # the prompt comes back before the completion


def parse_chat(data: Any) -> ApiCall:
    body = obj(data)
    only_known(body, CHAT_FIELDS)
    messages = _messages(body.get("messages"))
    max_tokens = _first_present(body, "max_completion_tokens", "max_tokens")
    reply_format = openai_reply_format(body.get("response_format"))
    if body.get("modalities") not in (None, ["text"]):
        raise ApiError(400, "Only text replies are supported.", param="modalities")
    strict: list[str] = []
    parallel = boolean(body, "parallel_tool_calls", default=True)
    tools, forced = openai_tool_choice(body.get("tool_choice"),
                                       openai_tools(body.get("tools"), strict), strict, parallel)
    effort = text(body, "reasoning_effort", 16)
    if effort and effort not in EFFORTS:
        raise ApiError(400, f"'reasoning_effort' must be one of {', '.join(EFFORTS)}.",
                       param="reasoning_effort")
    thinking = _template_kwargs(body.get("chat_template_kwargs"))
    field = "chat_template_kwargs.enable_thinking"
    if effort in ("none", "minimal"):
        thinking, effort, field = False, "", "reasoning_effort"
    call = _call(body, messages, max_tokens, default_max=-1)
    return ApiCall(**{**call.__dict__, "tools": tools, "reasoning_effort": effort,
                      "reply_format": reply_format, "logprobs": chat_logprobs(body),
                      "parallel_tool_calls": parallel, "forced_call": forced,
                      "enable_thinking": thinking, "thinking_field": field})


def parse_completion(data: Any) -> ApiCall:
    """A raw completion: the prompt continued as it is, no chat template (core RawPrompt);
    with `suffix`, filled in between. Legacy `logprobs` is a count of alternatives (0..5)."""
    body = obj(data)
    only_known(body, COMPLETION_FIELDS)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1:
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise ApiError(400, "'prompt' must be a string (one prompt per request).",
                       param="prompt")
    suffix = text(body, "suffix", 10**7)
    echo = boolean(body, "echo")
    logprobs = number(body, "logprobs", 0, MAX_COMPLETION_LOGPROBS, integer=True)
    if echo and logprobs is not None:
        raise ApiError(400, "'logprobs' with 'echo' would need the prompt's own "
                       "log-probabilities, which are not computed: leave one out.",
                       param="logprobs")
    if body.get("best_of") not in (None, 1):
        raise ApiError(400, "'best_of' must be 1.", param="best_of")
    call = _call(body, (Message("user", prompt + suffix),), "max_tokens",
                 default_max=COMPLETION_MAX_TOKENS)
    return ApiCall(**{**call.__dict__, "raw": RawPrompt(prompt, suffix), "echo": echo,
                      "logprobs": -1 if logprobs is None else int(logprobs)})


def openai_reply_format(raw: Any) -> str:
    """OpenAI's `response_format` as a GenerationRequest.reply_format: text, any JSON object,
    or a JSON schema, enforced by a grammar while sampling (`strict` or not)."""
    if raw is None:
        return ""
    fmt = obj(raw, "response_format")
    kind = fmt.get("type")
    if kind == "text":
        only_known(fmt, {"type"}, "response_format")
        return ""
    if kind == "json_object":
        only_known(fmt, {"type"}, "response_format")
        return JSON_OBJECT
    if kind == "json_schema":
        only_known(fmt, {"type", "json_schema"}, "response_format")
        spec = obj(fmt.get("json_schema"), "response_format.json_schema")
        only_known(spec, {"name", "schema", "strict", "description"},
                   "response_format.json_schema")
        return schema_text(spec.get("schema", {}), "response_format.json_schema.schema")
    raise ApiError(400, "'response_format.type' must be \"text\", \"json_object\" or "
                   "\"json_schema\".", param="response_format.type")


def schema_text(schema: Any, param: str) -> str:
    """A JSON schema as the text the engine turns into a grammar."""
    if not isinstance(schema, dict):
        raise ApiError(400, f"'{param}' must be a JSON schema (an object).", param=param)
    return json.dumps(schema) if schema else JSON_OBJECT


def _template_kwargs(raw: Any) -> bool | None:
    """llama-server's `chat_template_kwargs`: only `enable_thinking` is passed on."""
    if raw is None:
        return None
    kwargs = obj(raw, "chat_template_kwargs")
    only_known(kwargs, {"enable_thinking"}, "chat_template_kwargs")
    value = kwargs.get("enable_thinking")
    if value is not None and not isinstance(value, bool):
        raise ApiError(400, "'chat_template_kwargs.enable_thinking' must be true or false.",
                       param="chat_template_kwargs.enable_thinking")
    return value


def _call(body: dict[str, Any], messages: tuple[Message, ...], max_tokens_field: str,
          default_max: int) -> ApiCall:
    n = number(body, "n", 1, MAX_CHOICES, integer=True)
    if body.get("store") not in (None, False):
        raise ApiError(400, "'store' is not supported: replies are not kept.", param="store")
    if body.get("service_tier") not in (None, "auto", "default"):
        raise ApiError(400, "'service_tier' must be \"auto\" or \"default\".",
                       param="service_tier")
    if body.get("metadata") is not None:
        obj(body["metadata"], "metadata")  # kept by OpenAI only with `store`: as here, unused
    stream = boolean(body, "stream")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise ApiError(400, "'stream_options' must be an object.", param="stream_options")
    only_known(options or {}, {"include_usage"}, "stream_options")
    include_usage = boolean(options or {}, "include_usage", "stream_options.include_usage")
    model = text(body, "model", 256)
    user = text(body, "user", MAX_USER_LENGTH)
    lenient(body)
    body = aliased(body)
    return ApiCall(messages, sampling(body, max_tokens_field, default_max), stream,
                   include_usage, model, user, int(n or 1), keep_alive(body.get("keep_alive")),
                   logit_bias=logit_bias(body.get("logit_bias")))


def lenient(body: dict[str, Any]) -> None:
    """Fields accepted only with a value that changes nothing: `audio` null (no spoken
    replies), `verbosity` (a request for shorter or longer prose, left to the model),
    `cache_prompt` true."""
    if body.get("audio") is not None:
        raise ApiError(400, "Spoken replies ('audio') are not supported: leave it out or null.",
                       param="audio")
    if body.get("verbosity") not in (None, "low", "medium", "high"):
        raise ApiError(400, "'verbosity' must be low, medium or high.", param="verbosity")
    if body.get("cache_prompt") not in (None, True):
        raise ApiError(400, "'cache_prompt' false is not supported: prompts are always cached "
                       "(for their own client only).", param="cache_prompt")
    for name in ("prompt_cache_key", "safety_identifier"):
        text(body, name, 1024)


def aliased(body: dict[str, Any]) -> dict[str, Any]:
    """`repetition_penalty` (vLLM's and Hugging Face's name) is llama.cpp's repeat_penalty."""
    if body.get("repetition_penalty") is None:
        return body
    if body.get("repeat_penalty") is not None:
        raise ApiError(400, "Give 'repeat_penalty' or 'repetition_penalty', not both.",
                       param="repetition_penalty")
    return {**body, "repeat_penalty": body["repetition_penalty"]}


def logit_bias(raw: Any) -> tuple[tuple[int, float], ...]:
    """OpenAI's `logit_bias`: token ids (as strings: JSON keys) to a value from -100 to 100
    added to the token's logit. Whether an id is in the vocabulary the engine checks."""
    if raw is None:
        return ()
    biases = obj(raw, "logit_bias")
    if len(biases) > MAX_LOGIT_BIASES:
        raise ApiError(400, f"'logit_bias' may name at most {MAX_LOGIT_BIASES} tokens.",
                       param="logit_bias")
    out = []
    for key in biases:
        if not (isinstance(key, str) and key.isdigit() and len(key) < 10):
            raise ApiError(400, f"'logit_bias' keys must be token ids; {key[:20]!r} is not.",
                           param="logit_bias")
        value = number(biases, key, -100, 100, shown=f"logit_bias.{key}")
        out.append((int(key), float(value or 0)))
    return tuple(out)


def chat_logprobs(body: dict[str, Any]) -> int:
    """Chat's `logprobs` (true: each chosen token's) and `top_logprobs` (alternatives)."""
    wanted = boolean(body, "logprobs")
    top = number(body, "top_logprobs", 0, MAX_TOP_LOGPROBS, integer=True)
    if top is not None and not wanted:
        raise ApiError(400, "'top_logprobs' needs 'logprobs': true.", param="top_logprobs")
    return int(top or 0) if wanted else -1


def keep_alive(raw: Any) -> float | None:
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


def sampling(body: dict[str, Any], max_tokens_field: str, default_max: int,
             names: tuple[str, ...] = _SAMPLING_NUMBERS, stop_field: str = "stop",
             renamed: dict[str, str] | None = None) -> SamplingParams:
    """The sampling values a body sets, over API_SAMPLING. `renamed`: a dialect's own names
    for ours (Ollama's num_predict)."""
    values: dict[str, Any] = {}
    for name in names:
        spec = SPECS[name]
        value = number(body, name, spec.minimum, spec.maximum, integer=name == "top_k")
        if value is not None:
            values[name] = value
    seed = number(body, "seed", -(2**63), 2**64 - 1, integer=True)
    if seed is not None:
        # OpenAI takes any 64-bit seed; llama.cpp takes 31 bits. -1 (llama.cpp's "random") and
        # other negatives keep their meaning of "random".
        values["seed"] = int(seed) % 2**31 if seed >= 0 else -1
    max_tokens = number(body, max_tokens_field, 1, 2**31 - 1, integer=True)
    # Beyond the panel's maximum the context fills first anyway.
    values["max_tokens"] = (default_max if max_tokens is None
                            else min(int(max_tokens), int(SPECS["max_tokens"].maximum)))
    values["stop"] = stops(body.get(stop_field), stop_field)
    return API_SAMPLING.replace(**values)


def _messages(raw: Any) -> tuple[Message, ...]:
    if not isinstance(raw, list) or not raw:
        raise ApiError(400, "'messages' must be a non-empty list.", param="messages")
    messages: list[Message] = []
    calls: list[ToolCallTurn] = []
    for i, item in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(item, dict):
            raise ApiError(400, f"'{where}' must be an object.", param=where)
        only_known(item, _MESSAGE_FIELDS, where)
        role = item.get("role")
        if role == "developer":  # OpenAI's newer name for the system role
            role = "system"
        if role not in ROLES:
            raise ApiError(400, f"'{where}.role' must be one of {', '.join(ROLES)}.",
                           param=f"{where}.role")
        content, images = _content(item.get("content"), role, where)
        if role == "assistant":
            made = openai_calls(item.get("tool_calls"), where)
            calls += made
            reasoning = text(item, "reasoning_content", 10**7, f"{where}.reasoning_content")
            messages.append(Message("assistant", content, reasoning, tool_calls=made))
        elif role == "tool":
            call_id = text(item, "tool_call_id", 256, f"{where}.tool_call_id")
            name = text(item, "name", 64, f"{where}.name") or name_of_call(call_id, calls)
            messages.append(Message("tool", content, tool_call_id=call_id, name=name))
        else:
            for field in ("tool_calls", "tool_call_id", "reasoning_content", "name"):
                if item.get(field) is not None:
                    raise ApiError(400, f"'{where}.{field}' is not supported for a {role} turn.",
                                   param=f"{where}.{field}")
            messages.append(Message(role, content, images=images))
    return tuple(messages)


def _content(raw: Any, role: str, where: str) -> tuple[str, tuple[ImageRef, ...]]:
    """A turn's text, and the images of its `image_url` parts (a user turn's only)."""
    if isinstance(raw, str):
        return raw, ()
    if raw is None and role == "assistant":  # an assistant turn that only called tools
        return "", ()
    if isinstance(raw, list):
        parts: list[str] = []
        images: list[ImageRef] = []
        for j, part in enumerate(raw):
            if isinstance(part, dict) and part.get("type") == "image_url" and role == "user":
                images.append(image_part(part, f"{where}.content[{j}]"))
                continue
            if not (isinstance(part, dict) and part.get("type") == "text"
                    and isinstance(part.get("text"), str)):
                shown = "text or image_url" if role == "user" else "text"
                raise ApiError(400, f"'{where}.content[{j}]' must be a {shown} part "
                               f"(a {role} turn).", param=f"{where}.content")
            parts.append(part["text"])
        return "".join(parts), tuple(images)
    raise ApiError(400, f"'{where}.content' must be text.", param=f"{where}.content")


def stops(raw: Any, name: str = "stop") -> tuple[str, ...]:
    if raw is None:
        return ()
    found = [raw] if isinstance(raw, str) else raw
    if (not isinstance(found, list) or len(found) > MAX_STOP_STRINGS
            or not all(isinstance(s, str) and len(s) <= MAX_STOP_LENGTH for s in found)):
        raise ApiError(400, f"'{name}' must be a string or a list of at most {MAX_STOP_STRINGS} "
                       f"strings of at most {MAX_STOP_LENGTH} characters.", param=name)
    return tuple(s for s in found if s)


def _first_present(body: dict[str, Any], *names: str) -> str:
    return next((n for n in names if body.get(n) is not None), names[-1])
