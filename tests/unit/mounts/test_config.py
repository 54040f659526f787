"""`mcpServers` documents as users have them: Claude Desktop, Cursor, VS Code, bare mappings; `${VAR}`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_server.errors import ConfigError
from agent_server.mounts.config import MountConfig, load_mcp_config_file, parse_mcp_servers

ENV = {"TOKEN": "s3cret", "HOME": "/home/u"}


def parse(data: dict[str, Any], environ: dict[str, str] | None = None) -> list[MountConfig]:
    return parse_mcp_servers(data, environ=ENV if environ is None else environ)


def test_claude_desktop_document_with_other_top_level_keys() -> None:
    fs_args = ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]
    doc = {
        "globalShortcut": "Ctrl+Space",
        "mcpServers": {
            "fs": {"command": "npx", "args": fs_args},
            "gh": {"command": "gh-mcp", "env": {"GITHUB_TOKEN": "${TOKEN}"}},
        },
    }
    fs, gh = parse(doc)
    assert (fs.name, fs.transport, fs.command, fs.args) == ("fs", "stdio", "npx", fs_args)
    assert gh.env == {"GITHUB_TOKEN": "s3cret"}
    assert (fs.enabled, fs.timeout_s, fs.startup_timeout_s, fs.include, fs.exclude, fs.tool_prefix) == (
        True,
        120,
        30,
        None,
        [],
        "fs",
    )


def test_cursor_document_with_url_headers_and_type() -> None:
    doc = {
        "mcpServers": {
            "remote": {
                "type": "http",
                "url": "https://example.com/mcp",
                "headers": {"Authorization": "Bearer ${TOKEN}"},
            },
            "local": {"type": "stdio", "command": "uvx", "args": ["tool"]},
        }
    }
    remote, local = parse(doc)
    assert (remote.transport, remote.url, remote.headers) == (
        "http",
        "https://example.com/mcp",
        {"Authorization": "Bearer s3cret"},
    )
    assert local.transport == "stdio"


def test_vscode_document_ignores_inputs_and_accepts_env_prefix() -> None:
    doc = {
        "inputs": [{"type": "promptString", "id": "key", "description": "API key", "password": True}],
        "servers": {
            "web": {"type": "http", "url": "http://127.0.0.1:9000/mcp"},
            "tool": {"type": "stdio", "command": "tool", "args": ["--home", "${env:HOME}"], "cwd": "/srv"},
        },
    }
    web, tool = parse(doc)
    assert web.transport == "http"
    assert (tool.args, tool.cwd) == (["--home", "/home/u"], "/srv")


def test_vscode_settings_form_and_bare_mapping() -> None:
    (a,) = parse({"mcp": {"servers": {"a": {"command": "a"}}}})
    assert a.name == "a"
    bare = parse({"x": {"command": "x", "timeout_s": 5, "include": ["read_*"], "exclude": ["*_dir"], "prefix": "X"}})
    assert (bare[0].timeout_s, bare[0].include, bare[0].exclude, bare[0].tool_prefix) == (5, ["read_*"], ["*_dir"], "X")
    # a bare mapping may hold a server called "servers"
    (servers,) = parse({"servers": {"command": "s"}})
    assert servers.name == "servers"


def test_disabled_and_ignored_foreign_keys() -> None:
    off, on = parse(
        {
            "mcpServers": {
                "off": {"command": "a", "disabled": True, "autoApprove": ["x"]},
                "on": {"command": "b", "enabled": True, "description": "mine"},
            }
        }
    )
    assert (off.enabled, on.enabled) == (False, True)


def test_default_and_missing_variables() -> None:
    (entry,) = parse({"s": {"command": "s", "args": ["${LEVEL:-info}", "$HOME", "${TOKEN}"]}})
    assert entry.args == ["info", "$HOME", "s3cret"]  # only ${...} is expanded
    with pytest.raises(ConfigError) as err:
        parse({"gh": {"command": "gh", "env": {"T": "${GH_TOKEN}"}}})
    assert "'gh'" in err.value.message and "GH_TOKEN" in err.value.message and "env.T" in err.value.message
    with pytest.raises(ConfigError, match=r"'h'.*headers.Authorization.*NOPE"):
        parse({"h": {"url": "http://x/mcp", "headers": {"Authorization": "Bearer ${env:NOPE}"}}})
    with pytest.raises(ConfigError, match=r"'v'.*input:key"):
        parse({"v": {"command": "v", "args": ["${input:key}"]}})


@pytest.mark.parametrize(
    ("entry", "fragment"),
    [
        ({"args": ["x"]}, "exactly one of `command`"),
        ({"command": "a", "url": "http://x"}, "exactly one of `command`"),
        ({"url": "ftp://x"}, "not an http"),
        ({"type": "sse", "url": "http://x/sse"}, "SSE transport is not supported"),
        ({"type": "stdio", "url": "http://x"}, "needs `command`"),
        ({"type": "http", "command": "a"}, "needs `url`"),
        ({"type": "carrier-pigeon", "command": "a"}, "unknown type"),
        ({"type": "stdio", "transport": "http", "command": "a"}, "disagree"),
        ({"command": "a", "comand": "typo"}, "comand: unknown key"),
        ({"command": "a", "timeout_s": 0}, "timeout_s"),
        ({"command": "a", "args": "not a list"}, "args"),
        ({"command": "a", "envFile": ".env"}, "envFile"),
        ({"command": "a", "disabled": "yes"}, "disabled"),
        ({"command": "a", "disabled": True, "enabled": True}, "disagree"),
        ("not an object", "must be an object"),
    ],
)
def test_bad_entries_name_the_server(entry: object, fragment: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse({"mcpServers": {"broken": entry}})
    assert "'broken'" in err.value.message
    assert fragment in err.value.message


def test_bad_documents() -> None:
    with pytest.raises(ConfigError, match="mcpServers must be an object"):
        parse({"mcpServers": ["a"]})


def test_load_file(tmp_path: Path) -> None:
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(json.dumps({"mcpServers": {"a": {"command": "a", "cwd": "sub"}, "b": {"command": "b"}}}))
    a, b = load_mcp_config_file(path, environ={})
    assert a.cwd == str(tmp_path / "sub")  # relative to the file
    assert b.cwd is None
    with pytest.raises(ConfigError, match="cannot read"):
        load_mcp_config_file(tmp_path / "missing.json", environ={})
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_mcp_config_file(tmp_path / "bad.json", environ={})
    (tmp_path / "list.json").write_text("[]")
    with pytest.raises(ConfigError, match="object at the top level"):
        load_mcp_config_file(tmp_path / "list.json", environ={})


def test_values_expanded_into_url_and_headers_and_header_values_are_the_servers_secrets() -> None:
    entry = {
        "url": "https://${HOST}/mcp?key=${KEY}",
        "headers": {"Authorization": "Bearer ${TOKEN}", "X-Plain": "literal-value"},
        "env": {"NOT_A_URL_SECRET": "${OTHER}"},
    }
    environ = {"HOST": "mcp.example.com", "KEY": "k-123", "TOKEN": "t-456", "OTHER": "o-789"}
    (config,) = parse_mcp_servers({"web": entry}, environ=environ)
    assert set(config.secrets) == {"mcp.example.com", "k-123", "t-456", "Bearer t-456", "literal-value"}
    assert "k-123" not in repr(config) and "t-456" not in repr(config) and "expanded_secrets" not in config.model_dump()
    with pytest.raises(ConfigError, match="expanded_secrets: unknown key"):
        parse_mcp_servers({"web": {"url": "https://h/mcp", "expanded_secrets": ["x"]}}, environ={})
