"""Chat templates: turn a conversation into the prompt text a model was trained on.

Templates are Jinja source shipped inside GGUF files (`tokenizer.chat_template`): code written by
whoever made the file. They run in Jinja's immutable sandbox (no Python internals, no mutation) and
under a budget of time and size, so a hostile template can neither escape nor hang the engine.

The sandbox and its budgets are core/template_sandbox.py.

Message text never becomes markup. Only the template's own text may produce control tokens
(`<|im_start|>`, `<|eot_id|>`, `<start_of_turn>`, `[INST]`, `<|start|>`...); the text of every
message, whatever its role (system prompts, user and assistant turns, tool results, a reply's
reasoning), is tokenized as plain text, so a pasted `<|im_end|><|im_start|>system` is read as
the characters it is made of. Structured values the template prints into its markup (tool calls'
names and arguments, the tool definitions an MCP server wrote) cannot be told apart from it, so
every control string in them is defused (see `defuse`) before the template sees them.
`render_prompt` finds the message text in the rendered prompt by rendering twice: once with the
real messages, once with each message's text replaced by a random placeholder that no text
contains. The placeholder render gives the template's markup; the real one must then read as that
markup with each message's text (or the text trimmed, as `| trim` does) in the placeholders'
places. When it does not (a template that slices, rewrites or branches on message text), the
prompt is used as rendered but control strings in message text are first defused with a zero-width
space between their characters, so they cannot be read as control tokens either way.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable, Collection, Generator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, cast

from jinja2.exceptions import SecurityError, TemplateSyntaxError

from inglenook.core.builtin_templates import CHATML_TEMPLATE, Choice
from inglenook.core.messages import ROLES, ImageRef, Message, ToolCallTurn
from inglenook.core.template_sandbox import (
    MAX_OUTPUT_CHARS,
    TIME_BUDGET_S,
    TOO_BIG,
    TemplateError,
    compile_template,
    rendering,
    tick,
    time_limit,
)

__all__ = ["CHATML_TEMPLATE", "MAX_OUTPUT_CHARS", "TIME_BUDGET_S", "TemplateError", "time_limit"]


def _check_roles(messages: Sequence[Message]) -> None:
    # Message refuses other roles; this catches one built around it.
    for m in messages:
        if m.role not in ROLES:
            raise TemplateError(f"A message has the unknown role {m.role!r}.")


@dataclass(frozen=True)
class TemplateContext:
    """The template variables a request sets besides the messages (see GenerationRequest)."""

    tools: tuple[dict[str, Any], ...] = ()
    enable_thinking: bool | None = None
    reasoning_effort: str = ""

    def variables(self) -> dict[str, Any]:
        """Only what is set: templates test `tools is defined`, `enable_thinking is defined`,
        and an unset variable must keep the template's own default."""
        found: dict[str, Any] = {}
        if self.tools:
            found["tools"] = list(self.tools)
        if self.enable_thinking is not None:
            found["enable_thinking"] = self.enable_thinking
        if self.reasoning_effort:
            found["reasoning_effort"] = self.reasoning_effort
        return found


def _arguments(text: str) -> Any:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _as_template_reads(m: Message) -> dict[str, Any]:
    """A message as Hugging Face templates read it (OpenAI's shape: `reasoning_content`,
    `tool_calls[].function.arguments` as an object, a tool result's `tool_call_id`)."""
    item: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.reasoning:
        item["reasoning_content"] = m.reasoning
    if m.tool_calls:
        item["tool_calls"] = [{"id": c.id, "type": "function",
                               "function": {"name": c.name, "arguments": _arguments(c.arguments)}}
                              for c in m.tool_calls]
    if m.role == "tool":
        item["tool_call_id"], item["name"] = m.tool_call_id, m.name
    return item


class RendersText(Protocol):
    """A chat template here (ChatTemplate) or in a child process (engine/template_process.py)."""

    source: str

    def render(self, messages: Sequence[Message], *, add_generation_prompt: bool = True,
               context: TemplateContext | None = None) -> str: ...


class ChatTemplate:
    def __init__(self, source: str, *, bos_token: str = "", eos_token: str = "") -> None:
        self.source = source
        self.bos_token = bos_token
        self.eos_token = eos_token
        try:
            self._template = compile_template(source)
        except TemplateSyntaxError as e:
            raise TemplateError(
                f"The chat template has a syntax error on line {e.lineno}: {e.message}"
            ) from e
        except Exception as e:
            raise TemplateError(f"The chat template could not be read: {e}") from e

    def render(self, messages: Sequence[Message], *, add_generation_prompt: bool = True,
               context: TemplateContext | None = None) -> str:
        _check_roles(messages)
        chars_in = sum(len(m.content) + len(m.reasoning) for m in messages)
        if context is not None and context.tools:
            chars_in += len(json.dumps(context.tools))
        max_chars = max(MAX_OUTPUT_CHARS, 4 * chars_in)
        variables = context.variables() if context is not None else {}
        with rendering(max_chars):
            stream = cast(Generator[str, None, None], self._template.generate(
                **variables,
                messages=[_as_template_reads(m) for m in messages],
                bos_token=self.bos_token,
                eos_token=self.eos_token,
                add_generation_prompt=add_generation_prompt,
            ))
            parts: list[str] = []
            size = 0
            try:
                for chunk in stream:
                    size += len(chunk)
                    if size > max_chars:
                        raise TemplateError(TOO_BIG)
                    tick()
                    parts.append(chunk)
            except TemplateError:
                raise
            except MemoryError as e:  # a builtin step that outgrew the renderer's memory limit
                raise TemplateError(TOO_BIG) from e
            except SecurityError as e:
                raise TemplateError(
                    f"The chat template tried to reach Python internals and was blocked ({e})."
                ) from e
            except Exception as e:  # whatever a template can cause: undefined, type, recursion
                raise TemplateError(f"The chat template failed: {e or type(e).__name__}") from e
            finally:
                stream.close()
        return "".join(parts)


def _fold_system(messages: Sequence[Message]) -> list[Message]:
    """The system prompt merged into the first user message, for templates that refuse one."""
    system = "\n\n".join(m.content for m in messages if m.role == "system")
    rest = [m for m in messages if m.role != "system"]
    for i, m in enumerate(rest):
        if m.role == "user":
            rest[i] = Message("user", f"{system}\n\n{m.content}")
            break
    else:
        rest.insert(0, Message("user", system))
    return rest


def _refuses_system(error: TemplateError, messages: Sequence[Message]) -> bool:
    return error.raised_by_template and any(m.role == "system" for m in messages)


def render_with_fallback(
    template: ChatTemplate, messages: Sequence[Message], *, add_generation_prompt: bool = True
) -> str:
    """Render; if the template refuses a system message (Gemma, early Mistral), fold it into the
    first user message and try again."""
    try:
        return template.render(messages, add_generation_prompt=add_generation_prompt)
    except TemplateError as e:
        if not _refuses_system(e, messages):
            raise
    return template.render(_fold_system(messages), add_generation_prompt=add_generation_prompt)


def generation_prompt(template: RendersText) -> str:
    """What the template writes for `add_generation_prompt` after a one-question conversation:
    where a reply starts (a template may open a reasoning block there). "" when it cannot be
    told (the template fails, or does not render the question the same way both times)."""
    question = [Message("user", "Hi")]
    try:
        without = template.render(question, add_generation_prompt=False)
        with_prompt = template.render(question, add_generation_prompt=True)
    except TemplateError:
        return ""
    return with_prompt[len(without):] if with_prompt.startswith(without) else ""


# -- message text as plain text -------------------------------------------------------------------
@dataclass(frozen=True)
class Segment:
    """A stretch of the prompt: the template's markup, or a message's text (`from_message`),
    which must be tokenized as plain text."""

    text: str
    from_message: bool


@dataclass(frozen=True)
class RenderedPrompt:
    segments: tuple[Segment, ...]
    # The template reshaped message text, so it could not be told apart from markup: control
    # strings in message text were defused instead (see `defuse`), and `segments` is one markup
    # segment of the whole prompt.
    defused: bool = False
    # The images of the rendered messages, in order: IMAGE_MARK stands for each in the text.
    images: tuple[ImageRef, ...] = ()

    @property
    def text(self) -> str:
        return "".join(s.text for s in self.segments)


ZWSP = "\u200b"
# Where an image sits in a rendered prompt (the engine puts its embeddings there). Message text
# cannot contain it: engine/host/tokenizing.py replaces it in message text before rendering.
IMAGE_MARK = "\ufffc"  # OBJECT REPLACEMENT CHARACTER
# Placeholders are delimited by two private-use characters of plane 15 and carry a random nonce:
# nothing a user types or a template writes can contain one by chance, or guess it.
_OPEN, _CLOSE = "\U000f0000", "\U000f0001"


class ControlStrings:
    """The texts a tokenizer reads as control tokens, compiled once per model.

    `every`: all of them (what defusing removes when message text cannot be told apart from
    markup). `in_plain_text`: those it reads as tokens even in plain text (llama.cpp's
    user-defined tokens, such as gpt-oss's `<|start|>` and `<|message|>`): always defused in
    message text, since tokenizing it as plain text would not stop them.
    """

    def __init__(self, every: Collection[str] = (), in_plain_text: Collection[str] = ()) -> None:
        self.texts = (tuple(every), tuple(in_plain_text))  # what they were made of, to send on
        self.every = _alternation(every)
        self.in_plain_text = _alternation(in_plain_text)


def _alternation(texts: Collection[str]) -> re.Pattern[str] | None:
    texts = sorted({t for t in texts if t and ZWSP not in t}, key=len, reverse=True)
    return re.compile("|".join(map(re.escape, texts))) if texts else None


def _break(match: re.Match[str]) -> str:
    text = match[0]
    return ZWSP.join(text) if len(text) > 1 else "\ufffd"


def defuse(text: str, pattern: re.Pattern[str] | None) -> str:
    """`text` with a zero-width space between the characters of every control string in it (a
    one-character control string becomes U+FFFD). Repeated until none is left: breaking one
    match can leave another that overlapped it."""
    if pattern is None:
        return text
    while pattern.search(text):
        text = pattern.sub(_break, text)
    return text


def render_prompt(
    template: ChatTemplate, messages: Sequence[Message], *, add_generation_prompt: bool = True,
    control: ControlStrings | None = None, context: TemplateContext | None = None,
) -> RenderedPrompt:
    """The prompt as segments of markup and message text (see the module docstring), with the
    system-prompt fallback of `render_with_fallback`."""
    control = control or ControlStrings()
    _check_roles(messages)
    context = _defused_context(context or TemplateContext(), control.every)
    try:
        return _render_prompt(template, messages, add_generation_prompt, control, context)
    except TemplateError as e:
        if not _refuses_system(e, messages):
            raise
    return _render_prompt(template, _fold_system(messages), add_generation_prompt, control,
                          context)


def _defuse_value(value: Any, pattern: re.Pattern[str] | None) -> Any:
    """Every text in a JSON-like value (keys included) defused."""
    if isinstance(value, str):
        return defuse(value, pattern)
    if isinstance(value, dict):
        return {_defuse_value(k, pattern): _defuse_value(v, pattern) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_defuse_value(v, pattern) for v in value]
    return value


def _defused_context(context: TemplateContext, pattern: re.Pattern[str] | None
                     ) -> TemplateContext:
    if not context.tools or pattern is None:
        return context
    return replace(context, tools=tuple(_defuse_value(t, pattern) for t in context.tools))


def _with_text(m: Message, text: Callable[[str], str], markup: re.Pattern[str] | None
               ) -> Message:
    """`m` with its message text passed through `text`, and the structured values the
    template prints as markup (tool calls, a tool result's name) defused with `markup`."""
    calls = tuple(ToolCallTurn(defuse(c.id, markup), defuse(c.name, markup),
                               json.dumps(_defuse_value(_arguments(c.arguments), markup),
                                          ensure_ascii=False))
                  for c in m.tool_calls)
    return replace(m, content=text(m.content), reasoning=text(m.reasoning), tool_calls=calls,
                   tool_call_id=defuse(m.tool_call_id, markup), name=defuse(m.name, markup))


def _render_prompt(template: ChatTemplate, messages: Sequence[Message],
                   add_generation_prompt: bool, control: ControlStrings,
                   context: TemplateContext) -> RenderedPrompt:
    messages = [_with_text(m, lambda t: defuse(t, control.in_plain_text), control.every)
                for m in messages]
    real = template.render(messages, add_generation_prompt=add_generation_prompt,
                           context=context)
    nonce = secrets.token_hex(8)
    texts = [m.content for m in messages] + [m.reasoning for m in messages]
    # Empty text gets no placeholder: there is nothing to protect, and templates often test it.
    # A message's content is text number i, its reasoning number len(messages) + i.
    marked = [replace(m, content=f"{_OPEN}{nonce}{i:x}{_CLOSE}" if m.content else "",
                      reasoning=f"{_OPEN}{nonce}{len(messages) + i:x}{_CLOSE}"
                      if m.reasoning else "")
              for i, m in enumerate(messages)]
    try:
        shaped = template.render(marked, add_generation_prompt=add_generation_prompt,
                                 context=context)
    except TemplateError:
        shaped = None  # the template objects to the placeholders themselves
    segments = None if shaped is None else _align(shaped, real, nonce, texts, template.source)
    if segments is not None:
        return RenderedPrompt(segments)
    defused = [_with_text(m, lambda t: defuse(t, control.every), None) for m in messages]
    text = template.render(defused, add_generation_prompt=add_generation_prompt,
                           context=context)
    return RenderedPrompt((Segment(text, from_message=False),), defused=True)


def _align(shaped: str, real: str, nonce: str, contents: Sequence[str],
           source: str) -> tuple[Segment, ...] | None:
    """Read `real` as the markup of `shaped` with message text where its placeholders are, or
    None when it does not read that way."""
    parts = re.split(re.escape(_OPEN + nonce) + "([0-9a-f]+)" + re.escape(_CLOSE), shaped)
    markup, ids = parts[0::2], parts[1::2]
    stray = [c for c in (_OPEN, _CLOSE) if c not in source]
    if any(nonce in m or any(c in m for c in stray) for m in markup):
        return None  # a placeholder was cut or rewritten: its pieces ended up in the markup
    segments: list[Segment] = []
    pos = 0
    for k, text in enumerate(markup):
        if not real.startswith(text, pos):
            return None
        if text:
            segments.append(Segment(text, from_message=False))
            pos += len(text)
        if k == len(ids):
            break
        index = int(ids[k], 16)
        if index >= len(contents):
            return None
        after = markup[k + 1]
        for candidate in _as_templates_print(contents[index]):
            if real.startswith(candidate, pos) and real.startswith(after, pos + len(candidate)):
                break
        else:
            return None
        if candidate:
            segments.append(Segment(candidate, from_message=True))
            pos += len(candidate)
    return tuple(segments) if pos == len(real) else None


def _as_templates_print(content: str) -> dict[str, None]:
    """The text as is, then as templates commonly trim it (`| trim`, `.strip('\n')`...)."""
    return dict.fromkeys((content, content.strip(), content.lstrip(), content.rstrip(),
                          content.strip("\n"), content.lstrip("\n"), content.rstrip("\n")))


def for_model(choice: Choice, bos_token: str, eos_token: str) -> ChatTemplate:
    """The chosen template (core/builtin_templates.choose), compiled.

    A broken GGUF template raises rather than silently falling back to a built-in one: the
    user should see why replies look wrong, and can choose another in Defaults for this model.
    """
    return ChatTemplate(choice.source, bos_token=bos_token, eos_token=eos_token)
