"""What every procedure's input shares, as nested models validated once at the edge.

A procedure's input model extends :class:`ProcedureInput` and adds its own fields; the parts every
procedure has are sub-models with one name each, so the CLI, an input file (``lockkeeper start
NAME -f input.yaml --set approvals.four_eyes=true``), a composed procedure and the workflow read
the same shape:

- ``cluster``: the cluster's name (search attribute, lease scopes, messages);
- ``approvals``: :class:`workflows.kit.models.ApprovalRules` (who requested it, four-eyes,
  allowed approvers);
- ``gates``: :class:`GatePolicy` (every gate's timeout and what a timeout does);
- ``calls``: :class:`CallTimeouts` (activity start-to-close and heartbeat timeouts);
- ``search_attributes``: upsert LockkeeperStatus on phase changes;
- ``dry_run``: plan and check, change nothing;
- ``report_to``: the workflow ID of a parent procedure this one reports to (a phase of a cluster
  upgrade), None when started on its own;
- ``alerts``: :class:`AlertGatePolicy`, the Prometheus alert gate before each node, batch and
  phase (None: none).

Node procedures pass a :class:`DrainPolicy` to their node runs whole, and take
:data:`MaxUnavailable` (an int >= 1 or ``"N%"``), the same type the CLI parses, and
:data:`NodeOrder` (``node_order``: which node goes first; :func:`workflows.kit.plan.order_nodes`).

Pure pydantic v2; no Temporal import. Unknown fields are refused (``extra="forbid"``): a typo in an
input file is an error at the start, never a default silently taken. Durations are seconds.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from activities.alerts.models import AlertQuery, CheckAlertsInput

from workflows.kit.windows import check_specs
from workflows.kit.models import ApprovalRules, DrainDecision, GateTimeoutOutcome, check_timeout_decision

_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")
_INT = re.compile(r"^\s*(\d+)\s*$")


class Strict(BaseModel):
    """Base of every input model: unknown fields are an error."""

    model_config = ConfigDict(extra="forbid")


class GatePolicy(Strict):
    """How every gate of a procedure waits (DESIGN.md "Gate"): ``timeout_seconds`` None waits
    until somebody decides; otherwise after that many seconds ``timeout_outcome`` applies
    (recorded as a timeout, never as somebody's approval)."""

    timeout_seconds: float | None = Field(None, gt=0)
    timeout_outcome: GateTimeoutOutcome = GateTimeoutOutcome.REJECT


class CallTimeouts(Strict):
    """Activity timeouts, seconds: ``short_call_seconds`` bounds one short API call (a read, a
    patch) so that a call lost with a crashed worker is retried quickly; ``heartbeat_seconds`` is
    the heartbeat timeout of the watching and draining activities (they beat every 2 s);
    ``host_heartbeat_seconds``: the heartbeat timeout of a host command (it beats every 1 s; at
    least ``heartbeat_seconds``) in the procedures whose own default is
    :data:`workflows.kit.host.HOST_HEARTBEAT_SECONDS` (control-plane upgrade, VXLAN port change,
    drain's reboot command); None keeps that default. A test lowers it so that a killed worker's
    host command is judged lost sooner."""

    short_call_seconds: float = Field(10.0, gt=0)
    heartbeat_seconds: float = Field(10.0, gt=0)
    host_heartbeat_seconds: float | None = Field(None, gt=0)


class DrainPolicy(Strict):
    """How a node is drained (DESIGN.md handshake step 3; R2), passed whole to node runs.

    - ``wait_seconds``: one drain pass waits this long for evicted pods to be gone;
    - ``backoff_initial_seconds`` / ``backoff_max_seconds``: between passes while an eviction is
      refused (HTTP 429 from a PodDisruptionBudget);
    - ``decide_after_seconds``: a drain blocked this long opens the decision gate (wait, skip,
      delete-pod, abort); None never asks;
    - ``decision_timeout_seconds`` / ``decision_timeout_outcome``: an unanswered decision gate
      applies wait, skip or abort (never delete-pod);
    - ``timeout_seconds`` with ``on_timeout="proceed"``: give the drain up after that many
      seconds and go on with the pods still on the node (openshift-ansible's
      ``openshift_upgrade_nodes_drain_timeout``); ``on_timeout="gate"`` asks instead.
    """

    wait_seconds: float = Field(10.0, gt=0)
    backoff_initial_seconds: float = Field(2.0, gt=0)
    backoff_max_seconds: float = Field(30.0, gt=0)
    decide_after_seconds: float | None = Field(600.0, gt=0)
    decision_timeout_seconds: float | None = Field(None, gt=0)
    decision_timeout_outcome: Annotated[DrainDecision, BeforeValidator(lambda v: check_timeout_decision(DrainDecision(v)))] = (
        DrainDecision.WAIT
    )
    timeout_seconds: float | None = Field(None, gt=0)
    on_timeout: Literal["gate", "proceed"] = "gate"


def over_defaults(defaults: Callable[[], BaseModel]) -> BeforeValidator:
    """Validator of a nested field whose procedure defaults differ from its model's own (e.g. a
    drain policy with 30 s passes, ``Annotated[DrainPolicy, over_defaults(f)] =
    Field(default_factory=f)``): a partial mapping (an input file's ``drain: {wait_seconds: 5}``,
    a ``--set drain.wait_seconds=5``) keeps ``defaults()``' values for the fields it does not
    give; a model instance passes unchanged. Validation errors are the model's."""

    def merge(value: Any) -> Any:
        return {**defaults().model_dump(), **value} if isinstance(value, dict) else value

    return BeforeValidator(merge)


def parse_max_unavailable(value: object) -> int | str:
    """``maxUnavailable`` as MachineConfigPool.spec and openshift-ansible's ``serial`` take it: an
    integer >= 1 (or its digit string) or a percent ``"N%"`` with 0 < N <= 100, kept as the
    normalised string ``"N%"``. Raises ValueError (the validation error's message) otherwise.

    Source: apimachinery ``intstr.IntOrString`` (``GetScaledValueFromIntOrPercent``)."""
    if isinstance(value, bool):
        raise ValueError(f"invalid maxUnavailable {value!r}: expected an integer >= 1 or a percent like '25%'")
    if isinstance(value, int):
        if value < 1:
            raise ValueError(f"invalid maxUnavailable {value}: must be at least 1")
        return value
    if isinstance(value, float) and value.is_integer():
        return parse_max_unavailable(int(value))
    if isinstance(value, str):
        if m := _INT.match(value):
            return parse_max_unavailable(int(m.group(1)))
        if m := _PERCENT.match(value):
            pct = float(m.group(1))
            if not 0 < pct <= 100:
                raise ValueError(f"invalid maxUnavailable {value!r}: a percent must be above 0 and at most 100")
            return f"{m.group(1)}%"
    raise ValueError(f"invalid maxUnavailable {value!r}: expected an integer >= 1 or a percent like '25%'")


#: An integer >= 1 or ``"N%"``, validated wherever it is read (CLI flag, input file, child input).
MaxUnavailable = Annotated[int | str, BeforeValidator(parse_max_unavailable)]


def resolve_max_unavailable(value: int | str, pool_size: int) -> int:
    """Nodes at a time for ``pool_size`` nodes: a count is used as is; a percent is scaled and
    rounded DOWN (``intstr.GetScaledValueFromIntOrPercent(roundUp=false)``, as the MCO does), then
    raised to at least 1 so a rollout always progresses (MCO ``getMaxUnavailable``). Raises
    ValueError for a value :func:`parse_max_unavailable` refuses."""
    value = parse_max_unavailable(value)
    if isinstance(value, int):
        return value
    return max(1, math.floor(float(value[:-1]) * pool_size / 100))


#: ``node_order`` of a node procedure (the CLI's ``--order`` / ``--node-order FILE``):
#: ``"zone-oldest"`` (the machine-config-controller's: zone label, then creationTimestamp oldest
#: first, then name), ``"oldest-first"``, ``"newest-first"``, or an explicit list of node names
#: (those first, in that order, the rest zone-oldest). Anything else is a validation error.
#: The named values are :data:`workflows.kit.plan.NODE_ORDERS`; the ordering is
#: :func:`workflows.kit.plan.order_nodes`.
NodeOrder = Literal["zone-oldest", "oldest-first", "newest-first"] | list[str]

#: ``windows`` of a node procedure (the CLI's ``--window SPEC``, repeatable): maintenance windows,
#: each ``DAYS HH:MM-HH:MM ZONE`` (:mod:`workflows.kit.windows`); no node starts outside them (a
#: union); empty: always. A spec that does not parse is a validation error naming it.
MaintenanceWindows = Annotated[list[str], AfterValidator(check_specs)]


class AlertGatePolicy(AlertQuery, Strict):
    """How a procedure's alert gate asks and waits (the CLI's ``--alert-gate URL`` and friends).

    - ``url``: Prometheus' base URL (http or https);
    - ``filter``: regex of alert names to IGNORE (kured's ``--alert-filter-regexp``, searched);
    - ``firing_only``: pending alerts do not block (kured's ``--alert-firing-only``); False: they do;
    - ``severities``: only alerts whose ``severity`` label is one of these block; empty: all;
    - ``match_labels``: only alerts carrying all these label values block; empty: all;
    - ``bearer_token_file`` / ``ca_file``: paths on the worker (see
      :class:`activities.alerts.models.CheckAlertsInput`);
    - ``fail_open``: an unreachable Prometheus passes (with a warning) instead of blocking;
    - ``poll_seconds``: between two checks while blocked; ``timeout_seconds``: one check's HTTP
      exchange;
    - ``override``: open the ``proceed`` gate alongside a blocked wait (False: only the alerts
      clearing, or an abort, end it).

    Raises pydantic's ValidationError for a URL that is not http(s), a filter that does not
    compile, an unknown field, or a non-positive duration."""

    fail_open: bool = False
    poll_seconds: float = Field(30.0, gt=0)
    timeout_seconds: float = Field(10.0, gt=0)
    override: bool = True

    def check_input(self) -> CheckAlertsInput:
        """The ``check_alerts`` input of this policy."""
        return self.with_timeout(self.timeout_seconds)


class ProcedureInput(Strict):
    """The fields every procedure's input has (see the module doc)."""

    cluster: str = Field("default", min_length=1)
    approvals: ApprovalRules = Field(default_factory=ApprovalRules)
    gates: GatePolicy = Field(default_factory=GatePolicy)
    calls: CallTimeouts = Field(default_factory=CallTimeouts)
    search_attributes: bool = True
    dry_run: bool = False
    report_to: str | None = None
    #: With ``report_to``: also report each change of step (what it waits for, since, until)
    #: to the parent (a cluster upgrade shows its phase's step). False: only a change of its
    #: waiting gates, error or what stays changed (a campaign, whose history would otherwise
    #: hold a signal per step of every cluster; its status reads the step live from the child).
    report_progress: bool = True
    #: The alert gate: no node, batch or phase starts while Prometheus says the cluster alerts
    #: (:mod:`workflows.kit.alerts`); None: no gate.
    alerts: AlertGatePolicy | None = None
