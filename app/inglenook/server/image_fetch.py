"""Fetching an image an API request names by http(s) URL, when the user allowed it (off unless
`inglenook serve --fetch-images` or the window's API server settings turn it on).

A client of the API could otherwise make this machine read from places only it can reach, and
have the model describe what it found; and whatever is fetched is outside data. So:
- http and https only, and no user name or password in the URL;
- the host's addresses are resolved here and each one checked: only public addresses, never
  loopback, private, link-local, shared (CGNAT), reserved or multicast ones (an image on your own
  network can be sent as a data: URL by the client that can read it);
- the connection goes to the address that was checked, with the host name in the Host header
  and the TLS handshake (its certificate is verified against the name): a DNS answer that
  changes between the check and the connection (DNS rebinding) cannot send it elsewhere;
- no proxy from the environment (a proxy resolves the name itself, where it cannot be checked),
  no cookies, no credentials;
- redirects are followed by hand, at most MAX_REDIRECTS, each hop checked again;
- a timeout for the connection and for each read, and a deadline for the whole fetch;
- at most MAX_FILE_BYTES (core/images.py's cap), refused from the Content-Length before reading
  when it says more, and at the first byte over otherwise; no compression is accepted (a small
  gzip body can expand a thousandfold in one read); a Content-Type that is not an image is
  refused before the body is read. The bytes are then decoded by core/images.py's bounded
  decoder like any other image.
Each fetch, done or refused, is noted (the host and the size, never the URL's path) for the
request log.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit, urlunsplit

import httpx2

from inglenook import __version__
from inglenook.core.images import MAX_FILE_BYTES
from inglenook.core.units import describe_size

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
MAX_REDIRECTS = 3
TIMEOUT_S = 10.0  # to connect, and for each read
DEADLINE_S = 30.0  # for a whole fetch, redirects included
_REDIRECTS = (301, 302, 303, 307, 308)
_NOT_IMAGES = ("text/", "application/json", "application/xml", "application/javascript")


class FetchRefused(Exception):
    """An image URL that was not (or could not be) fetched; the message says why."""


def is_public(address: IPAddress) -> bool:
    """A unicast address on the public internet (an IPv4 address in IPv6 clothes is judged as
    IPv4: ::ffff:127.0.0.1 is loopback)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_global and not address.is_multicast and not address.is_reserved


def resolve(host: str, port: int) -> list[str]:
    """The host's addresses (the system resolver; a literal address is its own)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


@dataclass(frozen=True)
class FetchPolicy:
    """The rules of a fetch. Tests replace `address_allowed` (a loopback test server) and
    `resolve` (a name that resolves to it); the app never does."""

    address_allowed: Callable[[IPAddress], bool] = is_public
    resolve: Callable[[str, int], list[str]] = resolve
    max_bytes: int = MAX_FILE_BYTES
    max_redirects: int = MAX_REDIRECTS
    timeout_s: float = TIMEOUT_S
    deadline_s: float = DEADLINE_S


@dataclass
class ImageFetcher:
    """Fetches the images of one request; `notes` says what it fetched or refused."""

    policy: FetchPolicy = field(default_factory=FetchPolicy)
    notes: list[str] = field(default_factory=list)

    def fetch(self, url: str) -> bytes:
        """The bytes at `url` (not yet decoded); FetchRefused with the reason otherwise."""
        host = urlsplit(url).hostname or "?"
        try:
            data = self._fetch(url)
        except FetchRefused as exc:
            self.notes.append(f"image from {host} refused")
            raise exc from None
        self.notes.append(f"image fetched from {host} ({describe_size(len(data))})")
        return data

    def _fetch(self, url: str) -> bytes:
        policy = self.policy
        deadline = time.monotonic() + policy.deadline_s
        with httpx2.Client(timeout=httpx2.Timeout(policy.timeout_s), trust_env=False,
                           follow_redirects=False) as client:
            for _hop in range(policy.max_redirects + 1):
                target, headers, extensions, host = self._checked(url)
                try:
                    with client.stream("GET", target, headers=headers,
                                       extensions=extensions) as response:
                        if response.status_code in _REDIRECTS:
                            location = response.headers.get("location", "")
                            if not location:
                                raise FetchRefused(f"{host} redirected without a Location.")
                            url = urljoin(url, location)
                            continue
                        return self._body(response, host, deadline)
                except httpx2.TimeoutException:
                    raise FetchRefused(f"{host} did not answer in time.") from None
                except (httpx2.HTTPError, httpx2.InvalidURL, OSError) as exc:
                    reason = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
                    raise FetchRefused(f"the image could not be fetched from {host} "
                                       f"({reason}).") from None
        raise FetchRefused(f"more than {policy.max_redirects} redirects.")

    def _checked(self, url: str) -> tuple[str, dict[str, str], dict[str, object], str]:
        """The URL to connect to (the checked address in place of the name), its headers and
        extensions, and the host name; FetchRefused when the URL breaks a rule."""
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https"):
            raise FetchRefused(f"only http and https URLs are fetched, not {scheme or '?'}:.")
        if parts.username is not None or parts.password is not None:
            raise FetchRefused("a URL with a user name or password is not fetched.")
        host = parts.hostname
        if not host:
            raise FetchRefused("the URL has no host.")
        try:
            port = parts.port or (443 if scheme == "https" else 80)
        except ValueError:
            raise FetchRefused("the URL's port is not a number from 1 to 65535.") from None
        try:
            found = self.policy.resolve(host, port)
        except (OSError, UnicodeError) as exc:
            raise FetchRefused(f"{host} could not be resolved ({exc}).") from None
        try:
            addresses = [ipaddress.ip_address(a.split("%", 1)[0]) for a in found]
        except ValueError:
            raise FetchRefused(f"{host} resolved to something that is not an address.") from None
        if not addresses:
            raise FetchRefused(f"{host} could not be resolved.")
        for address in addresses:
            if not self.policy.address_allowed(address):
                raise FetchRefused(
                    f"{host} is on this machine or a private network ({address}): images are "
                    "fetched from public addresses only; send it as a data: URL instead.")
        address = addresses[0]
        shown = f"[{address}]" if address.version == 6 else str(address)
        target = urlunsplit((scheme, f"{shown}:{port}", parts.path or "/", parts.query, ""))
        default = port == (443 if scheme == "https" else 80)
        name = f"[{host}]" if ":" in host else host
        headers = {"host": name if default else f"{name}:{port}", "accept": "image/*",
                   "accept-encoding": "identity", "user-agent": f"inglenook/{__version__}"}
        extensions: dict[str, object] = {"sni_hostname": host} if scheme == "https" else {}
        return target, headers, extensions, host

    def _body(self, response: httpx2.Response, host: str, deadline: float) -> bytes:
        limit = self.policy.max_bytes
        if response.status_code != 200:
            raise FetchRefused(f"{host} answered HTTP {response.status_code}.")
        kind = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if kind.startswith(_NOT_IMAGES) or (kind.startswith(("audio/", "video/"))):
            raise FetchRefused(f"{host} sent {kind[:60]}, not an image.")
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):  # asked for none: a compressed body is not read
            raise FetchRefused(f"{host} sent the image compressed ({encoding[:20]}).")
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise FetchRefused(f"images up to {limit:,} bytes are read; this one is larger.")
        chunks, size = [], 0
        for chunk in response.iter_raw():
            size += len(chunk)
            if size > limit:
                raise FetchRefused(f"images up to {limit:,} bytes are read; this one is larger.")
            if time.monotonic() > deadline:
                raise FetchRefused(f"{host} took longer than {self.policy.deadline_s:g} s.")
            chunks.append(chunk)
        return b"".join(chunks)
