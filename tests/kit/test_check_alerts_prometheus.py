"""``check_alerts`` against a real Prometheus (Debian's binary) scraping a running clustersim and
evaluating tests/support/prometheus_rules.yml: a node made NotReady out of band turns ``KubeNodeNotReady``
pending, then firing, then it resolves once the node is Ready again; Prometheus' own errors and
an outage are reported, never raised; the bearer token and CA file reach a TLS, token-checking
proxy in front of Prometheus (as kube-rbac-proxy guards prometheus-k8s on OpenShift)."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from tests.support.promserver import PrometheusServer, set_node_ready
from temporalio.testing import ActivityEnvironment

from activities.alerts.activities import check_alerts
from activities.alerts.models import ActiveAlert, AlertsAnswer, CheckAlertsInput
from lockkeeper.devserver import free_port

NODE = "okd-worker-01"
#: R2's own trouble (one router replica cannot be scheduled) fires KubePodNotReady and
#: KubeDeploymentReplicasMismatch from the start; the node tests ignore it, as operators filter
#: known noise, and Watchdog always fires.
KNOWN = "^(Watchdog|KubePodNotReady|KubeDeploymentReplicasMismatch)$"


async def check(inp: CheckAlertsInput) -> AlertsAnswer:
    return await ActivityEnvironment().run(check_alerts, inp)


async def until(what: str, pred: Callable[[], Awaitable[Any]], timeout: float = 40.0) -> Any:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        got = await pred()
        if got:
            return got
        assert loop.time() < end, f"{what}: not within {timeout}s"
        await asyncio.sleep(0.2)


def node_alert(a: AlertsAnswer) -> ActiveAlert | None:
    return next((b for b in a.blocking if b.name == "KubeNodeNotReady" and b.labels.get("node") == NODE), None)


async def test_the_simulators_own_trouble_fires_real_rules(sim_factory, prometheus_factory) -> None:
    sim = await sim_factory("r2-pdb-blocked", time_scale=0.01)
    prom = await prometheus_factory(sim)

    async def both_firing() -> AlertsAnswer | None:
        a = await check(CheckAlertsInput(url=prom.url, filter="^Watchdog$"))
        return a if {"KubePodNotReady", "KubeDeploymentReplicasMismatch"} <= {b.name for b in a.blocking} else None

    a = await until("R2's pending router fires KubePodNotReady and KubeDeploymentReplicasMismatch", both_firing)
    pod = next(b for b in a.blocking if b.name == "KubePodNotReady")
    assert pod.labels["namespace"] == "openshift-ingress" and pod.labels["pod"].startswith("router-default-")
    dep = next(b for b in a.blocking if b.name == "KubeDeploymentReplicasMismatch")
    assert dep.labels["deployment"] == "router-default" and dep.labels["job"] == "kube-state-metrics"
    assert a.ignored_by.get("filter") == 1  # Watchdog


async def test_node_not_ready_goes_pending_then_firing_then_resolves(sim_factory, prometheus_factory) -> None:
    sim = await sim_factory("r2-pdb-blocked", time_scale=0.01)
    prom: PrometheusServer = await prometheus_factory(sim)
    firing_only = CheckAlertsInput(url=prom.url, filter=KNOWN)
    any_state = CheckAlertsInput(url=prom.url, filter=KNOWN, firing_only=False)
    a = await check(firing_only)
    assert a.ok and a.error is None and a.ignored_by.get("filter", 0) >= 1

    await set_node_ready(sim, NODE, False)
    became = datetime.now(UTC)

    # Poll until the firing-only gate blocks; on the way, a pending KubeNodeNotReady must not
    # block it (checked between two reads that both saw the alert pending).
    pending_seen: list[AlertsAnswer] = []

    async def firing() -> AlertsAnswer | None:
        before = node_alert(await check(any_state))
        gate = await check(firing_only)
        after = node_alert(await check(any_state))
        if before is not None and after is not None and before.state == after.state == "pending":
            assert node_alert(gate) is None and gate.ignored_by.get("pending", 0) >= 1, gate
            pending_seen.append(gate)
        return gate if node_alert(gate) is not None else None

    a = await until("KubeNodeNotReady firing", firing)
    assert pending_seen, "KubeNodeNotReady was never seen pending (for: 4s in tests/support/prometheus_rules.yml)"
    alert = node_alert(a)
    assert alert is not None and not a.ok and a.error is None
    assert alert.state == "firing" and alert.labels["severity"] == "warning" and alert.labels["condition"] == "Ready"
    assert alert.summary == "Node is not ready."
    assert alert.description == f"{NODE} has been unready for more than 15 minutes."
    assert alert.active_at is not None and abs(alert.active_at - became) < timedelta(seconds=10)
    assert alert.value == "0e+00"
    assert alert.line().startswith(f'KubeNodeNotReady{{condition="Ready",instance="{sim.host}:{sim.port}",'
                                   f'job="kube-state-metrics",node="{NODE}",severity="warning",status="true"}} firing since ')
    # Only critical alerts block: a warning does not. A label match for another node: neither.
    c = await check(CheckAlertsInput(url=prom.url, filter=KNOWN, severities=["critical"]))
    assert c.ok and c.ignored_by.get("severity", 0) >= 1
    assert (await check(CheckAlertsInput(url=prom.url, filter=KNOWN, match_labels={"node": "okd-master-01"}))).ok

    await set_node_ready(sim, NODE, True)

    async def resolved() -> AlertsAnswer | None:
        a = await check(any_state)
        return a if a.ok else None

    a = await until("KubeNodeNotReady resolved", resolved)
    assert a.blocking == [] and a.error is None


async def test_an_error_or_an_outage_is_reported_not_raised(sim_factory, prometheus_factory) -> None:
    sim = await sim_factory("r2-pdb-blocked", time_scale=0.01, start_agents=False)
    prom: PrometheusServer = await prometheus_factory(sim)
    a = await check(CheckAlertsInput(url=prom.url + "/no-such-prefix"))
    assert not a.ok and a.error is not None and a.error.startswith("HTTP 404: not a Prometheus API answer")

    await prom.stop()
    a = await check(CheckAlertsInput(url=prom.url, timeout_seconds=5))
    assert not a.ok and a.blocking == [] and a.error is not None and "ClientConnectorError" in a.error
    assert a.line().startswith("Prometheus could not be asked: ClientConnectorError")

    await prom.start()  # same port, same data: the gate's Prometheus is back, its rules evaluated again

    async def back() -> AlertsAnswer | None:
        a = await check(CheckAlertsInput(url=prom.url, filter="."))
        return a if a.ignored_by.get("filter", 0) >= 1 else None

    a = await until("Prometheus back, Watchdog firing again", back)
    assert a.ok and a.error is None and a.blocking == []


# --- authentication: a TLS proxy that checks a bearer token, in front of the real Prometheus ------


def _cert_pair(root: Path) -> tuple[Path, Path, Path]:
    """A CA and a server certificate for 127.0.0.1 signed by it: (ca.pem, server.pem, server.key)."""
    now = datetime.now(UTC) - timedelta(minutes=5)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "alerts test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now).not_valid_after(now + timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                       key_encipherment=False, data_encipherment=False, key_agreement=False,
                                       encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    leaf = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "prometheus-k8s")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(IPv4Address("127.0.0.1"))]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = root / "ca.pem", root / "server.pem", root / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return paths


@pytest.fixture
async def guarded(tmp_path: Path, sim_factory, prometheus_factory) -> Any:
    """(https URL of a token-checking TLS proxy before a real Prometheus, CA file, token file)."""
    sim = await sim_factory("r2-pdb-blocked", time_scale=0.01, start_agents=False)
    prom: PrometheusServer = await prometheus_factory(sim)
    ca, cert, key = _cert_pair(tmp_path)
    token = tmp_path / "token"
    token.write_text("s3cret-service-account-token\n")
    seen: list[str] = []

    async def alerts(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        if request.headers.get("Authorization") != "Bearer s3cret-service-account-token":
            return web.Response(status=401, text="Unauthorized\n")
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{prom.url}/api/v1/alerts") as resp:
                return web.Response(status=resp.status, body=await resp.read(), content_type="application/json")

    app = web.Application()
    app.router.add_get("/api/v1/alerts", alerts)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port, ssl_context=tls).start()
    try:
        yield f"https://127.0.0.1:{port}", ca, token, seen
    finally:
        await runner.cleanup()


async def test_bearer_token_and_ca_file(guarded, tmp_path: Path) -> None:
    url, ca, token, seen = guarded
    # The filter ignores every alert: the scenario's own pods may fire or pend by now, and this
    # test is about the answer getting through the token and the CA, not about which alerts fire.
    a = await check(CheckAlertsInput(url=url, bearer_token_file=str(token), ca_file=str(ca), filter="."))
    assert a.ok and a.error is None and a.active >= 1 and a.ignored == a.active, a  # Watchdog at least
    assert a.ignored_by.get("filter", 0) >= 1, a
    assert seen == ["Bearer s3cret-service-account-token"]  # read from the file, trailing newline stripped

    a = await check(CheckAlertsInput(url=url, ca_file=str(ca)))
    assert not a.ok and a.error == "HTTP 401: not a Prometheus API answer: 'Unauthorized\\n'"
    wrong = tmp_path / "wrong"
    wrong.write_text("expired")
    a = await check(CheckAlertsInput(url=url, ca_file=str(ca), bearer_token_file=str(wrong)))
    assert a.error is not None and a.error.startswith("HTTP 401")

    # Without the CA file the system's trust store does not know the proxy's certificate.
    a = await check(CheckAlertsInput(url=url, bearer_token_file=str(token)))
    assert not a.ok and a.error is not None and "Certificate" in a.error
    assert len(seen) == 3  # the unverified connection never sent the token
