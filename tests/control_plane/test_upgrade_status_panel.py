"""``lockkeeper status`` of the control-plane upgrade: the masters table names each master (its
row key is the master's name, not its position), and a list without distinct names keeps
positions."""

from __future__ import annotations

from rich.console import Console

from lockkeeper.panels import status_panel
from workflows.control_plane.models import ControlPlaneStatus, MasterRow
from workflows.kit.models import ProcedureStatus


def render(model: object) -> str:
    console = Console(width=200, record=True)
    console.print(status_panel("control-plane-upgrade", model))  # type: ignore[arg-type]
    return console.export_text()


def first_cells(text: str, title: str) -> list[str]:
    """The first column of the table titled ``title`` (rows after the header)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == title)
    cells = []
    for line in lines[start + 4:]:
        if not line.startswith("│"):
            break
        cells.append(line.split("│")[1].strip())
    return cells


def test_masters_are_named_rows() -> None:
    st = ControlPlaneStatus(masters=[MasterRow(name="master01.example.com", state="done"),
                                     MasterRow(name="master02.example.com", state="running", step="api-ready"),
                                     MasterRow(name="master03.example.com")])
    text = render(st)
    assert first_cells(text, "Masters") == ["master01.example.com", "master02.example.com", "master03.example.com"], text


def test_unnamed_or_repeated_items_keep_positions() -> None:
    class Twice(ProcedureStatus):
        masters: list[MasterRow] = []

    text = render(Twice(masters=[MasterRow(name="m"), MasterRow(name="m")]))
    assert first_cells(text, "Masters") == ["0", "1"], text
