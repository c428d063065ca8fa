"""``lockkeeper status`` in table mode is for a person: for every procedure's status and result
model, filled with sample values down to its nested models, the rendered panel holds no Python
repr (``datetime.``, ``{'``, ``TzInfo``, ``<... object at``), and a waiting gate is shown with the
exact command that answers it."""

from __future__ import annotations

import types
import typing
from datetime import UTC, datetime
from enum import Enum
from typing import Any, Literal, Union

import pytest
from pydantic import BaseModel
from rich.console import Console

from lockkeeper import panels
from workflows.kit.models import Gate, GateKind, GateState
from workflows.registry import PROCEDURES

WHEN = datetime(2018, 7, 10, 10, 0, tzinfo=UTC)
REPRS = ("datetime.", "{'", "TzInfo", " object at 0x", "[{'")


def sample(tp: Any, depth: int = 0) -> Any:
    """A value of type ``tp`` (nested models filled too, to a depth of 6)."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (Union, types.UnionType):
        non_none = [a for a in args if a is not type(None)]
        return sample(non_none[0], depth) if non_none else None
    if origin is typing.Annotated:
        return sample(args[0], depth)
    if origin is Literal:
        return args[0]
    if origin in (list, tuple, set, frozenset, typing.Sequence):
        item = sample(args[0], depth + 1) if args and depth < 6 else None
        return [] if item is None else [item]
    if origin is dict:
        item = sample(args[1], depth + 1) if args and depth < 6 else None
        return {} if item is None else {"k1": item}
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return build(tp, depth + 1) if depth < 6 else None
    if isinstance(tp, type) and issubclass(tp, Enum):
        return list(tp)[0]
    if tp is datetime:
        return WHEN
    if tp is bool:
        return True
    if tp is int:
        return 3
    if tp is float:
        return 1.5
    if tp is str:
        return "text"
    return None


def build(model: type[BaseModel], depth: int = 0) -> BaseModel:
    values = {}
    for name, field in model.model_fields.items():
        value = sample(field.annotation, depth)
        if value is not None:
            values[name] = value
    try:
        return model.model_validate(values)
    except Exception:  # noqa: BLE001 - validators with rules of their own: fall back to a raw instance
        return model.model_construct(**values)


def render(model: BaseModel, procedure: str, view: int) -> str:
    console = Console(width=200, record=True, color_system=None)
    console.print(panels._views(procedure)[view](model))
    return console.export_text()


@pytest.mark.parametrize("spec", PROCEDURES, ids=lambda s: s.name)
def test_status_and_result_tables_show_no_python_repr(spec: Any) -> None:
    status = build(spec.status_model)
    status.workflow_id = "wf-1"  # type: ignore[attr-defined]
    status.gates = [Gate(id="plan", kind=GateKind.STEP, state=GateState.WAITING, opened_at=WHEN, comment="go?")]  # type: ignore[attr-defined]
    text = render(status, spec.name, 0)
    assert not [r for r in REPRS if r in text], text
    assert "answer: lockkeeper approve wf-1 plan -m REASON" in text
    result = build(spec.result_model)
    text = render(result, spec.name, 1)
    assert not [r for r in REPRS if r in text], text


def test_a_gate_with_choices_names_each_choice() -> None:
    from workflows.kit.models import ProcedureStatus

    st = ProcedureStatus(workflow_id="wf-2", gates=[Gate(id="api/m1/1", kind=GateKind.STEP, choices=["wait", "restart"])])
    text = render(st, "no-such-procedure", 0)
    assert "answer: lockkeeper decide wf-2 api/m1/1 wait|restart -m REASON" in text
    assert "answer: lockkeeper reject wf-2 api/m1/1 -m REASON" in text
