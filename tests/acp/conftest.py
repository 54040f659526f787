from __future__ import annotations

from pathlib import Path

import pytest

from tests.subprocess.helpers import ServerDirs


@pytest.fixture
def dirs(tmp_path: Path) -> ServerDirs:
    layout = ServerDirs(tmp_path)
    layout.workspace.mkdir()
    return layout
