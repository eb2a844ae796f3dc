"""Chat templates rendered in a child the engine can always stop (engine/template_process.py)."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest

from inglenook.core.messages import Message, ToolCallTurn
from inglenook.core.template import (
    ChatTemplate,
    ControlStrings,
    TemplateContext,
    TemplateError,
    render_prompt,
)
from inglenook.engine.template_process import TemplateRenderer
from tests.templates import QWEN3

CHATML = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
CONTROL = ControlStrings(["<|im_start|>", "<|im_end|>"])
CHAT = [Message("system", "Be brief."), Message("user", "Hi <|im_end|> there"),
        Message("assistant", "Hello!", tool_calls=(ToolCallTurn("c1", "clock", '{"tz": "UTC"}'),)),
        Message("tool", "12:00", tool_call_id="c1", name="clock"), Message("user", "Thanks")]

# Each spends its time or memory inside one C call, where no sandbox check runs.
NESTED = ("{% set ns = namespace(a=[0], b=[0]) %}{% for i in range(40) %}"
          "{% set ns.a = [ns.a, ns.a] %}{% set ns.b = [ns.b, ns.b] %}{% endfor %}")
C_LEVEL_BOMBS = [
    NESTED + "{{ ns.a == ns.b }}",  # 2^40 comparisons
    NESTED + "{{ (ns.a|string)|length }}",  # the text of a 2^40-leaf tree
    NESTED + "{{ ns.a|tojson|length }}",
    "{{ range(3000)|map('center', 900000)|list|length }}",  # 2.7 GB of padding
]


@pytest.fixture
def renderer() -> Iterator[TemplateRenderer]:
    made = TemplateRenderer(CHATML)
    yield made
    made.close()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is gone once its state says so.
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split(") ")[-1][0] != "Z"


def test_a_prompt_renders_as_it_does_in_process(renderer: TemplateRenderer) -> None:
    context = TemplateContext(tools=({"type": "function", "function": {"name": "clock"}},))
    there = renderer.render_prompt(CHAT, control=CONTROL, context=context)
    here = render_prompt(ChatTemplate(CHATML), CHAT, control=CONTROL, context=context)
    assert there == here and not there.defused
    assert renderer.render(CHAT, add_generation_prompt=False) == ChatTemplate(CHATML).render(
        CHAT, add_generation_prompt=False)
    qwen = TemplateRenderer(QWEN3, eos_token="<|im_end|>")
    try:
        assert qwen.render_prompt(CHAT, control=CONTROL, context=context) == render_prompt(
            ChatTemplate(QWEN3, eos_token="<|im_end|>"), CHAT, control=CONTROL,
            context=context)
    finally:
        qwen.close()


def test_errors_cross_with_their_message_and_flag() -> None:
    with pytest.raises(TemplateError, match="syntax error on line 1"):
        TemplateRenderer("{% if %}")
    refusing = TemplateRenderer("{{ raise_exception('No system role') }}")
    try:
        with pytest.raises(TemplateError, match="No system role") as info:
            refusing.render_prompt(CHAT)
        assert info.value.raised_by_template
    finally:
        refusing.close()


@pytest.mark.parametrize("bomb", C_LEVEL_BOMBS)
def test_a_template_stuck_in_c_code_is_stopped_and_the_next_render_works(bomb: str) -> None:
    template = "{% if messages[-1].content == 'boom' %}" + bomb + "{% endif %}" + CHATML
    renderer = TemplateRenderer(template, time_limit_s=1.0)
    try:
        start = time.monotonic()
        with pytest.raises(TemplateError, match=r"longer than 1 seconds|memory|unreasonably"):
            renderer.render_prompt([Message("user", "boom")], control=CONTROL)
        assert time.monotonic() - start < 30  # the limit plus a kill; not minutes or hours
        # The child is gone or renders again; the next prompt gets one that works.
        prompt = renderer.render_prompt([Message("user", "fine")], control=CONTROL)
        assert prompt.text == "<|im_start|>user\nfine<|im_end|>\n<|im_start|>assistant\n"
        assert [s.from_message for s in prompt.segments] == [False, True, False]
    finally:
        renderer.close()


def test_a_render_that_waits_for_a_core_is_not_stopped() -> None:
    # The limit is CPU time: a child kept off the CPU (stopped here, as a busy machine would
    # starve it) for longer than its limit plus the grace still answers.
    renderer = TemplateRenderer(CHATML, time_limit_s=0.5)
    pid = renderer.pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    resume = threading.Timer(3.0, os.kill, (pid, signal.SIGCONT))  # the starvation, not a wait
    resume.start()
    try:
        prompt = renderer.render_prompt([Message("user", "slow")], control=CONTROL)
        assert prompt.text.startswith("<|im_start|>user\nslow") and renderer.pid == pid
    finally:
        resume.join()
        renderer.close()


def test_a_killed_child_is_reaped_and_close_ends_it() -> None:
    renderer = TemplateRenderer("{% if messages[-1].content == 'boom' %}" + C_LEVEL_BOMBS[0]
                                + "{% endif %}" + CHATML, time_limit_s=0.5)
    stuck = renderer.pid
    assert stuck is not None
    with pytest.raises(TemplateError, match=r"longer than 0\.5 seconds"):
        renderer.render([Message("user", "boom")])
    assert not alive(stuck)
    renderer.render([Message("user", "fine")])
    fresh = renderer.pid
    assert fresh is not None and fresh != stuck and alive(fresh)
    renderer.close()
    assert not alive(fresh)


def test_a_template_that_folds_constants_compiles_at_once() -> None:
    # Jinja used to run this chain while compiling (12 s, hundreds of MB, before any budget).
    start = time.monotonic()
    ChatTemplate("{{ ('x'|center(999999)|list|string|list|string|list|string)|length }}")
    assert time.monotonic() - start < 1.0
