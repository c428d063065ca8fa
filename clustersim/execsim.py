"""The per-pod command emulator behind ``pods/exec``: never a real shell.

Other components register handlers on ``sim.exec_router``::

    sim.exec_router.register("gluster", lambda req: req.argv[:1] == ["gluster"], handler)

``handler(ExecRequest) -> Awaitable[ExecResult]``. The first registered handler whose ``matches``
returns True runs; when none matches, the built-in fallback runs: ``true``, ``false``,
``echo ARGS...``, ``cat`` (copies stdin), ``exit N`` and ``sh -c "..."`` / ``bash -c "..."``
whose script is a sequence of simple commands joined by ``;``, ``&&`` or ``||`` (each simple
command is dispatched through the router again, so ``sh -c "gluster volume list"`` reaches
the gluster handler). Anything else ends with exit code 126 and the OCI runtime's
"executable file not found in $PATH" message on stderr (runc ``libcontainer`` wording; the exact
text differs between runtimes, see procedures-spec §9.2 item 5).
"""

from __future__ import annotations

import shlex
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class ExecRequest:
    """One exec into a container.

    ``pod`` is the Pod object as stored (do not mutate it); ``argv`` the command (``command``
    query parameters, in order); ``stdin`` the bytes the client sent on channel 0 (None when the
    client did not ask for stdin); ``tty`` whether a terminal was requested."""

    namespace: str
    pod: dict[str, Any]
    container: str
    argv: list[str]
    stdin: bytes | None = None
    tty: bool = False

    @property
    def pod_name(self) -> str:
        """``metadata.name`` of the pod."""
        return str(self.pod.get("metadata", {}).get("name", ""))

    @property
    def node_name(self) -> str:
        """``spec.nodeName`` of the pod ("" when unscheduled)."""
        return str((self.pod.get("spec") or {}).get("nodeName") or "")

    @property
    def labels(self) -> dict[str, str]:
        """``metadata.labels`` of the pod."""
        return dict(self.pod.get("metadata", {}).get("labels") or {})


@dataclass
class ExecResult:
    """What a command produced. ``exit_code != 0`` goes on the status channel as a
    ``NonZeroExitCode`` Failure Status (procedures-spec §9.2 item 5)."""

    stdout: bytes = b""
    stderr: bytes = b""
    exit_code: int = 0


ExecHandler = Callable[[ExecRequest], Awaitable[ExecResult]]
ExecMatcher = Callable[[ExecRequest], bool]


@dataclass
class ExecLogEntry:
    """One exec as the log keeps it (served at ``GET /_sim/exec``). Times are Unix seconds."""

    namespace: str
    pod: str
    container: str
    argv: list[str]
    subprotocol: str
    exit_code: int
    handler: str
    start: float
    end: float
    stdin_bytes: int = 0
    stdout_bytes: int = 0
    stderr_bytes: int = 0


@dataclass
class _Route:
    name: str
    matches: ExecMatcher
    handler: ExecHandler


@dataclass
class ExecRouter:
    """Dispatches exec requests to registered handlers, then to the built-in fallback.

    ``log`` keeps the last ``log_size`` execs (``ExecLogEntry``)."""

    log_size: int = 10000
    _routes: list[_Route] = field(default_factory=list)
    log: deque[ExecLogEntry] = field(init=False)

    def __post_init__(self) -> None:
        self.log = deque(maxlen=self.log_size)

    def register(self, name: str, matches: ExecMatcher, handler: ExecHandler) -> None:
        """Add a handler (tried in registration order; first match wins). Re-registering a
        ``name`` replaces the earlier route in place."""
        for i, route in enumerate(self._routes):
            if route.name == name:
                self._routes[i] = _Route(name, matches, handler)
                return
        self._routes.append(_Route(name, matches, handler))

    def unregister(self, name: str) -> None:
        """Remove the route called ``name`` (no error when absent)."""
        self._routes = [r for r in self._routes if r.name != name]

    @property
    def names(self) -> list[str]:
        """Registered route names, in the order they are tried."""
        return [r.name for r in self._routes]

    def route_for(self, req: ExecRequest) -> str:
        """The name of the route that would run ``req`` ("builtin" for the fallback)."""
        for route in self._routes:
            if route.matches(req):
                return route.name
        return "builtin"

    async def run(self, req: ExecRequest) -> tuple[ExecResult, str]:
        """Run ``req``; returns (result, route name). A handler that raises is reported as
        exit code 1 with the exception on stderr rather than breaking the exec stream."""
        for route in self._routes:
            if route.matches(req):
                try:
                    return await route.handler(req), route.name
                except Exception as exc:  # the emulator's bug must not look like a hung exec
                    return ExecResult(stderr=f"clustersim: exec handler {route.name} failed: {exc!r}\n".encode(),
                                      exit_code=1), route.name
        return await self._builtin(req), "builtin"

    def record(self, entry: ExecLogEntry) -> None:
        """Append to the exec log."""
        self.log.append(entry)

    def log_json(self) -> list[dict[str, Any]]:
        """The exec log as JSON-able dicts, oldest first."""
        return [asdict(e) for e in self.log]

    # ------------------------------------------------------------------ built-in commands
    async def _builtin(self, req: ExecRequest) -> ExecResult:
        argv = req.argv
        if not argv:
            return ExecResult(stderr=b"OCI runtime exec failed: exec failed: unable to start container process: "
                                     b"exec: no command given: unknown\n", exit_code=126)
        cmd = argv[0].rsplit("/", 1)[-1]
        if cmd == "true":
            return ExecResult()
        if cmd == "false":
            return ExecResult(exit_code=1)
        if cmd == "echo":
            return ExecResult(stdout=(" ".join(argv[1:]) + "\n").encode())
        if cmd == "cat" and len(argv) == 1:
            return ExecResult(stdout=req.stdin or b"")
        if cmd in ("sh", "bash") and len(argv) >= 3 and argv[1] == "-c":
            return await self._shell(req, argv[2])
        return not_found(argv[0])

    async def _shell(self, req: ExecRequest, script: str) -> ExecResult:
        """A tiny ``sh -c``: simple commands joined by ``;``, ``&&``, ``||``, plus ``exit N``."""
        try:
            lex = shlex.shlex(script, posix=True, punctuation_chars=";&|")
            lex.whitespace_split = True
            tokens = list(lex)
        except ValueError as exc:
            return ExecResult(stderr=f"sh: syntax error: {exc}\n".encode(), exit_code=2)
        out, err = bytearray(), bytearray()
        code = 0
        pending_op = ";"
        command: list[str] = []
        for tok in [*tokens, ";"]:
            if tok not in (";", "&&", "||"):
                command.append(tok)
                continue
            if command:
                run = pending_op == ";" or (pending_op == "&&" and code == 0) or (pending_op == "||" and code != 0)
                if run:
                    if command[0] == "exit":
                        try:
                            return ExecResult(bytes(out), bytes(err), int(command[1]) if len(command) > 1 else code)
                        except ValueError:
                            return ExecResult(bytes(out), bytes(err) + b"sh: exit: Illegal number\n", 2)
                    sub = ExecRequest(req.namespace, req.pod, req.container, command, req.stdin, req.tty)
                    result, _ = await self.run(sub)
                    out += result.stdout
                    err += result.stderr
                    code = result.exit_code
            elif tok != ";":
                err += f"sh: syntax error near unexpected token `{tok}'\n".encode()
                return ExecResult(bytes(out), bytes(err), 2)
            command = []
            pending_op = tok
        return ExecResult(bytes(out), bytes(err), code)


def not_found(executable: str) -> ExecResult:
    """Exit 126 with runc's message for a missing executable (what cri-o/containerd report)."""
    msg = (f'OCI runtime exec failed: exec failed: unable to start container process: exec: "{executable}": '
           f"executable file not found in $PATH: unknown\n")
    return ExecResult(stderr=msg.encode(), exit_code=126)


def now() -> float:
    """Wall-clock Unix seconds (exec log timestamps)."""
    return time.time()
