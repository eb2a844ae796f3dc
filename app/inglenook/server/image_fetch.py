"""Fetching an image an API request names by http(s) URL, when the user allowed it (off unless
`inglenook serve --fetch-images` or the window's API server settings turn it on).

A client of the API could otherwise make this machine read from places only it can reach, and
have the model describe what it found; and whatever is fetched is outside data. So:
- http and https only, no user name or password in the URL, no port 0; an internationalised
  host name is used in its IDNA (xn--) form, for the resolver, the Host header and TLS alike;
- the host's addresses are resolved here and each one checked: only public addresses, never
  loopback, private, link-local, site-local, shared (CGNAT), reserved or multicast ones, nor an
  IPv6 address that wraps one (IPv4-mapped, 6to4, Teredo: the IPv4 inside is judged too); an
  image on your own network can be sent as a data: URL by the client that can read it;
- the connection goes to the address that was checked, with the host name in the Host header
  and the TLS handshake (its certificate is verified against the name): a DNS answer that
  changes between the check and the connection (DNS rebinding) cannot send it elsewhere;
- no proxy from the environment (a proxy resolves the name itself, where it cannot be checked),
  no cookies, no credentials;
- redirects are followed by hand, at most MAX_REDIRECTS, each hop checked again, and never from
  https down to http;
- a deadline for the whole fetch that holds in every phase (connecting, each redirect, the
  headers, the body): each hop's timeouts are cut to what is left, and a watchdog shuts the
  fetch's sockets down when it passes (a server sending a header line every few seconds
  would otherwise hold the fetch for as long as it likes, each read within the read timeout);
  the name's lookup is the system resolver's, bounded by its own timeouts;
- at most MAX_FILE_BYTES (core/images.py's cap), refused from the Content-Length before reading
  when it says more, and at the first byte over otherwise; no compression is accepted (a small
  gzip body can expand a thousandfold in one read); a Content-Type that is not an image is
  refused before the body is read. The bytes are then decoded by core/images.py's bounded
  decoder like any other image;
- per request, at most MAX_IMAGES fetches, MAX_REQUEST_BYTES in all and REQUEST_DEADLINE_S for
  all of them together: a 4 MB body can name tens of thousands of URLs.
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
from inglenook.core.socket_watchdog import SocketWatchdog
from inglenook.core.units import describe_size

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
MAX_REDIRECTS = 3
TIMEOUT_S = 10.0  # to connect, and for each read
DEADLINE_S = 30.0  # for a whole fetch, redirects included
# One request's fetches together. A fetch holds a thread of server/replying.py's fetching pool
# and each image is written to the cache: 16 images (more than any client sends at once) and
# 64 MB (two of the largest, or 16 phone photos) bound what one request can cost, and
# REQUEST_DEADLINE_S how long it holds its thread.
MAX_IMAGES = 16
MAX_REQUEST_BYTES = 64 * 1024 * 1024
REQUEST_DEADLINE_S = 60.0
_REDIRECTS = (301, 302, 303, 307, 308)
_NOT_IMAGES = ("text/", "application/json", "application/xml", "application/javascript")


class FetchRefused(Exception):
    """An image URL that was not (or could not be) fetched; the message says why."""


class FetchDeferred(Exception):
    """Raised instead of fetching by a fetcher that is `deferred`: the parse is on threads that
    must not wait on the network, and is run again on the fetching pool (server/replying.py)."""


def is_public(address: IPAddress) -> bool:
    """A unicast address on the public internet. An IPv6 address that carries an IPv4 one is
    judged by that one too: ::ffff:127.0.0.1 is loopback, and 6to4 (2002::/16) and Teredo
    (2001::/32) relays deliver to the IPv4 address inside (2002:a9fe:a9fe:: reaches
    169.254.169.254, a cloud's metadata service)."""
    inside: list[ipaddress.IPv4Address] = []
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        elif address.sixtofour is not None:
            inside.append(address.sixtofour)
        elif address.teredo is not None:
            inside.extend(address.teredo)  # (relay server, client)
    if isinstance(address, ipaddress.IPv6Address) and address.is_site_local:
        return False  # fec0::/10: deprecated, yet still routed inside some networks
    return all(a.is_global and not a.is_multicast and not a.is_reserved
               for a in (address, *inside))


def resolve(host: str, port: int) -> list[str]:
    """The host's addresses (the system resolver; a literal address is its own)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


@dataclass(frozen=True)
class FetchPolicy:
    """The rules of a fetch. Tests replace `address_allowed` (a loopback test server) and
    `resolve` (a name that resolves to it), and shorten the limits; the app never does."""

    address_allowed: Callable[[IPAddress], bool] = is_public
    resolve: Callable[[str, int], list[str]] = resolve
    max_bytes: int = MAX_FILE_BYTES
    max_redirects: int = MAX_REDIRECTS
    timeout_s: float = TIMEOUT_S
    deadline_s: float = DEADLINE_S
    max_images: int = MAX_IMAGES
    max_request_bytes: int = MAX_REQUEST_BYTES
    request_deadline_s: float = REQUEST_DEADLINE_S


@dataclass
class ImageFetcher:
    """Fetches the images of one request; `notes` says what it fetched or refused. While
    `deferred`, fetch raises FetchDeferred instead (see server/replying.py)."""

    policy: FetchPolicy = field(default_factory=FetchPolicy)
    notes: list[str] = field(default_factory=list)
    deferred: bool = False
    fetched: int = field(default=0, init=False)  # begun, refused ones too: each costs a lookup
    fetched_bytes: int = field(default=0, init=False)
    _started: float | None = field(default=None, init=False, repr=False)

    def fetch(self, url: str) -> bytes:
        """The bytes at `url` (not yet decoded); FetchRefused with the reason otherwise."""
        if self.deferred:
            raise FetchDeferred
        host = urlsplit(url).hostname or "?"
        try:
            data = self._within_request(url)
        except FetchRefused as exc:
            self.notes.append(f"image from {_shown(host)} refused")
            raise exc from None
        self.notes.append(f"image fetched from {_shown(host)} ({describe_size(len(data))})")
        return data

    def _within_request(self, url: str) -> bytes:
        """A fetch within the request's caps: its count, its bytes and its time."""
        policy = self.policy
        now = time.monotonic()
        if self._started is None:
            self._started = now
        if self.fetched >= policy.max_images:
            raise FetchRefused(f"at most {policy.max_images} images are fetched for one "
                               "request; send the others as data: URLs.")
        left = policy.max_request_bytes - self.fetched_bytes
        if left <= 0:
            raise FetchRefused(f"at most {describe_size(policy.max_request_bytes)} of images "
                               "are fetched for one request; send the others as data: URLs.")
        request_end = self._started + policy.request_deadline_s
        if now >= request_end:
            raise FetchRefused(f"fetching this request's images took longer than "
                               f"{policy.request_deadline_s:g} s; send them as data: URLs.")
        self.fetched += 1
        data = self._fetch(url, min(now + policy.deadline_s, request_end), left)
        self.fetched_bytes += len(data)
        return data

    def _fetch(self, url: str, deadline: float, left: int) -> bytes:
        policy = self.policy
        late = FetchRefused(f"{_shown(urlsplit(url).hostname or '?')} took longer than "
                            f"{deadline - time.monotonic():.3g} s.")
        watchdog = SocketWatchdog()
        with httpx2.Client(trust_env=False, follow_redirects=False) as client, \
                watchdog.deadline(deadline - time.monotonic()):
            for _hop in range(policy.max_redirects + 1):
                remaining = deadline - time.monotonic()
                if remaining <= 0 or watchdog.fired:
                    raise late
                target, headers, extensions, host = self._checked(url)
                extensions["trace"] = watchdog.trace
                try:
                    with client.stream("GET", target, headers=headers, extensions=extensions,
                                       timeout=min(policy.timeout_s, remaining)) as response:
                        if response.status_code in _REDIRECTS:
                            url = next_hop(url, response.headers.get("location", ""), host)
                            continue
                        data = self._body(response, host, min(policy.max_bytes, left))
                except (httpx2.HTTPError, httpx2.InvalidURL, OSError) as exc:
                    if watchdog.fired or time.monotonic() >= deadline:
                        raise late from None
                    if isinstance(exc, httpx2.TimeoutException):
                        raise FetchRefused(f"{host} did not answer in time.") from None
                    reason = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
                    raise FetchRefused(f"the image could not be fetched from {host} "
                                       f"({reason}).") from None
                if watchdog.fired:  # a body without a length ends where the watchdog cut it
                    raise late
                return data
        raise FetchRefused(f"more than {policy.max_redirects} redirects.")

    def _checked(self, url: str) -> tuple[str, dict[str, str], dict[str, object], str]:
        """The URL to connect to (the checked address in place of the name), its headers and
        extensions, and the host name (IDNA); FetchRefused when the URL breaks a rule."""
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https"):
            raise FetchRefused(f"only http and https URLs are fetched, not {scheme or '?'}:.")
        if parts.username is not None or parts.password is not None:
            raise FetchRefused("a URL with a user name or password is not fetched.")
        if not parts.hostname:
            raise FetchRefused("the URL has no host.")
        host = _ascii_host(parts.hostname)
        try:
            port = parts.port
        except ValueError:
            port = 0
        if port == 0:
            raise FetchRefused("the URL's port is not a number from 1 to 65535.")
        default = 443 if scheme == "https" else 80
        port = port or default
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
        name = f"[{host}]" if ":" in host else host
        headers = {"host": name if port == default else f"{name}:{port}", "accept": "image/*",
                   "accept-encoding": "identity", "user-agent": f"inglenook/{__version__}"}
        extensions: dict[str, object] = {"sni_hostname": host} if scheme == "https" else {}
        return target, headers, extensions, host

    def _body(self, response: httpx2.Response, host: str, limit: int) -> bytes:
        """The image's bytes, at most `limit` (the file cap, or what is left of the request's
        bytes); the deadline is the watchdog's."""
        too_large = FetchRefused(
            f"images up to {limit:,} bytes are read; this one is larger."
            if limit == self.policy.max_bytes else
            f"at most {describe_size(self.policy.max_request_bytes)} of images are fetched for "
            "one request; this one would pass it.")
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
            raise too_large
        chunks, size = [], 0
        for chunk in response.iter_raw():
            size += len(chunk)
            if size > limit:
                raise too_large
            chunks.append(chunk)
        return b"".join(chunks)


def next_hop(url: str, location: str, host: str) -> str:
    """Where a redirect from `url` (on `host`) to `location` leads; FetchRefused without a
    Location, or from https down to http (what the client asked to be private would not be)."""
    if not location:
        raise FetchRefused(f"{host} redirected without a Location.")
    target = urljoin(url, location)
    if urlsplit(url).scheme.lower() == "https" and urlsplit(target).scheme.lower() != "https":
        raise FetchRefused(f"{host} redirected from https to an unencrypted URL.")
    return target


def _ascii_host(host: str) -> str:
    """The host as the network spells it: an internationalised name in its IDNA form
    (bücher.example → xn--bcher-kva.example); FetchRefused when it has none."""
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        raise FetchRefused("the URL's host name is not a valid internationalised name.") from None


def _shown(host: str) -> str:
    """The host for the request log (IDNA: a look-alike letter cannot pass for another)."""
    try:
        return _ascii_host(host)
    except FetchRefused:
        return host.encode("ascii", "backslashreplace").decode("ascii")
