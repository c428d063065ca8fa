"""The README's shell blocks as commands: what the README tests check and run.

Conventions (the README follows them so that its blocks can be checked and run as written):

- A fenced block without a language, or marked ``sh``/``bash``/``shell``, is shell; others (the
  ``yaml`` plan file) are files, not commands.
- A line ending in ``\\`` continues on the next one; ``#`` starts a comment (outside quotes). In a
  comment right after a command, or on the comment lines that follow it, the README shows what
  the command prints.
- A here-document (``<<EOF2`` ... ``EOF2``) is the file it writes, not commands.
- ``$(...)`` in a ``lockkeeper`` command is one of the forms in :data:`SUBSTITUTIONS` (a line of
  ``sim serve``'s output turned into flags); the checker puts an example of what it expands to
  in its place. Any other form fails the check until it is taught here.
- ``ID`` is the workflow ID the last ``lockkeeper start`` printed; ``GATE``, ``NODE`` and the
  like are placeholders a person fills in; the parser only needs them to be words.

Sources: the POSIX shell's token rules as Python's :mod:`shlex` implements them (``posix=True``,
``punctuation_chars=True``).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"

SHELL_LANGS = {"", "sh", "bash", "shell", "console"}
_FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>[\w-]*)\s*$")
_HEREDOC = re.compile(r"<<-?\s*['\"]?(?P<tag>\w+)['\"]?")
_SEPARATORS = {"|", "||", "&&", ";", "&", "|&"}

#: ``$(...)`` forms a README command may use, each with a stand-in of what it expands to:
#: ``sim serve`` prints one ``MASTER_API name=url`` line per master; ``sed`` turns each into a flag.
SUBSTITUTIONS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^grep \^MASTER_API (?P<env>\S+) \| sed 's/MASTER_API /(?P<flag>--[\w-]+) /'$"),
     r"\g<flag> master01=http://127.0.0.1:1 \g<flag> master02=http://127.0.0.1:2"),
]


@dataclass
class Block:
    """One fenced shell block: its first line number in the README, its section and its lines."""

    line: int
    section: str
    lines: list[str] = field(default_factory=list)


@dataclass
class Command:
    """One simple command of a README block (``argv`` after the variable assignments in front of
    it); ``line`` is the README line it starts on, ``text`` the whole logical line."""

    line: int
    section: str
    argv: list[str]
    text: str


def blocks(text: str | None = None) -> list[Block]:
    """The README's shell blocks, in order."""
    lines = (README.read_text() if text is None else text).splitlines()
    found: list[Block] = []
    section = ""
    current: Block | None = None
    indent = ""
    for no, raw in enumerate(lines, 1):
        fence = _FENCE.match(raw)
        if current is None:
            if raw.startswith("#"):
                section = raw.lstrip("#").strip()
            if fence:
                indent = fence["indent"]
                current = Block(no + 1, section) if fence["lang"] in SHELL_LANGS else Block(-1, section)
            continue
        if fence and not fence["lang"]:
            if current.line > 0:
                found.append(current)
            current = None
            continue
        current.lines.append(raw[len(indent):] if raw.startswith(indent) else raw.lstrip())
    return found


def logical_lines(block: Block) -> list[tuple[int, str]]:
    """``(README line, text)`` of each logical line: continuations joined, here-documents and
    comment-only lines dropped."""
    out: list[tuple[int, str]] = []
    pending = ""
    start = 0
    heredoc: str | None = None
    for i, raw in enumerate(block.lines):
        no = block.line + i
        if heredoc is not None:
            if raw.strip() == heredoc:
                heredoc = None
            continue
        if not pending:
            start = no
            if raw.lstrip().startswith("#") or not raw.strip():
                continue
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        line = pending + raw
        pending = ""
        m = _HEREDOC.search(line)
        if m:
            heredoc = m["tag"]
        out.append((start, line))
    if pending:
        out.append((start, pending))
    return out


def substitute(line: str, strict: bool = True) -> str:
    """``line`` with each ``$(...)`` replaced by the stand-in of its :data:`SUBSTITUTIONS` form;
    :class:`ValueError` names a form that is not there (``strict=False``: the word ``SUBST``)."""
    result = ""
    i = 0
    while (j := line.find("$(", i)) >= 0:
        depth, k = 1, j + 2
        while k < len(line) and depth:
            depth += {"(": 1, ")": -1}.get(line[k], 0)
            k += 1
        inner = line[j + 2:k - 1].strip()
        for pattern, stand_in in SUBSTITUTIONS:
            if pattern.match(inner):
                result += line[i:j] + pattern.sub(stand_in, inner)
                break
        else:
            if strict:
                raise ValueError(f"$({inner}) is no known form (tests/support/readme.py SUBSTITUTIONS)")
            result += line[i:j] + "SUBST"
        i = k
    return result + line[i:]


def split_commands(line: str) -> list[list[str]]:
    """The simple commands of a logical line (split at ``|``, ``&&``, ``;``, ...), comments
    dropped, each as its words."""
    lex = shlex.shlex(line, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    commands: list[list[str]] = [[]]
    for token in lex:
        if token in _SEPARATORS:
            commands.append([])
        else:
            commands[-1].append(token)
    return [c for c in commands if c]


_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def commands(program: str | None = None, text: str | None = None) -> list[Command]:
    """Every simple command of the README's shell blocks whose program is ``program`` (its base
    name; every command when None), variable assignments in front of it removed, ``$(...)``
    replaced (:func:`substitute`)."""
    found: list[Command] = []
    for block in blocks(text):
        for no, line in logical_lines(block):
            if program is not None and program not in line:
                continue
            for argv in split_commands(substitute(line)):
                while argv and _ASSIGNMENT.match(argv[0]):
                    argv = argv[1:]
                if argv and (program is None or Path(argv[0]).name == program):
                    found.append(Command(no, block.section, argv, line.strip()))
    return found
