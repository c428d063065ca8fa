"""Kubernetes version strings and the kubelet skew rule.

Version strings come as a ``/version`` ``gitVersion`` (``v1.11.0+d4cacc0`` on OpenShift 3.11,
``v1.27.8+4fab27b`` on 4.14, ``v1.30.2`` upstream, ``v1.37.0-clustersim`` from the simulator) or
as a Node's ``status.nodeInfo.kubeletVersion`` (the same form). Semantic Versioning 2.0.0 shapes
them: ``MAJOR.MINOR.PATCH``, then ``-PRERELEASE`` and ``+BUILD`` (OpenShift puts its commit in
the build part). OpenShift 3.x release numbers (``3.11.161``) are not Kubernetes versions:
OpenShift 3.N ships Kubernetes 1.(N), 3.11 → 1.11 (origin's ``/version`` answers the Kubernetes
version; ``/version/openshift`` the OpenShift one).

Kubernetes version-skew policy (https://kubernetes.io/releases/version-skew-policy/#kubelet):
"kubelet must not be newer than kube-apiserver"; it may be older (up to three minor versions
since 1.28, two before). The policy counts minor versions, so :func:`kubelet_too_new` compares
``(major, minor)``: a kubelet 1.11.5 under an API server 1.11.0 is within the policy.
"""

from __future__ import annotations

import re
from typing import NamedTuple

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:-([0-9A-Za-z.-]+))?(?:\+([0-9A-Za-z.-]+))?$")


class KubeVersion(NamedTuple):
    """A parsed version: ``major``, ``minor``, ``patch`` (0 when absent), and the pre-release and
    build parts (``""`` when absent)."""

    major: int
    minor: int
    patch: int
    prerelease: str = ""
    build: str = ""

    def __str__(self) -> str:
        pre = f"-{self.prerelease}" if self.prerelease else ""
        build = f"+{self.build}" if self.build else ""
        return f"v{self.major}.{self.minor}.{self.patch}{pre}{build}"

    @property
    def minor_version(self) -> tuple[int, int]:
        """``(major, minor)``, what the skew policy compares."""
        return self.major, self.minor


def parse_version(text: str) -> KubeVersion:
    """``v1.10.0+b81c8f8`` → ``KubeVersion(1, 10, 0, "", "b81c8f8")``; a leading ``v`` and the
    patch are optional (``1.11``). Raises ValueError for anything else (``3.11.161-1.el7`` parses
    as 3.11.161 and is not a Kubernetes version: callers pass Kubernetes versions)."""
    m = _VERSION.match(text.strip())
    if m is None:
        raise ValueError(f"not a Kubernetes version (vMAJOR.MINOR.PATCH[-PRE][+BUILD]): {text!r}")
    major, minor, patch, pre, build = m.groups()
    return KubeVersion(int(major), int(minor), int(patch or 0), pre or "", build or "")


def kubelet_too_new(kubelet: str, apiserver: str) -> bool:
    """The kubelet version is newer than the API server's by minor version (module docstring).
    Raises ValueError when either does not parse."""
    return parse_version(kubelet).minor_version > parse_version(apiserver).minor_version
