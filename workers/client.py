"""The Temporal client connection shared by the CLI, the worker, the demo and the tests."""

from __future__ import annotations

from typing import TYPE_CHECKING

from workers.settings import Settings

if TYPE_CHECKING:
    import temporalio.client


class ConnectionFailed(RuntimeError):
    """The Temporal frontend could not be reached; the message names the address."""


async def connect(settings: Settings, *, identity: str | None = None) -> temporalio.client.Client:
    """Connect to Temporal at ``settings.temporal_address`` in ``settings.temporal_namespace``.

    Uses the pydantic data converter (models in and out of history, as the worker does).
    Authentication: mTLS with ``temporal_tls_cert``/``temporal_tls_key`` (optionally a CA), or a
    Temporal Cloud API key (``temporal_api_key``, TLS on), or plaintext (dev server).
    ``identity`` is the client identity recorded in history (e.g. ``alice@laptop``).

    Raises :class:`ConnectionFailed` (message includes the address) when the server cannot be
    reached.
    """
    from temporalio.client import Client
    from temporalio.contrib.pydantic import pydantic_data_converter
    from temporalio.service import TLSConfig

    tls: TLSConfig | bool = False
    if settings.uses_tls:
        tls = TLSConfig(
            client_cert=settings.temporal_tls_cert.read_bytes() if settings.temporal_tls_cert else None,
            client_private_key=settings.temporal_tls_key.read_bytes() if settings.temporal_tls_key else None,
            server_root_ca_cert=settings.temporal_tls_ca.read_bytes() if settings.temporal_tls_ca else None,
        )
    kwargs = {}
    if identity:
        kwargs["identity"] = identity
    try:
        return await Client.connect(
            settings.temporal_address,
            namespace=settings.temporal_namespace,
            data_converter=pydantic_data_converter,
            tls=tls,
            api_key=settings.temporal_api_key.get_secret_value() if settings.temporal_api_key else None,
            **kwargs,
        )
    except RuntimeError as exc:
        # The core SDK reports connection problems as RuntimeError("Failed client connect: ...").
        raise ConnectionFailed(
            f"cannot connect to Temporal at {settings.temporal_address} "
            f"(namespace {settings.temporal_namespace}): {exc}"
        ) from exc
