"""Where an OpenAI-compatible API lives (a remote provider, a local server): its address, key
and name for messages. Apart from engine/remote_api.py so that what that module uses
(remote_vision) can name it without an import loop. Qt-free."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Endpoint:
    """Where an OpenAI-compatible API lives: base URL ending in its version ("…/v1")."""

    base_url: str
    api_key: str = field(default="", repr=False)  # never in a log line or a traceback
    name: str = ""  # what the user called it (a provider's name), for messages

    @property
    def host(self) -> str:
        return urlsplit(self.base_url).netloc

    @property
    def who(self) -> str:
        """The server in messages: "GPU server (gpu-box:8000)", or its host."""
        return f"{self.name} ({self.host})" if self.name else self.host

    def url(self, path: str) -> str:
        return f"{self.base_url}/{path.lstrip('/')}"

    @property
    def key_in_clear(self) -> bool:
        """A key sent over plain HTTP to another machine can be read on the way."""
        parts = urlsplit(self.base_url)
        return bool(self.api_key) and parts.scheme == "http" and not is_loopback(parts.hostname)


def is_loopback(host: str | None) -> bool:
    return host in ("localhost", "::1") or (host or "").startswith("127.")
