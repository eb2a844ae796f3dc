"""mcp.json: the shape other chat apps write, checked entry by entry, saved without losing what
we do not use."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inglenook import paths
from inglenook.tools.config import (
    ConfigError,
    ServerConfig,
    load_config,
    parse_config,
    save_config,
    set_server_enabled,
)

CLAUDE_STYLE = {
    "mcpServers": {
        "files": {"command": "npx",
                  "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
                  "env": {"DEBUG": "1"}},
        "search": {"url": "https://example.org/mcp", "headers": {"Authorization": "Bearer t"}},
        "time": {"command": "uvx", "args": ["mcp-server-time"], "disabled": True,
                 "alwaysAllow": ["get_time"]},
    },
    "theme": "kept",
}


def test_the_config_file_lives_in_the_config_dir() -> None:
    assert paths.mcp_config_file() == paths.config_dir() / "mcp.json"


def test_a_missing_file_is_no_servers_and_no_problem() -> None:
    assert load_config() == load_config(paths.mcp_config_file())
    assert load_config().servers == () and load_config().problems == ()


def test_stdio_and_http_servers_are_read_as_other_apps_write_them() -> None:
    config = parse_config(CLAUDE_STYLE)
    assert config.problems == ()
    files, search, time = config.servers
    assert (files.transport, files.command, files.args, files.env) == (
        "stdio", "npx", ("-y", "@modelcontextprotocol/server-filesystem", "/tmp"), {"DEBUG": "1"})
    assert (search.transport, search.url, search.headers) == (
        "http", "https://example.org/mcp", {"Authorization": "Bearer t"})
    assert not time.enabled and files.enabled
    assert [s.name for s in config.enabled] == ["files", "search"]
    assert "Bearer" not in repr(search)  # headers may hold a token: not in logs


@pytest.mark.parametrize(("entry", "says"), [
    ({"args": ["x"]}, "needs a command"),
    ({"command": "a", "url": "http://h/mcp"}, "both"),
    ({"command": "a", "args": "not a list"}, "args"),
    ({"command": "a", "env": {"N": 1}}, "env"),
    ({"url": "ftp://h/x"}, "http(s)"),
    ({"url": "https://h/mcp", "headers": ["x"]}, "headers"),
    ({"url": "https://h/sse", "type": "sse"}, "SSE"),
    ({"command": "a", "disabled": "yes"}, "disabled"),
    ("npx server", "not an object"),
])
def test_a_bad_entry_is_reported_and_the_others_still_load(entry: object, says: str) -> None:
    config = parse_config({"mcpServers": {"bad": entry, "good": {"command": "ok"}}})
    assert [s.name for s in config.servers] == ["good"]
    (problem,) = config.problems
    assert "'bad'" in problem and says in problem


def test_a_file_that_is_not_json_is_reported_not_raised(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text("{not json")
    config = load_config(path)
    assert config.servers == () and "could not be read" in config.problems[0]
    assert parse_config({"mcpServers": []}).problems == (
        "mcp.json: mcpServers is not an object of servers.",)


def test_vs_code_style_type_http_is_streamable_http() -> None:
    config = parse_config({"mcpServers": {"s": {"type": "http", "url": "http://127.0.0.1:1/mcp"}}})
    assert config.servers[0].transport == "http"


def test_saving_keeps_other_keys_unknown_fields_and_broken_entries(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    data = {**CLAUDE_STYLE, "mcpServers": {**CLAUDE_STYLE["mcpServers"], "typo": {"comand": "x"}}}
    path.write_text(json.dumps(data))
    config = load_config(path)
    assert len(config.problems) == 1
    added = ServerConfig("echo", command="python", args=("-m", "echo_server"))
    save_config([*[s for s in config.servers if s.name != "search"], added], path)
    written = json.loads(path.read_text())
    assert written["theme"] == "kept"
    assert set(written["mcpServers"]) == {"files", "time", "echo", "typo"}  # search was removed
    assert written["mcpServers"]["time"]["alwaysAllow"] == ["get_time"]
    assert written["mcpServers"]["typo"] == {"comand": "x"}  # left for the user to fix
    reread = load_config(path)
    assert reread.get("echo") == added and reread.get("files") == config.get("files")


def test_a_server_is_switched_off_and_on_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(CLAUDE_STYLE))
    assert not set_server_enabled("files", False, path).get("files").enabled  # type: ignore[union-attr]
    assert json.loads(path.read_text())["mcpServers"]["files"]["disabled"] is True
    assert set_server_enabled("files", True, path).get("files").enabled  # type: ignore[union-attr]
    assert "disabled" not in json.loads(path.read_text())["mcpServers"]["files"]
    with pytest.raises(ConfigError):
        set_server_enabled("nope", True, path)


def test_names_must_be_unique_and_sane(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    with pytest.raises(ConfigError, match="same name"):
        save_config([ServerConfig("a", command="x"), ServerConfig("a", command="y")], path)
    with pytest.raises(ConfigError):
        save_config([ServerConfig("bad\nname", command="x")], path)
    with pytest.raises(ConfigError):
        save_config([ServerConfig("no-command")], path)
    assert not path.exists()
