"""The ``gluster:`` section of a scenario file (pydantic-validated).

Shape (every key optional except ``hosts`` and ``volumes``)::

    gluster:
      namespace: glusterfs                      # where the GlusterFS DaemonSet's pods run
      pod_selector: {glusterfs: storage-pod}    # labels of those pods (o-a glusterfs-template.yml)
      write_rate: 1.0                           # client writes per simulated second, per volume
      heal_rate: 5.0                            # entries healed per simulated second, per replica set
      status_style: upstream                    # or "seed": offline bricks print their port, no pid
      absent_when_pod_down: false               # true: a host without a running pod is a disconnected peer
      hosts:
        - {node: master01.example.com, address: 10.0.0.10, shd_pid: 215}
      volumes:
        - name: glusterfs-registry-volume
          replica: 3
          arbiter: 0                            # 1: the last brick of every replica set is an arbiter
          bricks:
            - 10.0.0.11                          # host only: a heketi-style path is generated
            - {host: 10.0.0.12, path: /var/lib/heketi/mounts/vg_.../brick_.../brick, pid: 204}
      faults:                                   # switched on at start (same shapes as POST /_sim/gluster/fault)
        - {kind: split_brain, volume: glusterfs-registry-volume, n: 1}
      symptoms:                                 # named fault sets, switchable per test
        brick_offline: [{kind: brick_start_failure, volume: glusterfs-registry-volume, brick: 10.0.0.12, immediate: true}]
      enabled_symptoms: [brick_offline]

Paths follow heketi's layout ``/var/lib/heketi/mounts/vg_<32 hex>/brick_<32 hex>/brick``
(procedures-spec §8.4).
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def stable_hex(*parts: str) -> str:
    """32 lowercase hex characters derived from ``parts`` (deterministic across runs)."""
    return hashlib.md5("/".join(parts).encode(), usedforsecurity=False).hexdigest()


def stable_uuid(*parts: str) -> str:
    """A UUID string derived from ``parts`` (deterministic across runs)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "clustersim-gluster/" + "/".join(parts)))


def heketi_brick_path(volume: str, host: str, index: int) -> str:
    """A heketi-style brick path for brick ``index`` of ``volume`` on ``host``."""
    return (f"/var/lib/heketi/mounts/vg_{stable_hex('vg', host)}/"
            f"brick_{stable_hex('brick', volume, host, str(index))}/brick")


class HostCfg(_Strict):
    """A gluster peer: the Node it runs on and the address its bricks were created with."""

    node: str
    address: str
    uuid: str | None = None
    shd_pid: int | None = None  # the self-heal daemon's pid at start (random-looking default)


class BrickCfg(_Strict):
    """One brick: ``host`` is a peer address (or its node name); pid/port at start are optional."""

    host: str
    path: str | None = None
    pid: int | None = None
    port: int | None = None


class VolumeCfg(_Strict):
    """A volume; bricks in ``Brick1..N`` order, consecutive groups of ``replica`` form replica sets."""

    name: str
    id: str | None = None
    replica: int = Field(default=3, ge=1)
    arbiter: int = Field(default=0, ge=0, le=1)
    bricks: list[BrickCfg | str]
    options: dict[str, str] = Field(default_factory=lambda: {
        "transport.address-family": "inet", "nfs.disable": "on"})
    size_gib: float = Field(default=2.0, gt=0)  # each brick's LV (``df -kh`` in the pods)
    used_percent: float = Field(default=3.0, ge=0, le=100)

    @model_validator(mode="after")
    def _shape(self) -> VolumeCfg:
        if len(self.bricks) % self.replica:
            raise ValueError(f"volume {self.name}: {len(self.bricks)} bricks is not a multiple of replica {self.replica}")
        if self.arbiter and self.replica < 3:
            raise ValueError(f"volume {self.name}: an arbiter needs replica 3")
        return self

    def brick_cfgs(self) -> list[BrickCfg]:
        """The bricks as BrickCfg (a bare string is a host)."""
        return [BrickCfg(host=b) if isinstance(b, str) else b for b in self.bricks]


FaultKind = Literal["brick_start_failure", "split_brain", "transaction_in_progress", "glusterd_down", "brick_usage",
                    "clear"]


class FaultCfg(_Strict):
    """A fault (the body of ``POST /_sim/gluster/fault``).

    - ``brick_start_failure``: ``volume``, ``brick`` ("host:/path", a host address or node name),
      ``sticky`` (stays down until ``gluster volume start VOL force``; default one-shot: the next
      start fails, the one after works), ``immediate`` (the brick process dies now, as if its
      last start had failed; a one-shot fault is then already used up).
    - ``split_brain``: ``volume``, ``n`` entries that never heal (on the first replica set).
    - ``transaction_in_progress``: the next ``n`` gluster CLI calls fail with the lock error.
    - ``glusterd_down``: ``host`` (address or node); ``up: true`` brings it back.
    - ``brick_usage``: ``volume`` and ``percent``: every brick of it is that full (``df -kh``;
      openshift-ansible 3.11's check_bricks fails above 96%).
    - ``clear``: removes every armed fault (not split-brain entries already written).
    """

    kind: FaultKind
    volume: str | None = None
    brick: str | None = None
    host: str | None = None
    sticky: bool = False
    immediate: bool = False
    n: int = Field(default=1, ge=0)
    up: bool = False
    percent: float | None = Field(default=None, ge=0, le=100)

    @model_validator(mode="after")
    def _needs(self) -> FaultCfg:
        need = {"brick_start_failure": ("volume", "brick"), "split_brain": ("volume",),
                "glusterd_down": ("host",), "brick_usage": ("volume", "percent")}.get(self.kind, ())
        missing = [k for k in need if getattr(self, k) in (None, "")]
        if missing:
            raise ValueError(f"fault {self.kind} needs {', '.join(missing)}")
        return self


class GlusterSection(_Strict):
    """The whole ``gluster:`` section (see the module docstring)."""

    namespace: str = "glusterfs"
    pod_selector: dict[str, str] = Field(default_factory=lambda: {"glusterfs": "storage-pod"})
    write_rate: float = Field(default=1.0, ge=0)
    heal_rate: float = Field(default=5.0, ge=0)
    status_style: Literal["upstream", "seed"] = "upstream"
    absent_when_pod_down: bool = False
    hosts: list[HostCfg]
    volumes: list[VolumeCfg] = Field(default_factory=list)
    faults: list[FaultCfg] = Field(default_factory=list)
    # Named, switchable fault sets (a scenario's field-report symptoms): ``enabled`` ones are
    # applied at start after ``faults``; others via POST /_sim/gluster/symptom {"name": ...}.
    symptoms: dict[str, list[FaultCfg]] = Field(default_factory=dict)
    enabled_symptoms: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _refs(self) -> GlusterSection:
        unknown = [s for s in self.enabled_symptoms if s not in self.symptoms]
        if unknown:
            raise ValueError(f"enabled_symptoms names unknown symptoms {unknown}; known: {sorted(self.symptoms)}")
        known = {h.address for h in self.hosts} | {h.node for h in self.hosts}
        for v in self.volumes:
            for b in v.brick_cfgs():
                if b.host not in known:
                    raise ValueError(f"volume {v.name}: brick host {b.host!r} is not a gluster host")
        names = [v.name for v in self.volumes]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate volume names: {names}")
        return self


def parse_section(section: dict[str, Any] | None) -> GlusterSection:
    """Validate a ``gluster:`` section. Raises pydantic.ValidationError (a ValueError)."""
    return GlusterSection.model_validate(section or {})
