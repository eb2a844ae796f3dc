"""The server's settings: loopback by default, anything else only with a token."""

from __future__ import annotations

import pytest

from inglenook.server.config import ConfigError, ServerConfig, is_loopback
from inglenook.server.security import _host_name, allowed_hosts

TOKEN = "t" * 24


def test_the_default_listens_on_loopback_only() -> None:
    config = ServerConfig()
    config.check()
    assert config.host == "127.0.0.1" and not config.token and not config.cors_origins


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "myhost.lan"])
def test_a_network_address_without_a_token_is_refused(host: str) -> None:
    with pytest.raises(ConfigError, match="token"):
        ServerConfig(host=host).check()
    with pytest.raises(ConfigError, match="at least 16"):
        ServerConfig(host=host, token="short").check()
    ServerConfig(host=host, token=TOKEN).check()


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_loopback_needs_no_token(host: str) -> None:
    assert is_loopback(host)
    ServerConfig(host=host).check()


@pytest.mark.parametrize("origin", ["*", " * ", "localhost:3000", "http://x.test/path",
                                    "ftp://x.test", "http://", "http://u@x.test"])
def test_bad_cors_origins_are_refused(origin: str) -> None:
    with pytest.raises(ConfigError):
        ServerConfig(cors_origins=(origin,)).check()


def test_good_settings_pass() -> None:
    ServerConfig(cors_origins=("http://localhost:3000", "https://app.example"),
                 token="abc").check()


@pytest.mark.parametrize("config", [ServerConfig(port=70000), ServerConfig(host=" "),
                                    ServerConfig(token=" padded "),
                                    ServerConfig(max_body_bytes=10)])
def test_settings_that_cannot_work_are_refused(config: ServerConfig) -> None:
    with pytest.raises(ConfigError):
        config.check()


def test_host_headers_are_compared_without_their_port() -> None:
    assert _host_name("127.0.0.1:8080") == "127.0.0.1"
    assert _host_name("[::1]:8080") == "::1"
    assert _host_name("localhost") == "localhost"
    assert _host_name("[::1") == ""
    hosts = allowed_hosts(ServerConfig())
    assert {"localhost", "127.0.0.1", "::1"} <= hosts
    assert "evil.example" not in hosts and "0.0.0.0" not in hosts
    assert "lan-name" in allowed_hosts(ServerConfig(extra_hosts=("LAN-Name.",)))
