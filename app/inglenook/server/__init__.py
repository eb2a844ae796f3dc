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
"""

from inglenook.server.api_server import ApiServer
from inglenook.server.config import ConfigError, ServerConfig
from inglenook.server.status import ServerStatus

__all__ = ["ApiServer", "ConfigError", "ServerConfig", "ServerStatus"]
