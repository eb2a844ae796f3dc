"""What a tool call came to: a status for its card and the text the model gets back.

Every outcome becomes text for the model, failures included, so it can tell the user what
happened or try something else instead of waiting for a result that never comes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

ToolStatus = Literal["ok", "error", "denied", "timeout", "unavailable"]
# A tool can return a whole web page or file; more than this would crowd out the conversation
# (and the card). The model is told how much was cut.
MAX_RESULT_CHARS = 60_000


@dataclass(frozen=True)
class ToolResult:
    status: ToolStatus
    text: str  # the `tool` message's content
    detail: str = ""  # for the card or a log, not the model: a server's stderr, say

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def denied() -> ToolResult:
    return ToolResult("denied", "The user denied this call.")


def timed_out(seconds: float) -> ToolResult:
    return ToolResult("timeout", f"The tool did not answer within {seconds:g} s.")


def unavailable(server: str, reason: str, detail: str = "") -> ToolResult:
    return ToolResult("unavailable", f"The tool server {server!r} is not available: {reason}",
                      detail)


def unknown_tool(name: str) -> ToolResult:
    return ToolResult("error", f"There is no tool named {name!r}.")


def failed(message: str, detail: str = "") -> ToolResult:
    return ToolResult("error", f"The tool failed: {message}", detail)


def from_content(blocks: list[Any], structured: Any = None, is_error: bool = False) -> ToolResult:
    """A tools/call result (MCP content blocks) as text: text blocks as they are, other media
    named (a text-only model cannot see them), structured content when there is nothing else."""
    parts = [_block_text(block) for block in blocks]
    text = "\n".join(p for p in parts if p)
    if not text and structured is not None:
        text = json.dumps(structured, ensure_ascii=False)
    if len(text) > MAX_RESULT_CHARS:
        cut = len(text) - MAX_RESULT_CHARS
        text = f"{text[:MAX_RESULT_CHARS]}\n[… {cut:,} more characters not shown]"
    if is_error:
        return ToolResult("error", text or "The tool reported an error.")
    return ToolResult("ok", text)


def _block_text(block: Any) -> str:
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        return f"[{kind} ({block.mime_type}) not shown]"
    if kind == "resource":
        resource = block.resource
        text = getattr(resource, "text", None)
        return str(text) if text is not None else f"[resource {resource.uri} not shown]"
    if kind == "resource_link":
        return f"[resource {block.uri}]"
    return f"[{kind or 'unknown'} content not shown]"
