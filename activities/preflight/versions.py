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


#: The last OpenShift 3 minor version; OpenShift 3.N ships Kubernetes 1.N (3.6 → 1.6 ... 3.11 → 1.11).
LAST_OPENSHIFT_3_MINOR = 11


class ClusterVersion(NamedTuple):
    """An OpenShift release version, ``(major, minor)`` (``3.10``, ``4.21``): what the update
    rules count (module docstring of :func:`update_step_problem`)."""

    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


def parse_cluster_version(text: str) -> ClusterVersion:
    """An OpenShift release version as an operator writes it or ClusterVersion reports it:
    ``3.10``, ``v3.10.0``, ``4.21.3``, ``4.22.0-rc.1`` → ``(major, minor)``. Raises ValueError for
    anything else."""
    m = _VERSION.match(text.strip())
    if m is None:
        raise ValueError(f"not a release version (MAJOR.MINOR[.PATCH], e.g. 3.10 or 4.21.3): {text!r}")
    return ClusterVersion(int(m.group(1)), int(m.group(2)))


def openshift_from_kube(git_version: str) -> ClusterVersion | None:
    """The OpenShift 3 release of a cluster whose API answers ``/version`` with ``git_version``:
    Kubernetes 1.N with 6 ≤ N ≤ 11 is OpenShift 3.N (origin's release mapping, see the module
    docstring); None for any other version (OpenShift 4 reports its release in ClusterVersion
    only). Raises ValueError when ``git_version`` does not parse."""
    v = parse_version(git_version)
    if v.major == 1 and 6 <= v.minor <= LAST_OPENSHIFT_3_MINOR:
        return ClusterVersion(3, v.minor)
    return None


def update_step_problem(current: ClusterVersion, target: ClusterVersion) -> str | None:
    """Why an update of the cluster from ``current`` to ``target`` is refused, or None when it is
    one minor version at most (issue 41: the cluster-version operator's refusal of an update across
    more than one minor version). Sources: the Kubernetes version-skew policy's "Supported
    component upgrade order" (kubernetes.io/releases/version-skew-policy: kube-apiserver goes from
    1.n to 1.(n+1), and its instances stay within one minor version of each other, so a control
    plane moves one minor version at a time); OpenShift 4's update graph (a minor update goes to
    4.(n+1); ``oc adm upgrade`` offers no 4.n → 4.(n+2) edge); OpenShift 3's openshift-ansible,
    whose ``upgrade_control_plane`` playbooks exist per release, each from the one before
    (3.9 → 3.10 → 3.11). Refused: a downgrade, a change of major version, more than one minor
    version at once. The same minor version (a patch update, a run again after a partly done
    upgrade) is allowed."""
    if target < current:
        return f"{current} -> {target} is a downgrade: the cluster's version only goes forward"
    if target.major != current.major:
        return f"{current} -> {target} changes the major version: upgrade to the last {current.major}.x first"
    if target.minor > current.minor + 1:
        skipped = ", ".join(f"{current.major}.{m}" for m in range(current.minor + 1, target.minor))
        return (f"{current} -> {target} is {target.minor - current.minor} minor versions at once: one minor version at a time "
                f"(upgrade to {current.major}.{current.minor + 1} first; skipped: {skipped})")
    return None
