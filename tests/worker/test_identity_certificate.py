"""The operator's identity from the Temporal client certificate (workers.client.certificate_identity,
lockkeeper.cli.common.identity_of / check_identity / decisions.stamp_decision), without a server: the CN is
the identity, a different --identity is refused with exit 2, a certificate without CN or not PEM
is a one-line error, and decisions are stamped with sent_at / deadline / connection_identity."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import typer
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from lockkeeper.cli import common, decisions
from workers.client import CertificateError, certificate_identity
from workers.settings import Settings
from workflows.kit.models import ApproveInput


def self_signed(tmp_path: Path, *attrs: x509.NameAttribute) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(list(attrs))
    now = datetime.now(UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - timedelta(minutes=1))
            .not_valid_after(now + timedelta(days=1)).sign(key, hashes.SHA256()))
    crt, pem_key = tmp_path / "client.crt", tmp_path / "client.key"
    crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pem_key.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    return crt, pem_key


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    import os

    for k in list(os.environ):
        if k.startswith(("LOCKKEEPER_", "TEMPORAL_")):
            monkeypatch.delenv(k)
    return monkeypatch


def test_cn_is_the_identity_and_a_different_one_is_refused(tmp_path: Path, clean_env: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    crt, key = self_signed(tmp_path, x509.NameAttribute(NameOID.ORGANIZATION_NAME, "ops"), x509.NameAttribute(NameOID.COMMON_NAME, "alice"))
    settings = Settings(temporal_tls_cert=crt, temporal_tls_key=key)
    assert certificate_identity(settings) == "alice" and settings.uses_tls
    assert certificate_identity(Settings()) is None

    clean_env.setenv("LOCKKEEPER_TEMPORAL_TLS_CERT", str(crt))
    clean_env.setenv("LOCKKEEPER_TEMPORAL_TLS_KEY", str(key))
    assert common.identity_of(None) == "alice"
    assert common.identity_of("alice") == "alice"
    with pytest.raises(typer.Exit) as info:
        common.identity_of("mallory")
    assert info.value.exit_code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "'mallory'" in err and "'alice'" in err, err
    assert common.check_identity(settings, "alice") == "alice"
    with pytest.raises(common.CliError) as refused:
        common.check_identity(settings, "mallory")
    assert refused.value.code == 2


def test_unreadable_or_nameless_certificates_are_one_line_errors(tmp_path: Path, clean_env: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    crt, key = self_signed(tmp_path, x509.NameAttribute(NameOID.ORGANIZATION_NAME, "ops"))
    with pytest.raises(CertificateError, match="no common name"):
        certificate_identity(Settings(temporal_tls_cert=crt, temporal_tls_key=key))
    junk = tmp_path / "junk.crt"
    junk.write_text("not a certificate\n")
    with pytest.raises(CertificateError, match="not a readable PEM certificate"):
        certificate_identity(Settings(temporal_tls_cert=junk, temporal_tls_key=key))
    clean_env.setenv("LOCKKEEPER_TEMPORAL_TLS_CERT", str(junk))
    clean_env.setenv("LOCKKEEPER_TEMPORAL_TLS_KEY", str(key))
    with pytest.raises(typer.Exit) as info:
        common.identity_of("bob")
    assert info.value.exit_code == 2 and len(capsys.readouterr().err.strip().splitlines()) == 1


def test_decisions_are_stamped_with_a_deadline_inside_the_wait() -> None:
    before = datetime.now(UTC)
    arg, deadline = decisions.stamp_decision(ApproveInput(identity="bob"), 30.0, "bob")
    assert isinstance(arg, ApproveInput) and arg.deadline == deadline and arg.connection_identity == "bob"
    assert arg.sent_at is not None and before <= arg.sent_at <= datetime.now(UTC)
    assert (deadline - arg.sent_at).total_seconds() == pytest.approx(28.0)  # the wait less the 2 s margin
    _, short = decisions.stamp_decision(ApproveInput(identity="bob"), 5.0, None)
    assert short is not None
    plain = {"identity": "bob", "reason": "x"}
    assert decisions.stamp_decision(plain, 30.0, None) == (plain, None)  # no deadline field: sent unchanged
