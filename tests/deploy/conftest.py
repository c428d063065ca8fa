"""Deployment tests: the compose file, the image's lock, the Kubernetes manifests, RBAC proven by
recording, graceful shutdown and the metrics/health endpoints (dev server + clustersim + worker
subprocesses, as in the procedures' end-to-end tests)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
KUBECTL = Path(sys.executable).parent / "kubectl"


def kustomize_build(path: Path) -> list[dict[str, Any]]:
    """``kubectl kustomize PATH`` → the rendered objects. Fails the test with kubectl's stderr."""
    proc = subprocess.run([str(KUBECTL), "kustomize", str(path)], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        pytest.fail(f"kubectl kustomize {path} failed:\n{proc.stderr}")
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


@pytest.fixture(scope="session")
def rendered_example() -> list[dict[str, Any]]:
    """The example overlay, built once per session."""
    return kustomize_build(DEPLOY / "k8s" / "overlays" / "example")
