"""The command line refuses bad configuration before serving, with a message on stderr and exit code 2."""

from __future__ import annotations

import json
import sys
from importlib import metadata
from pathlib import Path

import anyio
import pytest

from agent_server.cli import EXIT_CONFIG, GIL_SWITCH_INTERVAL_S, build_parser, main, settings_from_args
from agent_server.errors import ConfigError
from agent_server.settings import (
    AnthropicModel,
    OpenAIModel,
    OpenAIResponsesModel,
    SamplingModel,
    ScriptModel,
    load_settings,
)


def test_unknown_config_key_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"max_tool_passes": 5, "contxt_window": 10}))
    assert main(["--config", str(config)]) == EXIT_CONFIG
    err = capsys.readouterr()
    assert "contxt_window" in err.err and err.out == ""


def test_malformed_config_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config.toml"
    config.write_text("max_tool_passes = = 3")
    assert main(["--config", str(config)]) == EXIT_CONFIG
    assert "not valid toml" in capsys.readouterr().err


def test_missing_script_file_is_refused_before_serving(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--workspace", str(tmp_path), "--llm", f"script:{tmp_path / 'nope.json'}"])
    assert code == EXIT_CONFIG
    assert "nope.json" in capsys.readouterr().err


def test_unknown_provider_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--workspace", str(tmp_path), "--llm", "telepathy"]) == EXIT_CONFIG
    assert "telepathy" in capsys.readouterr().err


def test_flags_override_the_config_file_and_paths_are_relative_to_it(tmp_path: Path) -> None:
    config = tmp_path / "conf" / "agent.toml"
    config.parent.mkdir()
    config.write_text('state_dir = "state"\nmax_tool_passes = 3\nllm = "script:s.json"\n')
    settings = load_settings(config_file=config, overrides={"max_tool_passes": 7, "workspace": tmp_path})
    assert settings.max_tool_passes == 7
    assert settings.state_path == (tmp_path / "conf" / "state").resolve()
    assert settings.llm == ScriptModel(path=tmp_path / "conf" / "s.json")
    assert settings.workspace == tmp_path.resolve()


def test_the_model_is_a_typed_choice_from_a_spec_or_an_object(tmp_path: Path) -> None:
    config = tmp_path / "agent.json"
    config.write_text('{"llm": {"kind": "script", "path": "s.json"}}')
    assert load_settings(config_file=config).llm == ScriptModel(path=tmp_path / "s.json")
    assert load_settings(overrides={"llm": "openai:gpt-x"}).llm == OpenAIModel(model="gpt-x")
    assert load_settings(overrides={"llm": "openai"}).llm == OpenAIModel(model=None)
    assert load_settings(overrides={"llm": "sampling"}).llm == SamplingModel()
    assert load_settings(overrides={"llm": "anthropic:claude-x"}).llm == AnthropicModel(model="claude-x")
    assert load_settings(overrides={"llm": "openai-responses"}).llm == OpenAIResponsesModel(model=None)
    expected = r"llm: .*expected script:PATH, openai:MODEL, openai-responses:MODEL, anthropic:MODEL or sampling"
    with pytest.raises(ConfigError, match=expected):
        load_settings(overrides={"llm": "telepathy"})
    with pytest.raises(ConfigError, match="llm"):
        load_settings(overrides={"llm": {"kind": "openai", "modle": "typo"}})


def test_mounted_servers_are_checked_and_expanded_when_the_settings_load(tmp_path: Path) -> None:
    servers = {"web": {"url": "https://example.test/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}}
    settings = load_settings(overrides={"mcpServers": servers}, environ={"TOKEN": "t0k"})
    assert settings.mcp_servers["web"].headers == {"Authorization": "Bearer t0k"}
    with pytest.raises(ConfigError, match=r"mcpServers: MCP server 'web': headers.Authorization uses \$\{TOKEN\}"):
        load_settings(overrides={"mcpServers": servers}, environ={})
    with pytest.raises(ConfigError, match="MCP server 'bad'.*exactly one of `command`"):
        load_settings(overrides={"mcpServers": {"bad": {"args": ["x"]}}})


def test_the_mcp_config_file_joins_the_config_servers_and_a_name_twice_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "claude_desktop_config.json"
    file.write_text(json.dumps({"mcpServers": {"fs": {"command": "npx", "args": ["server"]}}}))
    both = load_settings(overrides={"mcpServers": {"web": {"url": "http://127.0.0.1:1/mcp"}}, "mcp_config": file})
    assert list(both.mcp_servers) == ["web", "fs"]
    with pytest.raises(ConfigError, match="'fs' is configured twice"):
        load_settings(overrides={"mcpServers": {"fs": {"command": "x"}}, "mcp_config": file})


def test_allow_flags_enable_the_tools_and_keep_the_config_files_other_tool_settings(tmp_path: Path) -> None:
    config = tmp_path / "agent.toml"
    config.write_text("[tools]\nexec = true\ncommand_timeout_s = 5\n")
    plain = settings_from_args(build_parser().parse_args(["--workspace", str(tmp_path)]))
    assert (plain.tools.write, plain.tools.exec) == (False, False)
    from_file = settings_from_args(build_parser().parse_args(["--config", str(config), "--allow-write"]))
    assert (from_file.tools.write, from_file.tools.exec, from_file.tools.command_timeout_s) == (True, True, 5)
    both = settings_from_args(build_parser().parse_args(["--allow-write", "--allow-exec"]))
    assert (both.tools.write, both.tools.exec) == (True, True)
    with pytest.raises(ConfigError, match=r"tools\.command_timeout_s"):
        load_settings(overrides={"tools": {"command_timeout_s": 0}})


def test_acp_serves_stdio_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--workspace", str(tmp_path), "--protocol", "acp", "--transport", "streamable-http"])
    assert exited.value.code == EXIT_CONFIG
    err = capsys.readouterr()
    assert "--protocol acp serves stdio only" in err.err and err.out == ""


def test_acp_refuses_a_missing_script_before_serving(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--workspace", str(tmp_path), "--protocol", "acp", "--llm", f"script:{tmp_path / 'nope.json'}"])
    assert code == EXIT_CONFIG
    assert "nope.json" in capsys.readouterr().err


def test_the_view_refuses_a_network_bind_without_auth_and_a_bad_view_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["view", "--state-dir", str(tmp_path), "--host", "10.0.0.5"]) == EXIT_CONFIG
    assert "without authentication" in capsys.readouterr().err
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"view": {"path": "/mcp"}}))
    assert main(["view", "--config", str(config), "--state-dir", str(tmp_path)]) == EXIT_CONFIG
    assert "view.path" in capsys.readouterr().err


def test_the_view_says_when_its_store_cannot_be_opened(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "a-file"
    state.write_text("")
    assert main(["view", "--state-dir", str(state), "--port", "0"]) == EXIT_CONFIG
    assert "cannot open the session store" in capsys.readouterr().err


def test_version_is_the_one_every_door_reports(capsys: pytest.CaptureFixture[str]) -> None:
    from agent_server.mounts.transport import client_info
    from agent_server.version import version

    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    out = capsys.readouterr()
    assert out.err == f"agent-server {version()}\n" and out.out == ""  # stdout is the wire
    assert client_info().version == version() == metadata.version("agent-server")  # read off the header alone


def test_the_log_level_is_taken_in_any_case_and_a_wrong_one_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert build_parser().parse_args(["--log-level", "debug"]).log_level == "DEBUG"
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["--log-level", "chatty"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'CHATTY'" in capsys.readouterr().err


def test_the_server_process_hands_the_gil_over_every_millisecond(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A worker thread walking a model's huge argument must not keep the event loop waiting CPython's default
    # 5 ms at each hand-over (bench/loop_lag.py); what the server's process runs with is set before it serves.
    seen: list[float] = []

    def serve(*_: object, **__: object) -> None:
        seen.append(sys.getswitchinterval())
        raise KeyboardInterrupt  # stop here: the process would serve now

    monkeypatch.setattr(anyio, "run", serve)
    before = sys.getswitchinterval()
    try:
        assert main(["--workspace", str(tmp_path)]) == 130
    finally:
        sys.setswitchinterval(before)
    assert seen == [pytest.approx(GIL_SWITCH_INTERVAL_S)]
    assert GIL_SWITCH_INTERVAL_S < 0.005  # below CPython's default, or the setting would do nothing
