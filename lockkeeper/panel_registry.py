"""Status and result panels that a procedure's CLI module registers at import time.

It imports nothing heavy, so a start module can register its panel while ``--help`` stays free
of temporalio and kubernetes; :mod:`lockkeeper.panels` consults it after its own table.
``REGISTERED``: procedure name → (status view, result view), each taking the decoded model and
returning a rich renderable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

REGISTERED: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {}


def register(procedure: str, status_view: Callable[[Any], Any], result_view: Callable[[Any], Any]) -> None:
    """Register the views of ``procedure`` (the first registration wins)."""
    REGISTERED.setdefault(procedure, (status_view, result_view))
