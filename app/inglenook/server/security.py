"""Who may talk to the server, checked before any route runs (a plain ASGI middleware).

1. Host: only the names the server is reached by (loopback, the bound address). A web page
   that rebinds its own DNS name to 127.0.0.1 still sends its own name here: 403.
2. Origin: browsers name the page making the request. Only listed origins get CORS headers,
   and a request from any other page is refused outright (403): a page can send a "simple"
   POST without asking first, and it would run even though the page cannot read the answer.
3. Token: when one is set, `Authorization: Bearer <token>` or `x-api-key: <token>` (how
   Anthropic's clients send it), compared in constant time (with each of several, when the
   server gives each tool its own). One middleware for every route of every dialect.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import socket
from collections.abc import Iterable

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from inglenook.server.config import ServerConfig, is_wildcard
from inglenook.server.errors import error_body

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
ALLOWED_METHODS = "GET, POST, OPTIONS"
PREFLIGHT_MAX_AGE = "600"


def allowed_hosts(config: ServerConfig) -> frozenset[str]:
    """Host names (no port) a request may carry."""
    names = {*LOOPBACK_NAMES, _normal(config.host), *map(_normal, config.extra_hosts)}
    if is_wildcard(config.host):  # reachable by every address and name of this machine
        names |= set(map(_normal, _own_names()))
    return frozenset(names)


class SecurityMiddleware:
    def __init__(self, app: ASGIApp, config: ServerConfig) -> None:
        self.app = app
        self.hosts = allowed_hosts(config)
        self.origins = frozenset(config.cors_origins)
        self.tokens = [t.encode() for t in config.tokens]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        if _normal(_host_name(headers.get("host", ""))) not in self.hosts:
            await _refuse(send, 403, "This server only answers requests addressed to it by its "
                          "own address (the Host header names another).", "host_not_allowed")
            return
        origin = headers.get("origin")
        cors: list[tuple[bytes, bytes]] = []
        if origin is not None:
            if origin not in self.origins:
                await _refuse(send, 403, f"Requests from web pages at {origin[:200]} are not "
                              "allowed (see --cors-origin).", "origin_not_allowed")
                return
            cors = [(b"access-control-allow-origin", origin.encode("latin-1")),
                    (b"vary", b"Origin")]
            if scope["method"] == "OPTIONS" and "access-control-request-method" in headers:
                await _preflight(send, cors, headers.get("access-control-request-headers", ""))
                return
        if self.tokens and not self._authorized(headers):
            await _refuse(send, 401, "A valid API key is needed: send the server's token as "
                          "'Authorization: Bearer <token>'.", "invalid_api_key", cors,
                          [(b"www-authenticate", b"Bearer")])
            return
        if not cors:
            await self.app(scope, receive, send)
            return

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), *cors]}
            await send(message)

        await self.app(scope, receive, send_with_cors)

    def _authorized(self, headers: Headers) -> bool:
        given = presented_token(headers)
        presented = (given or "").encode("utf-8", errors="replace")
        # Every token compared, so the time taken does not say which one came close.
        matches = [hmac.compare_digest(presented, token) for token in self.tokens]
        return given is not None and any(matches)


def presented_token(headers: Headers) -> str | None:
    """The token a request carries: `Authorization: Bearer …` (OpenAI, Ollama) or
    `x-api-key` (Anthropic's clients); None when it carries neither."""
    scheme, _, given = headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and given.strip():
        return given.strip()
    key = headers.get("x-api-key")
    return key.strip() if key else None


async def _preflight(send: Send, cors: list[tuple[bytes, bytes]], requested: str) -> None:
    # The origin is trusted, so whatever headers its client library sends are allowed.
    headers = [*cors, (b"access-control-allow-methods", ALLOWED_METHODS.encode()),
               (b"access-control-max-age", PREFLIGHT_MAX_AGE.encode()),
               (b"content-length", b"0")]
    if requested:
        headers.append((b"access-control-allow-headers", requested.encode("latin-1")))
    await send({"type": "http.response.start", "status": 204, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


async def _refuse(send: Send, status: int, message: str, code: str,
                  *extra: Iterable[tuple[bytes, bytes]]) -> None:
    body = json.dumps(error_body(status, message, code=code)).encode()
    headers = [(b"content-type", b"application/json"),
               (b"content-length", str(len(body)).encode())]
    for more in extra:
        headers.extend(more)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _host_name(host: str) -> str:
    """The name in a Host header, without the port: "[::1]:8080" -> "::1"."""
    host = host.strip()
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else ""
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _normal(name: str) -> str:
    name = name.strip().strip("[]").lower().rstrip(".")
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        return name


def _own_names() -> set[str]:
    """This machine's names and interface addresses (for a server listening on all of them)."""
    names = {socket.gethostname(), socket.getfqdn(), f"{socket.gethostname()}.local"}
    try:
        import psutil

        for addresses in psutil.net_if_addrs().values():
            names.update(a.address.split("%")[0] for a in addresses
                         if a.family in (socket.AF_INET, socket.AF_INET6))
    except (ImportError, OSError):
        pass
    return names
