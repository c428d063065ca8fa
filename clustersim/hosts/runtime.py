"""``docker`` and ``crictl`` of the host interpreter: containers derived from the pods bound to
the node, images, and pulls that take ``pull_seconds`` of simulated time.

Container names follow the kubelet's dockershim scheme
``k8s_<container>_<pod>_<namespace>_<pod uid>_<restart count>`` (kubernetes
``pkg/kubelet/dockershim/naming.go``), so ``docker ps | grep k8s_sdn_sdn`` works as in the seeds.
Daemon-down messages are docker 1.13's ``Cannot connect to the Docker daemon at
unix:///var/run/docker.sock. Is the docker daemon running?`` and crictl 1.11's ``connect endpoint``
error.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from clustersim.hosts.ctx import Ctx
from clustersim.hosts.model import RUNTIME_UNITS

Result = tuple[str, str, int]
DOCKER_DOWN = "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?\n"
CRIO_DOWN = ("time=\"2020-06-01T00:00:00Z\" level=fatal msg=\"connect: connect endpoint "
             "'unix:///var/run/crio/crio.sock', make sure you are running as root and the endpoint has been "
             "started: context deadline exceeded\"\n")


def _id(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def containers(ctx: Ctx, runtime: str) -> list[dict[str, Any]]:
    """Running containers of ``runtime`` on the host: one per container of each Running pod,
    none while that runtime is not the host's active runtime."""
    host = ctx.host
    if host.runtime != runtime or not host.runtime_up():
        return []
    out = []
    for pod in ctx.world.pods_on(host):
        meta, st = pod["metadata"], pod.get("status") or {}
        if st.get("phase") != "Running" or meta.get("deletionTimestamp"):
            continue
        restarts = {c.get("name"): c.get("restartCount", 0) for c in st.get("containerStatuses") or []}
        for c in pod["spec"].get("containers") or []:
            name = (f"k8s_{c['name']}_{meta['name']}_{meta.get('namespace', '')}_{meta.get('uid', '')}_"
                    f"{restarts.get(c['name'], 0)}")
            out.append({"id": _id(name), "name": name, "image": c.get("image", ""), "pod": meta["name"],
                        "container": c["name"], "pod_id": _id(meta.get("uid", meta["name"]))})
    return out


def _filters(args: list[str]) -> tuple[list[str], list[str]]:
    out, rest, i = [], [], 0
    while i < len(args):
        if args[i] in ("--filter", "-f") and i + 1 < len(args):
            out.append(args[i + 1])
            i += 2
            continue
        if args[i].startswith("--filter="):
            out.append(args[i].split("=", 1)[1])
        else:
            rest.append(args[i])
        i += 1
    return out, rest


async def _pull(ctx: Ctx, image: str) -> tuple[bool, str]:
    known = ctx.world.registry_images()
    if known and image not in known:
        return False, f"manifest for {image} not found"
    await ctx.world.sim_sleep(ctx.world.pull_seconds(ctx.host))
    ctx.host.images.add(image)
    return True, ""


#: What docker 1.13 printed for every exec into R3's etcd container (seed 002: the etcd backup
#: task and the etcd pod's liveness probe alike); docker exits 126 when the runtime cannot
#: start the command.
OCI_EXEC_FAILED = ('rpc error: code = 2 desc = oci runtime error: exec failed: container_linux.go:247: '
                   'starting container process caused "process_linux.go:110: decoding init error from pipe '
                   'caused \\"read parent: connection reset by peer\\""\n')


def _exec_broken(ctx: Ctx, container: dict[str, Any]) -> bool:
    """Host fault ``exec_broken=NAME``: exec into a container named NAME (its Kubernetes
    container name, e.g. ``etcd``) fails as in R3."""
    broken = {f.split("=", 1)[1] for f in ctx.host.faults if f.startswith("exec_broken=")}
    return container["container"] in broken


async def _exec(ctx: Ctx, runtime: str, args: list[str]) -> Result:
    """``docker exec [-i] [-t] ID|NAME CMD...``: the command runs on the host interpreter (the
    node's containers here are host-level daemons such as OVS, whose commands the host model
    provides). Unknown container: docker's ``Error: No such container: ID`` (1)."""
    while args and args[0].startswith("-"):
        args = args[1:]
    if len(args) < 2:
        return "", '"docker exec" requires at least 2 arguments.\n', 1
    ref, argv = args[0], args[1:]
    match = [c for c in containers(ctx, runtime) if c["id"].startswith(ref) or c["name"] == ref]
    if not match:
        return "", f"Error: No such container: {ref}\n", 1
    if _exec_broken(ctx, match[0]):
        return "", OCI_EXEC_FAILED, 126
    if ctx.dispatch is None:
        return "", "exec is not available here\n", 1
    return await ctx.dispatch(argv)


async def cmd_docker(ctx: Ctx) -> Result:
    """``docker ps [-q] [--filter name=X] | pull IMG | image inspect IMG | images | exec ID CMD...``."""
    host, args = ctx.host, ctx.args
    if not args:
        return "", "Usage:\tdocker COMMAND\n", 1
    if not (host.up and host.unit_active(RUNTIME_UNITS["docker"])):
        return "", DOCKER_DOWN, 1
    sub = args[0]
    if sub == "ps":
        filters, rest = _filters(args[1:])
        rows = containers(ctx, "docker")
        for f in filters:
            key, _, val = f.partition("=")
            if key == "name":
                rows = [r for r in rows if val in r["name"]]
        if "-q" in rest:
            return "".join(r["id"][:12] + "\n" for r in rows), "", 0
        head = f"{'CONTAINER ID':<20}{'IMAGE':<20}{'COMMAND':<25}{'CREATED':<20}{'STATUS':<20}{'PORTS':<20}NAMES\n"
        command = '"/usr/bin/run"'
        body = "".join(f"{r['id'][:12]:<20}{r['image'][:17]:<20}{command:<25}{'2 hours ago':<20}"
                       f"{'Up 2 hours':<20}{'':<20}{r['name']}\n" for r in rows)
        return head + body, "", 0
    if sub == "pull" and len(args) == 2:
        ok, msg = await _pull(ctx, args[1])
        if not ok:
            return f"Trying to pull repository {args[1]} ... \n", f"Error response from daemon: {msg}\n", 1
        digest = _id(args[1])
        tag = args[1].rsplit(":", 1)[-1] if ":" in args[1].rsplit("/", 1)[-1] else "latest"
        return (f"Trying to pull repository {args[1]} ... \n{tag}: Pulling from {args[1].split(':')[0]}\n"
                f"Digest: sha256:{digest}\nStatus: Downloaded newer image for {args[1]}\n"), "", 0
    if (sub == "image" and args[1:2] == ["inspect"]) or sub == "inspect":
        names = args[2:] if sub == "image" else args[1:]
        found = [n for n in names if n in host.images]
        missing = [n for n in names if n not in host.images]
        body = json.dumps([{"Id": "sha256:" + _id(n), "RepoTags": [n]} for n in found], indent=4)
        return body + "\n", "".join(f"Error: No such image: {n}\n" for n in missing), 1 if missing else 0
    if sub == "exec":
        return await _exec(ctx, "docker", args[1:])
    if sub == "images":
        head = f"{'REPOSITORY':<40}{'TAG':<20}{'IMAGE ID':<20}{'CREATED':<20}SIZE\n"
        rows = []
        for ref in sorted(host.images):
            repo, _, tag = ref.rpartition(":") if ":" in ref.rsplit("/", 1)[-1] else (ref, "", "latest")
            rows.append(f"{repo:<40}{tag:<20}{_id(ref)[:12]:<20}{'2 weeks ago':<20}1.1 GB\n")
        return head + "".join(rows), "", 0
    return "", f"docker: '{sub}' is not simulated\n", 1


async def cmd_crictl(ctx: Ctx) -> Result:
    """``crictl ps [-q] | pull IMG | inspecti IMG | images | exec ID CMD...`` (needs crio running)."""
    host, args = ctx.host, ctx.args
    if not host.unit_active(RUNTIME_UNITS["cri-o"]) or not host.up:
        return "", CRIO_DOWN, 1
    sub = args[0] if args else ""
    if sub == "ps":
        rows = containers(ctx, "cri-o")
        if "-q" in args:
            return "".join(r["id"] + "\n" for r in rows), "", 0
        head = (f"{'CONTAINER ID':<20}{'IMAGE':<20}{'CREATED':<20}{'STATE':<20}{'NAME':<20}{'ATTEMPT':<20}"
                "POD ID\n")
        return head + "".join(f"{r['id'][:13]:<20}{r['image'][:17]:<20}{'2 hours ago':<20}{'Running':<20}"
                              f"{r['container']:<20}{'0':<20}{r['pod_id'][:13]}\n" for r in rows), "", 0
    if sub == "pull" and len(args) == 2:
        ok, msg = await _pull(ctx, args[1])
        if not ok:
            return "", f'time="2020-06-01T00:00:00Z" level=fatal msg="pulling image failed: {msg}"\n', 1
        return f"Image is up to date for {args[1]}\n", "", 0
    if sub == "inspecti" and len(args) == 2:
        if args[1] not in host.images:
            return "", f'time="2020-06-01T00:00:00Z" level=fatal msg="no such image {args[1]} present"\n', 1
        return json.dumps({"status": {"id": "sha256:" + _id(args[1]), "repoTags": [args[1]]}}, indent=2) + "\n", "", 0
    if sub == "exec":
        return await _exec(ctx, "cri-o", args[1:])
    if sub == "images":
        return "IMAGE\tTAG\tIMAGE ID\tSIZE\n" + "".join(f"{i}\n" for i in sorted(host.images)), "", 0
    return "", f"crictl: '{sub}' is not simulated\n", 1
