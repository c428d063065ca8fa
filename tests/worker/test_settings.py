"""Settings: environment names, validation errors that name the variable or file, secrets."""

from __future__ import annotations

from pathlib import Path

import pytest

from workers.settings import Settings, SettingsError, load_settings

ENV_NAMES = [
    "TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "TEMPORAL_API_KEY", "TEMPORAL_TLS", "TEMPORAL_TLS_CERT",
    "TEMPORAL_TLS_KEY", "TEMPORAL_TLS_CA", "KUBECONFIG", "KUBE_CONTEXT",
]

KUBECONFIG = """
apiVersion: v1
kind: Config
clusters: [{name: sim, cluster: {server: "http://127.0.0.1:1"}}]
users: [{name: admin, user: {token: abc}}]
contexts: [{name: sim, context: {cluster: sim, user: admin}}]
current-context: sim
"""


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("LOCKKEEPER_") or name in ENV_NAMES:
            monkeypatch.delenv(name)


def test_defaults() -> None:
    s = load_settings()
    assert (s.temporal_address, s.temporal_namespace, s.task_queue) == ("localhost:7233", "default", "lockkeeper")
    assert not s.uses_tls and s.temporal_api_key is None


def test_plain_and_prefixed_names_prefixed_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEMPORAL_ADDRESS", "temporal.example:7233")
    monkeypatch.setenv("TEMPORAL_NAMESPACE", "ops")
    assert load_settings().temporal_address == "temporal.example:7233"
    assert load_settings().temporal_namespace == "ops"
    monkeypatch.setenv("LOCKKEEPER_TEMPORAL_ADDRESS", "other:7000")
    assert load_settings().temporal_address == "other:7000"
    assert load_settings(temporal_address="flag:1").temporal_address == "flag:1"


@pytest.mark.parametrize("address", ["localhost", "host:port", ":7233", "host:0", "host:70000"])
def test_address_must_be_host_port(monkeypatch: pytest.MonkeyPatch, address: str) -> None:
    monkeypatch.setenv("TEMPORAL_ADDRESS", address)
    with pytest.raises(SettingsError, match="TEMPORAL_ADDRESS must be host:port"):
        load_settings()


def test_cert_without_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cert = tmp_path / "client.pem"
    cert.write_text("x")
    monkeypatch.setenv("TEMPORAL_TLS_CERT", str(cert))
    with pytest.raises(SettingsError, match="TEMPORAL_TLS_KEY is not set"):
        load_settings()


def test_tls_file_missing_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEMPORAL_TLS_CERT", str(tmp_path / "nope.pem"))
    monkeypatch.setenv("TEMPORAL_TLS_KEY", str(tmp_path / "nope.key"))
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert str(tmp_path / "nope.pem") in str(err.value) and str(tmp_path / "nope.key") in str(err.value)


def test_tls_with_cert_and_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("c.pem", "k.pem"):
        (tmp_path / name).write_text("x")
    monkeypatch.setenv("TEMPORAL_TLS_CERT", str(tmp_path / "c.pem"))
    monkeypatch.setenv("TEMPORAL_TLS_KEY", str(tmp_path / "k.pem"))
    assert load_settings().uses_tls


def test_api_key_is_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEMPORAL_API_KEY", "sk-verysecret")
    s = load_settings()
    assert s.uses_tls
    assert s.temporal_api_key is not None and s.temporal_api_key.get_secret_value() == "sk-verysecret"
    assert "sk-verysecret" not in repr(s) and "sk-verysecret" not in str(s.safe_dict())


def test_kubeconfig_missing_file_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    with pytest.raises(SettingsError, match=f"KUBECONFIG: file {tmp_path / 'missing'} does not exist"):
        load_settings().check_kubeconfig()


def test_kubeconfig_bad_yaml_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text("clusters: [unclosed\n  - : :")
    monkeypatch.setenv("KUBECONFIG", str(path))
    with pytest.raises(SettingsError, match=f"{path} is not valid YAML"):
        load_settings().check_kubeconfig()


def test_kubeconfig_not_a_kubeconfig(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text("hello: world\n")
    with pytest.raises(SettingsError, match="not a kubeconfig"):
        Settings(kubeconfig=path).check_kubeconfig()


def test_kubeconfig_context(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'absent'}:{path}")  # first existing entry wins
    s = load_settings()
    assert s.kubeconfig == path
    s.check_kubeconfig()
    monkeypatch.setenv("KUBE_CONTEXT", "prod")
    with pytest.raises(SettingsError, match="context 'prod' not in"):
        load_settings().check_kubeconfig()


def test_several_problems_reported_together(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCKKEEPER_LOG_LEVEL", "loud")
    monkeypatch.setenv("LOCKKEEPER_MAX_CONCURRENT_ACTIVITIES", "0")
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert "LOCKKEEPER_LOG_LEVEL: log level must be" in str(err.value)
    assert "LOCKKEEPER_MAX_CONCURRENT_ACTIVITIES" in str(err.value)


def test_ssh_sudo_is_checked_at_start_and_empty_means_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCKKEEPER_SSH_SUDO", "maybe")
    with pytest.raises(SettingsError, match="LOCKKEEPER_SSH_SUDO"):
        load_settings()
    monkeypatch.setenv("LOCKKEEPER_SSH_SUDO", "")
    assert load_settings().ssh_sudo is None
    monkeypatch.setenv("LOCKKEEPER_SSH_SUDO", "off")
    assert load_settings().ssh_sudo is False


@pytest.mark.parametrize(("role", "threads"), [("all", 250), ("workflows", 50), ("activities", 200)])
def test_worker_role_sizes_the_threads(monkeypatch: pytest.MonkeyPatch, role: str, threads: int) -> None:
    """A ``workflows`` worker runs only local activities, an ``activities`` worker only remote
    ones: each gets threads (and API connections) for its own slots."""
    from workers.settings import activity_threads

    monkeypatch.setenv("LOCKKEEPER_WORKER_ROLE", role)
    s = load_settings(max_concurrent_activities=200, max_concurrent_local_activities=50)
    assert s.worker_role == role and activity_threads(s) == threads


def test_worker_role_unknown_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCKKEEPER_WORKER_ROLE", "both")
    with pytest.raises(SettingsError, match="LOCKKEEPER_WORKER_ROLE.*'all', 'workflows' or 'activities'"):
        load_settings()


def test_pollers_map_to_the_sdks_poller_behaviour(monkeypatch: pytest.MonkeyPatch) -> None:
    """``workflow_task_pollers`` / ``activity_task_pollers``: a fixed number of open polls, or
    0 for the SDK's autoscaling; negative is refused naming the variable."""
    from temporalio.worker import PollerBehaviorAutoscaling, PollerBehaviorSimpleMaximum

    from workers.worker import _pollers

    monkeypatch.setenv("LOCKKEEPER_WORKFLOW_TASK_POLLERS", "20")
    monkeypatch.setenv("LOCKKEEPER_ACTIVITY_TASK_POLLERS", "0")
    s = load_settings()
    assert _pollers(s.workflow_task_pollers) == PollerBehaviorSimpleMaximum(maximum=20)
    assert isinstance(_pollers(s.activity_task_pollers), PollerBehaviorAutoscaling)
    assert (load_settings(workflow_task_pollers=None).workflow_task_pollers, Settings().activity_task_pollers) == (20, 0)
    monkeypatch.setenv("LOCKKEEPER_WORKFLOW_TASK_POLLERS", "-1")
    with pytest.raises(SettingsError, match="LOCKKEEPER_WORKFLOW_TASK_POLLERS"):
        load_settings()


def test_versioning_defaults_build_id_from_the_package_version(monkeypatch: pytest.MonkeyPatch) -> None:
    """Worker versioning is on by default, in deployment ``lockkeeper``, as the build named by the
    installed package's version; ``LOCKKEEPER_BUILD_ID`` (or ``--build-id``) overrides it, and an
    empty one means the default."""
    from importlib.metadata import version

    s = load_settings()
    assert (s.versioning, s.deployment_name, s.build_id, s.promote) == (True, "lockkeeper", version("lockkeeper"), "auto")
    monkeypatch.setenv("LOCKKEEPER_BUILD_ID", "2024.06.1-abc123")
    monkeypatch.setenv("LOCKKEEPER_DEPLOYMENT_NAME", "ops-lockkeeper")
    monkeypatch.setenv("LOCKKEEPER_PROMOTE", "never")
    monkeypatch.setenv("LOCKKEEPER_VERSIONING", "false")
    s = load_settings()
    assert (s.versioning, s.deployment_name, s.build_id, s.promote) == (False, "ops-lockkeeper", "2024.06.1-abc123", "never")
    assert load_settings(build_id="flag").build_id == "flag"
    monkeypatch.setenv("LOCKKEEPER_BUILD_ID", " ")
    assert load_settings().build_id == version("lockkeeper")


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("LOCKKEEPER_DEPLOYMENT_NAME", "lock.keeper", "without '.'"),
        ("LOCKKEEPER_DEPLOYMENT_NAME", " ", "1 to 255 characters"),
        ("LOCKKEEPER_BUILD_ID", "__unversioned__", "not '__unversioned__'"),
        ("LOCKKEEPER_BUILD_ID", "x" * 256, "1 to 255 characters"),
        ("LOCKKEEPER_PROMOTE", "always", "'auto' or 'never'"),
    ],
)
def test_versioning_settings_are_checked_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, message: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match=f"{name}: .*{message}"):
        load_settings()


def test_without_the_package_the_build_id_must_be_given(monkeypatch: pytest.MonkeyPatch) -> None:
    """A source tree on PYTHONPATH has no package version to name its build: say so, by name."""
    import importlib.metadata

    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    with pytest.raises(SettingsError, match="build_id: .*not installed.*set LOCKKEEPER_BUILD_ID"):
        load_settings()
    monkeypatch.setenv("LOCKKEEPER_BUILD_ID", "git-1a2b3c")
    assert load_settings().build_id == "git-1a2b3c"
