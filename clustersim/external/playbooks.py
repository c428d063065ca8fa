"""What the openshift-ansible playbooks R3d and R4 run do to the simulated cluster (spec §8.7).

- ``playbooks/openshift-master/openshift_node_group.yml``: ensures a ConfigMap
  ``openshift-node/<group>`` for every node group the hosts section defines;
- ``playbooks/openshift-node/scaleup.yml``: fails with openshift-ansible's
  ``Detected no new_nodes in inventory. Please add hosts to the new_nodes host group to add
  nodes.`` when ``[new_nodes]`` is empty; otherwise scales each new node up
  (:func:`clustersim.hosts.join.scaleup`) with its ``openshift_node_group_name`` and the runtime
  from ``openshift_use_crio``, adding the GlusterFS node label for hosts in ``[glusterfs]``
  (unless the ``external`` section's ``reapply_gluster_label`` is false: R4 symptom (c));
- ``playbooks/byo/openshift-cluster/upgrades/v3_10/upgrade_nodes.yml`` (any ``upgrade_nodes.yml``)
  with ``-e openshift_upgrade_nodes_label=K=V`` and/or ``-l HOST``: upgrades the kubelets of the
  matching ``[nodes]`` hosts (masters included: the simulator has no separate model of the
  control-plane playbook's "Update master nodes" play) and puts each node in its node group as the
  3.10 upgrade does: every node needs ``openshift_node_group_name`` (o-a
  ``roles/lib_utils/action_plugins/node_group_checks.py``: "openshift_node_group_name must be
  defined for all nodes") and its group's ConfigMap ``openshift-node/<group>`` ("the upgrade
  process will block until you have the required configmaps", o-a README, release-3.10); the
  node gets ``BOOTSTRAP_CONFIG_NAME=<group>`` (``roles/openshift_node/tasks/upgrade/
  bootstrap_changes.yml``), the ConfigMap's ``node-config.yaml``, and the group's
  ``kubeletArguments.node-labels`` on its Node (the ``sync`` DaemonSet of
  ``roles/openshift_node_group/files/sync.yaml`` relabels the node when its config changes:
  infra nodes get ``node-role.kubernetes.io/infra=true``, compute nodes
  ``node-role.kubernetes.io/compute=true``; no label is removed).

Output imitates ansible-playbook's default callback (``TASK [...]``, ``fatal: [host]: FAILED! =>``,
``PLAY RECAP``); exit status 0 on success, 2 when a host failed, 1 for an unknown playbook
(ansible-playbook's codes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import yaml

from clustersim.external.inventory import Inventory, truthy
from clustersim.hosts.join import JoinError
from clustersim.hosts.join import scaleup as join_scaleup
from clustersim.hosts.join import upgrade as join_upgrade

if TYPE_CHECKING:
    from clustersim.hosts.component import HostsComponent
    from clustersim.sim import ClusterSim

NO_NEW_NODES = "Detected no new_nodes in inventory. Please add hosts to the new_nodes host group to add nodes."
GLUSTER_SELECTOR_VAR = "openshift_storage_glusterfs_nodeselector"
DEFAULT_GLUSTER_SELECTOR = "glusterfs=storage-host"
KUBELET_VERSIONS = {"3.9": "v1.9.1+a0ce1bc657", "3.10": "v1.10.0+b81c8f8", "3.11": "v1.11.0+d4cacc0"}
NODE_GROUP_VAR = "openshift_node_group_name"
NO_NODE_GROUP = "openshift_node_group_name must be defined for all nodes"
NODE_CONFIG_KEY = "node-config.yaml"


def missing_group_configmap(group: str) -> str:
    """The failure when node group ``group`` has no ConfigMap yet."""
    return (f"The node group {group} has no ConfigMap openshift-node/{group}: run "
            "playbooks/openshift-master/openshift_node_group.yml first")


def node_config_labels(node_config: str) -> dict[str, str]:
    """The labels of a node group's ``node-config.yaml`` (``kubeletArguments.node-labels``: a
    list of ``k=v[,k=v...]`` strings, as ``openshift_node_group`` writes them). Raises
    ValueError for a config that is not a YAML mapping or a label that is not ``k=v``."""
    doc = yaml.safe_load(node_config) or {}
    if not isinstance(doc, dict):
        raise ValueError("node-config.yaml is not a mapping")
    labels: dict[str, str] = {}
    for item in (doc.get("kubeletArguments") or {}).get("node-labels") or []:
        for pair in str(item).split(","):
            k, eq, v = pair.strip().partition("=")
            if not eq or not k:
                raise ValueError(f"node label {pair!r} is not k=v")
            labels[k] = v
    return labels


@dataclass
class PlayRun:
    """The printed output and outcome of one playbook run."""

    lines: list[str] = field(default_factory=list)
    ok: dict[str, int] = field(default_factory=dict)
    changed: dict[str, int] = field(default_factory=dict)
    failed: dict[str, int] = field(default_factory=dict)

    def task(self, name: str) -> None:
        """Print a ``TASK [name] ***`` header."""
        self.lines += ["", f"TASK [{name}] " + "*" * max(3, 60 - len(name))]

    def result(self, host: str, changed: bool = False, msg: str | None = None) -> None:
        """Record an ok/changed result for ``host`` (with an optional message)."""
        self.ok[host] = self.ok.get(host, 0) + 1
        if changed:
            self.changed[host] = self.changed.get(host, 0) + 1
        word = "changed" if changed else "ok"
        self.lines.append(f"{word}: [{host}]" + (f" => {json.dumps({'msg': msg})}" if msg else ""))

    def fatal(self, host: str, msg: str) -> None:
        """Record a failure of ``host`` in ansible's ``fatal: [h]: FAILED! => {...}`` form."""
        self.failed[host] = self.failed.get(host, 0) + 1
        self.lines.append(f"fatal: [{host}]: FAILED! => " + json.dumps({"changed": False, "msg": msg}))

    def finish(self) -> tuple[str, int]:
        """(stdout, exit code) with the PLAY RECAP."""
        hosts = sorted(set(self.ok) | set(self.failed))
        recap = ["", "PLAY RECAP " + "*" * 60]
        for h in hosts:
            recap.append(f"{h:<26} : ok={self.ok.get(h, 0):<4} changed={self.changed.get(h, 0):<4} "
                         f"unreachable=0    failed={self.failed.get(h, 0):<4}")
        if self.failed:
            self.lines += ["", "NO MORE HOSTS LEFT " + "*" * 50]
        return "\n".join([*self.lines, *recap]) + "\n", 2 if self.failed else 0


def _hosts(sim: ClusterSim) -> HostsComponent | None:
    comp = sim.components.get("hosts")
    return comp  # type: ignore[return-value]


async def node_group(sim: ClusterSim, inv: Inventory, extra: dict[str, str], run: PlayRun) -> None:
    """Create missing node-group ConfigMaps (openshift-node/<group>) with their labels."""
    hosts = _hosts(sim)
    groups = hosts.section.node_groups if hosts is not None else {}
    run.task("openshift_node_group : Create the node group configmaps")
    if sim.store.try_get("namespaces", "openshift-node") is None:
        sim.store.create("namespaces", {"metadata": {"name": "openshift-node"}})
    for name, labels in sorted(groups.items()):
        if sim.store.try_get("configmaps", name, "openshift-node") is not None:
            run.result("localhost")
            continue
        node_labels = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
        cfg = f"kind: NodeConfig\napiVersion: v1\nkubeletArguments:\n  node-labels:\n  - '{node_labels}'\n"
        sim.store.create("configmaps", {"metadata": {"name": name, "namespace": "openshift-node"},
                                        "data": {"node-config.yaml": cfg}})
        run.result("localhost", changed=True)


async def scaleup(sim: ClusterSim, inv: Inventory, extra: dict[str, str], run: PlayRun,
                  reapply_gluster_label: bool = True) -> None:
    """Scale every ``[new_nodes]`` host up (see module docstring)."""
    run.task("Ensure there are new_nodes")
    new_nodes = inv.hosts("new_nodes")
    if not new_nodes:
        run.fatal("localhost", NO_NEW_NODES)
        return
    run.result("localhost")
    hosts = _hosts(sim)
    gluster_hosts = set(inv.hosts("glusterfs"))
    for name in new_nodes:
        run.task("openshift_node : Install node, clients, and conntrack packages")
        if hosts is None or name not in hosts.hosts:
            run.fatal(name, f"Failed to connect to the host via ssh: ssh: Could not resolve hostname {name}")
            continue
        group = inv.var(name, "openshift_node_group_name") or "node-config-compute"
        if sim.store.try_get("configmaps", group, "openshift-node") is None:
            run.fatal(name, missing_group_configmap(group))
            continue
        runtime = "cri-o" if truthy(inv.var(name, "openshift_use_crio")) else "docker"
        labels: dict[str, str] = {}
        if name in gluster_hosts and reapply_gluster_label:
            sel = inv.var(name, GLUSTER_SELECTOR_VAR) or DEFAULT_GLUSTER_SELECTOR
            for part in sel.split(","):
                k, _, v = part.partition("=")
                labels[k.strip()] = v.strip()
        try:
            lines = await join_scaleup(hosts, name, group, runtime, labels, inv.var(name, "openshift_pkg_version"))
        except JoinError as exc:
            run.fatal(name, str(exc))
            continue
        run.result(name, changed=True, msg=lines[0])
        run.task("Approve node certificates when bootstrapping")
        run.result("localhost", changed=True, msg=lines[-1])
        if name in gluster_hosts:
            run.task("openshift_storage_glusterfs : Label GlusterFS nodes")
            if labels:
                run.result(name, changed=True)
            else:
                run.lines.append(f"skipping: [{name}]")


async def upgrade_nodes(sim: ClusterSim, inv: Inventory, extra: dict[str, str], run: PlayRun,
                        limit: list[str] | None = None) -> None:
    """Upgrade the kubelet of the ``[nodes]`` hosts matching ``openshift_upgrade_nodes_label``
    and ``limit``, each into its node group (module docstring)."""
    hosts = _hosts(sim)
    selector = extra.get("openshift_upgrade_nodes_label") or inv.var("", "openshift_upgrade_nodes_label") or ""
    release = extra.get("openshift_release") or inv.group_vars.get("OSEv3", {}).get("openshift_release", "3.10")
    version = KUBELET_VERSIONS.get(release.lstrip("v"), KUBELET_VERSIONS["3.10"])
    wanted = dict(p.split("=", 1) for p in selector.split(",") if "=" in p)
    run.task("Upgrade node services")
    targets = []
    for name in inv.hosts("nodes"):
        node = sim.store.try_get("nodes", name)
        if node is None or (limit and name not in limit):
            continue
        lbls = node["metadata"].get("labels") or {}
        if all(lbls.get(k) == v for k, v in wanted.items()):
            targets.append(name)
    if not targets:
        run.fatal("localhost", f"No nodes matched openshift_upgrade_nodes_label={selector!r}"
                               + (f" and --limit {','.join(limit)}" if limit else ""))
        return
    for name in targets:
        if hosts is None:
            run.fatal(name, "no simulated hosts in this scenario")
            continue
        group = inv.var(name, NODE_GROUP_VAR)
        if not group:
            run.fatal(name, NO_NODE_GROUP)
            continue
        cm = sim.store.try_get("configmaps", group, "openshift-node")
        if cm is None:
            run.fatal(name, missing_group_configmap(group))
            continue
        node_config = str((cm.get("data") or {}).get(NODE_CONFIG_KEY, ""))
        try:
            labels = node_config_labels(node_config)
            lines = await join_upgrade(hosts, name, version, node_group=group, node_config=node_config, labels=labels)
        except (JoinError, ValueError) as exc:
            run.fatal(name, str(exc))
            continue
        run.result(name, changed=True, msg=lines[-1])


def playbook_kind(path: str) -> str | None:
    """"node_group", "scaleup", "upgrade_nodes" or None for a playbook the stand-in does not know."""
    p = path.replace("\\", "/")
    if p.endswith("openshift-master/openshift_node_group.yml"):
        return "node_group"
    if p.endswith("openshift-node/scaleup.yml"):
        return "scaleup"
    if p.endswith("upgrade_nodes.yml"):
        return "upgrade_nodes"
    return None


async def run_playbook(sim: ClusterSim, playbook: str, inv: Inventory, extra: dict[str, str],
                       limit: list[str] | None, options: dict[str, Any]) -> tuple[str, str, int]:
    """Run ``playbook`` against the sim: (stdout, stderr, exit code)."""
    kind = playbook_kind(playbook)
    if kind is None:
        return "", f"ERROR! the playbook: {playbook} could not be found\n", 1
    run = PlayRun(lines=[f"PLAY [{kind}] " + "*" * 60])
    if kind == "node_group":
        await node_group(sim, inv, extra, run)
    elif kind == "scaleup":
        await scaleup(sim, inv, extra, run, reapply_gluster_label=bool(options.get("reapply_gluster_label", True)))
    else:
        await upgrade_nodes(sim, inv, extra, run, limit)
    out, code = run.finish()
    return out, "", code
