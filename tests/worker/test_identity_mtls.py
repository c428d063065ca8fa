"""Identity has a trust model (issue 18, "Self-declared identities"): with a Temporal client
certificate the operator's identity is the certificate's CN.

The dev server speaks plaintext, so the test puts a TLS-terminating proxy in front of its gRPC
port (Python ``ssl``: client certificates required and verified against a CA made here, ALPN
``h2``) and points the real console script at it with ``LOCKKEEPER_TEMPORAL_TLS_*``. The CA, the
server certificate and the client certificates (CN ``alice``) are generated with
``cryptography``. Shown: ``approve --identity mallory`` with alice's certificate exits 2 on one
line before any connection is made; ``approve`` without ``--identity`` is recorded as alice,
with the connection's identity beside the asserted one, in the gate and its history record;
the proxy saw alice's certificate.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from datetime import UTC, datetime, timedelta
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from lockkeeper.devserver import free_port
from tests.support.harness import start_rollout, status
from tests.kit.test_decision_deadline import FAST, SCALE, cli_env, lk, wait_gate

pytestmark = pytest.mark.e2e

SERVER_NAME = "temporal.lockkeeper.test"


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "lockkeeper test"), x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write(path: Path, key: Any, cert: x509.Certificate) -> tuple[Path, Path]:
    cert_path, key_path = path.with_suffix(".crt"), path.with_suffix(".key")
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def make_pki(root: Path) -> dict[str, tuple[Path, Path]]:
    """A CA, a server certificate for :data:`SERVER_NAME` / 127.0.0.1 and a client certificate
    for alice, as PEM files: name → (cert, key)."""
    now = datetime.now(UTC) - timedelta(minutes=5)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(_name("lockkeeper test CA")).issuer_name(_name("lockkeeper test CA"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now).not_valid_after(now + timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                       key_encipherment=False, data_encipherment=False, key_agreement=False,
                                       encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    out = {"ca": _write(root / "ca", ca_key, ca)}

    def leaf(cn: str, server: bool) -> tuple[Path, Path]:
        key = ec.generate_private_key(ec.SECP256R1())
        b = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(ca.subject).public_key(key.public_key())
             .serial_number(x509.random_serial_number()).not_valid_before(now).not_valid_after(now + timedelta(days=1))
             .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
             .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]),
                            critical=False)
             .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False))
        if server:
            b = b.add_extension(x509.SubjectAlternativeName([x509.DNSName(SERVER_NAME), x509.IPAddress(IPv4Address("127.0.0.1"))]),
                                critical=False)
        return _write(root / cn.replace(" ", "-"), key, b.sign(ca_key, hashes.SHA256()))

    out["server"] = leaf(SERVER_NAME, True)
    out["alice"] = leaf("alice", False)
    return out


class TlsProxy:
    """TLS (client certificate required, ALPN h2) on 127.0.0.1:``port`` → plaintext ``upstream``.
    ``peers``: the CN of each connection's client certificate, in order."""

    def __init__(self, upstream: str, pki: dict[str, tuple[Path, Path]]) -> None:
        self.upstream_host, port = upstream.rsplit(":", 1)
        self.upstream_port = int(port)
        self.port = free_port()
        self.peers: list[str] = []
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(*pki["server"])
        ctx.load_verify_locations(cafile=str(pki["ca"][0]))
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.set_alpn_protocols(["h2"])
        self.ctx = ctx
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port, ssl=self.ctx)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peercert") or {}
        cn = next((v for rdn in peer.get("subject", ()) for k, v in rdn if k == "commonName"), "")
        self.peers.append(cn)
        up_reader, up_writer = await asyncio.open_connection(self.upstream_host, self.upstream_port)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
                pass
            finally:
                with contextlib.suppress(Exception):
                    dst.close()

        tasks = {asyncio.ensure_future(pipe(reader, up_writer)), asyncio.ensure_future(pipe(up_reader, writer))}
        self._tasks |= tasks
        try:
            await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            self._tasks -= tasks


@pytest.mark.timeout(300)
async def test_certificate_cn_is_the_identity_and_a_different_identity_is_refused(
    dev_server: Any, sim_factory: Any, worker_for: Any, temporal_client: Any, task_queue: str, tmp_path: Path
) -> None:
    pki = make_pki(tmp_path)
    proxy = TlsProxy(dev_server.address, pki)
    await proxy.start()
    try:
        sim = await sim_factory("r1-ovn-interrupted", time_scale=SCALE)
        await worker_for(sim)  # the worker talks to the dev server directly
        handle = await start_rollout(temporal_client, task_queue, pools=["infra"], approval="pool", cluster="mtls",
                                     approvals={"requested_by": "bob", "four_eyes": True}, **FAST)
        gate = await wait_gate(handle)
        address = f"127.0.0.1:{proxy.port}"
        env = cli_env(
            LOCKKEEPER_TEMPORAL_TLS_CERT=str(pki["alice"][0]), LOCKKEEPER_TEMPORAL_TLS_KEY=str(pki["alice"][1]),
            LOCKKEEPER_TEMPORAL_TLS_CA=str(pki["ca"][0]), LOCKKEEPER_TEMPORAL_TLS_SERVER_NAME=SERVER_NAME,
        )

        # A different --identity is refused before anything is sent (no connection at all).
        code, out, err = await lk(address, task_queue, "approve", handle.id, gate.id, "--identity", "mallory", env=env)
        assert code == 2, (code, out, err)
        assert len(err.strip().splitlines()) == 1 and "'mallory'" in err and "'alice'" in err, err
        assert proxy.peers == []
        st = await status(handle)
        assert next(g for g in st.gates if g.id == gate.id).state == "waiting"

        # Without --identity the certificate decides who approves: alice, recorded twice.
        code, out, err = await lk(address, task_queue, "approve", handle.id, gate.id, "-m", "via mTLS", env=env)
        assert code == 0, (code, out, err)
        assert proxy.peers and set(proxy.peers) == {"alice"}, proxy.peers
        st = await status(handle)
        g = next(x for x in st.gates if x.id == gate.id)
        assert g.state == "approved" and g.decided_by == "alice" and g.connection_identity == "alice", g
        rec = [r for r in st.gate_history if r.gate_id == gate.id and r.action == "approved"]
        assert len(rec) == 1 and rec[0].by == "alice" and rec[0].connection_identity == "alice", rec
        await handle.execute_update("abort", {"identity": "test", "comment": "done"})
    finally:
        await proxy.stop()
