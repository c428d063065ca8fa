"""The worker's HTTP health endpoint (aiohttp): ``/healthz`` (liveness) and ``/readyz`` (readiness).

- ``GET /healthz``: 200 ``{"status": "ok"}`` as long as the worker's event loop answers. A
  worker whose loop is blocked (a synchronous call on the loop, a deadlock) stops answering,
  and the kubelet's liveness probe restarts it.
- ``GET /readyz``: 200 ``{"status": "ready"}`` once the Temporal worker polls its task queue
  (the SDK validated the namespace and started its pollers; with worker versioning, the server
  registered the queue in the worker's build: :func:`workers.versioning.settle`), 503
  ``{"status": "starting"}`` before, and 503 ``{"status": "stopping"}`` from the moment a graceful shutdown starts, so a
  rolling update of the Deployment waits for the new pod to poll before it stops the old one.

Kubernetes probe semantics: https://kubernetes.io/docs/concepts/configuration/liveness-readiness-startup-probes/
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

#: ``ready()`` answers: "ready" → 200; any other string (e.g. "starting", "stopping") → 503.
ReadyFn = Callable[[], str]


class HealthServer:
    """Serve ``/healthz`` and ``/readyz`` on ``host:port`` (port 0 = any free port, see
    :attr:`port` after :meth:`start`). ``ready`` is called per request and returns ``"ready"``
    or a short reason why not. Raises ``OSError`` from :meth:`start` when the port is taken."""

    def __init__(self, host: str, port: int, ready: ReadyFn) -> None:
        self.host = host
        self._port = port
        self._ready = ready
        self._runner: web.AppRunner | None = None

    @property
    def port(self) -> int:
        """The bound port (the requested one, or the one the OS picked for 0)."""
        return self._port

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _readyz(self, request: web.Request) -> web.Response:
        state = self._ready()
        return web.json_response({"status": state}, status=200 if state == "ready" else 503)

    async def start(self) -> None:
        """Bind and serve in the running event loop."""
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        # access_log=None: probes every few seconds would drown the worker's own log lines.
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self._port)
        await site.start()
        server = getattr(site, "_server", None)
        sockets = getattr(server, "sockets", None) or []
        if sockets:
            self._port = int(sockets[0].getsockname()[1])

    async def stop(self) -> None:
        """Stop serving (idempotent)."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
