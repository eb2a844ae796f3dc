"""What a loaded model's chat template says about reasoning and tools, worked out once at load.

Qt-free and free of llama_cpp, so the fake engine of the GUI tests reports the same traits as the
real host for the same template. The markers are the texts the reply splitter and the tool-call
parsers look for: where a model writes one as a control token, the host passes its text through
into the reply instead of dropping it (host.Session); message text can still never produce one,
which is the template's business (core/template.py).
"""

from __future__ import annotations

from inglenook.core.reasoning import ReasoningFormat, TemplateTraits, traits_of
from inglenook.core.template import RendersText, generation_prompt
from inglenook.tools.formats import tool_format

_REASONING_MARKERS = {
    "think": ("<think>", "</think>"),
    "bracket": ("[THINK]", "[/THINK]"),
    "channels": ("<|channel|>", "<|message|>", "<|start|>", "<|end|>", "<|constrain|>",
                 "<|return|>", "<|call|>"),
}
_TOOL_MARKERS: dict[str, tuple[str, ...]] = {
    "hermes": ("<tool_call>", "</tool_call>"),
    "llama": ("<|python_tag|>",),
    "mistral": ("[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"),
    "harmony": _REASONING_MARKERS["channels"],
}


def template_traits(template: RendersText) -> tuple[TemplateTraits, str]:
    """The template's reasoning traits and its tool-call format ("" for none)."""
    return traits_of(template.source, generation_prompt(template)), tool_format(
        template.source) or ""


def stream_markers(reasoning: ReasoningFormat | None, tools: str) -> frozenset[str]:
    """The marker texts a reply in these formats must keep for the window to read it."""
    found = set(_REASONING_MARKERS[reasoning.kind]) if reasoning is not None else set()
    found.update(_TOOL_MARKERS.get(tools, ()))
    return frozenset(found)
