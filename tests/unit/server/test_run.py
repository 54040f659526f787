"""Which binds are served and how their Host/Origin headers are checked: decided by address, not by spelling."""

from __future__ import annotations

import pytest

from agent_server.errors import ConfigError
from agent_server.http_settings import AuthSettings, HttpSettings
from agent_server.server.http_app import check_bind, is_loopback, resource_url, transport_security
from agent_server.settings import Settings

TOKENS = AuthSettings(tokens={"alice": "sha256:" + "a" * 64})


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "127.255.0.9", "::1", "[::1]", "localhost", "LocalHost"])
def test_loopback_hosts_are_protected(host: str) -> None:
    assert is_loopback(host)
    security = transport_security(host, HttpSettings())
    assert security.enable_dns_rebinding_protection
    assert "127.0.0.1:*" in security.allowed_hosts and "http://localhost:*" in security.allowed_origins


def test_the_bound_address_is_an_allowed_host() -> None:
    security = transport_security("127.0.0.2", HttpSettings())
    assert "127.0.0.2:*" in security.allowed_hosts and "http://127.0.0.2:*" in security.allowed_origins
    six = transport_security("0:0:0:0:0:0:0:1", HttpSettings())
    assert "[0:0:0:0:0:0:0:1]:*" in six.allowed_hosts


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.4", "example.com", "localhost.example.com", ""])
def test_other_hosts_are_checked_against_the_configured_hosts_and_origins_only(host: str) -> None:
    assert not is_loopback(host)
    http = HttpSettings(allowed_hosts=("agents.example.com",), allowed_origins=("https://app.example.com",))
    security = transport_security(host, http)
    assert security.enable_dns_rebinding_protection
    assert "agents.example.com" in security.allowed_hosts
    assert set(security.allowed_hosts).isdisjoint({"127.0.0.1:*", "localhost:*", "[::1]:*"})
    assert security.allowed_origins == ["https://app.example.com"]


def test_a_specific_bind_address_is_an_allowed_host_and_a_wildcard_is_not() -> None:
    assert "192.168.1.4:*" in transport_security("192.168.1.4", HttpSettings()).allowed_hosts
    assert transport_security("0.0.0.0", HttpSettings()).allowed_hosts == []


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.4", "example.com"])
def test_a_non_loopback_bind_without_auth_is_refused_naming_the_setting(host: str) -> None:
    with pytest.raises(ConfigError, match=r"auth\.tokens"):
        check_bind(Settings(), host)


def test_a_wildcard_bind_needs_the_allowed_hosts_too() -> None:
    with pytest.raises(ConfigError, match=r"http\.allowed_hosts"):
        check_bind(Settings(auth=TOKENS), "0.0.0.0")
    check_bind(Settings(auth=TOKENS, http=HttpSettings(allowed_hosts=("agents.example.com",))), "0.0.0.0")
    check_bind(Settings(auth=TOKENS), "192.168.1.4")


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost"])
def test_loopback_is_served_with_or_without_auth(host: str) -> None:
    check_bind(Settings(), host)
    check_bind(Settings(auth=TOKENS), host)


def test_the_resource_url_is_the_setting_else_the_audience_else_the_bind() -> None:
    assert resource_url(TOKENS, "127.0.0.1", 8000) == "http://127.0.0.1:8000/mcp"
    assert resource_url(TOKENS, "::1", 8000) == "http://[::1]:8000/mcp"
    jwt = AuthSettings.model_validate(
        {"jwt": {"issuer": "https://id.example", "jwks_url": "https://id.example/jwks", "audience": "https://a/mcp"}}
    )
    assert resource_url(jwt, "0.0.0.0", 8000) == "https://a/mcp"
    own = TOKENS.model_copy(update={"resource_url": "https://agents.example.com/mcp"})
    assert resource_url(own, "0.0.0.0", 8000) == "https://agents.example.com/mcp"


def test_idle_connections_outlive_a_pooled_clients_so_it_never_reuses_one_being_closed() -> None:
    """With both at 5 s (uvicorn's and httpx's defaults), a client could send a request on a connection the
    server closed that instant: the request is reset (`ReadError`), which a burst of turns over HTTP showed."""
    import httpx2

    client_idle_s = httpx2.Limits().keepalive_expiry
    assert client_idle_s is not None
    assert HttpSettings().keep_alive_timeout_s > client_idle_s
