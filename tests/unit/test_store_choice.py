"""Which session store the settings name: `--store`, the `store_url` setting, `AGENT_SERVER_STORE`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from agent_server import AgentRuntime
from agent_server.cli import build_parser, settings_from_args
from agent_server.errors import ConfigError
from agent_server.runtime.choice import POSTGRES_EXTRA, store_opener
from agent_server.settings import load_settings

PG = "postgresql://agent:hunter22@db.internal/agents"


def test_sqlite_is_the_default() -> None:
    assert load_settings(environ={}).store_url is None


def test_the_environment_names_the_store_over_the_config_file_and_the_flag_over_both(tmp_path: Path) -> None:
    config = tmp_path / "agent.json"
    config.write_text(json.dumps({"store_url": "postgresql://file/db"}))
    assert load_settings(config_file=config, environ={}).store_url == "postgresql://file/db"
    env = {"AGENT_SERVER_STORE": "postgresql://env/db"}
    assert load_settings(config_file=config, environ=env).store_url == "postgresql://env/db"
    flag = {"store_url": "postgres://flag/db"}
    assert load_settings(config_file=config, overrides=flag, environ=env).store_url == "postgres://flag/db"
    assert load_settings(overrides={"store_url": "sqlite"}, environ=env).store_url is None


def test_the_store_flag_reaches_the_settings() -> None:
    args = build_parser().parse_args(["--store", PG])
    assert settings_from_args(args).store_url == PG


def test_an_unknown_store_is_a_config_error_that_hides_the_password() -> None:
    with pytest.raises(ConfigError, match="expected sqlite or a URL postgresql://") as caught:
        load_settings(overrides={"store_url": "mysql://root:hunter22@db/x"}, environ={})
    assert "hunter22" not in caught.value.message


def test_the_settings_repr_does_not_show_the_store_url() -> None:
    assert "hunter22" not in repr(load_settings(overrides={"store_url": PG}, environ={}))


def test_postgres_without_the_extra_is_a_config_error_naming_the_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # `import psycopg` now fails as if not installed
    monkeypatch.delitem(sys.modules, "agent_server.store.postgres", raising=False)
    settings = load_settings(overrides={"store_url": PG}, environ={})
    with pytest.raises(ConfigError) as caught:
        store_opener(settings)
    assert POSTGRES_EXTRA in caught.value.message
    assert "hunter22" not in caught.value.message
    with pytest.raises(ConfigError, match="agent-server\\[postgres\\]"):
        AgentRuntime(settings)
