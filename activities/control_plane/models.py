"""Models of the control-plane activities (pure pydantic; workflows import only this module).

The readiness probe follows openshift-ansible's handler ``verify API server``: ``curl --silent
--tlsv1.2 --max-time 2 --cacert ca-bundle.crt {{ api_url }}/healthz/ready`` until the body is
``ok`` (``roles/openshift_control_plane/handlers/main.yml``), against **this master's** URL.
Mirror pods are ``kube-system/master-<component>-<node>`` (procedures-spec §4.1).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

PROBE_MASTER_API = "probe_master_api"
READ_MASTER_PODS = "read_master_pods"


class ProbeMasterApiInput(BaseModel):
    """GET ``url`` + ``path``; ``ca_file`` verifies TLS with that CA bundle, ``insecure`` skips
    verification (a lab), neither = the system trust store; ``timeout_seconds`` per request (o-a:
    2 s)."""

    url: str
    path: str = "/healthz/ready"
    ca_file: str | None = None
    insecure: bool = False
    timeout_seconds: float = Field(2.0, gt=0)


class ProbeMasterApiResult(BaseModel):
    """``ready``: HTTP 200 with body ``ok``; ``status`` the HTTP status (None: no answer),
    ``body`` its first 200 characters, ``error`` why there was no answer (connection refused
    while the API pod is down)."""

    ready: bool
    status: int | None = None
    body: str = ""
    error: str | None = None


class MasterPodsInput(BaseModel):
    """The mirror pods of ``master`` for ``components`` (``api``, ``controllers``, ``etcd``)."""

    master: str
    components: list[str] = Field(default_factory=lambda: ["api", "controllers"])
    namespace: str = "kube-system"


class MirrorPod(BaseModel):
    """One mirror pod: ``exists``, ``ready`` (condition Ready True), ``phase`` and the first
    container's ``image``."""

    name: str
    component: str
    exists: bool = False
    ready: bool = False
    phase: str | None = None
    image: str | None = None


class MasterPods(BaseModel):
    """The mirror pods asked for, in ``components`` order."""

    pods: list[MirrorPod] = Field(default_factory=list)
