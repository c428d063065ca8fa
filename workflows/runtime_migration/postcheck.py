"""The migration's post-check (procedures-spec §6.3, after all nodes), run by
:class:`workflows.runtime_migration.workflow.RuntimeMigrationWorkflow`.

1. ``rpm -qa`` on the migrated nodes and the peers, and every
   Node object (its roles, kubelet and container-runtime versions), so each migrated node is
   compared with the peers of its own node group (:func:`plan.package_findings`), not with
   every peer.
2. A gated ``yum -y install`` of the missing packages; afterwards each finding says what was
   done about it (``resolved``), and :func:`summary` words the outcome from what is true at the
   end: installed, install refused, install failed, still missing.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.runtime_migration.models import NodeObject, NodeObjectInput
    from workflows.kit import calls as acts
    from workflows.kit.models import GateState, GateTimeoutOutcome
    from workflows.runtime_migration import plan
    from workflows.runtime_migration.models import PackageFinding

INSTALL_GATE = "post-check/install"


# ``wf`` is the RuntimeMigrationWorkflow (typed Any: this module is imported by it).


async def node_groups(wf: Any, nodes: list[str]) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """node → group (its roles, :func:`plan.node_group`) and node → {kubelet, runtime}; a Node
    that is absent gets group "" and no versions."""
    t = wf.timeouts
    groups: dict[str, str] = {}
    versions: dict[str, dict[str, str]] = {}
    for n in nodes:
        obj: NodeObject = await acts.call("read_node_object", NodeObjectInput(node=n), NodeObject, timeouts=t)
        groups[n] = plan.node_group(obj.labels) if obj.exists else ""
        if obj.exists:
            versions[n] = {"kubelet": obj.kubelet_version, "runtime": obj.runtime}
    return groups, versions


async def post_check(wf: Any, baseline: dict[str, dict[str, str]], migrated: list[str]) -> None:
    """Steps 1-2 of the module doc; findings, installs and warnings go to ``wf._status``."""
    try:
        await _post_check(wf, baseline, migrated)
    finally:
        wf._doing("post-check", None)


async def _post_check(wf: Any, baseline: dict[str, dict[str, str]], migrated: list[str]) -> None:
    inp, st = wf._in, wf._status
    peers = st.peers
    wf._doing("post-check", f"reading the packages of {', '.join(migrated)} and their peers {', '.join(peers) or '(none)'}")
    now, bad = await wf._packages([*migrated, *peers])
    st.warnings += bad
    wf._doing("post-check", "reading the node groups and the kubelet and runtime versions")
    groups, versions = await node_groups(wf, [*migrated, *peers])
    st.findings = plan.package_findings(baseline, now, migrated, peers, inp.package_ignore, groups=groups, node_versions=versions)
    wf._doing("post-check", None)
    missing: dict[str, list[str]] = {}
    for f in st.findings:
        if f.kind == "missing":
            missing.setdefault(f.node, []).append(f.package)
    if not missing or not inp.offer_package_install:
        return
    what = "; ".join(f"yum -y install {' '.join(p)} on {n}" for n, p in missing.items())
    gate = await wf.gates.approval(INSTALL_GATE, f"post-check found missing packages: {what}; approve installs them, "
                                   "reject leaves them for later", timeout_seconds=inp.gates.timeout_seconds,
                                   timeout_outcome=GateTimeoutOutcome.REJECT)
    if gate.state != GateState.APPROVED:
        for f in st.findings:
            if f.kind == "missing":
                f.resolved = f"not installed: gate {INSTALL_GATE} {gate.state}"
        wf.touch()
        return
    failed: dict[str, str] = {}
    for n, pkgs in missing.items():
        wf._doing("post-check", f"installing {' '.join(pkgs)} on {n}")
        q = await wf._host(n, ["rpm", "-q", *pkgs])
        todo = plan.packages_installed(q.stdout, pkgs) if q else []
        todo = [p for p in pkgs if p not in todo]
        if todo:
            r = await wf._host(n, ["yum", "-y", "install", *todo])
            if r is None or not r.ok:
                failed[n] = r.summary() if r else "unreachable"
                st.warnings.append(f"install on {n} failed: {failed[n]}")
                continue
        q = await wf._host(n, ["rpm", "-q", *pkgs])
        st.installed[n] = plan.packages_installed(q.stdout, pkgs) if q else []
    by = gate.decided_by or "?"
    for f in st.findings:
        if f.kind != "missing":
            continue
        if f.package in st.installed.get(f.node, []):
            f.resolved = f"installed after gate {INSTALL_GATE} (approved by {by})"
        elif f.node in failed:
            f.resolved = f"install failed: {failed[f.node]}"
        else:
            f.resolved = "still missing after the install"
    wf.touch()


def summary(findings: list[PackageFinding]) -> str:
    """The post-check part of the outcome message, true to the end state: per missing package
    the nodes where it is now installed and those where it is still missing, then the version
    differences. "" when there is nothing to say."""
    parts: list[str] = []
    installed: dict[str, list[str]] = {}
    still: dict[str, list[str]] = {}
    for f in findings:
        if f.kind != "missing":
            continue
        done = f.resolved is not None and f.resolved.startswith("installed")
        (installed if done else still).setdefault(f.package, []).append(f.node)
    for pkg, nodes in installed.items():
        parts.append(f"{pkg} was missing on {', '.join(nodes)} and is installed again")
    for pkg, nodes in still.items():
        parts.append(f"{pkg} missing on {', '.join(nodes)}")
    versions = [f"{f.package} on {f.node}" for f in findings if f.kind == "version"]
    if versions:
        parts.append("version differences within the node group: " + ", ".join(versions))
    return "; ".join(parts)
