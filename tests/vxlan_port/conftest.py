"""The VXLAN port change's tests use the helpers of tests/workflows (beats, replay, kit_fakes),
which import by their own names; the fixtures are the shared ones of tests/conftest.py."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "workflows"))
