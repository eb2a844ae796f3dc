"""The sandbox chat templates run in: Jinja's immutable sandbox under budgets of time and size.

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
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import time
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NoReturn

from jinja2 import Template, nodes, pass_context
from jinja2.exceptions import SecurityError
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

MAX_OUTPUT_CHARS = 1_000_000  # raised to 4x the conversation for very long contexts
TIME_BUDGET_S = 2.0
_MAX_POWER_BITS = 100_000  # `9 ** (9 ** 9)` would otherwise spin on one bignum
TOO_BIG = "The chat template produced an unreasonably large prompt and was stopped."
_TOO_SLOW = "The chat template took longer than {:g} seconds (of computing) and was stopped."
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
    seconds: float  # the budget that deadline stands for, as the user is told it
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
_DEADLINE: ContextVar[tuple[float, float] | None] = ContextVar("inglenook_template_deadline",
                                                               default=None)  # (end, seconds)


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Every render inside shares one deadline `seconds` from now (each still has its own
    TIME_BUDGET_S), so a caller that kills the renderer after a hard limit can rely on the
    sandbox stopping everything it can stop before that."""
    token = _DEADLINE.set((_clock() + seconds, seconds))
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
        raise TemplateError(_TOO_SLOW.format(budget.seconds))


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
        raise TemplateError(TOO_BIG)
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
        raise TemplateError(TOO_BIG)
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
            raise TemplateError(TOO_BIG)
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
        raise TemplateError(TOO_BIG)
    if budget is not None and sizes:
        budget.work_left -= sum(sizes) - max(sizes)
        if budget.work_left < 0:
            raise TemplateError(TOO_BIG)
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
                raise TemplateError(TOO_BIG)
        elif operator == "+" and _size(left, limit) + _size(right, limit) > limit:
            raise TemplateError(TOO_BIG)
        elif operator == "*":
            count, seq = (left, right) if isinstance(left, int) else (right, left)
            sized = isinstance(count, int) and count > 0 and isinstance(seq, (str, list, tuple))
            if sized and count * _size(seq, limit // count) > limit:
                raise TemplateError(TOO_BIG)
        return super().call_binop(context, operator, left, right)


def _raise_exception(message: str) -> NoReturn:
    raise TemplateError(
        f"The chat template rejected the conversation: {message}", raised_by_template=True
    )


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | str | None = None,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    if (len(indent) if isinstance(indent, str) else indent or 0) > 16:
        raise TemplateError(TOO_BIG)  # repeated once per nesting level on every line
    # Like transformers: keeps non-ASCII as is and does not HTML-escape, unlike Jinja's own tojson.
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def compile_template(source: str) -> Template:
    """`source` compiled in the bounded sandbox, with Hugging Face's globals and filters.
    Raises Jinja's own errors (TemplateSyntaxError...) for the caller to word."""
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
    return env.from_string(_instrument(env.parse(source)))


@contextlib.contextmanager
def rendering(max_chars: int) -> Iterator[None]:
    """The budget of one render: TIME_BUDGET_S of CPU time (or less, inside time_limit) and
    `max_chars` of output."""
    deadline = _clock() + TIME_BUDGET_S
    budget = _Budget(deadline, TIME_BUDGET_S, max_chars, 4 * max_chars)
    request = _DEADLINE.get()
    if request is not None and request[0] < deadline:
        budget.deadline, budget.seconds = request
    token = _BUDGET.set(budget)
    try:
        yield
    finally:
        _BUDGET.reset(token)


def tick() -> None:
    """A step of rendering: raises TemplateError once the time budget is spent."""
    _tick()
