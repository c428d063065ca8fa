"""GlusterFS activities: the gluster CLI in a GlusterFS pod through the gateway's exec, and the
pod operations of R3a (procedures-spec §3.2, §3.3).

Activity names (workflows call them by name; ``workflows.shared.glusterfs.calls`` holds the constants):

- ``read_gluster(GlusterReadInput) -> GlusterReport``: inventory (pods of every cluster's
  selector, nodes), then in the first usable pod ``volume list``, ``volume info all --xml``,
  ``volume status all --xml``, ``peer status --xml`` and, when asked, ``volume heal VOL info``
  per replicated started volume. Read-only.
- ``delete_gluster_pod(PodRef) -> DeletePodResult``: delete the pod only while it still has the
  recorded uid and is not terminating; otherwise report ``already_gone`` (a retried or resumed
  delete never deletes a second pod).
- ``find_gluster_replacement(ReplacementInput) -> ReplacementState``: the pod on the node with a
  new uid (the DaemonSet's replacement), and whether the old one is still there.
- ``gluster_volume_start_force(VolumeStartInput) -> VolumeStartResult``:
  ``gluster volume start VOL force`` (restarts only the offline bricks of VOL).

CLI handling (§2.6): ``--mode=script`` on every call (no prompts); ``Another transaction is in
progress`` is retried in the same pod with a doubling backoff; ``Connection failed`` (glusterd
down there) or an exec that cannot start (pod gone, not running) moves to the next pod; when no
pod answers, the activity fails (``GlusterUnavailable``, retryable) or, with no usable pod at
all, ``NoGlusterPod`` (non-retryable). ``heal info`` is read in text form: its XML form carries
no per-entry status, so split-brain entries would need a second call.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.cluster.base import GatewayActivities
from activities.cluster.models import PodRef
from activities.context import beating, fail, heartbeat, log, pause
from activities.gluster.inventory import exec_candidates, gluster_pod, node_addresses
from activities.gluster.models import (
    CommandNote,
    DeletePodResult,
    GlusterPod,
    GlusterReadInput,
    GlusterReport,
    GlusterTarget,
    HealInfo,
    NodeAddresses,
    ReplacementInput,
    ReplacementState,
    VolumeStartInput,
    VolumeStartResult,
)
from activities.gluster.parse import (
    GlusterParseError,
    classify_error,
    parse_heal_info_text,
    parse_peer_status_xml,
    parse_uuid_get,
    parse_volume_info_xml,
    parse_volume_list,
    parse_volume_status_xml,
    xml_error,
)
from activities.kube.errors import KubeError, NotFound

if TYPE_CHECKING:
    from activities.kube.gateway import KubeGateway

GLUSTER = ["gluster", "--mode=script"]


class CliAnswer:
    """What one CLI call returned in a pod: stdout, stderr, exit code."""

    def __init__(self, pod: str, stdout: str, stderr: str, exit_code: int | None) -> None:
        self.pod, self.stdout, self.stderr, self.exit_code = pod, stdout, stderr, exit_code

    @property
    def text(self) -> str:
        return (self.stdout + "\n" + self.stderr).strip()


class GlusterCli:
    """Runs ``gluster`` commands in the first usable pod of ``pods`` (see the module doc).

    ``notes`` collects one :class:`CommandNote` per command. Raises ApplicationError
    ``GlusterUnavailable`` (retryable) when every pod failed, ``GlusterBusy`` (retryable) when
    the lock error outlasts ``attempts``."""

    def __init__(self, gateway: KubeGateway, namespace: str, pods: list[GlusterPod], *, attempts: int = 5,
                 backoff: float = 2.0, max_backoff: float = 10.0, timeout: float = 120.0,
                 notes: builtins.list[CommandNote] | None = None, sleep: Callable[[float], None] = pause) -> None:
        self.gateway, self.namespace, self.pods = gateway, namespace, list(pods)
        self.attempts, self.backoff, self.max_backoff, self.timeout = attempts, backoff, max_backoff, timeout
        self.notes = notes if notes is not None else []
        self.sleep = sleep
        self.current: GlusterPod | None = self.pods[0] if self.pods else None

    def _exec(self, pod: GlusterPod, argv: builtins.list[str]) -> CliAnswer:
        with beating({"pod": pod.name, "argv": argv[len(GLUSTER):], "running": True}):  # heal info can take minutes
            out = self.gateway.exec_in_pod(self.namespace, pod.name, argv, timeout=self.timeout)
        return CliAnswer(pod.name, out.stdout.decode("utf-8", "replace"), out.stderr.decode("utf-8", "replace"),
                         out.exit_code)

    def run(self, args: builtins.list[str]) -> CliAnswer:
        """``gluster --mode=script ARGS`` in the current pod (moving on as needed). Returns the
        answer of the first pod whose glusterd answered, whatever its exit code (the caller
        parses it: ``heal info`` answers volume errors with exit 1)."""
        argv = GLUSTER + args
        errors: builtins.list[str] = []
        for pod in self._order():
            note = CommandNote(pod=pod.name, argv=argv, attempts=0)
            self.notes.append(note)
            delay = self.backoff
            while True:
                note.attempts += 1
                heartbeat({"pod": pod.name, "argv": args, "attempt": note.attempts})
                try:
                    ans = self._exec(pod, argv)
                except KubeError as exc:  # pod gone, not running, no host assigned: try the next one
                    note.error = f"exec failed: {exc}"
                    break
                if ans.exit_code is None:
                    note.error = f"timed out after {self.timeout:.0f}s"
                    break
                kind = classify_error(ans.text + "\n" + (xml_error(ans.stdout) or ""))
                if kind == "transaction" and note.attempts < self.attempts:
                    log().info("gluster %s in %s: another transaction is in progress; retrying in %.1fs", args, pod.name, delay)
                    with beating({"pod": pod.name, "argv": args, "retry_in": delay}):  # a back-off may outlast the heartbeat timeout
                        self.sleep(delay)
                    delay = min(self.max_backoff, delay * 2)
                    continue
                if kind == "transaction":
                    note.error = ans.text
                    raise fail("GlusterBusy", f"gluster {' '.join(args)}: {ans.text} (after {note.attempts} attempts)", retryable=True)
                if kind == "connection":
                    note.error = ans.text
                    break
                self.current = pod
                return ans
            errors.append(f"{pod.name}: {note.error}")
        raise fail("GlusterUnavailable", f"gluster {' '.join(args)}: no GlusterFS pod answered ({'; '.join(errors) or 'no pods'})",
                   retryable=True)

    def _order(self) -> builtins.list[GlusterPod]:
        if self.current is None:
            return self.pods
        i = self.pods.index(self.current)
        return self.pods[i:] + self.pods[:i]

    def ok(self, args: builtins.list[str]) -> str:
        """:meth:`run` that must succeed: returns stdout; raises ``GlusterPeerError`` (retryable:
        ``Locking/Staging failed on <host>``) or ``GlusterCommandFailed`` (non-retryable) with
        the CLI's words otherwise."""
        ans = self.run(args)
        err = xml_error(ans.stdout)
        if ans.exit_code != 0 or err:
            words = f"gluster {' '.join(args)} in {ans.pod}: {err or ans.text or f'exit {ans.exit_code}'}"
            if classify_error(words) == "peer":  # Locking/Staging failed on <host>: a peer problem that may pass
                raise fail("GlusterPeerError", words, retryable=True)
            raise fail("GlusterCommandFailed", words)
        return ans.stdout


class GlusterActivities(GatewayActivities):
    """The GlusterFS activities over one gateway (see the module doc). Synchronous: run them
    on the worker's thread pool."""

    ACTIVITIES: ClassVar[tuple[str, ...]] = (
        "read_gluster", "delete_gluster_pod", "find_gluster_replacement", "gluster_volume_start_force",
    )

    # --- inventory ---------------------------------------------------------------------------------

    def _pods(self, target: GlusterTarget) -> builtins.list[GlusterPod]:
        pods: dict[str, GlusterPod] = {}
        for sel in target.selectors():
            for obj in self.gateway.list_pods(target.namespace, label_selector=sel):
                p = gluster_pod(obj)
                pods[p.uid or p.name] = p
        return sorted(pods.values(), key=lambda p: p.name)

    def _nodes(self) -> builtins.list[NodeAddresses]:
        return [node_addresses(n) for n in self.gateway.list_nodes()]

    def _cli(self, target: GlusterTarget, pods: builtins.list[GlusterPod], nodes: builtins.list[NodeAddresses],
             notes: builtins.list[CommandNote], **kw: Any) -> GlusterCli:
        usable = exec_candidates(pods, nodes, target.exclude_node)
        if not usable:
            raise fail("NoGlusterPod", f"no suitable gluster pod found in namespace {target.namespace} "
                                       f"({', '.join(target.selectors())}; Running, Ready, on a Ready node"
                                       + (f", not on {target.exclude_node}" if target.exclude_node else "") + ")")
        return GlusterCli(self.gateway, target.namespace, usable, notes=notes, **kw)

    # --- activities --------------------------------------------------------------------------------

    @activity.defn(name="read_gluster", no_thread_cancel_exception=True)
    def read_gluster(self, input: GlusterReadInput) -> GlusterReport:
        """Read the GlusterFS state (see the module doc). Raises ``NoGlusterPod``,
        ``GlusterUnavailable``, ``GlusterBusy``, ``GlusterCommandFailed`` or ``GlusterParseError``;
        an API error listing the pods or nodes as its retryable ``Api*`` type (``planning_errors``)."""
        t = input.target
        with self.planning_errors(policy_decides=True):  # Api* types; the caller's retry policy decides
            report = GlusterReport(at=datetime.now(UTC), pods=self._pods(t), nodes=self._nodes())
        cli = self._cli(t, report.pods, report.nodes, report.calls, attempts=input.attempts, backoff=input.backoff_seconds,
                        max_backoff=input.max_backoff_seconds, timeout=input.command_timeout_seconds)
        try:
            names = cli.run(["volume", "list"])
            if names.exit_code != 0 and classify_error(names.text) != "no-volumes":
                raise fail("GlusterCommandFailed", f"gluster volume list in {names.pod}: {names.text or f'exit {names.exit_code}'}")
            report.volume_names = parse_volume_list(names.text)
            if report.volume_names:
                report.info = parse_volume_info_xml(cli.ok(["volume", "info", "all", "--xml"]))
                report.status = parse_volume_status_xml(cli.ok(["volume", "status", "all", "--xml"]))
            report.peers = parse_peer_status_xml(cli.ok(["peer", "status", "--xml"]))
            if _unmapped_hosts(report):
                report.pod_uuids = self._pod_uuids(report, cli)
            if input.heal:
                wanted = input.heal_volumes
                for vi in report.info:
                    if wanted is not None and vi.name not in wanted:
                        continue
                    if not vi.replicated:
                        report.heal[vi.name] = HealInfo(volume=vi.name, skipped=f"not replicated (Type: {vi.type or 'Distribute'})")
                    elif vi.status not in ("", "Started"):
                        report.heal[vi.name] = HealInfo(volume=vi.name, skipped=f"volume {vi.status}")
                    else:
                        ans = cli.run(["volume", "heal", vi.name, "info"])
                        report.heal[vi.name] = parse_heal_info_text(vi.name, ans.text)
        except GlusterParseError as exc:
            raise fail("GlusterParseError", f"unreadable gluster output: {exc}") from None
        report.exec_pod = cli.current.name if cli.current else ""
        report.exec_node = cli.current.node if cli.current else ""
        return report

    def _pod_uuids(self, report: GlusterReport, cli: GlusterCli) -> dict[str, str]:
        """``gluster system:: uuid get`` in every usable pod: which glusterd runs where."""
        out: dict[str, str] = {}
        for pod in cli.pods:
            one = GlusterCli(self.gateway, cli.namespace, [pod], attempts=cli.attempts, backoff=cli.backoff,
                             max_backoff=cli.max_backoff, timeout=cli.timeout, notes=report.calls, sleep=cli.sleep)
            try:
                uuid = parse_uuid_get(one.run(["system::", "uuid", "get"]).stdout)
            except ApplicationError:  # that pod's glusterd is down: its bricks show as offline anyway
                continue
            if uuid:
                out[pod.name] = uuid
        return out

    @activity.defn(name="delete_gluster_pod", no_thread_cancel_exception=True)
    def delete_gluster_pod(self, input: PodRef) -> DeletePodResult:
        """Delete ``input.name`` only if it still is ``input.uid`` and not terminating.

        The check and the DELETE are two requests; the window between them only matters if the
        pod was replaced under the same name in between, which a DaemonSet never does (its
        replacements get new names)."""
        gw = self.gateway
        try:
            obj = gw.get_pod(input.namespace, input.name)
        except NotFound:
            return DeletePodResult(already_gone=True, detail=f"pod {input.name} is gone")
        pod = gluster_pod(obj)
        if pod.uid != input.uid:
            return DeletePodResult(already_gone=True, detail=f"pod {input.name} now has uid {pod.uid}, not {input.uid}")
        if pod.terminating:
            return DeletePodResult(already_gone=True, detail=f"pod {input.name} ({input.uid}) is already terminating")
        try:
            gw.delete_pod(input.namespace, input.name)
        except NotFound:
            return DeletePodResult(already_gone=True, detail=f"pod {input.name} is gone")
        log().info("deleted GlusterFS pod %s/%s (uid %s)", input.namespace, input.name, input.uid)
        return DeletePodResult(deleted=True, detail=f"deleted pod {input.name} ({input.uid})")

    @activity.defn(name="find_gluster_replacement", no_thread_cancel_exception=True)
    def find_gluster_replacement(self, input: ReplacementInput) -> ReplacementState:
        """The pods of the target on ``input.node``: a replacement (new uid; the healthy, then
        newest, first) and whether the old uid is still present."""
        pods = [p for p in self._pods(input.target) if p.node == input.node]
        new = [p for p in pods if p.uid != input.old_uid]
        new.sort(key=lambda p: (not p.healthy, -(p.created_at.timestamp() if p.created_at else 0), p.name))
        return ReplacementState(replacement=new[0] if new else None, old_present=any(p.uid == input.old_uid for p in pods))

    @activity.defn(name="gluster_volume_start_force", no_thread_cancel_exception=True)
    def gluster_volume_start_force(self, input: VolumeStartInput) -> VolumeStartResult:
        """``gluster volume start VOL force`` in a usable pod; ``ok`` when the CLI said success."""
        pods, nodes = self._pods(input.target), self._nodes()
        cli = self._cli(input.target, pods, nodes, [], attempts=input.attempts, backoff=input.backoff_seconds)
        ans = cli.run(["volume", "start", input.volume, "force"])
        ok = ans.exit_code == 0 and "success" in ans.stdout
        return VolumeStartResult(pod=ans.pod, output=ans.text, ok=ok)


def _unmapped_hosts(report: GlusterReport) -> set[str]:
    """Brick hosts that match no pod IP, host IP, node name or node address."""
    known = {p.pod_ip for p in report.pods} | {p.host_ip for p in report.pods}
    known |= {n.name for n in report.nodes} | {a for n in report.nodes for a in n.addresses}
    return {b.host for v in report.info for b in v.bricks} - known


def make_gluster_activities(gateway: KubeGateway | Callable[[], KubeGateway]) -> builtins.list[Callable[..., Any]]:
    """The GlusterFS activities for a Worker, bound to ``gateway`` (or a factory)."""
    factory = (lambda: gateway) if hasattr(gateway, "get_node") else gateway
    return GlusterActivities(factory).activities()  # type: ignore[arg-type]
