"""The one redaction function: secrets and URL credentials become `***`, whatever the text around them."""

from __future__ import annotations

import logging

import pytest

from agent_server.redaction import redact, redact_logger, redact_url


def test_url_userinfo_and_query_values_are_hidden_the_rest_kept() -> None:
    url = "https://bob:pw@mcp.example.com:8443/v1/mcp?key=abc&empty=&flag&api-version=2024#part"
    assert redact_url(url) == "https://***@mcp.example.com:8443/v1/mcp?key=***&empty=&flag&api-version=***#part"
    assert redact_url("http://127.0.0.1:9000/mcp") == "http://127.0.0.1:9000/mcp"
    assert redact_url("http://[::1/broken?k=v") == "http://***"


def test_urls_inside_text_and_given_secrets_are_masked_longest_first() -> None:
    text = "failed: 'http://u:p@h/x?token=TTT' with sk-abcdef and sk-abcdefXYZ (path /sk-abcdef/)"
    redacted = redact(text, ["sk-abcdef", "sk-abcdefXYZ", ""])
    assert redacted == "failed: 'http://***@h/x?token=***' with *** and *** (path /***/)"
    assert redact("a b c", ["a"]) == "a b c"  # a value too short to be a secret masks nothing


def test_a_redacted_logger_hides_credentials_and_secrets_added_later(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("tests.redaction.demo")
    redact_logger(logger.name)
    redact_logger(logger.name, ["tok-1234"])  # a second call adds to the same filter
    assert len(logger.filters) == 1
    with caplog.at_level(logging.INFO, logger=logger.name):
        logger.info("GET %s with %s", "http://a:b@host/p?x=1", "tok-1234")
    assert [r.getMessage() for r in caplog.records] == ["GET http://***@host/p?x=*** with ***"]
