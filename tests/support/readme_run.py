"""Run README sections as written: each shell line in order, as a person in a few terminals would.

:mod:`tests.support.readme` reads the blocks; this runs them. The README is written so that its
procedure sections run verbatim under these conventions, which the README's "Procedures against
the simulator" states for its readers too:

- **What is already there.** The README's install (``pip install ...``) has run, and a Temporal
  dev server runs: ``temporal server start-dev`` lines are not run, the test's server stands in
  (``TEMPORAL_ADDRESS`` points at it). Each run gets a task queue of its own
  (``LOCKKEEPER_TASK_QUEUE``) and a cluster name of its own (``LOCKKEEPER_CLUSTER``, so its
  leases never meet another run's), the documented settings.
- **Terminals.** ``lockkeeper sim serve`` and ``lockkeeper worker`` are servers: each starts in
  the background (its own terminal) and the next line runs once it is ready (the simulator says
  ``serving on``, the worker ``worker started``); they are stopped at the end. A second
  ``lockkeeper worker`` replaces the first, as a person would stop one and start the other.
  Every other line runs to its end in one shell whose exported variables carry over to the next
  line (the README's ``export $(grep ...)``), like one terminal.
- **Time.** The tests may set ``CLUSTERSIM_TIME_SCALE`` (the default of ``sim serve
  --time-scale``) to run the simulated cluster faster than real time; a line's own
  ``--time-scale`` wins. lockkeeper's own timers are not scaled.
- **Files.** ``/tmp/`` in a line is the run's own temporary folder (so two runs never share one).
- **ID.** ``ID`` is the workflow ID the last ``lockkeeper start`` (or ``revert ID --full``, which
  starts a reverse run) printed as its first line of stdout.
- **Answers wait for their gate.** Before ``lockkeeper approve|reject|decide ID GATE``, the run
  waits until ``lockkeeper status ID`` offers that command, as a person reads status before
  answering.
- **What the README says a line prints** (the comment after it and the ``#   `` lines under it):
  ``exit N`` is its exit code (else 0; a ``--watch`` is left after a few seconds like Ctrl-C, exit
  130); ``outcome X: text`` and ``waiting for text`` are what ``lockkeeper status ID`` shows, and
  the run polls status until it does (the text up to the first `` (``, ``;`` or `` ...``). A wrong
  exit code or a text status never shows fails the run with the line and the outputs.
- **Status is for a person.** Every table-mode ``status`` the run reads, the README's own and its
  polls, must show no Python repr (:data:`REPR_MARKS`: ``datetime.``, ``{'``, ``TzInfo``, ...).
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support import readme

#: How long a server may take to say it is ready, and a status text to show up (seconds).
READY_TIMEOUT = 60.0
STATUS_TIMEOUT = 300.0
WATCH_SECONDS = 4.0
#: Between two `status` reads while waiting (each is a CLI process: about a second of CPU).
POLL_SECONDS = 2.5
#: Lines not run (see the module docstring), by the start of their command.
NOT_RUN = (("pip", "install"), ("temporal", "server", "start-dev"))
_ID = re.compile(r"^[a-z][\w./-]*\d[\w./-]*$")
_EXIT = re.compile(r"\bexit (\d+)\b")
_OUTCOME = re.compile(r"\b(outcome [\w-]+(?::[^;(]*?)?)\s*(?:\(|;|\s\.\.\.|$)")
_WAITING = re.compile(r"\b(waiting for [^;(]*?)\s*(?:\(|;|\s\.\.\.|$)")
_ANSWERS = ("approve", "reject", "decide")
#: What a Python repr leaves in a table-mode ``status`` (issue 42: status is for a person).
REPR_MARKS = ("datetime.", "{'", "TzInfo", "<class '", "object at 0x")


def reprs_in(text: str) -> list[str]:
    """The :data:`REPR_MARKS` found in ``text``."""
    return [m for m in REPR_MARKS if m in text]


@dataclass
class Step:
    """One command line of a section with what the README says about it."""

    line: int
    section: str
    code: str
    notes: list[str] = field(default_factory=list)

    @property
    def argv(self) -> list[str]:
        """The words of the line's first simple command, variable assignments dropped."""
        words = readme.split_commands(readme.substitute(self.code, strict=False))[0] if self.code.strip() else []
        while words and re.match(r"^[A-Za-z_]\w*=", words[0]):
            words = words[1:]
        return words

    @property
    def note(self) -> str:
        return " ".join(n.strip() for n in self.notes)


def split_comment(line: str) -> tuple[str, str]:
    """``line`` as (code, comment): the comment starts at a ``#`` outside quotes after a blank."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1:].strip()
    return line.rstrip(), ""


def steps(sections: list[str], text: str | None = None) -> list[Step]:
    """The steps of the named sections' shell blocks (the README's section titles), in README
    order; :class:`KeyError` names a section with no shell block."""
    found: list[Step] = []
    seen: set[str] = set()
    for block in readme.blocks(text):
        if block.section not in sections:
            continue
        seen.add(block.section)
        pending, pending_notes = "", []
        heredoc: str | None = None
        for i, raw in enumerate(block.lines):
            if heredoc is not None:
                found[-1].code += "\n" + raw
                if raw.strip() == heredoc:
                    heredoc = None
                continue
            if not pending and raw.lstrip().startswith("#"):
                if found and found[-1].section == block.section:
                    found[-1].notes.append(raw.lstrip()[1:])
                continue
            if not raw.strip():
                continue
            code, comment = split_comment(raw)
            if comment:
                pending_notes.append(comment)
            if code.endswith("\\"):
                pending += code[:-1] + " "
                continue
            found.append(Step(block.line + i, block.section, pending + code, pending_notes))
            pending, pending_notes = "", []
            m = re.search(r"<<-?\s*['\"]?(\w+)['\"]?", code)
            if m:
                heredoc = m.group(1)
    missing = [s for s in sections if s not in seen]
    if missing:
        raise KeyError(f"README sections without a shell block: {missing}")
    return found


class RunFailed(AssertionError):
    """A README line did not do what the README says."""


@dataclass
class Server:
    kind: str
    proc: subprocess.Popen[bytes]
    log: Path


class SectionRun:
    """Runs :func:`steps` in one temporary folder against a dev server (see the module doc)."""

    def __init__(self, tmp: Path, temporal_address: str, task_queue: str, *, extra_env: dict[str, str] | None = None):
        self.tmp = tmp
        self.state = tmp / "shell.env"
        self.servers: list[Server] = []
        self.wid: str | None = None
        self.transcript: list[str] = []
        self.transcript_file = tmp / "transcript.txt"
        bindir = str(Path(sys.executable).parent)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "LOCKKEEPER_", "KUBE", "CLUSTERSIM_"))}
        env.update(PATH=bindir + os.pathsep + env.get("PATH", ""), TEMPORAL_ADDRESS=temporal_address,
                   LOCKKEEPER_TASK_QUEUE=task_queue, LOCKKEEPER_CLUSTER=f"readme-{task_queue[-8:]}", COLUMNS="400", PYTHONUNBUFFERED="1",
                   LOCKKEEPER_GRACEFUL_SHUTDOWN_SECONDS="5")
        env.update(extra_env or {})
        self.env = env
        self.state.write_text("")

    # -- running lines ---------------------------------------------------------------------------

    def _code(self, step: Step) -> str:
        code = step.code.replace("/tmp/", f"{self.tmp}/")
        if re.search(r"\bID\b", code):
            if self.wid is None:
                raise RunFailed(f"README.md:{step.line}: uses ID before any `lockkeeper start` printed one")
            code = re.sub(r"\bID\b", self.wid, code)
        return code

    def shell(self, code: str, timeout: float = 600.0) -> tuple[int, str, str]:
        """Run ``code`` in bash with the variables exported so far; keeps what it exports."""
        script = f"source {shlex.quote(str(self.state))}\n{code}\n__rc=$?\nexport -p > {shlex.quote(str(self.state))}\nexit $__rc\n"
        p = subprocess.run(["bash", "-c", script], env=self.env, cwd=self.tmp, capture_output=True, timeout=timeout, check=False)
        return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")

    def start_server(self, kind: str, code: str, ready: str) -> None:
        if kind == "worker":
            for old in [s for s in self.servers if s.kind == "worker"]:
                self._stop(old)
                self.servers.remove(old)
        log = self.tmp / f"{kind}-{len(self.servers)}.log"
        script = f"source {shlex.quote(str(self.state))}\n{code}\n"
        with log.open("wb") as out:
            proc = subprocess.Popen(["bash", "-c", script], env=self.env, cwd=self.tmp, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        server = Server(kind, proc, log)
        self.servers.append(server)
        deadline = time.monotonic() + READY_TIMEOUT
        while ready not in log.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RunFailed(f"{kind} did not get ready ({ready!r} not printed):\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.2)

    def _stop(self, server: Server) -> None:
        if server.proc.poll() is None:
            try:
                os.killpg(server.proc.pid, signal.SIGTERM)
                server.proc.wait(timeout=20)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(server.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def close(self) -> None:
        for s in reversed(self.servers):
            self._stop(s)
        self.servers.clear()

    def status_text(self) -> str:
        """``lockkeeper status ID`` (stdout and stderr), whitespace-normalised. The polls run the
        same command in this process (typer's test runner): a CLI process per poll costs about a
        second of CPU, which a loaded suite cannot spare; the README's own ``status`` lines still
        run as processes (:meth:`run_step`)."""
        from typer.testing import CliRunner

        from lockkeeper.cli import app

        env = {"TEMPORAL_ADDRESS": self.env["TEMPORAL_ADDRESS"], "LOCKKEEPER_TASK_QUEUE": self.env["LOCKKEEPER_TASK_QUEUE"],
               "COLUMNS": "400", "TEMPORAL_NAMESPACE": self.env.get("TEMPORAL_NAMESPACE", "default")}
        res = CliRunner().invoke(app, ["status", str(self.wid)], env=env)
        out = res.stdout
        err = res.stderr
        self.check_person_readable(f"lockkeeper status {self.wid}", out)
        return " ".join((out + " " + err).split())

    def check_person_readable(self, command: str, out: str) -> None:
        """A table-mode ``status`` shows no Python repr (:data:`REPR_MARKS`)."""
        if found := reprs_in(out):
            raise RunFailed(f"`{command}` prints Python reprs ({', '.join(found)}):\n{out[:4000]}")

    @staticmethod
    def ended(status: str) -> bool:
        """Whether a status text is that of a closed run (an outcome, or a failed, terminated or
        canceled execution)."""
        return bool(re.search(r" outcome [\w-]+|\): (failed|terminated|canceled|timed_out): ", f" {status}"))

    def wait_status(self, step: Step, text: str, timeout: float = STATUS_TIMEOUT) -> str:
        """Poll ``status ID`` until it shows ``text`` (whitespace-normalised)."""
        want = " ".join(text.split())
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            last = self.status_text()
            if want in last:
                return last
            if self.ended(last):
                break  # the run ended: it will never wait for it again
            time.sleep(POLL_SECONDS)
        raise RunFailed(f"README.md:{step.line}: `lockkeeper status {self.wid}` never showed {want!r}\n"
                        f"    {step.code}\nlast status: {last[:3000]}")

    def log(self, line: str) -> None:
        """Add ``line`` to the transcript (kept in ``transcript.txt`` too, for a run cut short)."""
        self.transcript.append(line)
        with self.transcript_file.open("a") as f:
            f.write(line + "\n")

    def run_step(self, step: Step) -> None:
        argv = step.argv
        if any(tuple(argv[:len(p)]) == p for p in NOT_RUN):
            self.log(f"# not run (README convention): {step.code}")
            return
        code = self._code(step)
        self.log(f"$ {code}")
        if argv[:3] == ["lockkeeper", "sim", "serve"]:
            return self.start_server("sim", code, "serving on")
        if argv[:2] == ["lockkeeper", "worker"]:
            return self.start_server("worker", code, "worker started")
        if argv[:1] == ["lockkeeper"] and len(argv) > 3 and argv[1] in _ANSWERS and argv[2] == "ID":
            verb, gate = argv[1], argv[3]
            offers = [f"lockkeeper {verb} {self.wid} {gate} "]
            if verb == "approve":
                offers.append(f"lockkeeper decide {self.wid} {gate} ")
            deadline = time.monotonic() + STATUS_TIMEOUT
            while not any(o in (last := self.status_text()) for o in offers):
                if time.monotonic() > deadline or self.ended(last):
                    raise RunFailed(f"README.md:{step.line}: status never offered {offers[0]!r}\n    {step.code}\n"
                                    f"last status: {last[-3000:]}")
                time.sleep(POLL_SECONDS)
        watch = "--watch" in argv
        if watch:
            code = f"timeout -s INT {WATCH_SECONDS} {code}"
        rc, out, err = self.shell(code)
        if argv[1:2] == ["status"] and "-o" not in argv:
            self.check_person_readable(code, out)
        self.log(f"  exit {rc}\n" + "".join(f"  | {ln}\n" for ln in (out + err).splitlines()[-15:]))
        m = _EXIT.search(step.note)
        expected = int(m.group(1)) if m else (130 if watch else 0)
        if watch and rc == 124:  # coreutils' timeout says 124 when it had to interrupt
            rc = 130
        if rc != expected:
            raise RunFailed(f"README.md:{step.line}: exit {rc}, the README says {expected}\n    {step.code}\n"
                            f"stdout: {out[-3000:]}\nstderr: {err[-3000:]}")
        if argv[:2] == ["lockkeeper", "start"] or (argv[:2] == ["lockkeeper", "revert"] and "--full" in argv):
            first = out.strip().splitlines()[0] if out.strip() else ""
            if _ID.match(first):
                self.wid = first
        for pattern in (_WAITING, _OUTCOME):
            for m in pattern.finditer(step.note):
                if self.wid is not None:
                    self.wait_status(step, m.group(1).rstrip(" :"))

    def run(self, sections: list[str], text: str | None = None) -> list[str]:
        """Run the sections' steps in order; returns the transcript. Raises :class:`RunFailed`."""
        try:
            for step in steps(sections, text):
                self.run_step(step)
        finally:
            self.close()
        return self.transcript
