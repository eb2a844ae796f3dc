"""A guard that makes every network access outside loopback fail loudly, for the offline proof
(tests/gui/test_offline.py).

It is a Python audit hook (PEP 578), so it sees every socket operation made through Python's
socket module, whoever makes it (httpx, urllib, huggingface_hub, Qt for Python's helpers): a
connect or datagram to an address that is not loopback, and any name lookup other than
localhost. The hook raises before the call reaches the kernel, so nothing leaves the machine,
and it records the attempt. Audit hooks cannot be removed, so one guard per process is switched
on and off.

Child processes get the same guard from `netguard_site/sitecustomize.py`: put that folder on
PYTHONPATH and name a log file in INGLENOOK_NET_GUARD_LOG; each guarded process writes an
"installed" line with its pid, and a "blocked" line for every attempt.
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

LOG_ENV = "INGLENOOK_NET_GUARD_LOG"
SITE_DIR = Path(__file__).resolve().parent / "netguard_site"
_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}
_IP_FAMILIES = (socket.AF_INET, socket.AF_INET6)


class NetworkBlocked(ConnectionRefusedError):
    """Raised in place of a network access outside loopback."""


def is_loopback(host: object) -> bool:
    if host is None:  # getaddrinfo(None, port): the local wildcard / loopback
        return True
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    name = str(host).strip("[]").split("%")[0]
    if name.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def outside_loopback(event: str, args: tuple[Any, ...]) -> str | None:
    """What the socket event would reach, when that is outside this machine; else None."""
    if event in ("socket.connect", "socket.sendto", "socket.sendmsg"):
        sock, address = args[0], args[1]
        if getattr(sock, "family", None) not in _IP_FAMILIES or address is None:
            return None  # Unix sockets (D-Bus, X11), netlink, or an already connected socket
        return None if is_loopback(address[0]) else f"{event} {address!r}"
    if event in ("socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr"):
        return None if is_loopback(args[0]) else f"{event} {args[0]!r}"
    if event == "socket.getnameinfo":
        return None if is_loopback(args[0][0]) else f"{event} {args[0]!r}"
    return None


class Guard:
    """The audit hook. `attempts` lists what was blocked while the guard was on."""

    def __init__(self, log: Path | None) -> None:
        self.log = log
        self.on = True
        self.attempts: list[str] = []

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if not self.on or not event.startswith("socket."):
            return
        what = outside_loopback(event, args)
        if what is None:
            return
        self.attempts.append(what)
        self.write({"event": "blocked", "what": what})
        raise NetworkBlocked(f"network access outside loopback blocked by the offline test: "
                             f"{what}")

    def write(self, record: dict[str, Any]) -> None:
        if self.log is None:
            return
        record = {"pid": os.getpid(), **record}
        with open(self.log, "a", encoding="utf-8") as out:  # one short line: one write
            out.write(json.dumps(record) + "\n")


_guard: Guard | None = None


def install(log: Path | None = None) -> Guard:
    """The process's guard, installed on first use and switched on."""
    global _guard
    if _guard is None:
        _guard = Guard(log)
        sys.addaudithook(_guard)
    _guard.on = True
    _guard.write({"event": "installed", "argv": sys.argv})
    return _guard


def read_log(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def guarded_env(log: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """An environment whose Python processes (and their children) install the guard at start."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SITE_DIR), env.get("PYTHONPATH")]))
    env[LOG_ENV] = str(log)
    return env
