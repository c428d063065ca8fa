"""What the etcd backup and restore need before their first write, as data (issue 39; the kit
checks them: :meth:`workflows.kit.procedure.ProcedureWorkflow.kit_preflight`).

- Every binary a member's host runs, looked up through the executor the activities use (so the
  check also proves the host can be reached): ``etcdctl`` (snapshot save, member list/add/update,
  health) and ``etcdutl`` (snapshot status and restore, etcd v3.5's offline tool) as the member
  names them, or by name; a local member's bare name is found as the etcd activities find it
  (:func:`activities.host.executors.find_etcd_binary`, ``local_lookup="etcd"``). A restore that
  starts a local ``process`` member also needs its etcd binary.
- The restore takes each member's peer and client ports again when it starts the member: nothing
  but etcd itself may listen there (``ss -Htlnp`` on the member's host; ``owner="etcd"``, the
  member the restore stops first). Ports 2379-2380 are etcd's own (``allow_well_known``).
- The names the operator gave are checked when the input is validated (unique names and URLs,
  the survivor among the members: :func:`workflows.etcd.models.member_problems`); the restore
  adds the read-only host checks of ``etcd_preflight_restore`` (the survivor's data or the
  snapshot, the stop and start methods) as ``input`` checks, one per problem.

Pure functions of the input (deterministic): the workflows call them.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from activities.etcd.models import EtcdMember, ProcessControl
from activities.host.models import ExecBackend
from activities.preflight.models import HostExecutable, InputCheck, PortFree, Precondition


def tool(member: EtcdMember, name: str, why: str) -> HostExecutable:
    """``etcdctl``/``etcdutl`` (``name``) on ``member``'s host, as the activities will run it."""
    given = member.etcdctl if name == "etcdctl" else member.etcdutl
    return HostExecutable(program=given or name, node=member.name, access=member.host, local_lookup="etcd",
                          why=f"{why} ({member.host.describe()})")


def backup_preconditions(members: list[EtcdMember]) -> list[Precondition]:
    """The backup: ``etcdctl`` (snapshot save) and ``etcdutl`` (snapshot status) on every
    member's host."""
    out: list[Precondition] = []
    for m in members:
        out.append(tool(m, "etcdctl", f"etcdctl snapshot save runs there for {m.name}"))
        out.append(tool(m, "etcdutl", f"etcdutl snapshot status checks {m.name}'s snapshot there"))
    return out


def _port(url: str) -> int:
    port = urlsplit(url).port
    assert port is not None  # EtcdMember validates its URLs
    return port


def restore_preconditions(members: list[EtcdMember], survivor: str, snapshot_restore: bool,
                          host_problems: list[str]) -> list[Precondition]:
    """The restore: ``etcdctl`` on every host, ``etcdutl`` on the survivor's (snapshot-restore),
    a local ``process`` member's etcd binary, each member's peer and client ports free of
    anything but etcd, and ``host_problems`` (``etcd_preflight_restore``'s findings) as one
    failed ``input`` check each (one passed check when there are none)."""
    out: list[Precondition] = []
    for m in members:
        out.append(tool(m, "etcdctl", f"the restore runs etcdctl there (member list, add, update, health) for {m.name}"))
        if snapshot_restore and m.name == survivor:
            out.append(tool(m, "etcdutl", f"etcdutl snapshot restore rebuilds {m.name}'s data there"))
        control = m.control
        if isinstance(control, ProcessControl) and m.host.backend == ExecBackend.LOCAL:
            out.append(HostExecutable(program=control.argv[0], node=m.name, access=m.host, local_lookup="etcd",
                                      why=f"the restore starts {m.name} with it"))
        for what, url in (("peer", m.peer_url), ("client", m.client_url)):
            out.append(PortFree(port=_port(url), protocol="tcp", node=m.name, access=m.host, allow_well_known=True,
                                owner="etcd", why=f"the restore starts {m.name} listening on its {what} URL {url}"))
    if host_problems:
        out += [InputCheck(about="etcd preflight on the hosts", ok=False, detail=p,
                           why="read-only checks before any member is stopped") for p in host_problems]
    else:
        out.append(InputCheck(about="etcd preflight on the hosts", ok=True,
                              detail="survivor data or snapshot, stop and start methods checked on every host",
                              why="read-only checks before any member is stopped"))
    return out
