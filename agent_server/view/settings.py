"""The web view's settings (key `view` of `agent_server.settings.Settings`): where the page is served and how
often a running turn's stored state is refreshed for pages in other processes.

A module of its own, light, with nothing of the page: the settings import it on every path (stdio included).
"""

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

_PATH = re.compile(r"/[A-Za-z0-9._~-]+(/[A-Za-z0-9._~-]+)*")


class ViewSettings(BaseModel):
    """The web view (`agent-server view`, or the page beside `/mcp` on Streamable HTTP).

    `enabled`: serve the page at `path` on the Streamable HTTP transport, beside `/mcp`, protected as `/mcp` is
    (the same `auth` tokens; Host/Origin as `http` says). `agent-server view` serves it whatever `enabled` says.
    `progress_interval_s`: a running turn's record is written to the store as it goes (its model calls and tool
    rounds so far, status still `running`) at most this often, so that a page in another process, or on
    another replica, shows it live; 0 writes only the turn's start and end.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = False
    path: str = "/view"
    progress_interval_s: float = Field(default=1.0, ge=0, le=3600)

    @field_validator("path")
    @classmethod
    def _check_path(cls, value: str) -> str:
        value = value.rstrip("/")
        if not _PATH.fullmatch(value) or value == "/mcp" or value.startswith(("/mcp/", "/.well-known")):
            raise ValueError(f"expected a path such as /view (letters, digits, . _ ~ -), not /mcp; got {value!r}")
        return value
