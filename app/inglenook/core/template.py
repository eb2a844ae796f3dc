"""Chat templates: turn a conversation into the prompt text a model was trained on.

Templates are Jinja source shipped inside GGUF files (`tokenizer.chat_template`): code written by
whoever made the file. They run in Jinja's immutable sandbox (no Python internals, no mutation) and
under a budget of time and size, so a hostile template can neither escape nor hang the engine.

How the budget is enforced: every sandbox call, attribute/item lookup, guarded operator and (by
rewriting the parsed template) every loop iteration checks the clock; every printed value counts
against a size budget; every `~` join checks the size of its result and counts what it adds
(linear in the output, so a template appending to one growing string renders long chats); and
the few builtins that can build a huge value in one step are refused up front (see `_precheck`).
Every filter is called with the template's context, so Jinja never runs one while compiling
(it folds calls on constants otherwise: a chain of `|list|string` on a literal took 12 s and
hundreds of MB before any budget existed). Residual limit: a single builtin step runs in C, where
no check can run (two self-doubling lists compared, `map` of a padding filter over a range), so
the engine renders in a child process it kills past a hard time limit and whose address space is
capped (engine/template_process.py): these budgets give the usual bombs a clear message, the
child makes sure of the rest.

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

import contextlib
import functools
import json
import re
import secrets
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, NoReturn, Protocol

from jinja2 import nodes, pass_context
from jinja2.exceptions import SecurityError, TemplateSyntaxError
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

from inglenook.core.messages import ROLES, Message, ToolCallTurn

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

MAX_OUTPUT_CHARS = 1_000_000  # raised to 4x the conversation for very long contexts
TIME_BUDGET_S = 2.0
_MAX_POWER_BITS = 100_000  # `9 ** (9 ** 9)` would otherwise spin on one bignum
_TOO_BIG = "The chat template produced an unreasonably large prompt and was stopped."
_TOO_SLOW = (f"The chat template took longer than {TIME_BUDGET_S:g} seconds (of computing) and "
             "was stopped.")
_FORMAT_SPEC = re.compile(r"%[-#0 +*.\d]+|\{[^{}]*:[^{}]*\}")  # %-specs and {:...} fields


class TemplateError(Exception):
    """A chat template could not be used; str() is a message for the user."""

    def __init__(self, message: str, raised_by_template: bool = False) -> None:
        super().__init__(message)
        self.raised_by_template = raised_by_template  # came from the template's raise_exception()

    def __reduce__(self) -> tuple[type[TemplateError], tuple[str, bool]]:
        return type(self), (str(self), self.raised_by_template)  # keeps the flag across a pipe


@dataclass
class _Budget:
    deadline: float  # in CPU seconds of the rendering thread (see _clock)
    max_chars: int
    work_left: int  # characters the template may emit anywhere, including into {% set %} blocks
    ticks: int = 0


# The time budget counts the CPU time of the thread that renders, not the wall clock: on a
# machine busy with llama.cpp's spinning threads a normal template can wait seconds for a core,
# and must not be stopped for it. Read every _CLOCK_EVERY ticks (the clock costs ~0.4 µs).
_clock = time.thread_time
_CLOCK_EVERY = 16


_BUDGET: ContextVar[_Budget | None] = ContextVar("inglenook_template_budget", default=None)
# The end of a whole request (all renders of render_prompt, its fallback included); see time_limit.
_DEADLINE: ContextVar[float | None] = ContextVar("inglenook_template_deadline", default=None)


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Every render inside shares one deadline `seconds` from now (each still has its own
    TIME_BUDGET_S), so a caller that kills the renderer after a hard limit can rely on the
    sandbox stopping everything it can stop before that."""
    token = _DEADLINE.set(_clock() + seconds)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _tick() -> None:
    budget = _BUDGET.get()
    if budget is None:
        return
    budget.ticks += 1
    if budget.ticks % _CLOCK_EVERY == 0 and _clock() > budget.deadline:
        raise TemplateError(_TOO_SLOW)


def _limit() -> int:
    budget = _BUDGET.get()  # None while compiling (Jinja folds constants at compile time)
    return MAX_OUTPUT_CHARS if budget is None else budget.max_chars


def _size(value: object, cap: int) -> int:
    """Lower bound of len(str(value)), walking into containers only until it passes `cap`, so it
    costs O(cap) at worst even for `[[s] * 1000] * 1000`-style shared structures."""
    total, stack = 0, [value]
    while stack and total <= cap:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, (list, tuple, dict)):
            total += 2 + len(item)
            stack.extend(item.items() if isinstance(item, dict) else item)
        else:
            total += 1
    return total


def _grows_too_much(text: object, marker: object, growth: object) -> bool:
    """Whether adding `growth` characters at every `marker` in `text` would pass the limit."""
    per = len(growth) if isinstance(growth, str) else growth if isinstance(growth, int) else 0
    if not (isinstance(text, str) and isinstance(marker, str)):
        return False
    hits = text.count(marker) if marker else len(text) + 1
    return len(text) + hits * per > _limit()


def _precheck(
    name: str, text: Any, args: tuple[Any, ...], kwargs: dict[str, Any], *, is_filter: bool
) -> tuple[Any, tuple[Any, ...]]:
    """Refuse a call whose result alone would be huge, before it allocates it.

    `text` is the filtered value or the method's object. Covers the one-step amplifiers: widths
    (`center(n)`, `ljust(n)`, `'%*s' % (n, '')`, `'{:>n}'`), per-line/per-tab/per-match growth
    (`indent`, `expandtabs`, `replace`) and `join` with a long separator. Returns (text, args)
    with join's items turned into a list so they can be sized.
    """
    limit = _limit()
    if any(isinstance(v, int) and v > limit for v in (*args, *kwargs.values())):
        raise TemplateError(_TOO_BIG)
    first = args[0] if args else None
    if name in ("format", "format_map", "%") and isinstance(text, str):
        widths = (int(n) for spec in _FORMAT_SPEC.findall(text) for n in re.findall(r"\d+", spec))
        too_big = sum(widths) > limit
    elif name == "replace":
        too_big = len(args) >= 2 and _grows_too_much(text, args[0], args[1])
    elif name == "indent" and is_filter:
        too_big = _grows_too_much(text, "\n", kwargs.get("width", first or 4))
    elif name == "expandtabs":
        too_big = _grows_too_much(text, "\t", kwargs.get("tabsize", first or 8))
    elif name == "join" and (args or is_filter):
        if is_filter:
            text = list(text)
            items, sep = text, kwargs.get("d", first or "")
        else:
            args = (list(args[0]), *args[1:])
            items, sep = args[0], text
        too_big = len(items) * _size(sep, limit) + _size(items, limit) > limit
    else:
        too_big = False
    if too_big:
        raise TemplateError(_TOO_BIG)
    return text, args


def _guard_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """`func` with its arguments checked first, taking the template's context whatever `func`
    takes: Jinja folds a filter that takes no context when its arguments are constants, at
    compile time, where no budget applies."""
    wants = getattr(getattr(func, "jinja_pass_arg", None), "name", "")  # Jinja's _PassArg

    @pass_context
    @functools.wraps(func)
    def guarded(context: Any, value: Any = None, *args: Any, **kwargs: Any) -> Any:
        _tick()
        first = {"context": (context,), "eval_context": (context.eval_ctx,),
                 "environment": (context.environment,)}.get(wants, ())
        value, rest = _precheck(name, value, args, kwargs, is_filter=True)
        return func(*first, value, *rest, **kwargs)

    return guarded


@pass_context  # context filters are never folded at compile time, so they always run
def _ticking(_context: Any, iterable: Iterable[Any]) -> Iterator[Any]:
    for item in iterable:
        _tick()
        yield item


@pass_context
def _counted(_context: Any, value: Any) -> Any:
    budget = _BUDGET.get()
    if budget is not None:
        budget.work_left -= _size(value, budget.work_left)
        if budget.work_left < 0:
            raise TemplateError(_TOO_BIG)
    return value


@pass_context
def _joined(_context: Any, values: tuple[Any, ...]) -> str:
    """`a ~ b ~ c`, with the result's size checked before it is built. Only what the join adds
    to its largest part counts as work: a template that appends to one growing string
    (`ns.out = ns.out ~ turn`) is charged for each turn once, not for the whole string on every
    append, which made long chats quadratic and refused. A value that doubles itself is still
    stopped, by the size of its result."""
    budget = _BUDGET.get()
    limit = _limit()
    sizes = [_size(v, limit) for v in values]
    if sum(sizes) > limit:
        raise TemplateError(_TOO_BIG)
    if budget is not None and sizes:
        budget.work_left -= sum(sizes) - max(sizes)
        if budget.work_left < 0:
            raise TemplateError(_TOO_BIG)
    return "".join(map(str, values))


def _instrument(ast: nodes.Template) -> nodes.Template:
    """Make every loop iteration check the clock, every printed value count against the work
    budget, and every `~` join check its result's size and count what it adds (so
    `{% set x = x ~ x %}` repeated can't double its way to gigabytes).

    Without this, `{% for i in range(10**5) %}{% for j in range(10**5) %}{% endfor %}{% endfor %}`
    never reaches a sandbox hook and would spin for hours.
    """

    def wrap(node: nodes.Node, name: str) -> nodes.Expr:
        return nodes.Filter(node, name, [], [], None, None, lineno=node.lineno)

    for loop in list(ast.find_all(nodes.For)):
        loop.iter = wrap(loop.iter, "_inglenook_ticking")
    for output in list(ast.find_all(nodes.Output)):
        output.nodes = [wrap(n, "_inglenook_counted") for n in output.nodes]
    for concat in list(ast.find_all(nodes.Concat)):
        operands = nodes.Tuple(concat.nodes, "load", lineno=concat.lineno)
        concat.nodes = [wrap(operands, "_inglenook_joined")]  # a join of one string: itself
    return ast


class _GenerationTag(Extension):
    """HF's `{% generation %}` marks assistant text for training masks; a no-op at inference."""

    tags = {"generation"}  # noqa: RUF012 (Jinja's Extension API declares it as a plain class attr)

    def parse(self, parser: Any) -> list[nodes.Node]:
        next(parser.stream)
        return parser.parse_statements(("name:endgeneration",), drop_needle=True)


class _BoundedEnvironment(ImmutableSandboxedEnvironment):
    """The immutable sandbox, plus a clock check on every call, lookup and guarded operator."""

    intercepted_binops = frozenset({"*", "**", "%", "+"})  # also stops Jinja folding them early

    def call(self, context: Any, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        _tick()
        name = getattr(obj, "__name__", "")
        target = getattr(getattr(obj, "__wrapped__", obj), "__self__", None)  # str.format wrapper
        _, args = _precheck(name, target, args, kwargs, is_filter=False)
        return super().call(context, obj, *args, **kwargs)

    def getattr(self, obj: Any, attribute: str) -> Any:
        _tick()
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        _tick()
        return super().getitem(obj, argument)

    def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
        # Jinja returns a silent Undefined here; a template that probes internals is hostile or
        # broken, so fail loudly instead of rendering a prompt with holes in it.
        raise SecurityError(f"access to {attribute!r} of a {type(obj).__name__!r} object")

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        _tick()
        limit = _limit()
        if operator == "%" and isinstance(left, str):
            # `*` widths come from the arguments; plain `'%d' % 5000000` must still work.
            _precheck("%", left, right if "*" in left and isinstance(right, tuple) else (), {},
                      is_filter=False)
        elif operator == "**" and isinstance(left, int) and isinstance(right, int):
            if right * abs(left).bit_length() > _MAX_POWER_BITS:
                raise TemplateError(_TOO_BIG)
        elif operator == "+" and _size(left, limit) + _size(right, limit) > limit:
            raise TemplateError(_TOO_BIG)
        elif operator == "*":
            count, seq = (left, right) if isinstance(left, int) else (right, left)
            sized = isinstance(count, int) and count > 0 and isinstance(seq, (str, list, tuple))
            if sized and count * _size(seq, limit // count) > limit:
                raise TemplateError(_TOO_BIG)
        return super().call_binop(context, operator, left, right)


def _check_roles(messages: Sequence[Message]) -> None:
    # Message refuses other roles; this catches one built around it.
    for m in messages:
        if m.role not in ROLES:
            raise TemplateError(f"A message has the unknown role {m.role!r}.")


def _raise_exception(message: str) -> NoReturn:
    raise TemplateError(
        f"The chat template rejected the conversation: {message}", raised_by_template=True
    )


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | str | None = None,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    if (len(indent) if isinstance(indent, str) else indent or 0) > 16:
        raise TemplateError(_TOO_BIG)  # repeated once per nesting level on every line
    # Like transformers: keeps non-ASCII as is and does not HTML-escape, unlike Jinja's own tojson.
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


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
        env = _BoundedEnvironment(
            trim_blocks=True,
            lstrip_blocks=True,
            extensions=["jinja2.ext.loopcontrols", _GenerationTag],
        )
        env.filters["tojson"] = _tojson
        env.filters = {name: _guard_filter(name, f) for name, f in env.filters.items()}
        env.filters["_inglenook_ticking"] = _ticking
        env.filters["_inglenook_counted"] = _counted
        env.filters["_inglenook_joined"] = _joined
        env.globals["raise_exception"] = _raise_exception
        env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
        try:
            self._template = env.from_string(_instrument(env.parse(source)))
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
        deadline = _clock() + TIME_BUDGET_S
        budget = _Budget(min(deadline, _DEADLINE.get() or deadline), max_chars, 4 * max_chars)
        token = _BUDGET.set(budget)
        variables = context.variables() if context is not None else {}
        stream = self._template.generate(
            **variables,
            messages=[_as_template_reads(m) for m in messages],
            bos_token=self.bos_token,
            eos_token=self.eos_token,
            add_generation_prompt=add_generation_prompt,
        )
        parts: list[str] = []
        size = 0
        try:
            for chunk in stream:
                size += len(chunk)
                if size > max_chars:
                    raise TemplateError(_TOO_BIG)
                _tick()
                parts.append(chunk)
        except TemplateError:
            raise
        except MemoryError as e:  # a builtin step that outgrew the renderer's memory limit
            raise TemplateError(_TOO_BIG) from e
        except SecurityError as e:
            raise TemplateError(
                f"The chat template tried to reach Python internals and was blocked ({e})."
            ) from e
        except Exception as e:  # anything the template can trigger: undefined, type, recursion...
            raise TemplateError(f"The chat template failed: {e or type(e).__name__}") from e
        finally:
            stream.close()  # type: ignore[attr-defined]  # a generator, typed as an Iterator
            _BUDGET.reset(token)
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

    @property
    def text(self) -> str:
        return "".join(s.text for s in self.segments)


ZWSP = "\u200b"
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


def choose_source(gguf_template: str | None, override: str | None) -> tuple[str, str]:
    """The template source to use and where it came from: "override", "gguf" or "chatml"."""
    for source, label in ((override, "override"), (gguf_template, "gguf")):
        if source and source.strip():
            return source, label
    return CHATML_TEMPLATE, "chatml"


def for_model(
    gguf_template: str | None, override: str | None, bos_token: str, eos_token: str
) -> tuple[ChatTemplate, str]:
    """The template to use and where it came from (see choose_source).

    A broken GGUF template raises rather than silently falling back to ChatML: the user should see
    why replies look wrong, and can set an override.
    """
    source, label = choose_source(gguf_template, override)
    return ChatTemplate(source, bos_token=bos_token, eos_token=eos_token), label
