"""The host command interpreter: argv in, (stdout, stderr, exit code) out. Never a real shell.

Dispatch order for ``argv[0]`` (a path such as ``/usr/libexec/iptables/iptables.init`` is
matched by its full text first, then by its base name):

1. commands registered by other components (``register_command``: ``ovs-vsctl``,
   ``master-restart``, ``gluster`` ...), called as ``handler(host, argv)``;
2. the built-in commands of :mod:`fs`, :mod:`pkg`, :mod:`netcmd`, :mod:`runtime`;
3. anything else exits 127 with ``sh: CMD: command not found`` (procedures-spec §8.2).

A binary that belongs to a package (``docker`` to ``docker-client``/``docker``, ``crictl`` to
``cri-tools``) is "not found" once that package is removed. ``env K=V CMD...`` (how lockkeeper's
executors pass variables) runs CMD. ``sh -c SCRIPT`` accepts only simple commands joined by
``&&`` or ``;`` with at most a ``DIR/*`` glob per word; other shell syntax exits 2.
``reboot``, ``systemctl reboot`` and ``shutdown -r now`` start the reboot sequence and raise
:class:`~clustersim.hosts.ctx.SessionDropped` (the session dies without an exit status).

``timeout [-s SIG|--signal=SIG] DURATION CMD...`` (coreutils, how lockkeeper's SSH executor
bounds a command on its host) runs CMD and cancels it where it is after DURATION, then exits 124,
or 137 for ``-s KILL`` (coreutils ``timeout(1)``); its own bad usage exits 125. DURATION counts
*real* seconds at any time scale: the bound is lockkeeper's, taken from its own real-time
timeout, and must keep its order with it. The log shows CMD with ``bound_seconds``.
``sudo -n CMD...`` runs CMD (a host has no users: everything runs as root), logged as CMD with
``sudo`` set.

``command -v NAME`` (POSIX; RHEL ships ``/usr/bin/command``, bash's builtin wrapper) prints where
NAME is found and exits 0, or prints nothing and exits 1 (:meth:`Interpreter.which`); ``ss``
lists the host's listening sockets (:mod:`clustersim.hosts.sockets`).

Every command goes through :meth:`Interpreter.run` (SSH and the debug pod's ``chroot /host``
alike), so that is where the step traps (clustersim.traps, ``Interpreter.traps``) see it: by
host, the command line without the ``sudo``/``timeout``/``env`` wrappers, and ``via``. A held
command waits before it starts; a failing trap ends it with its exit code and stderr (logged so).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shlex
from collections.abc import Awaitable, Callable

from clustersim.hosts import fs, netcmd, pkg, runtime, sockets
from clustersim.hosts.ctx import Ctx, HostWorld, SessionDropped
from clustersim.hosts.model import CommandRecord, HostState, norm
from clustersim.traps.model import TrapClosed, TrapSet

Result = tuple[str, str, int]
#: What other components register: ``handler(host, argv) -> (stdout, stderr, exit code)``.
CommandHandler = Callable[[HostState, list[str]], Awaitable[Result]]
#: Log entries kept per host.
LOG_LIMIT = 5000

#: Binaries that vanish with their packages (any one of the packages provides the binary).
PACKAGED: dict[str, tuple[str, ...]] = {
    "docker": ("docker-client", "docker"),
    "crictl": ("cri-tools",),
    "dnsmasq": ("dnsmasq",),
    "oc": ("atomic-openshift-clients", "origin-clients"),
}
SHELL_FORBIDDEN = ("|", ">", "<", "$", "`", "(", ")", "{", "}", "||")
#: coreutils ``timeout`` DURATION: a decimal number with an optional unit.
_DURATION = re.compile(r"^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)([smhd]?)$")
_UNIT_SECONDS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def split_timeout(argv: list[str]) -> tuple[float, str, list[str]]:
    """``timeout [-s SIG|-sSIG|--signal=SIG|--signal SIG] DURATION CMD...`` as (seconds, signal
    name, CMD...); the signal defaults to TERM. Raises ValueError (the message ``timeout(1)`` would
    print) for any other option, a bad DURATION or no CMD."""
    args, sig = argv[1:], "TERM"
    while args and args[0].startswith("-"):
        opt = args.pop(0)
        if opt in ("-s", "--signal") and args:
            sig = args.pop(0)
        elif opt.startswith("--signal="):
            sig = opt.split("=", 1)[1]
        elif opt.startswith("-s") and len(opt) > 2:
            sig = opt[2:]
        else:
            raise ValueError(f"timeout: unrecognized option '{opt}' (only -s/--signal is simulated)")
    sig = sig.upper().removeprefix("SIG")
    if sig not in ("TERM", "KILL", "9", "15"):
        raise ValueError(f"timeout: {sig}: only TERM and KILL are simulated")
    match = _DURATION.match(args[0]) if args else None
    if match is None:
        raise ValueError(f"timeout: invalid time interval {args[0]!r}" if args else "timeout: missing operand")
    if len(args) < 2:
        raise ValueError("timeout: missing operand")
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)], "KILL" if sig in ("KILL", "9") else "TERM", args[1:]


def strip_wrappers(argv: list[str]) -> list[str]:
    """``argv`` without any ``env [NAME=VALUE...]``, ``sudo`` and ``timeout`` wrappers, as step
    traps match a command (a wrapper in bad form is left in place)."""
    argv = list(argv)
    while argv and argv[0] in ("env", "sudo", "timeout"):
        before = argv
        if argv[0] == "env":
            argv = argv[1:]
            while argv and "=" in argv[0] and not argv[0].startswith("-"):
                argv = argv[1:]
        else:
            argv = unwrap(argv)[0]
        if argv == before:
            break  # a wrapper in bad form: matched as it is
    return argv


def unwrap(argv: list[str]) -> tuple[list[str], bool, float | None]:
    """``argv`` without the wrappers lockkeeper's SSH executor puts around a command, in its order
    (``sudo -n``, then ``timeout ... DURATION``): (the command, under sudo, DURATION or None). A
    wrapper in bad form is left in place (running it answers its usage error)."""
    sudo = argv[:2] == ["sudo", "-n"] and len(argv) > 2
    inner = argv[2:] if sudo else list(argv)
    bound = None
    if inner[:1] == ["timeout"]:
        with contextlib.suppress(ValueError):
            bound, _, inner = split_timeout(inner)
    return list(inner), sudo, bound


def _fs(fn: Callable[[HostState, list[str], bytes], Result]) -> Callable[[Ctx], Awaitable[Result]]:
    async def run(ctx: Ctx) -> Result:
        return fn(ctx.host, ctx.args, ctx.stdin)
    return run


async def _reboot(ctx: Ctx) -> Result:
    if ctx.argv[0] == "shutdown" and ctx.args[:1] != ["-r"]:
        return "", "shutdown: only 'shutdown -r now' is simulated\n", 1
    ctx.world.request_reboot(ctx.host)
    raise SessionDropped


async def _true(ctx: Ctx) -> Result:
    return "", "", 0


async def _false(ctx: Ctx) -> Result:
    return "", "", 1


async def _echo(ctx: Ctx) -> Result:
    return " ".join(ctx.args) + "\n", "", 0


BUILTINS: dict[str, Callable[[Ctx], Awaitable[Result]]] = {
    **{name: _fs(fn) for name, fn in fs.FS_COMMANDS.items()},
    "systemctl": pkg.cmd_systemctl, "rpm": pkg.cmd_rpm, "yum": pkg.cmd_yum,
    "iptables": netcmd.cmd_iptables, "iptables-save": netcmd.cmd_iptables_save,
    "/usr/libexec/iptables/iptables.init": netcmd.cmd_iptables_init, "service": netcmd.cmd_service,
    "getent": netcmd.cmd_getent, "nslookup": netcmd.cmd_nslookup, "hostname": netcmd.cmd_hostname,
    "docker": runtime.cmd_docker, "crictl": runtime.cmd_crictl,
    "reboot": _reboot, "shutdown": _reboot, "true": _true, "false": _false, "echo": _echo,
    "ss": sockets.cmd_ss,
}
#: Commands the interpreter runs itself (before the table above): ``command -v`` finds them too.
WRAPPERS = ("env", "sudo", "timeout", "command", "sh", "bash")
#: What bash's ``command -v`` prints as a bare name: its builtins (``/usr/bin/command`` is bash's
#: POSIX builtin wrapper on RHEL, so the lookup is bash's).
SHELL_BUILTINS = frozenset({"echo", "true", "false", "command", "test", "printf", "kill", "cd", "type", "hash", "read"})
#: Where RHEL 7/8 install a simulated command that is not under /usr/bin.
COMMAND_PATHS = {
    "iptables": "/usr/sbin/iptables", "iptables-save": "/usr/sbin/iptables-save", "service": "/usr/sbin/service",
    "reboot": "/usr/sbin/reboot", "shutdown": "/usr/sbin/shutdown", "ss": "/usr/sbin/ss", "gluster": "/usr/sbin/gluster",
    "master-restart": "/usr/local/bin/master-restart", "master-logs": "/usr/local/bin/master-logs",
}
#: root's PATH on RHEL (an SSH login's; sudo's ``secure_path`` is a subset), searched in order.
ROOT_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


class Interpreter:
    """Runs argv lists against hosts (see module docstring). ``world`` is the HostWorld the
    commands act on; ``clock_now`` returns the RFC 3339 time for the command log."""

    def __init__(self, world: HostWorld, clock_now: Callable[[], str]) -> None:
        self.world = world
        self._now = clock_now
        self._extra: dict[str, CommandHandler] = {}
        #: The simulator's step traps (None: no traps), consulted before every command runs.
        self.traps: TrapSet | None = None

    def register_command(self, name: str, handler: CommandHandler) -> None:
        """Add (or replace) a command; ``name`` is a base name (``ovs-vsctl``) or a full path."""
        self._extra[name] = handler

    def _lookup(self, cmd: str) -> tuple[CommandHandler | None, Callable[[Ctx], Awaitable[Result]] | None]:
        base = cmd.rsplit("/", 1)[-1]
        for key in (cmd, base):
            if key in self._extra:
                return self._extra[key], None
        for key in (cmd, base):
            if key in BUILTINS:
                return None, BUILTINS[key]
        return None, None

    async def run(self, host: HostState, argv: list[str], *, stdin: bytes = b"", via: str = "ssh") -> Result:
        """Run ``argv`` on ``host`` and log it (argv, via, start, end, exit). Raises
        SessionDropped when the command reboots the host (logged with exit None)."""
        shown, sudo, bound = unwrap(argv)
        rec = CommandRecord(argv=shown, via=via, start=self._now(), bound_seconds=bound, sudo=sudo)
        host.log.append(rec)
        if len(host.log) > LOG_LIMIT:
            del host.log[: len(host.log) - LOG_LIMIT]
        trapped = await self._trap(host, shown, via)
        if trapped is not None:
            rec.end, rec.exit = self._now(), trapped[2]
            return trapped
        try:
            out, err, code = await self.dispatch(host, list(argv), stdin, via)
        except SessionDropped:
            rec.end = self._now()
            raise
        rec.end, rec.exit = self._now(), code
        return out, err, code

    async def _trap(self, host: HostState, shown: list[str], via: str) -> Result | None:
        """What a step trap does to the command: None to run it (after a hold, once released),
        or the result a ``fail`` trap gives (exit 255 when the simulator stops during a hold)."""
        if self.traps is None:
            return None
        action, trap = self.traps.check_host(host.name, strip_wrappers(shown), via)
        if trap is None:
            return None
        if action == "hold":
            try:
                await trap.hold()
            except TrapClosed:
                return "", "clustersim: shutting down\n", 255
        elif action == "fail":
            return "", trap.spec.stderr, trap.spec.exit_code
        return None

    async def dispatch(self, host: HostState, argv: list[str], stdin: bytes, via: str) -> Result:
        """Run ``argv`` without logging (``sh -c`` parts come back through here)."""
        while argv and argv[0] == "env":
            argv = argv[1:]
            while argv and "=" in argv[0] and not argv[0].startswith("-"):
                argv = argv[1:]
        if not argv:
            return "", "", 0
        cmd = argv[0]
        if cmd == "sudo":
            if argv[1:2] != ["-n"] or len(argv) < 3:
                return "", "sudo: only 'sudo -n CMD...' is simulated\n", 1
            return await self.dispatch(host, argv[2:], stdin, via)  # a host has no users: all is root
        if cmd == "timeout":
            return await self._timeout(host, argv, stdin, via)
        if cmd in ("command", "/usr/bin/command"):
            return await self._command(host, argv, stdin, via)
        if cmd in ("sh", "bash", "/bin/sh", "/bin/bash") and len(argv) == 3 and argv[1] == "-c":
            return await self._shell(host, argv[2], stdin, via)
        base = cmd.rsplit("/", 1)[-1]
        if base in PACKAGED and not any(p in host.packages for p in PACKAGED[base]):
            return "", f"sh: {cmd}: command not found\n", 127
        extra, builtin = self._lookup(cmd)
        if extra is not None:
            return await extra(host, argv)
        if builtin is not None:
            async def nested(inner: list[str]) -> Result:
                return await self.dispatch(host, inner, stdin, via)

            return await builtin(Ctx(host=host, argv=argv, stdin=stdin, world=self.world, via=via, dispatch=nested))
        return "", f"sh: {cmd}: command not found\n", 127

    def which(self, host: HostState, name: str) -> str | None:
        """What ``command -v NAME`` prints on ``host``, or None when NAME is not found: a bare name
        for a shell builtin; for a NAME with a ``/``, NAME when that file exists or a known
        command lives there; otherwise the first ``ROOT_PATH`` directory holding a file of that
        name, else the install path of a command this host can run (:data:`COMMAND_PATHS`,
        default ``/usr/bin/NAME``). A packaged binary whose package is gone is not found."""
        base = name.rsplit("/", 1)[-1]
        if base in PACKAGED and not any(p in host.packages for p in PACKAGED[base]):
            return None
        known = base in WRAPPERS or base in self._extra or base in BUILTINS
        if "/" in name:
            installed = COMMAND_PATHS.get(base, f"/usr/bin/{base}")
            aliases = {installed, installed.replace("/usr/", "/", 1)}  # /bin -> /usr/bin, /sbin -> /usr/sbin
            exact = name in self._extra or name in BUILTINS  # registered under a full path
            return name if norm(name) in host.files or exact or (known and norm(name) in aliases) else None
        if base in SHELL_BUILTINS:
            return base
        for d in ROOT_PATH:
            if f"{d}/{base}" in host.files:
                return f"{d}/{base}"
        return COMMAND_PATHS.get(base, f"/usr/bin/{base}") if known else None

    async def _command(self, host: HostState, argv: list[str], stdin: bytes, via: str) -> Result:
        """POSIX ``command``: ``command -v NAME...`` prints where each NAME is found and exits 0
        when any was (bash's ``command.def``: nothing printed, exit 1, when none); ``command
        CMD ARGS...`` runs CMD."""
        args = argv[1:]
        if args[:1] == ["-v"]:
            found = [w for w in (self.which(host, n) for n in args[1:]) if w]
            return "".join(f"{w}\n" for w in found), "", 0 if found else 1
        if not args or args[0].startswith("-"):
            return "", "sh: command: only 'command -v NAME' and 'command CMD...' are simulated\n", 2
        return await self.dispatch(host, args, stdin, via)

    async def _timeout(self, host: HostState, argv: list[str], stdin: bytes, via: str) -> Result:
        """coreutils ``timeout`` (module docstring): CMD cancelled after DURATION real seconds."""
        try:
            seconds, sig, inner = split_timeout(argv)
        except ValueError as exc:
            return "", f"{exc}\nTry 'timeout --help' for more information.\n", 125
        try:
            return await asyncio.wait_for(self.dispatch(host, inner, stdin, via), seconds)
        except TimeoutError:
            return "", "", 137 if sig == "KILL" else 124

    async def _shell(self, host: HostState, script: str, stdin: bytes, via: str) -> Result:
        try:
            lex = shlex.shlex(script, posix=True, punctuation_chars=";&|<>()")
            lex.whitespace_split = True
            tokens = list(lex)
        except ValueError as exc:
            return "", f"sh: -c: line 0: syntax error: {exc}\n", 2
        bad = [t for t in tokens if t in SHELL_FORBIDDEN or any(c in t for c in "$`")]
        if bad:
            return "", f"sh: -c: shell syntax {bad[0]!r} is not simulated (only ';', '&&' and DIR/* globs)\n", 2
        out, err, code = [], [], 0
        command: list[str] = []
        op = ";"
        for tok in [*tokens, ";"]:
            if tok not in (";", "&&"):
                command.extend(self._glob(host, tok))
                continue
            if command and (op == ";" or code == 0):
                o, e, code = await self.dispatch(host, command, stdin, via)
                out.append(o)
                err.append(e)
            command, op = [], tok
        return "".join(out), "".join(err), code

    @staticmethod
    def _glob(host: HostState, word: str) -> list[str]:
        """``DIR/*`` expands to DIR's entries (sorted); no match leaves the word as is (sh)."""
        if not word.endswith("/*") or "*" in word[:-1]:
            return [word]
        d = norm(word[:-2])
        names = fs.children(host, d) if host.is_dir(d) else []
        return [f"{d}/{n}" for n in names] or [word]
