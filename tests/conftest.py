from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    # The anyio pytest plugin runs @pytest.mark.anyio tests once per backend returned here.
    return "asyncio"
