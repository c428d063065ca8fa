"""Option groups: flags declared once and offered by every start command that names the group.

A start command takes one parameter for a group, with the group as its default
(``start: Start = start_options(wait=...)``); :func:`with_option_groups` (applied by the
registration, :func:`lockkeeper.cli.start.register`) puts the group's flags into the command's
signature in that parameter's place, so typer offers them, and hands the command the value the
group builds from them (``OptionGroup.build(**flags)``). A group's flags, help texts and defaults
are written in one place; a command only says the words that differ (a help text naming what it
waits for).

Typer reads a command's parameters from ``inspect.signature`` and their types from
``__annotations__`` (through ``typing.get_type_hints``), so the wrapper carries both.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Flag:
    """One flag of a group: the keyword it arrives as, its type and its ``typer.Option``."""

    name: str
    annotation: Any
    option: Any


@dataclass(frozen=True)
class OptionGroup:
    """``flags`` that together stand for one parameter of a command; ``build(**values)`` (the
    flags by name) returns what the command gets for it and may raise ``typer.BadParameter``
    (exit 2, before the command body runs)."""

    flags: tuple[Flag, ...]
    build: Callable[..., Any]

    def replace(self, command: Callable[..., Any], param: str) -> Callable[..., Any]:
        """``command`` with this group's flags instead of its parameter ``param``."""
        return with_option_groups(command, {param: self})


def groups_of(command: Callable[..., Any]) -> dict[str, OptionGroup]:
    """The parameters of ``command`` whose default is an :class:`OptionGroup`, by name."""
    return {p.name: p.default for p in inspect.signature(command).parameters.values() if isinstance(p.default, OptionGroup)}


def with_option_groups(command: Callable[..., Any], groups: dict[str, OptionGroup] | None = None) -> Callable[..., Any]:
    """``command`` with each group parameter (``groups``, default :func:`groups_of` it) replaced
    by the group's flags, in its place in the signature; the wrapper builds each group's value
    from its flags, in the order of the parameters, and calls ``command`` with it. Returns
    ``command`` itself when it names no group. Raises ``ValueError`` when a flag's name is
    already a parameter (two groups, or a group and the command, would share a keyword)."""
    groups = groups_of(command) if groups is None else groups
    if not groups:
        return command
    sig = inspect.signature(command)
    params: list[inspect.Parameter] = []
    for p in sig.parameters.values():
        group = groups.get(p.name)
        if group is None:
            params.append(p)
            continue
        params += [inspect.Parameter(f.name, p.kind, annotation=f.annotation, default=f.option) for f in group.flags]
    names = [p.name for p in params]
    if len(names) != len(set(names)):
        raise ValueError(f"{command.__name__}: a group flag shares its name with another parameter: {names}")
    flags_of = {param: [f.name for f in group.flags] for param, group in groups.items()}

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        for param, group in groups.items():
            kwargs[param] = group.build(**{n: kwargs.pop(n, None) for n in flags_of[param]})
        return command(*args, **kwargs)

    wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    annotations = {k: v for k, v in getattr(command, "__annotations__", {}).items() if k not in groups}
    wrapper.__annotations__ = {**annotations, **{f.name: f.annotation for g in groups.values() for f in g.flags}}
    return wrapper


def flags(*items: tuple[str, Any, Any]) -> tuple[Flag, ...]:
    """:class:`Flag` s from ``(name, annotation, typer.Option)`` triples."""
    return tuple(Flag(*item) for item in items)
