"""Settings of every lockkeeper process (CLI, worker, demo), read from the environment.

Names: ``LOCKKEEPER_<FIELD>`` for everything, and the conventional names other tools use
(``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``, ``TEMPORAL_API_KEY``, ``TEMPORAL_TLS_CERT``,
``TEMPORAL_TLS_KEY``, ``KUBECONFIG``, ``KUBE_CONTEXT``) as aliases, so an operator's existing
shell works unchanged. ``LOCKKEEPER_`` names win when both are set.

Secrets (the Temporal API key) are :class:`pydantic.SecretStr`: their ``repr`` is masked, and
they are only read in :func:`workers.client.connect`. They never go into workflow input.

Validation errors are raised as :class:`SettingsError` with one human line per problem, naming
the variable and, for files, the path.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_TASK_QUEUE = "lockkeeper"
#: The Temporal worker deployment every lockkeeper worker belongs to, unless
#: ``LOCKKEEPER_DEPLOYMENT_NAME`` says otherwise (:mod:`workers.versioning`).
DEFAULT_DEPLOYMENT_NAME = "lockkeeper"
#: The build ID Temporal reserves for "no version" (a deployment's current version when none is).
UNVERSIONED = "__unversioned__"


class SettingsError(ValueError):
    """Settings are invalid; ``str()`` is a message for people, one problem per line."""


def _aliases(field: str, *plain: str) -> AliasChoices:
    return AliasChoices(f"LOCKKEEPER_{field.upper()}", *plain)


class Settings(BaseSettings):
    """Where Temporal and the cluster are, and how to authenticate to them.

    Fields:
    - ``temporal_address``: ``host:port`` of the Temporal frontend (gRPC), default ``localhost:7233``.
    - ``temporal_namespace``: default ``default``.
    - ``temporal_api_key``: Temporal Cloud API key (implies TLS).
    - ``temporal_tls_cert`` / ``temporal_tls_key``: client certificate and key (PEM files) for mTLS;
      both or neither. ``temporal_tls_ca``: server CA (PEM), optional. ``temporal_tls_server_name``:
      the name to verify the server's certificate against (SNI) when it differs from the host
      of ``temporal_address`` (e.g. a port-forward or a proxy). With a client certificate the
      CLI's identity is the certificate's subject CN (:func:`workers.client.certificate_identity`).
    - ``temporal_tls``: force TLS without a client certificate.
    - ``task_queue``: the worker's and the client's task queue, default ``lockkeeper``.
    - ``kubeconfig``: path to a kubeconfig file (``KUBECONFIG``; only the first entry of a
      ``:``-separated list is used); ``kube_context``: context name in it.
    - ``in_cluster``: use the pod's service account instead of a kubeconfig.
    - ``ssh_sudo``: host commands over SSH go through ``sudo -n`` (default: for any SSH user but
      ``root``; see :func:`activities.host.factory.ssh_sudo`).
    - ``cluster``: the name lockkeeper uses for the cluster in workflow IDs and search attributes.
    - ``cluster_queues``: per-cluster task queues (issue 38, ``LOCKKEEPER_CLUSTER_QUEUES``; the
      worker's ``--cluster NAME`` sets it): a worker polls ``<task_queue>-<cluster>``
      (:func:`cluster_task_queue`) with that cluster's credentials only, and ``lockkeeper start``
      puts a procedure for cluster C on ``<task_queue>-C``. Off (default): one queue,
      ``task_queue``, as before. A campaign (``ProcedureSpec.central``) stays on ``task_queue``.
    - ``max_concurrent_activities``: worker thread pool size (sync activities, local ones
      included) and the Kubernetes connection pool's size, default 200. Every node in flight holds
      one thread in a watch (``wait_for_node``) or a drain, and a 2,000-node pool at
      maxUnavailable 10% has 200 in flight; with 50 threads a 600-node rollout (60 in flight) queued
      its short calls behind the watches (issue 16: 147 s against 171 s with 50).
    - ``max_concurrent_local_activities``: the short calls node runs make as local activities
      (:func:`workflows.kit.calls.call`), default 200. They get threads of their own on top of the
      activities' (:func:`activity_threads`), so a local call never waits for a watch to end. A
      node run's workflow task stays open while its local calls wait for a slot: with 50 slots,
      50 rollouts of 10 nodes on one worker had a reaction p99 of 58 s, with 200 of 1.95 s.
    - ``hand_off_waits``: a node's reboot wait (``wait_for_node_done``, ``wait_node_ready``) and
      its wait for the daemon's drain request and the evicted pods (``drain_when_asked``) are
      handed to one shared watch of all Nodes and completed asynchronously, so they hold no
      activity slot (default
      true; issue 40: ``benchmarks/fairness.py --no-hand-off`` measures the difference). False
      watches inside each activity, one slot per node in flight.
    - ``worker_role``: ``all`` (default) serves workflows and activities in one process;
      ``workflows`` serves workflow tasks and the node runs' local activities only (it polls no
      activity task); ``activities`` serves activity tasks only. Run one of each (or several) on
      the same task queue to give the workflow code a Python interpreter (GIL) of its own: on one
      process, 200 threads of watches and drains share it with 200 node runs at 2,000 nodes
      (issue 16; docs/production.md has what it measured on two cores).
    - ``workflow_task_pollers`` / ``activity_task_pollers``: how many polls for workflow tasks /
      activity tasks the worker keeps open at once (0: scaled by the server's feedback, the
      SDK's ``PollerBehaviorAutoscaling``); default 5, the SDK's.
    - ``graceful_shutdown_seconds``: how long a stopping worker lets running activities finish.
    - ``metrics_port``: worker only; serve Prometheus metrics (the Temporal SDK's and lockkeeper's,
      see :mod:`workers.metrics`) on ``listen_host:metrics_port`` at ``/metrics``. Off when unset.
    - ``health_port``: worker only; serve ``/healthz`` and ``/readyz`` (see :mod:`workers.health`)
      on ``listen_host:health_port``. Off when unset. ``listen_host``: default ``0.0.0.0``.
    - ``log_level``, ``log_format`` (``auto`` = console on a terminal, JSON otherwise).
    - ``decision_timeout``: CLI only; seconds an operator update (approve, reject, decide,
      pause, ...) waits for a worker's answer, default 30. The update's deadline is about then;
      a worker that picks it up later refuses it, so no answer means nothing was decided.
    - ``versioning``: worker deployment versioning (:mod:`workers.versioning`), default on: the
      worker declares ``deployment_name`` and ``build_id`` and every workflow it runs is PINNED
      to the build it started on. ``LOCKKEEPER_VERSIONING=false`` for a server without worker
      deployments (before Temporal 1.29.1, or ``system.enableDeploymentVersions`` off): the
      worker then runs unversioned and history-changing edits need ``workflow.patched`` again.
    - ``deployment_name``: the worker deployment, default ``lockkeeper`` (no ``.``: Temporal
      joins name and build ID with one). Every lockkeeper worker of a namespace shares it.
    - ``build_id``: the build this worker's code is; default :func:`default_build_id` (the
      installed lockkeeper package's version). Every process of one release (both roles, the
      host-only workers) must carry the same build ID, and two releases never the same one.
    - ``promote``: worker only; ``auto`` (default) makes this build the deployment's current
      version when the deployment has never had one (a fresh namespace: the first worker just
      works), ``never`` leaves that to ``lockkeeper deployment promote``. A later build never
      becomes current by itself.
    """

    model_config = SettingsConfigDict(
        env_prefix="LOCKKEEPER_",
        populate_by_name=True,
        extra="ignore",
        validate_default=True,
    )

    temporal_address: str = Field(
        "localhost:7233", validation_alias=_aliases("temporal_address", "TEMPORAL_ADDRESS")
    )
    temporal_namespace: str = Field(
        "default", validation_alias=_aliases("temporal_namespace", "TEMPORAL_NAMESPACE")
    )
    temporal_api_key: SecretStr | None = Field(
        None, validation_alias=_aliases("temporal_api_key", "TEMPORAL_API_KEY")
    )
    temporal_tls: bool = Field(False, validation_alias=_aliases("temporal_tls", "TEMPORAL_TLS"))
    temporal_tls_cert: Path | None = Field(
        None, validation_alias=_aliases("temporal_tls_cert", "TEMPORAL_TLS_CERT")
    )
    temporal_tls_key: Path | None = Field(
        None, validation_alias=_aliases("temporal_tls_key", "TEMPORAL_TLS_KEY")
    )
    temporal_tls_ca: Path | None = Field(
        None, validation_alias=_aliases("temporal_tls_ca", "TEMPORAL_TLS_CA")
    )
    temporal_tls_server_name: str | None = Field(None, validation_alias=_aliases("temporal_tls_server_name"))
    task_queue: str = Field(DEFAULT_TASK_QUEUE, validation_alias=_aliases("task_queue"))
    kubeconfig: Path | None = Field(None, validation_alias=_aliases("kubeconfig", "KUBECONFIG"))
    kube_context: str | None = Field(None, validation_alias=_aliases("kube_context", "KUBE_CONTEXT"))
    in_cluster: bool = Field(False, validation_alias=_aliases("in_cluster"))
    #: A worker for host procedures only (etcd, node commands), e.g. on a bastion host: it needs
    #: no cluster credentials and registers no Kubernetes activities. Give it its own task queue.
    host_only: bool = Field(False, validation_alias=_aliases("host_only"))
    #: Checked here so a bad value fails the worker's start with the other problems; the executors
    #: read it themselves (activities.host.factory.ssh_sudo: None = sudo for any user but root).
    ssh_sudo: bool | None = Field(None, validation_alias=_aliases("ssh_sudo"))
    cluster: str = Field("default", validation_alias=_aliases("cluster"))
    cluster_queues: bool = Field(False, validation_alias=_aliases("cluster_queues"))
    max_concurrent_activities: int = Field(200, ge=1, validation_alias=_aliases("max_concurrent_activities"))
    max_concurrent_local_activities: int = Field(
        200, ge=1, validation_alias=_aliases("max_concurrent_local_activities")
    )
    hand_off_waits: bool = Field(True, validation_alias=_aliases("hand_off_waits"))
    worker_role: Literal["all", "workflows", "activities"] = Field("all", validation_alias=_aliases("worker_role"))
    workflow_task_pollers: int = Field(5, ge=0, le=1000, validation_alias=_aliases("workflow_task_pollers"))
    activity_task_pollers: int = Field(5, ge=0, le=1000, validation_alias=_aliases("activity_task_pollers"))
    graceful_shutdown_seconds: float = Field(
        30.0, ge=0, validation_alias=_aliases("graceful_shutdown_seconds")
    )
    metrics_port: int | None = Field(None, ge=1, le=65535, validation_alias=_aliases("metrics_port"))
    health_port: int | None = Field(None, ge=1, le=65535, validation_alias=_aliases("health_port"))
    listen_host: str = Field("0.0.0.0", validation_alias=_aliases("listen_host"))
    log_level: str = Field("info", validation_alias=_aliases("log_level"))
    log_format: str = Field("auto", validation_alias=_aliases("log_format"))
    decision_timeout: float = Field(30.0, gt=0, le=3600, validation_alias=_aliases("decision_timeout"))
    versioning: bool = Field(True, validation_alias=_aliases("versioning"))
    deployment_name: str = Field(DEFAULT_DEPLOYMENT_NAME, validation_alias=_aliases("deployment_name"))
    #: Empty (unset) is replaced with :func:`default_build_id` while validating.
    build_id: str = Field("", validation_alias=_aliases("build_id"))
    promote: Literal["auto", "never"] = Field("auto", validation_alias=_aliases("promote"))

    @field_validator("ssh_sudo", mode="before")
    @classmethod
    def _unset_when_empty(cls, v: object) -> object:
        return None if isinstance(v, str) and not v.strip() else v

    @field_validator("temporal_address")
    @classmethod
    def _host_port(cls, v: str) -> str:
        host, sep, port = v.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"TEMPORAL_ADDRESS must be host:port (e.g. localhost:7233), got {v!r}")
        return v

    @field_validator("kubeconfig", mode="before")
    @classmethod
    def _first_kubeconfig(cls, v: Any) -> Any:
        # KUBECONFIG may be a list like PATH; kubectl merges them, we use the first existing one.
        if isinstance(v, str):
            parts = [p for p in v.split(os.pathsep) if p]
            if not parts:
                return None
            existing = [p for p in parts if Path(p).expanduser().exists()]
            return Path((existing or parts)[0]).expanduser()
        return v

    @field_validator("log_level")
    @classmethod
    def _level(cls, v: str) -> str:
        if v.lower() not in ("debug", "info", "warning", "error", "critical"):
            raise ValueError(f"log level must be debug|info|warning|error|critical, got {v!r}")
        return v.lower()

    @field_validator("log_format")
    @classmethod
    def _format(cls, v: str) -> str:
        if v.lower() not in ("auto", "console", "json"):
            raise ValueError(f"log format must be auto|console|json, got {v!r}")
        return v.lower()

    @field_validator("deployment_name")
    @classmethod
    def _deployment_name(cls, v: str) -> str:
        v = v.strip()
        if not v or "." in v or len(v) > 255:
            raise ValueError(f"a deployment name is 1 to 255 characters without '.', got {v!r}")
        return v

    @field_validator("build_id", mode="before")
    @classmethod
    def _build_id(cls, v: object) -> object:
        if v is None or (isinstance(v, str) and not v.strip()):
            return default_build_id()
        if isinstance(v, str):
            v = v.strip()
            if v == UNVERSIONED or len(v) > 255:
                raise ValueError(f"a build ID is 1 to 255 characters and not {UNVERSIONED!r}, got {v!r}")
        return v

    @model_validator(mode="after")
    def _check_files(self) -> Settings:
        problems: list[str] = []
        if (self.temporal_tls_cert is None) != (self.temporal_tls_key is None):
            missing = "TEMPORAL_TLS_KEY" if self.temporal_tls_key is None else "TEMPORAL_TLS_CERT"
            problems.append(f"TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY go together: {missing} is not set")
        for name, path in (
            ("TEMPORAL_TLS_CERT", self.temporal_tls_cert),
            ("TEMPORAL_TLS_KEY", self.temporal_tls_key),
            ("TEMPORAL_TLS_CA", self.temporal_tls_ca),
        ):
            if path is not None and not path.is_file():
                problems.append(f"{name}: file {path} does not exist")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def uses_tls(self) -> bool:
        """TLS is on with a client certificate, an API key (Temporal Cloud) or when forced."""
        return (
            self.temporal_tls
            or self.temporal_tls_cert is not None
            or self.temporal_api_key is not None
            or self.temporal_tls_ca is not None
            or self.temporal_tls_server_name is not None
        )

    def queue_for(self, cluster: str | None = None) -> str:
        """The task queue of a procedure for ``cluster`` (default: this process' ``cluster``):
        ``<task_queue>-<cluster>`` with ``cluster_queues``, else ``task_queue``."""
        return cluster_task_queue(self.task_queue, cluster or self.cluster) if self.cluster_queues else self.task_queue

    def for_worker(self) -> Settings:
        """The settings a worker polls with: with ``cluster_queues``, ``task_queue`` is its
        cluster's own queue (:meth:`queue_for`); otherwise these settings unchanged."""
        if not self.cluster_queues:
            return self
        return self.model_copy(update={"task_queue": self.queue_for(), "cluster_queues": False})

    def check_kubeconfig(self) -> None:
        """Validate the cluster credentials source; the worker calls this before it starts.

        Raises :class:`SettingsError` when the kubeconfig is missing, not YAML, not a kubeconfig
        (no ``clusters``/``contexts``), or lacks ``kube_context``. The message names the file.
        In-cluster mode needs the service account token file instead.
        """
        if self.in_cluster:
            token = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
            if not token.is_file():
                raise SettingsError(f"in-cluster mode: service account token {token} does not exist")
            return
        path = self.kubeconfig or Path("~/.kube/config").expanduser()
        if not path.is_file():
            raise SettingsError(f"KUBECONFIG: file {path} does not exist")
        import yaml  # lazy: the CLI's --help should not pay for it

        try:
            doc = yaml.safe_load(path.read_text())
        except yaml.YAMLError as exc:
            raise SettingsError(f"KUBECONFIG: file {path} is not valid YAML: {exc}") from None
        except OSError as exc:
            raise SettingsError(f"KUBECONFIG: cannot read {path}: {exc}") from None
        if not isinstance(doc, dict) or not doc.get("clusters") or not doc.get("contexts"):
            raise SettingsError(f"KUBECONFIG: file {path} is not a kubeconfig (no clusters or contexts)")
        if self.kube_context:
            names = [c.get("name") for c in doc.get("contexts") or [] if isinstance(c, dict)]
            if self.kube_context not in names:
                raise SettingsError(
                    f"KUBE_CONTEXT: context {self.kube_context!r} not in {path} (has {', '.join(map(str, names))})"
                )

    def safe_dict(self) -> dict[str, Any]:
        """Settings for logs: secrets shown only as set/unset."""
        d = self.model_dump(mode="json")
        d["temporal_api_key"] = "***" if self.temporal_api_key else None
        return d


def cluster_task_queue(base: str, cluster: str) -> str:
    """The task queue of cluster ``cluster``'s workers: ``<base>-<cluster>`` (issue 38), e.g.
    ``lockkeeper-prod-eu``. Raises ValueError for an empty cluster name."""
    if not cluster:
        raise ValueError("a per-cluster task queue needs a cluster name")
    return f"{base}-{cluster}"


def default_build_id() -> str:
    """The build ID of a worker that sets no ``LOCKKEEPER_BUILD_ID``: the version of the installed
    ``lockkeeper`` distribution (``importlib.metadata``, e.g. ``0.1.0``).

    The rule: the package version names the workflow code, so every release that changes a
    workflow gets a new version and its workers are a new build; between releases (a fix shipped
    as a new image of the same version) set ``LOCKKEEPER_BUILD_ID`` to something that changes with
    the code, e.g. the image tag or the git commit. Not the SDK's own default
    (``temporalio.worker.load_default_build_id``, a hash of every loaded module): it differs between
    the ``workflows`` and ``activities`` processes of one release and with every dependency bump.
    Raises ValueError when lockkeeper is not installed (a source tree on ``PYTHONPATH``): set
    ``LOCKKEEPER_BUILD_ID`` then.
    """
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lockkeeper")
    except PackageNotFoundError:
        raise ValueError(
            "the lockkeeper package is not installed, so it has no version to use as the build ID: "
            "set LOCKKEEPER_BUILD_ID"
        ) from None


def load_settings(**overrides: Any) -> Settings:
    """Read settings from the environment, ``overrides`` (CLI flags; ``None`` values ignored) win.

    Raises :class:`SettingsError` with one line per invalid setting.
    """
    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        return Settings(**given)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"]) or "settings"
            msg = err["msg"].removeprefix("Value error, ")
            lines.append(f"{loc}: {msg}" if err["loc"] else msg)
        raise SettingsError("invalid settings:\n  " + "\n  ".join(lines)) from None


def activity_threads(settings: Settings) -> int:
    """Threads (and Kubernetes connections) a worker needs: one per activity slot and one per
    local activity slot, so a local call never waits for a watch to give its thread back (a
    ``workflows`` worker runs local activities only, an ``activities`` worker no local one)."""
    if settings.worker_role == "workflows":
        return settings.max_concurrent_local_activities
    if settings.worker_role == "activities":
        return settings.max_concurrent_activities
    return settings.max_concurrent_activities + settings.max_concurrent_local_activities
