"""The Temporal client connection shared by the CLI, the worker, the demo and the tests."""

from __future__ import annotations

from typing import TYPE_CHECKING

from workers.settings import Settings

if TYPE_CHECKING:
    import temporalio.client


class ConnectionFailed(RuntimeError):
    """The Temporal frontend could not be reached; the message names the address."""


class CertificateError(ValueError):
    """The client certificate cannot be read or names nobody; the message names the file."""


def certificate_identity(settings: Settings) -> str | None:
    """The identity of the connection's credential: the subject CN of the TLS client
    certificate ``settings.temporal_tls_cert`` (PEM; the first certificate of the file is the
    client's, as TLS sends it first), None without a client certificate.

    This is the name a Temporal server's ClaimMapper sees for the connection (the default
    JWT-less mTLS setup maps the subject CN); lockkeeper uses it as the operator's identity
    and refuses a different ``--identity``. An API key (Temporal Cloud) carries no identity
    the client can read, so it gives None here.

    Raises :class:`CertificateError` when the file is not a PEM certificate or its subject has
    no CN.
    """
    path = settings.temporal_tls_cert
    if path is None:
        return None
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    try:
        cert = x509.load_pem_x509_certificate(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise CertificateError(f"TEMPORAL_TLS_CERT: {path} is not a readable PEM certificate: {exc}") from None
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if not names:
        raise CertificateError(
            f"TEMPORAL_TLS_CERT: {path} has no common name (CN) in its subject {cert.subject.rfc4514_string()!r}; "
            "lockkeeper takes the operator's identity from it"
        )
    value = names[0].value
    return value.decode() if isinstance(value, bytes) else str(value)


async def connect(settings: Settings, *, identity: str | None = None) -> temporalio.client.Client:
    """Connect to Temporal at ``settings.temporal_address`` in ``settings.temporal_namespace``.

    Uses the pydantic data converter (models in and out of history, as the worker does).
    Authentication: mTLS with ``temporal_tls_cert``/``temporal_tls_key`` (optionally a CA and
    ``temporal_tls_server_name``, the name the server's certificate must carry), or a
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
            domain=settings.temporal_tls_server_name,
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
