"""The API (ASGI: starlette on uvicorn) in OpenAI's, Anthropic's and (when turned on) Ollama's
dialects, sharing the engine through the scheduler. Qt-free: `inglenook serve` runs it
headless and the window can embed ApiServer.

Modules: config (what to listen on, checked), security (Host, Origin, token: one middleware for
every route), fields (reading one field of a body), schemas and tool_specs (OpenAI's requests),
anthropic and ollama (each dialect's requests, replies and routes), responses (OpenAI's JSON
shapes), reply_reader (a reply told apart: reasoning, text, tool calls, by the window's
parsers), streaming (one reply, streamed or whole, stopped when the client leaves), replying
(what every reply route does), engine_link (replies as scheduler jobs), routes, status,
api_server.

The four names below are imported when first asked for: every command of the CLI imports
server.config, and this package importing api_server made each of them load starlette, uvicorn
and every route first (0.5 s of CPU at each start).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from inglenook.server.api_server import ApiServer
    from inglenook.server.config import ConfigError, ServerConfig
    from inglenook.server.status import ServerStatus

__all__ = ["ApiServer", "ConfigError", "ServerConfig", "ServerStatus"]
_MODULE_OF = {"ApiServer": "api_server", "ConfigError": "config", "ServerConfig": "config",
          "ServerStatus": "status"}


def __getattr__(name: str) -> object:
    if name not in _MODULE_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_MODULE_OF[name]}"), name)
