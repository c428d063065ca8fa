"""Step traps: stop a procedure deterministically at its first request of a step.

A trap matches requests to the simulated cluster and acts on the first ``times`` of them:

- API requests (every ``/api`` and ``/apis`` resource request, through the main endpoint and the
  per-master listeners alike), matched by ``verb`` (get, list, watch, create, update, patch,
  delete, deletecollection), ``resource`` (the plural, optionally ``plural.group``), ``group``,
  ``namespace`` and ``name`` (fnmatch globs, or ``name_regex``; a create's name is the one in its
  body), ``subresource`` (``""``: the object itself; ``eviction``, ``status``, ``exec`` ...);
- host commands (SSH and the debug pod's ``chroot /host`` alike: both go through the host
  interpreter, :meth:`clustersim.hosts.interp.Interpreter.run`), matched by ``host`` (a glob),
  ``argv`` (a regular expression searched in the command line as ``shlex.join`` prints it,
  after the ``sudo -n``/``timeout``/``env`` wrappers) and ``via`` (``ssh``, ``debug-pod``).

Actions: ``hold`` (the request waits until the trap is released, deleted, or the simulator
stops: a test acts meanwhile), ``fail`` (an API request is answered with ``status`` and a
Kubernetes ``Status`` body with ``reason`` and ``message``, defaults as kube-apiserver words
them, e.g. 403 Forbidden ``daemonsets.apps "sdn" is forbidden: User "system:serviceaccount:
lockkeeper:lockkeeper" cannot patch resource "daemonsets" in API group "apps" in the namespace
"openshift-sdn"``; a host command exits ``exit_code`` with ``stderr``), ``count`` (only
counted). After ``times`` acted-on matches (0: no limit) the trap passes requests through but
still counts ``hits``.

A held request is let go (it then runs as if it had just arrived, faults included) on release
or delete; when the simulator stops, it is failed cleanly instead (API: 503
ServiceUnavailable; host: exit 255 ``clustersim: shutting down``). A request whose client went
away while it was held still runs when released, as a kube-apiserver or sshd that already has
the request does: the write lands though nobody hears the answer.
"""

from __future__ import annotations

import asyncio
import fnmatch
import itertools
import re
import shlex
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: Canonical StatusReason for a failure code (apimachinery ``pkg/api/errors``).
REASONS: dict[int, str] = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
                           405: "MethodNotAllowed", 409: "Conflict", 410: "Gone", 422: "Invalid",
                           429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable",
                           504: "Timeout"}
#: The user named in a default Forbidden message (lockkeeper's service account in deploy/).
FORBIDDEN_USER = "system:serviceaccount:lockkeeper:lockkeeper"


class TrapSpec(BaseModel):
    """What a trap matches and does (module docstring). ``on`` says which requests: ``api`` or
    ``host``. Match fields left None match anything."""

    model_config = ConfigDict(extra="forbid")

    on: Literal["api", "host"] = "api"
    action: Literal["hold", "fail", "count"] = "hold"
    times: int = Field(default=1, ge=0)
    label: str = ""
    # API requests
    verb: str | list[str] | None = None
    resource: str | None = None
    group: str | None = None
    namespace: str | None = None
    name: str | None = None
    name_regex: str | None = None
    subresource: str | None = None
    # host commands
    host: str | None = None
    argv: str | None = None
    via: str | None = None
    # fail
    status: int = Field(default=403, ge=400, le=599)
    reason: str | None = None
    message: str | None = None
    exit_code: int = Field(default=1, ge=0, le=255)
    stderr: str = ""

    @model_validator(mode="after")
    def _check(self) -> TrapSpec:
        api_fields = [self.verb, self.resource, self.group, self.namespace, self.name, self.name_regex, self.subresource]
        host_fields = [self.host, self.argv, self.via]
        if self.on == "api" and any(f is not None for f in host_fields):
            raise ValueError("an api trap matches verb/resource/group/namespace/name/name_regex/subresource, "
                             "not host/argv/via")
        if self.on == "host" and any(f is not None for f in api_fields):
            raise ValueError("a host trap matches host/argv/via, not API fields")
        for rx in (self.name_regex, self.argv):
            if rx is not None:
                try:
                    re.compile(rx)
                except re.error as exc:
                    raise ValueError(f"bad regular expression {rx!r}: {exc}") from None
        return self

    # --- matching ------------------------------------------------------------------------------

    def matches_api(self, verb: str, plural: str, group: str, namespace: str, name: str, subresource: str) -> bool:
        """Does this (api) trap match the request?"""
        if self.on != "api":
            return False
        verbs = [self.verb] if isinstance(self.verb, str) else self.verb
        if verbs is not None and verb not in verbs:
            return False
        if self.resource is not None:
            want, _, want_group = self.resource.partition(".")
            if want != plural or (want_group and want_group != group):
                return False
        if self.group is not None and self.group != group:
            return False
        if self.namespace is not None and not fnmatch.fnmatchcase(namespace, self.namespace):
            return False
        if self.name is not None and not fnmatch.fnmatchcase(name, self.name):
            return False
        if self.name_regex is not None and not re.search(self.name_regex, name):
            return False
        return self.subresource is None or self.subresource == subresource

    def matches_host(self, host: str, command: str, via: str) -> bool:
        """Does this (host) trap match ``command`` (the unwrapped command line) on ``host``?"""
        if self.on != "host":
            return False
        if self.host is not None and not fnmatch.fnmatchcase(host, self.host):
            return False
        if self.via is not None and self.via != via:
            return False
        return self.argv is None or re.search(self.argv, command) is not None

    def api_failure(self, verb: str, plural: str, group: str, namespace: str, name: str) -> tuple[int, str, str]:
        """(code, reason, message) of a ``fail`` answer, with kube-apiserver's wording by default."""
        reason = self.reason or REASONS.get(self.status, "InternalError" if self.status >= 500 else "BadRequest")
        if self.message is not None:
            return self.status, reason, self.message
        qualified = f"{plural}.{group}" if group else plural
        if self.status == 403:
            scope = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
            obj = f'{qualified} "{name}"' if name else qualified
            return 403, reason, (f'{obj} is forbidden: User "{FORBIDDEN_USER}" cannot {verb} resource "{plural}" '
                                 f'in API group "{group}"{scope}')
        if self.status == 422:
            return 422, reason, f'{qualified} "{name}" is invalid: refused by a clustersim trap'
        return self.status, reason, f"refused by a clustersim trap ({self.status} {reason})"


class Hit(BaseModel):
    """One matching request: what it was (``PATCH daemonsets.apps openshift-sdn/sdn`` or
    ``node01: reboot``) and what the trap did (``held``, ``failed``, ``counted``, ``passed``)."""

    request: str
    action: str


class TrapState(BaseModel):
    """A trap as the endpoints show it: its ``spec``, ``hits`` (every matching request), ``acted``
    (how many it acted on), ``held`` (waiting now), ``released``, and the first ``log`` hits."""

    id: str
    spec: TrapSpec
    hits: int = 0
    acted: int = 0
    held: int = 0
    released: bool = False
    log: list[Hit] = Field(default_factory=list)


class TrapClosed(Exception):
    """The simulator stops while a request is held: fail it cleanly."""


#: Hits kept in a trap's log.
LOG_LIMIT = 50


class Trap:
    """A live trap (see the module docstring)."""

    def __init__(self, tid: str, spec: TrapSpec) -> None:
        self.state = TrapState(id=tid, spec=spec)
        self._release = asyncio.Event()
        self._closed = False
        self._changed = asyncio.Event()

    @property
    def spec(self) -> TrapSpec:
        return self.state.spec

    def _armed(self) -> bool:
        st = self.state
        return not st.released and (st.spec.times == 0 or st.acted < st.spec.times)

    def take(self, request: str) -> str:
        """Count a matching request and decide: ``hold``, ``fail``, ``count`` or ``pass``."""
        st = self.state
        st.hits += 1
        action = st.spec.action if self._armed() else "pass"
        if action != "pass":
            st.acted += 1
        if len(st.log) < LOG_LIMIT:
            st.log.append(Hit(request=request, action={"hold": "held", "fail": "failed", "count": "counted"}.get(action, "passed")))
        self._notify()
        return action

    async def hold(self) -> None:
        """Wait until released (return) or closed (raise TrapClosed)."""
        self.state.held += 1
        self._notify()
        try:
            await self._release.wait()
        finally:
            self.state.held -= 1
            self._notify()
        if self._closed:
            raise TrapClosed()

    def release(self) -> None:
        """Let every held request go; the trap passes what comes next."""
        self.state.released = True
        self._release.set()
        self._notify()

    def close(self) -> None:
        """Fail every held request (the simulator stops)."""
        self._closed = True
        self.release()

    def _notify(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def wait(self, *, hits: int = 1, held: int = 0, timeout: float = 30.0) -> bool:
        """Wait until ``hits`` matches (and ``held`` requests held now); False on timeout."""
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while not (self.state.hits >= hits and self.state.held >= held):
            left = end - loop.time()
            if left <= 0:
                return False
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except TimeoutError:
                return self.state.hits >= hits and self.state.held >= held
        return True


class TrapSet:
    """The traps of one simulator, by id (``t1``, ``t2`` ...). The first armed trap that matches
    acts on a request (in the order they were set); every matching trap counts the hit."""

    def __init__(self) -> None:
        self.traps: dict[str, Trap] = {}
        self._ids = itertools.count(1)
        self._closed = False

    def add(self, spec: TrapSpec) -> Trap:
        """Arm a trap; returns it."""
        trap = Trap(f"t{next(self._ids)}", spec)
        self.traps[trap.state.id] = trap
        return trap

    def release(self, tid: str) -> Trap:
        """Release trap ``tid`` (KeyError if unknown)."""
        trap = self.traps[tid]
        trap.release()
        return trap

    def delete(self, tid: str) -> None:
        """Release and forget trap ``tid`` (KeyError if unknown)."""
        self.traps.pop(tid).release()

    def close(self) -> None:
        """Fail every held request and forget every trap (the simulator stops)."""
        self._closed = True
        for trap in self.traps.values():
            trap.close()
        self.traps.clear()

    def _decide(self, match: list[Trap], request: str) -> tuple[str, Trap | None]:
        chosen: tuple[str, Trap | None] = ("pass", None)
        for trap in match:
            action = trap.take(request)
            if action != "pass" and chosen[1] is None:
                chosen = (action, trap)
        return chosen

    def check_api(self, verb: str, plural: str, group: str, namespace: str, name: str,
                  subresource: str) -> tuple[str, Trap | None]:
        """(action, trap) for an API request: ``pass`` (trap None), ``hold``, ``fail``, ``count``."""
        if not self.traps:
            return "pass", None
        match = [t for t in self.traps.values() if t.spec.matches_api(verb, plural, group, namespace, name, subresource)]
        if not match:
            return "pass", None
        qualified = f"{plural}.{group}" if group else plural
        obj = f"{namespace}/{name}" if namespace and name else (name or namespace)
        sub = f"/{subresource}" if subresource else ""
        return self._decide(match, f"{verb} {qualified}{sub} {obj}".rstrip())

    def check_host(self, host: str, argv: list[str], via: str) -> tuple[str, Trap | None]:
        """(action, trap) for a host command (``argv`` already unwrapped)."""
        if not self.traps:
            return "pass", None
        command = shlex.join(argv)
        match = [t for t in self.traps.values() if t.spec.matches_host(host, command, via)]
        if not match:
            return "pass", None
        return self._decide(match, f"{host}: {command}")
