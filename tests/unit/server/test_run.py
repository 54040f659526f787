"""Which hosts get DNS-rebinding protection: decided by address, not by spelling."""

from __future__ import annotations

import pytest

from agent_server.server.run import is_loopback, rebinding_protection


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "127.255.0.9", "::1", "[::1]", "localhost", "LocalHost"])
def test_loopback_hosts_are_protected(host: str) -> None:
    assert is_loopback(host)
    security = rebinding_protection(host)
    assert security is not None and security.enable_dns_rebinding_protection
    assert "127.0.0.1:*" in security.allowed_hosts and "http://localhost:*" in security.allowed_origins


def test_the_bound_address_is_an_allowed_host() -> None:
    security = rebinding_protection("127.0.0.2")
    assert security is not None
    assert "127.0.0.2:*" in security.allowed_hosts and "http://127.0.0.2:*" in security.allowed_origins
    six = rebinding_protection("0:0:0:0:0:0:0:1")
    assert six is not None and "[0:0:0:0:0:0:0:1]:*" in six.allowed_hosts


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.4", "example.com", "localhost.example.com", ""])
def test_other_hosts_are_not_loopback(host: str) -> None:
    assert not is_loopback(host)
    assert rebinding_protection(host) is None
