"""The Kubernetes gateway: the only lockkeeper module that imports ``kubernetes``.

:class:`KubeGateway` wraps one ``kubernetes.client.ApiClient`` (kubernetes 37, the pydantic
generation) built from a kubeconfig file and context, or from the in-cluster service account,
never from the client's process-global configuration, so one worker process can talk to
several clusters.

Design choices (kopf ``_cogs/clients`` style):

* Every method returns plain JSON dicts exactly as the API serves them (camelCase keys), read
  with ``_preload_content=False``. The typed pydantic models are skipped on the way in: they
  cost CPU on big lists and would turn a harmless missing optional field in a response into a
  validation error. Request bodies that the generated methods require as models (Eviction,
  Event) are built from models.
* Every ``ApiException`` and transport error becomes one of the types of
  :mod:`activities.errors` (``NotFound``, ``Conflict``, ``TooManyRequests`` with the parsed
  ``Status`` body, ``Invalid``, ``Unavailable``...).
* Every request has a bounded client timeout (connect, read) so a dead API server turns into
  ``Unavailable`` instead of a thread stuck forever.
* Patches are RFC 7386 merge patches (``application/merge-patch+json``), which the API server
  accepts for every kind, built-in or custom, and which delete a key when its value is null.
* Bearer tokens never appear in anything this module logs or raises (:func:`mask_secrets`).
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import urllib3
import yaml
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from activities.errors import KubeconfigError, KubeError, Unavailable, error_for_status

log = logging.getLogger(__name__)

MERGE_PATCH = "application/merge-patch+json"

MCO_GROUP = "machineconfiguration.openshift.io"
MCO_VERSION = "v1"
CONFIG_GROUP = "config.openshift.io"
CONFIG_VERSION = "v1"

#: (connect, read) seconds for ordinary requests.
DEFAULT_REQUEST_TIMEOUT: tuple[float, float] = (5.0, 30.0)
#: Extra read time granted to a watch beyond its server-side ``timeoutSeconds``.
WATCH_READ_GRACE_SECONDS = 5.0

_SECRET_PATTERNS = [
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]+"),
    re.compile(r"(?i)((?:token|password|client-key-data|api[_-]?key|authorization)[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]+"),
]


def mask_secrets(text: str) -> str:
    """Replace bearer tokens, passwords and keys in ``text`` with ``***``."""
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub(lambda m: m.group(1) + "***", text)
    return text


def _check_kubeconfig_file(path: Path, context: str | None) -> str:
    """Validate a kubeconfig's shape before the client reads it, for clear messages.

    Returns the context that will be used. Raises :class:`KubeconfigError`.
    """
    if not path.is_file():
        raise KubeconfigError(f"kubeconfig {path} does not exist or is not a file")
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise KubeconfigError(f"kubeconfig {path} cannot be read: {exc}") from None
    except yaml.YAMLError as exc:
        raise KubeconfigError(f"kubeconfig {path} is not valid YAML: {mask_secrets(str(exc))}") from None
    if not isinstance(raw, dict):
        raise KubeconfigError(f"kubeconfig {path} is not a YAML mapping (got {type(raw).__name__})")
    contexts = {c.get("name"): c.get("context") or {} for c in raw.get("contexts") or [] if isinstance(c, dict)}
    clusters = {c.get("name"): c.get("cluster") or {} for c in raw.get("clusters") or [] if isinstance(c, dict)}
    name = context or raw.get("current-context")
    if not name:
        raise KubeconfigError(f"kubeconfig {path} has no current-context and no context was given")
    if name not in contexts:
        known = ", ".join(sorted(str(n) for n in contexts)) or "none"
        raise KubeconfigError(f"kubeconfig {path} has no context {name!r} (contexts: {known})")
    cluster_name = contexts[name].get("cluster") if isinstance(contexts[name], dict) else None
    cluster = clusters.get(cluster_name)
    if not isinstance(cluster, dict) or not cluster.get("server"):
        raise KubeconfigError(f"kubeconfig {path}: context {name!r} names cluster {cluster_name!r} which has no server")
    return str(name)


class KubeGateway:
    """One connection to one cluster's API server.

    Build it with :meth:`from_kubeconfig`, :meth:`in_cluster` or :meth:`connect`. Thread-safe:
    the underlying urllib3 pool is shared by the worker's activity threads.

    All ``list_*`` methods return the ``items`` of the list (dicts); ``*_with_rv`` variants also
    return the list's ``metadata.resourceVersion`` for a following watch. Errors:
    :mod:`activities.errors` types only.
    """

    def __init__(
        self,
        api_client: client.ApiClient,
        *,
        description: str = "",
        request_timeout: tuple[float, float] = DEFAULT_REQUEST_TIMEOUT,
    ) -> None:
        self._api_client = api_client
        self._timeout = request_timeout
        self.description = description or api_client.configuration.host
        self.core = client.CoreV1Api(api_client)
        self.policy = client.PolicyV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)

    # --- construction -------------------------------------------------------------------------

    @classmethod
    def from_kubeconfig(
        cls,
        path: str | os.PathLike[str] | None = None,
        context: str | None = None,
        *,
        request_timeout: tuple[float, float] = DEFAULT_REQUEST_TIMEOUT,
    ) -> KubeGateway:
        """Gateway for ``context`` (default: current-context) of the kubeconfig at ``path``
        (default: ``$KUBECONFIG``'s first entry, else ``~/.kube/config``).

        Raises :class:`KubeconfigError` for a missing or malformed file, an unknown context or a
        cluster without server. The kubeconfig file is never written (``persist_config=False``).
        """
        if path is None:
            env = os.environ.get("KUBECONFIG", "")
            path = env.split(os.pathsep)[0] if env else os.path.expanduser(config.KUBE_CONFIG_DEFAULT_LOCATION)
        kube_path = Path(path)
        used_context = _check_kubeconfig_file(kube_path, context)
        configuration = type.__call__(client.Configuration)
        try:
            api_client = config.new_client_from_config(
                config_file=str(kube_path),
                context=context,
                persist_config=False,
                client_configuration=configuration,
            )
        except (ConfigException, TypeError, ValueError, KeyError, AttributeError, OSError) as exc:
            raise KubeconfigError(f"kubeconfig {kube_path} (context {used_context}): {mask_secrets(str(exc))}") from None
        if not api_client.configuration.host:
            raise KubeconfigError(f"kubeconfig {kube_path} (context {used_context}) gives no API server address")
        gateway = cls(
            api_client,
            description=f"{api_client.configuration.host} (context {used_context})",
            request_timeout=request_timeout,
        )
        log.debug("kubernetes gateway: %s", gateway.description)
        return gateway

    @classmethod
    def in_cluster(cls, *, request_timeout: tuple[float, float] = DEFAULT_REQUEST_TIMEOUT) -> KubeGateway:
        """Gateway from the pod's service account (``KUBERNETES_SERVICE_HOST`` and the token
        file under ``/var/run/secrets/kubernetes.io/serviceaccount``). Raises
        :class:`KubeconfigError` outside a pod."""
        configuration = type.__call__(client.Configuration)
        try:
            config.load_incluster_config(client_configuration=configuration)
        except (ConfigException, OSError) as exc:
            raise KubeconfigError(f"in-cluster configuration: {mask_secrets(str(exc))}") from None
        api_client = client.ApiClient(configuration=configuration)
        return cls(api_client, description=f"{configuration.host} (in-cluster)", request_timeout=request_timeout)

    @classmethod
    def connect(
        cls,
        kubeconfig: str | os.PathLike[str] | None = None,
        context: str | None = None,
        *,
        request_timeout: tuple[float, float] = DEFAULT_REQUEST_TIMEOUT,
    ) -> KubeGateway:
        """The usual choice: ``kubeconfig`` when given; else in-cluster when running in a pod
        (``KUBERNETES_SERVICE_HOST`` set) and no ``$KUBECONFIG``; else the default kubeconfig."""
        if kubeconfig is None and "KUBERNETES_SERVICE_HOST" in os.environ and "KUBECONFIG" not in os.environ:
            return cls.in_cluster(request_timeout=request_timeout)
        return cls.from_kubeconfig(kubeconfig, context, request_timeout=request_timeout)

    def close(self) -> None:
        """Release the connection pool."""
        self._api_client.close()

    def __repr__(self) -> str:
        return f"KubeGateway({self.description!r})"

    # --- plumbing -----------------------------------------------------------------------------

    def _call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
        """Run one generated API method, returning the decoded JSON body (``{}`` if empty)."""
        kwargs.setdefault("_request_timeout", self._timeout)
        kwargs["_preload_content"] = False
        try:
            resp = fn(*args, **kwargs)
            data = resp.data
        except ApiException as exc:
            raise _map_api_exception(exc, what) from None
        except urllib3.exceptions.HTTPError as exc:
            raise Unavailable(f"{what}: {mask_secrets(str(exc))}") from None
        if not data:
            return {}
        try:
            decoded = json.loads(data)
        except ValueError:
            raise Unavailable(f"{what}: the server answered with a body that is not JSON") from None
        return decoded if isinstance(decoded, dict) else {"items": decoded}

    # --- nodes ----------------------------------------------------------------------------------

    def get_node(self, name: str) -> dict[str, Any]:
        """GET /api/v1/nodes/NAME. Raises NotFound."""
        return self._call(f"get nodes {name}", self.core.read_node, name)

    def list_nodes(self, label_selector: str | None = None, field_selector: str | None = None) -> list[dict[str, Any]]:
        """Nodes matching the selectors (all when None)."""
        return self.list_nodes_with_rv(label_selector, field_selector)[0]

    def list_nodes_with_rv(
        self, label_selector: str | None = None, field_selector: str | None = None
    ) -> tuple[list[dict[str, Any]], str | None]:
        """Nodes plus the list's resourceVersion (to start a watch from)."""
        kw = _selectors(label_selector, field_selector)
        body = self._call("list nodes", self.core.list_node, **kw)
        return list(body.get("items") or []), (body.get("metadata") or {}).get("resourceVersion")

    def patch_node(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """Merge-patch a Node (RFC 7386: null deletes a key). A ``metadata.resourceVersion`` in
        the patch makes it conditional (409 Conflict if the node changed). Returns the Node."""
        return self._call(f"patch nodes {name}", self.core.patch_node, name, patch, _content_type=MERGE_PATCH)

    def watch_node(
        self, name: str, *, resource_version: str | None, timeout_seconds: int
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """Watch one Node (``fieldSelector=metadata.name=NAME``) from ``resource_version``.

        Yields ``(type, object)`` with type ADDED, MODIFIED, DELETED or BOOKMARK (object then
        only carries ``metadata.resourceVersion``). The server ends the stream after
        ``timeout_seconds`` (>= 1); the generator then ends. Raises ``Gone`` when the
        resourceVersion is too old (the caller re-lists), ``Unavailable`` when the stream breaks.
        """
        w = watch.Watch()
        # A wrapper with neither return annotation nor docstring makes Watch yield raw dicts
        # (no pydantic model per event) while still handling ERROR events (410) itself.
        list_node = lambda **kw: self.core.list_node(**kw)  # noqa: E731
        stream = w.stream(
            list_node,
            field_selector=f"metadata.name={name}",
            resource_version=resource_version or None,
            allow_watch_bookmarks=True,
            timeout_seconds=max(1, int(timeout_seconds)),
            _request_timeout=(self._timeout[0], max(1, int(timeout_seconds)) + WATCH_READ_GRACE_SECONDS),
        )
        try:
            for event in stream:
                if not isinstance(event, dict):
                    continue
                obj = event.get("raw_object")
                if not isinstance(obj, dict):
                    continue
                yield str(event.get("type", "")), obj
        except ApiException as exc:
            raise _map_api_exception(exc, f"watch nodes {name}") from None
        except urllib3.exceptions.HTTPError as exc:
            raise Unavailable(f"watch nodes {name}: {mask_secrets(str(exc))}") from None
        finally:
            stream.close()

    # --- pods -----------------------------------------------------------------------------------

    def list_pods(
        self,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        """Pods in ``namespace`` (all namespaces when None) matching the selectors."""
        kw = _selectors(label_selector, field_selector)
        if namespace is None:
            body = self._call("list pods", self.core.list_pod_for_all_namespaces, **kw)
        else:
            body = self._call(f"list pods -n {namespace}", self.core.list_namespaced_pod, namespace, **kw)
        return list(body.get("items") or [])

    def get_pod(self, namespace: str, name: str) -> dict[str, Any]:
        """GET one Pod. Raises NotFound."""
        return self._call(f"get pods {namespace}/{name}", self.core.read_namespaced_pod, name, namespace)

    def evict_pod(self, namespace: str, name: str, *, grace_period_seconds: int | None = None) -> None:
        """POST .../pods/NAME/eviction (policy/v1), honouring PodDisruptionBudgets.

        Raises ``NotFound`` when the pod is gone, ``TooManyRequests`` when a budget refuses
        (Status message and DisruptionBudget causes attached), ``ServerError`` when more than
        one budget matches.
        """
        options = client.V1DeleteOptions(grace_period_seconds=grace_period_seconds) if grace_period_seconds is not None else None
        body = client.V1Eviction(
            metadata=client.V1ObjectMeta(name=name, namespace=namespace),
            delete_options=options,
        )
        self._call(f"create pods.policy {namespace}/{name} eviction", self.core.create_namespaced_pod_eviction, name, namespace, body)

    def delete_pod(self, namespace: str, name: str, *, grace_period_seconds: int | None = None) -> dict[str, Any]:
        """DELETE one Pod (graceful unless ``grace_period_seconds`` is 0). Raises NotFound."""
        kw: dict[str, Any] = {}
        if grace_period_seconds is not None:
            kw["grace_period_seconds"] = grace_period_seconds
        return self._call(f"delete pods {namespace}/{name}", self.core.delete_namespaced_pod, name, namespace, **kw)

    # --- budgets and events ---------------------------------------------------------------------

    def list_pdbs(self, namespace: str) -> list[dict[str, Any]]:
        """PodDisruptionBudgets (policy/v1) in ``namespace``."""
        body = self._call(
            f"list poddisruptionbudgets -n {namespace}", self.policy.list_namespaced_pod_disruption_budget, namespace
        )
        return list(body.get("items") or [])

    def list_events(self, namespace: str, *, field_selector: str | None = None) -> list[dict[str, Any]]:
        """core/v1 Events in ``namespace`` (e.g. ``involvedObject.name=POD``)."""
        kw = _selectors(None, field_selector)
        body = self._call(f"list events -n {namespace}", self.core.list_namespaced_event, namespace, **kw)
        return list(body.get("items") or [])

    def create_node_event(
        self,
        *,
        node: str,
        node_uid: str | None,
        reason: str,
        message: str,
        type: str = "Normal",
        component: str = "lockkeeper",
        namespace: str = "default",
    ) -> dict[str, Any]:
        """Create a core/v1 Event about a Node (``involvedObject`` kind Node), as kubelet and
        the machine-config-daemon do: namespace ``default``, name ``NODE.<suffix>``."""
        now = datetime.now(UTC)
        body = client.CoreV1Event(
            metadata=client.V1ObjectMeta(generate_name=f"{node}.", namespace=namespace),
            involved_object=client.V1ObjectReference(api_version="v1", kind="Node", name=node, uid=node_uid),
            reason=reason,
            message=message,
            type=type,
            source=client.V1EventSource(component=component),
            reporting_component=component,
            reporting_instance=component,
            first_timestamp=now,
            last_timestamp=now,
            count=1,
        )
        return self._call(f"create events -n {namespace}", self.core.create_namespaced_event, namespace, body)

    # --- OpenShift: MachineConfigPools, MachineConfigs, cluster network -------------------------

    def list_machineconfigpools(self) -> list[dict[str, Any]]:
        """machineconfiguration.openshift.io/v1 MachineConfigPools."""
        body = self._call(
            "list machineconfigpools", self.custom.list_cluster_custom_object, MCO_GROUP, MCO_VERSION, "machineconfigpools"
        )
        return list(body.get("items") or [])

    def list_machineconfigs(self) -> list[dict[str, Any]]:
        """machineconfiguration.openshift.io/v1 MachineConfigs (rendered and source)."""
        body = self._call(
            "list machineconfigs", self.custom.list_cluster_custom_object, MCO_GROUP, MCO_VERSION, "machineconfigs"
        )
        return list(body.get("items") or [])

    def get_network_config(self, name: str = "cluster") -> dict[str, Any]:
        """``networks.config.openshift.io/cluster``. Raises NotFound (plain Kubernetes)."""
        return self._call(
            f"get networks.config.openshift.io {name}",
            self.custom.get_cluster_custom_object,
            CONFIG_GROUP,
            CONFIG_VERSION,
            "networks",
            name,
        )

    def patch_network_config(self, patch: dict[str, Any], name: str = "cluster") -> dict[str, Any]:
        """Merge-patch ``networks.config.openshift.io/cluster``."""
        return self._call(
            f"patch networks.config.openshift.io {name}",
            self.custom.patch_cluster_custom_object,
            CONFIG_GROUP,
            CONFIG_VERSION,
            "networks",
            name,
            patch,
            _content_type=MERGE_PATCH,
        )


def _selectors(label_selector: str | None, field_selector: str | None) -> dict[str, str]:
    kw: dict[str, str] = {}
    if label_selector:
        kw["label_selector"] = label_selector
    if field_selector:
        kw["field_selector"] = field_selector
    return kw


def _map_api_exception(exc: ApiException, what: str) -> KubeError:
    """ApiException -> our error type, keeping the Status body (kube-apiserver wording)."""
    status = int(exc.status or 0)
    headers = exc.headers or {}
    retry_after = headers.get("Retry-After") if hasattr(headers, "get") else None
    if status == 0:
        return Unavailable(f"{what}: {mask_secrets(str(exc.reason or exc))}")
    if status == 410 and not exc.body:
        # Watch ERROR events arrive as ApiException(status=410, reason="Expired: too old ...").
        return error_for_status(410, body=None, reason=str(exc.reason or "Expired"), what=what)
    body = exc.body if isinstance(exc.body, (str, bytes)) else None
    return error_for_status(status, body=body, reason=str(exc.reason or ""), retry_after=retry_after, what=what)
