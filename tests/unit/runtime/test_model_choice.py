"""The model the settings name: every provider built lazily (its module imported by its first call, never at
start), with its variables, and configuration errors still found at start."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agent_server.errors import ConfigError
from agent_server.llm.anthropic import AnthropicLLM
from agent_server.llm.openai import OpenAIChatLLM
from agent_server.llm.openai_responses import OpenAIResponsesLLM
from agent_server.llm.prices import price_for
from agent_server.runtime.choice import LazyLLM, fixed_llm
from agent_server.settings import Settings

PROVIDERS = ("agent_server.llm.openai", "agent_server.llm.anthropic", "agent_server.llm.openai_responses", "httpx")


def settings(tmp_path: Path, **values: object) -> Settings:
    return Settings(workspace=tmp_path, state_dir=tmp_path / "state", **values)  # pyright: ignore[reportArgumentType]


def built(llm: object) -> object:
    assert isinstance(llm, LazyLLM)
    return llm.built


def test_anthropic_reads_its_own_variables_and_its_base_has_no_v1(tmp_path: Path) -> None:
    env = {"ANTHROPIC_API_KEY": "sk-ant-secret-123456", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9/proxy"}
    llm = built(fixed_llm(settings(tmp_path, llm="anthropic:claude-sonnet-4-5"), env))
    assert isinstance(llm, AnthropicLLM)
    assert (
        repr(llm) == "AnthropicLLM(url='http://127.0.0.1:9/proxy/v1/messages', model='claude-sonnet-4-5', api_key=set)"
    )
    default = built(fixed_llm(settings(tmp_path, llm="anthropic:claude-haiku-4-5"), {}))
    assert "https://api.anthropic.com/v1/messages" in repr(default)


def test_openai_responses_shares_the_openai_variables(tmp_path: Path) -> None:
    env = {"OPENAI_API_KEY": "sk-x-123456", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    llm = built(fixed_llm(settings(tmp_path, llm="openai-responses:gpt-5-mini"), env))
    assert isinstance(llm, OpenAIResponsesLLM)
    assert "url='http://127.0.0.1:9/v1/responses'" in repr(llm)
    chat = built(fixed_llm(settings(tmp_path, llm="openai:gpt-4.1"), env))
    assert isinstance(chat, OpenAIChatLLM)


@pytest.mark.parametrize("spec", ["anthropic", "openai-responses"])
def test_a_provider_without_a_model_is_refused_at_start(tmp_path: Path, spec: str) -> None:
    with pytest.raises(ConfigError, match=f"--llm {spec} needs a model"):
        fixed_llm(settings(tmp_path, llm=spec), {})


def test_a_bad_base_url_is_refused_at_start_without_importing_the_provider(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="must be an http:// or https:// URL"):
        fixed_llm(settings(tmp_path, llm="anthropic:claude-sonnet-4-5"), {"ANTHROPIC_BASE_URL": "ftp://x"})


def test_settings_prices_win_over_the_built_in_table(tmp_path: Path) -> None:
    price = {"input_per_mtok": 1, "output_per_mtok": 2, "cache_read_per_mtok": 0.1, "cache_write_per_mtok": 1.25}
    llm = built(
        fixed_llm(settings(tmp_path, llm="anthropic:claude-sonnet-4-5", prices={"claude-sonnet-4-5": price}), {})
    )
    assert isinstance(llm, AnthropicLLM)
    found = price_for("claude-sonnet-4-5-20250929", llm.prices)
    assert found is not None and found.input_per_mtok == 1
    assert price_for("claude-sonnet-4-5-pro", llm.prices) is None  # a version suffix only: never a looser prefix


@pytest.mark.parametrize("spec", ["openai:gpt-4.1", "anthropic:claude-sonnet-4-5", "openai-responses:gpt-5"])
def test_no_provider_module_is_imported_when_the_server_is_made(tmp_path: Path, spec: str) -> None:
    script = f"""
import sys
from agent_server.server.app import create_server
from agent_server.settings import Settings
create_server(Settings(workspace={str(tmp_path)!r}, state_dir={str(tmp_path / "state")!r}, llm={spec!r}))
print(sorted(m for m in {PROVIDERS!r} if m in sys.modules))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
