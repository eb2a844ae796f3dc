"""Chat messages and the requests that carry them to the engine."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from inglenook.core.sampling import SamplingParams

Role = Literal["system", "user", "assistant", "tool"]
ROLES: tuple[Role, ...] = ("system", "user", "assistant", "tool")
# What to leave out when a conversation outgrows the context (see core/context.py).
OverflowPolicy = Literal["stop", "middle", "rolling"]
OVERFLOW_POLICIES: tuple[OverflowPolicy, ...] = ("stop", "middle", "rolling")
DEFAULT_OVERFLOW: OverflowPolicy = "middle"
WINDOW = ""  # the principal of the window's chats (and of the command line)


@dataclass(frozen=True)
class ToolCallTurn:
    """A tool call an assistant turn made, as the chat template is given it back. The
    arguments are JSON text (a message must stay hashable); the template gets the object."""

    id: str
    name: str
    arguments: str = "{}"


@dataclass(frozen=True)
class ImageRef:
    """An image a message shows the model: the sha256 of the file's bytes and where the file
    is. It crosses the pipe as these two strings (never the pixels, never pickle); the engine
    reads the file with core/images.py's bounds and refuses it when the bytes' hash is not
    `sha256`, so a KV state keyed on the hash can never be restored for another image."""

    sha256: str
    path: str

    def __post_init__(self) -> None:
        if len(self.sha256) != 64 or any(c not in "0123456789abcdef" for c in self.sha256):
            raise ValueError("An image's sha256 must be 64 lowercase hex digits.")


@dataclass(frozen=True)
class Message:
    """One turn. The role is one of ROLES and nothing else: templates branch on it and print it
    between control tokens, so a free-form role would be a way to write markup.

    `reasoning` is what a thinking model wrote before this reply's answer, sent only to
    templates that read it back (`reasoning_content`); like `content`, it is message text and
    never markup. An assistant turn that called tools lists them in `tool_calls`; a `tool` turn
    answers one of them (`tool_call_id`, `name`: the function it answers). `images` are shown
    to the model before the message's text, in order (only a model loaded with a projector
    can read them)."""

    role: Role
    content: str
    reasoning: str = ""
    tool_calls: tuple[ToolCallTurn, ...] = ()
    tool_call_id: str = ""
    name: str = ""
    images: tuple[ImageRef, ...] = ()

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"Unknown message role {self.role!r} (one of {', '.join(ROLES)}).")
        if not isinstance(self.content, str):
            raise TypeError(f"A message's content must be text, not {type(self.content).__name__}.")


@dataclass(frozen=True)
class RawPrompt:
    """A plain completion (OpenAI's /v1/completions): `prefix` continued as it is, with no
    chat template, read as plain text (it cannot produce control tokens). With a `suffix`,
    the reply fills in between: fill-in-the-middle, with the model's FIM tokens."""

    prefix: str
    suffix: str = ""


@dataclass(frozen=True)
class ForcedCall:
    """OpenAI's `tool_choice` "required" (`name` "": any offered tool) or a named function:
    the reply is a call, by a grammar made from the tools' schemas in the model's call format
    (engine/host/tool_grammar.py). `parallel` False: exactly one call. `strict`: the functions
    whose schema must be enforced whole (a keyword a grammar cannot enforce is refused)."""

    name: str = ""
    parallel: bool = True
    strict: tuple[str, ...] = ()


@dataclass(frozen=True)
class GenerationRequest:
    """One reply to generate. `messages` is the whole conversation the model should see.

    `conversation` names the conversation (the window: its scheduler owner, "chat:12"), so the
    engine keeps its KV-cache state when another conversation runs and restores it when this
    one continues; "" keeps none. `overflow` is what to leave out when it outgrows the context:
    "stop" (nothing: the reply fails with a message), "middle" (the oldest turns after the
    system prompt and the first exchange, unless that takes over half the room) or "rolling"
    (the oldest turns after the system prompt); anything else is read as the default.

    Passed into the chat template as its variables: `tools` (OpenAI-style function specs, the
    template's `tools`; empty: none offered), `enable_thinking` (None: the template's default)
    and `reasoning_effort` ("": the template's default). The window sets the last two only for
    a template that reads them (ModelInfo.traits).

    `principal` scopes the conversation: two principals' requests never reuse each other's KV
    cells, however alike their prompts, so neither can tell what the other sent."""

    request_id: int
    messages: tuple[Message, ...]
    sampling: SamplingParams = field(default_factory=SamplingParams)
    conversation: str = ""
    overflow: OverflowPolicy = DEFAULT_OVERFLOW
    tools: tuple[dict[str, Any], ...] = ()
    enable_thinking: bool | None = None
    reasoning_effort: str = ""
    # Whose request this is: KV state and prefix reuse never cross principals (see
    # engine/kv_reuse.py). WINDOW: the window's chats and the CLI; the API server names each
    # token's principal, and one for clients without a token.
    principal: str = ""
    # The reply's shape, enforced by a grammar while sampling (never by hope): "" free text,
    # JSON_OBJECT any JSON object, else a JSON Schema (its JSON text) the reply must match.
    reply_format: str = ""
    # OpenAI's logit_bias: (token id, value added to its logit), applied before every other
    # sampler. The ids are the loaded model's; the engine refuses one outside its vocabulary.
    logit_bias: tuple[tuple[int, float], ...] = ()
    # -1: no log-probabilities; 0..MAX_TOP_LOGPROBS: each chosen token's, with that many of
    # the most likely alternatives (protocol.Logprobs events, before the Delta of their text).
    logprobs: int = -1
    # A call the reply must be (tool_choice "required" or named), or None: the model chooses.
    forced_call: ForcedCall | None = None
    # A plain completion of a text instead of the conversation (`messages` is then that text
    # as one user turn, for the context budget); None: the chat template renders `messages`.
    raw: RawPrompt | None = None
    # Continue: the reply so far. The prompt ends inside the assistant turn with this text (no
    # end of turn), and the model goes on from it; its deltas are only what follows.
    prefill: str = ""


JSON_OBJECT = "json"  # GenerationRequest.reply_format: any JSON object


def build_messages(system_prompt: str, turns: list[Message]) -> tuple[Message, ...]:
    """The conversation as sent to the model: the system prompt (if any) first."""
    head = (Message("system", system_prompt),) if system_prompt.strip() else ()
    return head + tuple(turns)
