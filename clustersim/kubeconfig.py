"""Kubeconfig files pointing kubectl and the Python clients at a running simulator."""

from __future__ import annotations

from pathlib import Path

import yaml

DUMMY_TOKEN = "clustersim-dummy-token"


def kubeconfig_dict(url: str, *, name: str = "clustersim", token: str = DUMMY_TOKEN) -> dict:
    """A kubeconfig (v1 Config) with one cluster (``server: url``), one bearer-token user and one
    current context. The simulator accepts and ignores the token."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": url}}],
        "users": [{"name": f"{name}-admin", "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": f"{name}-admin",
                                                 "namespace": "default"}}],
        "current-context": name,
        "preferences": {},
    }


def write_kubeconfig(path: str | Path, url: str, *, name: str = "clustersim") -> Path:
    """Write the kubeconfig for ``url`` to ``path`` (parents created, mode 0600); returns the path."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(yaml.safe_dump(kubeconfig_dict(url, name=name), sort_keys=False))
    p.chmod(0o600)
    return p
