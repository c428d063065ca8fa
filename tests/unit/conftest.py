"""Fixtures of the unit tests."""

from __future__ import annotations

from typing import Any

import pytest
from startcapture import capture_starts


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The inputs the start commands would start their workflow with (nothing is contacted;
    :func:`startcapture.capture_starts`)."""
    return capture_starts(monkeypatch)
