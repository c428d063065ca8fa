"""The Kubernetes gateway: with :mod:`activities.kube` the only code that imports ``kubernetes``.

:class:`KubeGateway` wraps one ``kubernetes.client.ApiClient`` (kubernetes 37, the pydantic
generation) built from a kubeconfig file and context, or from the in-cluster service account,
never from the client's process-global configuration, so one worker process can talk to
several clusters.

Design choices (kopf ``_cogs/clients`` style):

* Generic verbs over the resource table (:mod:`activities.kube.resources`): :meth:`get`,
  :meth:`list`, :meth:`create`, :meth:`patch` (merge, strategic or JSON patch), :meth:`delete`,
  :meth:`watch`, :meth:`evict` and :meth:`exec_in_pod`. A new kind is one line in the table.
  The per-kind methods (``get_node``, ``list_pods``...) are one-line conveniences over them
  (:mod:`activities.kube.shortcuts`).
* Every verb returns plain JSON dicts exactly as the API serves them (camelCase keys); typed client
  models cost CPU on big lists and would turn a missing optional field into a validation error.
* Every ``ApiException`` and transport error becomes one of the types of
  :mod:`activities.kube.errors` (``NotFound``, ``Conflict``, ``TooManyRequests`` with the parsed
  ``Status`` body, ``Invalid``, ``Unavailable``...).
* Every request has a bounded client timeout (connect, read) so a dead API server turns into
  ``Unavailable`` instead of a thread stuck forever; no connection at all (refused, DNS) is
  ``Unreachable`` (:func:`transport_error`).
* Bearer tokens never appear in anything this module logs or raises (:func:`mask_secrets`).
"""

from __future__ import annotations

import builtins
import json
import logging
import os
import re
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from activities.kube.errors import KubeconfigError, Unavailable, Unreachable, error_for_status
from activities.kube.kubeconfig import check_kubeconfig_file, mask_secrets, throttle_token_refresh
from activities.kube.resources import resource
from activities.kube.shortcuts import KindShortcuts
from activities.kube.translate import map_api_exception, map_exec_exception

log = logging.getLogger(__name__)

__all__ = ["KubeGateway", "ExecOutput", "PatchType", "mask_secrets"]

PatchType = Literal["merge", "strategic", "json"]
#: Content type of each patch flavour (Kubernetes API conventions, "Patch operations").
PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
}

_CONN_PREFIX = re.compile(r"^(<[^>]*>|\w+\([^)]*\)): ")  # urllib3's "HTTPSConnection(host=.., port=..): "
#: (connect, read) seconds for ordinary requests.
DEFAULT_REQUEST_TIMEOUT: tuple[float, float] = (5.0, 30.0)
#: Extra read time granted to a watch beyond its server-side ``timeoutSeconds``.
WATCH_READ_GRACE_SECONDS = 5.0


@dataclass(frozen=True)
class ExecOutput:
    """What a command run through the exec API did: ``exit_code`` None when it was cut at its
    timeout (``timed_out``); ``stdout``/``stderr`` as received (not capped here)."""

    exit_code: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool


def size_connection_pool(configuration: client.Configuration, pool_size: int | None) -> None:
    """Keep up to ``pool_size`` connections to the API server (urllib3's ``maxsize``), at least
    the client's own default (5 per CPU).

    Every activity thread of a worker may hold one connection at a time; a pool smaller than the
    worker's activity concurrency discards connections on return ("Connection pool is full,
    discarding connection") and opens new ones (TLS handshakes) under load. The worker passes its
    ``max_concurrent_activities``. Must run before the ``ApiClient`` is built (its REST client
    reads the size once)."""
    if pool_size is not None:
        configuration.connection_pool_maxsize = max(int(pool_size), configuration.connection_pool_maxsize or 0)


class KubeGateway(KindShortcuts):
    """One connection to one cluster's API server.

    Build it with :meth:`from_kubeconfig`, :meth:`in_cluster` or :meth:`connect`. Thread-safe:
    the underlying urllib3 pool is shared by the worker's activity threads. Errors:
    :mod:`activities.kube.errors` types only.
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

    # --- construction -------------------------------------------------------------------------

    @classmethod
    def from_kubeconfig(
        cls,
        path: str | os.PathLike[str] | None = None,
        context: str | None = None,
        *,
        request_timeout: tuple[float, float] = DEFAULT_REQUEST_TIMEOUT,
        pool_size: int | None = None,
    ) -> KubeGateway:
        """Gateway for ``context`` (default: current-context) of the kubeconfig at ``path``
        (default: ``$KUBECONFIG``'s first entry, else ``~/.kube/config``). ``pool_size``: see
        :func:`size_connection_pool`.

        Raises :class:`KubeconfigError` for a missing or malformed file, an unknown context or a
        cluster without server. The kubeconfig file is never written (``persist_config=False``).
        """
        if path is None:
            env = os.environ.get("KUBECONFIG", "")
            path = env.split(os.pathsep)[0] if env else os.path.expanduser(config.KUBE_CONFIG_DEFAULT_LOCATION)
        kube_path = Path(path)
        used_context = check_kubeconfig_file(kube_path, context)
        configuration = type.__call__(client.Configuration)
        size_connection_pool(configuration, pool_size)
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
        throttle_token_refresh(api_client.configuration)
        gateway = cls(
            api_client,
            description=f"{api_client.configuration.host} (context {used_context})",
            request_timeout=request_timeout,
        )
        log.debug("kubernetes gateway: %s", gateway.description)
        return gateway

    @classmethod
    def in_cluster(
        cls, *, request_timeout: tuple[float, float] = DEFAULT_REQUEST_TIMEOUT, pool_size: int | None = None
    ) -> KubeGateway:
        """Gateway from the pod's service account (``KUBERNETES_SERVICE_HOST`` and the token
        file under ``/var/run/secrets/kubernetes.io/serviceaccount``). Raises
        :class:`KubeconfigError` outside a pod. ``pool_size``: see :func:`size_connection_pool`."""
        configuration = type.__call__(client.Configuration)
        size_connection_pool(configuration, pool_size)
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
        pool_size: int | None = None,
    ) -> KubeGateway:
        """The usual choice: ``kubeconfig`` when given; else in-cluster when running in a pod
        (``KUBERNETES_SERVICE_HOST`` set) and no ``$KUBECONFIG``; else the default kubeconfig."""
        if kubeconfig is None and "KUBERNETES_SERVICE_HOST" in os.environ and "KUBECONFIG" not in os.environ:
            return cls.in_cluster(request_timeout=request_timeout, pool_size=pool_size)
        return cls.from_kubeconfig(kubeconfig, context, request_timeout=request_timeout, pool_size=pool_size)

    @property
    def server(self) -> str:
        """The API server's URL from the kubeconfig (``https://api.example:6443``)."""
        return str(self._api_client.configuration.host)

    @property
    def pool_size(self) -> int:
        """Connections the urllib3 pool keeps per API server host."""
        return int(self._api_client.configuration.connection_pool_maxsize)

    def close(self) -> None:
        """Release the connection pool."""
        self._api_client.close()

    def __repr__(self) -> str:
        return f"KubeGateway({self.description!r})"

    # --- plumbing -----------------------------------------------------------------------------

    def _send(
        self,
        what: str,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str | None = None,
        timeout: Any = None,
    ) -> Any:
        """One HTTP request through the client's REST layer (auth, TLS, proxy as configured);
        returns the raw urllib3 response (body not read). Non-2xx and transport errors are
        raised as :mod:`activities.kube.errors` types."""
        headers = {"Accept": "application/json"}
        if content_type or body is not None:
            headers["Content-Type"] = content_type or "application/json"
        params = [(k, v) for k, v in (query or {}).items() if v is not None]
        try:
            request = self._api_client.param_serialize(
                method=method, resource_path=path, query_params=params, header_params=headers, body=body,
                auth_settings=["BearerToken"],
            )
            resp = self._api_client.call_api(*request, _request_timeout=timeout or self._timeout)
            if not 200 <= resp.status <= 299:
                resp.read()
                raise ApiException.from_response(http_resp=resp, body=None, data=None)
        except ApiException as exc:
            raise map_api_exception(exc, what) from None
        except urllib3.exceptions.HTTPError as exc:
            raise transport_error(what, exc, self.server) from None
        return resp.response

    def _json(self, what: str, method: str, path: str, **kw: Any) -> dict[str, Any]:
        """:meth:`_send`, then the decoded JSON body (``{}`` if empty)."""
        raw = self._send(what, method, path, **kw)
        try:
            data = raw.data
        except urllib3.exceptions.HTTPError as exc:
            raise Unavailable(f"{what}: {mask_secrets(str(exc))}") from None
        if not data:
            return {}
        try:
            decoded = json.loads(data)
        except ValueError:
            raise Unavailable(f"{what}: the server answered with a body that is not JSON") from None
        return decoded if isinstance(decoded, dict) else {"items": decoded}

    # --- generic verbs ------------------------------------------------------------------------

    def server_version(self) -> dict[str, Any]:
        """GET /version: the API server's version document (``gitVersion`` ``v1.11.0+d4cacc0``,
        ``major``, ``minor``...), what ``kubectl version`` shows as the server's."""
        return self._json("GET /version", "GET", "/version")

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        """GET one object of ``kind`` (a :mod:`~activities.kube.resources` key). Raises NotFound."""
        res = resource(kind)
        return self._json(f"get {res.plural} {_ref(namespace, name)}", "GET", res.path(namespace, name))

    def list_with_rv(
        self,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[builtins.list[dict[str, Any]], str | None]:
        """Objects of ``kind`` (all namespaces when ``namespace`` is None) matching the
        selectors, plus the list's ``metadata.resourceVersion`` to start a watch from."""
        res = resource(kind)
        body = self._json(
            f"list {res.plural}" + (f" -n {namespace}" if namespace else ""),
            "GET",
            res.path(namespace),
            query=_selectors(label_selector, field_selector),
        )
        return builtins.list(body.get("items") or []), (body.get("metadata") or {}).get("resourceVersion")

    def list(
        self,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> builtins.list[dict[str, Any]]:
        """The ``items`` of :meth:`list_with_rv`."""
        return self.list_with_rv(kind, namespace, label_selector=label_selector, field_selector=field_selector)[0]

    def create(self, kind: str, body: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        """POST a new object (``apiVersion``/``kind`` filled in when missing). Raises
        AlreadyExists, Invalid."""
        res = resource(kind)
        body = {"apiVersion": res.api_version, "kind": res.kind, **body}
        name = (body.get("metadata") or {}).get("name") or (body.get("metadata") or {}).get("generateName", "")
        return self._json(f"create {res.plural} {_ref(namespace, name)}", "POST", res.path(namespace), body=body)

    def patch(
        self,
        kind: str,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        patch_type: PatchType = "merge",
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """PATCH one object and return it.

        ``merge``: RFC 7386 (null deletes a key; accepted for every kind, built-in or custom;
        a ``metadata.resourceVersion`` in it makes it conditional: 409 Conflict when the object
        changed). ``strategic``: Kubernetes strategic merge (built-in kinds only). ``json``:
        RFC 6902 operations; a failing ``test`` op is refused as a whole with 422 Invalid,
        which is how a caller writes "change this only if it still holds that"."""
        res = resource(kind)
        return self._json(
            f"patch {res.plural} {_ref(namespace, name)}",
            "PATCH",
            res.path(namespace, name, subresource),
            body=patch,
            content_type=PATCH_CONTENT_TYPES[patch_type],
        )

    def delete(
        self, kind: str, name: str, namespace: str | None = None, *, grace_period_seconds: int | None = None,
        uid: str | None = None,
    ) -> dict[str, Any]:
        """DELETE one object (graceful unless ``grace_period_seconds`` is 0). With ``uid``, only
        that incarnation: a ``DeleteOptions`` body with ``preconditions.uid`` (meta/v1
        DeleteOptions), which the API server refuses with 409 Conflict when the object now has
        another uid. Raises NotFound, Conflict."""
        res = resource(kind)
        kw: dict[str, Any] = {}
        if uid:
            kw["body"] = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": uid}}
        return self._json(
            f"delete {res.plural} {_ref(namespace, name)}",
            "DELETE",
            res.path(namespace, name),
            query={"gracePeriodSeconds": grace_period_seconds},
            **kw,
        )

    def watch(
        self,
        kind: str,
        namespace: str | None = None,
        *,
        name: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None,
        timeout_seconds: int,
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """Watch objects of ``kind`` matching the selectors (one object with ``name``, which adds
        ``metadata.name=NAME`` to ``field_selector``) from ``resource_version``.

        Yields ``(type, object)`` with type ADDED, MODIFIED, DELETED or BOOKMARK (object then
        only carries ``metadata.resourceVersion``). The server ends the stream after
        ``timeout_seconds`` (>= 1); the generator then ends. An ERROR event is raised as its
        Status (``Gone`` for an expired resourceVersion: the caller re-lists); a broken stream
        is ``Unavailable``.
        """
        res = resource(kind)
        seconds = max(1, int(timeout_seconds))
        what = f"watch {res.plural} {_ref(namespace, name or '')}".rstrip()
        query = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": seconds,
            "resourceVersion": resource_version or None,
            **_selectors(label_selector, ",".join(f for f in (field_selector, name and f"metadata.name={name}") if f)),
        }
        raw = self._send(what, "GET", res.path(namespace), query=query,
                         timeout=(self._timeout[0], seconds + WATCH_READ_GRACE_SECONDS))
        try:
            for line in _lines(raw):
                try:
                    event = json.loads(line)
                except ValueError:
                    raise Unavailable(f"{what}: a watch line is not JSON") from None
                type_, obj = str(event.get("type", "")), event.get("object")
                if type_ == "ERROR":
                    status = obj if isinstance(obj, dict) else {}
                    raise error_for_status(int(status.get("code") or 500), body=json.dumps(status), what=what)
                if isinstance(obj, dict):
                    yield type_, obj
        except urllib3.exceptions.HTTPError as exc:
            raise Unavailable(f"{what}: {mask_secrets(str(exc))}") from None
        finally:
            raw.release_conn()

    def evict(self, namespace: str, name: str, *, grace_period_seconds: int | None = None) -> None:
        """POST .../pods/NAME/eviction (policy/v1), honouring PodDisruptionBudgets.

        Raises ``NotFound`` when the pod is gone, ``TooManyRequests`` when a budget refuses
        (Status message and DisruptionBudget causes attached), ``ServerError`` when more than
        one budget matches.
        """
        body: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "Eviction",
                                "metadata": {"name": name, "namespace": namespace}}
        if grace_period_seconds is not None:
            body["deleteOptions"] = {"gracePeriodSeconds": grace_period_seconds}
        self._json(f"create pods.policy {namespace}/{name} eviction", "POST",
                   resource("Pod").path(namespace, name, "eviction"), body=body)

    def exec_in_pod(
        self,
        namespace: str,
        name: str,
        argv: builtins.list[str],
        *,
        container: str | None = None,
        stdin: str | None = None,
        timeout: float,
    ) -> ExecOutput:
        """Run ``argv`` in a running container through the exec subresource (a websocket, as
        ``kubectl exec``; the client's ``kubernetes.stream``). No shell: each element is one
        argument. Returns what the command wrote and its exit code (from the final ``Status`` on
        the error channel; None when cut at ``timeout`` seconds or when no Status came). Raises
        the usual error types when the exec cannot start (a refused websocket handshake is mapped
        by its HTTP status: a missing pod is NotFound)."""
        from kubernetes.stream import stream

        # stream() swaps the ApiClient's request method while it opens the websocket, so on the
        # shared client a request from another thread at that moment would go out as a websocket
        # handshake: every exec gets a client of its own (same configuration).
        exec_client = client.ApiClient(self._api_client.configuration)
        api = client.CoreV1Api(exec_client)
        resp: Any = None
        try:
            resp = stream(
                api.connect_get_namespaced_pod_exec, name, namespace, command=argv, container=container,
                stdin=stdin is not None, stdout=True, stderr=True, tty=False, _preload_content=False,
            )
            if stdin is not None:
                resp.write_stdin(stdin)
            out, err = bytearray(), bytearray()
            end = datetime.now(UTC).timestamp() + timeout
            while resp.is_open() and datetime.now(UTC).timestamp() < end:
                resp.update(timeout=1)
                if resp.peek_stdout():
                    out += resp.read_stdout().encode()
                if resp.peek_stderr():
                    err += resp.read_stderr().encode()
            timed_out = resp.is_open()
            try:
                code = None if timed_out else resp.returncode
            except (TypeError, KeyError, IndexError, ValueError):
                code = None  # the stream ended without a Status on the error channel: exit code unknown
        except ApiException as exc:
            raise map_exec_exception(exc, f"exec pods {namespace}/{name}") from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise transport_error(f"exec pods {namespace}/{name}", exc, self.server) from None
        finally:
            if resp is not None:
                resp.close()
                # When the server closed first the websocket client skips its own shutdown,
                # leaving the socket open: close it here.
                sock = getattr(resp, "sock", None)
                if sock is not None:
                    sock.shutdown()
            exec_client.close()
        return ExecOutput(code, bytes(out), bytes(err), timed_out)


def transport_error(what: str, exc: BaseException, server: str) -> Unavailable:
    """No HTTP answer → :class:`Unreachable` when no connection could be made (urllib3
    ``NewConnectionError``: refused, no route, or as ``NameResolutionError`` a failed DNS lookup;
    the exec websocket's ``ConnectionRefusedError``/``gaierror``), else :class:`Unavailable`
    (timeouts, resets). The message names ``server``: "list nodes: cannot connect to the API
    server https://127.0.0.1:6443: [Errno 111] Connection refused"."""
    reason = exc.reason if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason else exc
    if isinstance(reason, urllib3.exceptions.NewConnectionError | ConnectionRefusedError | socket.gaierror):
        detail = _CONN_PREFIX.sub("", str(reason)).removeprefix("Failed to establish a new connection: ")
        return Unreachable(f"{what}: cannot connect to the API server {server}: {mask_secrets(detail)}")
    return Unavailable(f"{what}: {mask_secrets(str(exc))}")


def _ref(namespace: str | None, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


def _selectors(label_selector: str | None, field_selector: str | None) -> dict[str, str]:
    kw: dict[str, str] = {}
    if label_selector:
        kw["labelSelector"] = label_selector
    if field_selector:
        kw["fieldSelector"] = field_selector
    return kw


def _lines(raw: Any) -> Iterator[str]:
    """Newline-delimited JSON lines of a streaming response (a watch), as they arrive."""
    buffer = bytearray()
    for chunk in raw.stream(amt=None, decode_content=True):
        buffer += chunk
        while (cut := buffer.find(b"\n")) != -1:
            line = bytes(buffer[:cut]).decode("utf-8", "replace").strip()
            del buffer[: cut + 1]
            if line:
                yield line
    tail = bytes(buffer).decode("utf-8", "replace").strip()
    if tail:
        yield tail
