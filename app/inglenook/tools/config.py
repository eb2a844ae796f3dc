"""MCP servers the user configured, in the `mcp.json` shape Claude Desktop, Cursor, LM Studio and
Cline share, so a file copied from any of them works here:

    {"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "~"],
                  "env": {"DEBUG": "1"}},
        "search": {"url": "https://example.org/mcp", "headers": {"Authorization": "Bearer …"}},
        "old": {"command": "uvx", "args": ["mcp-server-time"], "disabled": true}}}

`command` (stdio) or `url` (streamable HTTP), never both. `disabled` is Cline's spelling of "off".
A bad entry is reported and skipped, never fatal: one typo must not cost the user the others.
Keys we do not use (Cline's `alwaysAllow`, VS Code's `type`…) are kept when the file is saved.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from inglenook import paths
from inglenook.core.filelock import file_lock
from inglenook.core.files import write_atomic
from inglenook.core.jsonload import JsonLoadError, load_json

Transport = Literal["stdio", "http"]
MAX_NAME = 64
_OUR_KEYS = frozenset({"command", "args", "env", "cwd", "url", "headers", "disabled", "type"})
# VS Code and Claude Code name the transport; these all mean streamable HTTP or stdio.
_HTTP_TYPES = frozenset({"http", "streamable-http", "streamablehttp", "streamable_http"})


@dataclass(frozen=True)
class ServerConfig:
    name: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str = ""
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)  # may hold a token
    enabled: bool = True
    extra: Mapping[str, Any] = field(default_factory=dict, repr=False)  # kept, not used

    @property
    def transport(self) -> Transport:
        return "http" if self.url else "stdio"

    def describe(self) -> str:
        """One line for a list of servers."""
        if self.url:
            return self.url
        return " ".join([self.command, *self.args])


@dataclass(frozen=True)
class McpConfig:
    servers: tuple[ServerConfig, ...] = ()
    problems: tuple[str, ...] = ()  # one sentence per entry (or file) that could not be used

    def get(self, name: str) -> ServerConfig | None:
        return next((s for s in self.servers if s.name == name), None)

    @property
    def enabled(self) -> tuple[ServerConfig, ...]:
        return tuple(s for s in self.servers if s.enabled)


class ConfigError(ValueError):
    """A server that cannot be saved as given; the message is for the user."""


def load_config(path: Path | None = None) -> McpConfig:
    path = path or paths.mcp_config_file()
    try:
        data = load_json(path)
    except FileNotFoundError:
        return McpConfig()
    except (OSError, JsonLoadError) as exc:
        return McpConfig(problems=(f"{path.name} could not be read ({exc}).",))
    return parse_config(data, path.name)


def parse_config(data: object, source: str = "mcp.json") -> McpConfig:
    if not isinstance(data, dict):
        return McpConfig(problems=(f"{source} is not a JSON object.",))
    entries = data.get("mcpServers", {})
    if not isinstance(entries, dict):
        return McpConfig(problems=(f"{source}: mcpServers is not an object of servers.",))
    servers: list[ServerConfig] = []
    problems: list[str] = []
    for name, entry in entries.items():
        try:
            servers.append(server_from_entry(name, entry))
        except ConfigError as exc:
            problems.append(f"{source}: server {name!r} is ignored: {exc}")
    return McpConfig(tuple(servers), tuple(problems))


def server_from_entry(name: str, entry: object) -> ServerConfig:
    """One `mcpServers` entry, checked; ConfigError says what is wrong with it."""
    check_name(name)
    if not isinstance(entry, dict):
        raise ConfigError("its entry is not an object")
    kind = entry.get("type")
    if kind is not None and not isinstance(kind, str):
        raise ConfigError("type is not text")
    kind = (kind or "").casefold()
    if kind == "sse":
        raise ConfigError("the old SSE transport is not supported; use streamable HTTP")
    command, url = entry.get("command"), entry.get("url")
    if command is not None and url is not None:
        raise ConfigError("it has both a command and a url")
    disabled = entry.get("disabled", False)
    if not isinstance(disabled, bool):
        raise ConfigError("disabled is not true or false")
    extra = {k: v for k, v in entry.items() if k not in _OUR_KEYS}
    if url is not None or kind in _HTTP_TYPES:
        return ServerConfig(name, url=check_url(url), headers=_strings(entry, "headers"),
                            enabled=not disabled, extra=extra)
    if not isinstance(command, str) or not command.strip():
        raise ConfigError("it needs a command (a program to run) or a url")
    args = entry.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ConfigError("args is not a list of text")
    cwd = entry.get("cwd", "")
    if not isinstance(cwd, str):
        raise ConfigError("cwd is not text")
    return ServerConfig(name, command=command.strip(), args=tuple(args),
                        env=_strings(entry, "env"), cwd=cwd, enabled=not disabled, extra=extra)


def check_name(name: object) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ConfigError("a server needs a name")
    if len(name) > MAX_NAME or not name.isprintable():
        raise ConfigError(f"a server's name is 1 to {MAX_NAME} printable characters")
    return name


def check_url(url: object) -> str:
    if not isinstance(url, str):
        raise ConfigError("url is not text")
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{url!r} is not an http(s) address")
    return url.strip()


def _strings(entry: Mapping[str, object], key: str) -> dict[str, str]:
    value = entry.get(key, {})
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ConfigError(f"{key} is not an object of text values")
    return dict(value)


def entry_of(server: ServerConfig) -> dict[str, Any]:
    """The `mcpServers` entry written for a server (the keys other apps read)."""
    entry: dict[str, Any] = dict(server.extra)
    if server.url:
        entry["url"] = server.url
        if server.headers:
            entry["headers"] = dict(server.headers)
    else:
        entry["command"] = server.command
        entry["args"] = list(server.args)
        if server.env:
            entry["env"] = dict(server.env)
        if server.cwd:
            entry["cwd"] = server.cwd
    if not server.enabled:
        entry["disabled"] = True
    return entry


def save_config(servers: Iterable[ServerConfig], path: Path | None = None) -> None:
    """Write the servers, keeping whatever else the file holds: other top-level keys, and
    entries that could not be read (the user may still want to fix them). Raises ConfigError
    for duplicate or bad names, OSError (LockTimeout) when it cannot write."""
    path = path or paths.mcp_config_file()
    servers = list(servers)
    with _locked(path):
        _write(path, servers)


def set_server_enabled(name: str, enabled: bool, path: Path | None = None) -> McpConfig:
    """Turn one server on or off in the file; the configuration as it now is."""
    path = path or paths.mcp_config_file()
    with _locked(path):
        config = load_config(path)
        if config.get(name) is None:
            raise ConfigError(f"There is no server named {name!r}.")
        _write(path, [replace(s, enabled=enabled) if s.name == name else s
                      for s in config.servers])
    return load_config(path)


def _locked(path: Path) -> AbstractContextManager[None]:
    return file_lock(path.with_name(path.name + ".lock"))


def _write(path: Path, servers: list[ServerConfig]) -> None:
    names = [check_name(s.name) for s in servers]
    if len(set(names)) != len(names):
        raise ConfigError("Two servers have the same name.")
    entries = {s.name: entry_of(s) for s in servers}
    for name, entry in entries.items():  # what we write must read back
        server_from_entry(name, entry)
    try:
        data = load_json(path)
    except (OSError, JsonLoadError):
        data = {}  # a missing or unreadable file is replaced (load_config reported it)
    top = data if isinstance(data, dict) else {}
    old = top.get("mcpServers")
    if isinstance(old, dict):
        for name, entry in old.items():
            if name not in entries and not _readable(name, entry):
                entries[name] = entry
    top["mcpServers"] = entries
    write_atomic(path, (json.dumps(top, ensure_ascii=False, indent=2) + "\n").encode())


def _readable(name: str, entry: object) -> bool:
    try:
        server_from_entry(name, entry)
    except ConfigError:
        return False
    return True
