"""The OpenAI-compatible API (ASGI: starlette on uvicorn), sharing the engine through the
scheduler. Qt-free: `inglenook serve` runs it headless and the window can embed ApiServer.

Modules: config (what to listen on, checked), security (Host, Origin, token), schemas (request
checking), responses (OpenAI's JSON shapes), streaming (one reply, SSE or JSON, stopped when
the client leaves), engine_link (replies as scheduler jobs), routes, status, api_server.
"""

from inglenook.server.api_server import ApiServer
from inglenook.server.config import ConfigError, ServerConfig
from inglenook.server.status import ServerStatus

__all__ = ["ApiServer", "ConfigError", "ServerConfig", "ServerStatus"]
