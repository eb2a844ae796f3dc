"""What the API server listens on and whom it answers, checked before anything is bound.

Secure by default: loopback only. Any other address must be asked for and needs a bearer token,
because everyone who can reach the port can then use the model (and the machine's CPU/GPU).
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from inglenook.server.image_fetch import FetchPolicy

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
OLLAMA_PORT = 11434  # `inglenook serve --ollama`: where Ollama's clients look by default
DEFAULT_MAX_BODY = 4 * 1024 * 1024  # a 128k-token conversation is ~0.5 MB of JSON
DEFAULT_MAX_PENDING = 32  # API replies generating or waiting; more get 503
DEFAULT_MAX_TOKENS = 4096  # a reply's tokens when a request names no limit
MIN_NETWORK_TOKEN = 16  # a short token on a network port can be guessed
TOKEN_ENV = "INGLENOOK_API_TOKEN"  # keeps the token out of `ps` listings


class ConfigError(ValueError):
    """Settings the server refuses to start with; the message says what to change."""


@dataclass(frozen=True)
class ServerConfig:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT  # 0: any free port (tests)
    # When set, every request needs `Authorization: Bearer <token>`. Several tokens separated
    # by spaces: one per tool, each tool a principal of its own (its KV cache its own).
    token: str = ""
    cors_origins: tuple[str, ...] = ()  # browser origins allowed to call the API
    max_body_bytes: int = DEFAULT_MAX_BODY
    max_pending: int = DEFAULT_MAX_PENDING
    extra_hosts: tuple[str, ...] = field(default=())  # more Host names to accept (a LAN name)
    ollama: bool = False  # Ollama's /api/* routes too (server/ollama.py): off unless asked
    # Images named by http(s) URL are fetched (server/image_fetch.py): off unless asked, since
    # the app otherwise never reaches the network on its own. `fetch_policy`: tests only.
    fetch_images: bool = False
    # Clients without a token share one principal (their KV states reused across them: a side
    # channel, see engine/kv_reuse.py) unless this keeps each client's to itself.
    isolate_clients: bool = False
    # Ollama's /api/pull downloads models from the Hub for a client: off unless asked, for
    # the same reason (and a download fills the disk).
    allow_pull: bool = False
    fetch_policy: FetchPolicy | None = field(default=None, compare=False, repr=False)
    # Tokens a reply may have when the request names no limit (Codex, Ollama without
    # num_predict): a model that never stops is cut there, with finish reason "length".
    default_max_tokens: int = DEFAULT_MAX_TOKENS

    def check(self) -> None:
        """Raise ConfigError for settings that would be unsafe or cannot work."""
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"Port {self.port} is not between 0 and 65535.")
        if not self.host.strip():
            raise ConfigError("The address to listen on is empty.")
        if self.token and (self.token != self.token.strip() or not self.token.isprintable()):
            raise ConfigError("The token must be printable text without surrounding spaces.")
        if len(set(self.tokens)) != len(self.tokens):
            raise ConfigError("The same token is given twice.")
        if not is_loopback(self.host):
            if not self.token:
                raise ConfigError(
                    f"Listening on {self.host} lets other machines use the model: give a token "
                    f"(--token or {TOKEN_ENV}) that clients send as a bearer token.")
            if min(len(t) for t in self.tokens) < MIN_NETWORK_TOKEN:
                raise ConfigError(
                    f"A token for a network address needs at least {MIN_NETWORK_TOKEN} "
                    "characters; make one with: python -c "
                    "'import secrets; print(secrets.token_urlsafe())'.")
        for origin in self.cors_origins:
            check_origin(origin)
        if self.default_max_tokens < 1:
            raise ConfigError("The default reply limit must be at least 1 token.")
        if self.max_body_bytes < 1024 or self.max_pending < 1:
            raise ConfigError("The body limit must be at least 1 KiB and the queue at least 1.")

    @property
    def tokens(self) -> tuple[str, ...]:
        return tuple(self.token.split())

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


def token_from_env(given: str | None) -> str:
    return given if given is not None else os.environ.get(TOKEN_ENV, "")


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


def check_origin(origin: str) -> str:
    """An origin exactly as browsers send it (scheme://host[:port]); '*' is refused: it would
    let every web page the user opens drive the model."""
    if origin.strip() == "*":
        raise ConfigError("'*' would let any web page use the API; list the origins instead.")
    parts = urlsplit(origin)
    if (parts.scheme not in ("http", "https") or not parts.hostname
            or parts.path or parts.query or parts.fragment or parts.username):
        raise ConfigError(f"{origin!r} is not an origin like http://localhost:3000.")
    return origin
