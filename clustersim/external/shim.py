"""``clustersim-ansible-playbook``: an ``ansible-playbook`` stand-in that acts on a running simulator.

Tests put it first on PATH as ``ansible-playbook``; it is then the "external command" a
procedure runs (spec §8.7). It accepts ``ansible-playbook``'s common form::

    ansible-playbook [-i INVENTORY] [-e K=V | -e JSON]... [-l HOST[,HOST]] [-v...] [-b] PLAYBOOK...

reads the INI inventory file, and POSTs it with the playbook path to
``<sim>/_sim/external/ansible-playbook``; it prints the run's output and exits with its code.
Without ``-i`` the inventory is ``$ANSIBLE_INVENTORY`` (a path, or several separated by commas,
read as one inventory), as ansible's ``DEFAULT_HOST_LIST`` setting reads it; the stand-in never
falls back to the machine's ``/etc/ansible/hosts``. The simulator is ``$CLUSTERSIM_URL``, or else
the server of the current context of the first ``$KUBECONFIG`` file (what ``lockkeeper sim
serve`` writes). Exit codes: the playbook's (0, 1, 2); 250 when the simulator cannot be reached,
no inventory is given or the arguments are wrong (ansible's "unexpected error").
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path

import yaml

UNEXPECTED = 250


def sim_url(environ: dict[str, str] | None = None) -> str:
    """The simulator's base URL (see module docstring). Raises ValueError when none is configured."""
    env = dict(os.environ if environ is None else environ)
    if env.get("CLUSTERSIM_URL"):
        return env["CLUSTERSIM_URL"].rstrip("/")
    first = (env.get("KUBECONFIG") or "").split(os.pathsep)[0]
    if not first:
        raise ValueError("set CLUSTERSIM_URL or KUBECONFIG to the simulator")
    cfg = yaml.safe_load(Path(first).read_text()) or {}
    ctx_name = cfg.get("current-context")
    ctx = next((c["context"] for c in cfg.get("contexts") or [] if c.get("name") == ctx_name), None)
    cluster_name = (ctx or {}).get("cluster")
    for c in cfg.get("clusters") or []:
        if c.get("name") == cluster_name or cluster_name is None:
            return str(c["cluster"]["server"]).rstrip("/")
    raise ValueError(f"{first}: no cluster for the current context")


def parse_extra_vars(values: list[str]) -> dict[str, str]:
    """``-e`` values: ``k=v k2=v2`` pairs or a JSON object (later values win)."""
    out: dict[str, str] = {}
    for v in values:
        v = v.strip()
        if v.startswith("{"):
            out.update({str(k): str(x) for k, x in json.loads(v).items()})
            continue
        for part in v.split():
            k, eq, x = part.partition("=")
            if not eq:
                raise ValueError(f"extra var {part!r} is not K=V")
            out[k] = x.strip("'\"")
    return out


def inventory_source(option: str, environ: dict[str, str] | None = None) -> str:
    """The inventory path(s): ``-i`` when given, else ``$ANSIBLE_INVENTORY``. Raises ValueError
    when neither is set."""
    env = os.environ if environ is None else environ
    found = option or env.get("ANSIBLE_INVENTORY", "")
    if not found.strip(","):
        raise ValueError("no inventory: give -i INVENTORY or set ANSIBLE_INVENTORY")
    return ",".join(p for p in found.split(",") if p)


def link_as_ansible_playbook(directory: str | os.PathLike[str]) -> Path:
    """Create ``DIRECTORY/ansible-playbook`` pointing at this stand-in's console script (next to
    the running interpreter), so that a test can put DIRECTORY first on PATH. Returns the link.
    Raises FileNotFoundError when the console script is not installed."""
    script = Path(sys.executable).parent / "clustersim-ansible-playbook"
    if not script.is_file():
        raise FileNotFoundError(f"{script}: install the project (pip install -e .) to get the console script")
    link = Path(directory) / "ansible-playbook"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(script)
    return link


def main(argv: list[str] | None = None) -> int:
    """Run the stand-in (see module docstring); returns the exit code."""
    parser = argparse.ArgumentParser(prog="ansible-playbook", add_help=True)
    parser.add_argument("-i", "--inventory", default="")
    parser.add_argument("-e", "--extra-vars", action="append", default=[])
    parser.add_argument("-l", "--limit", default="")
    parser.add_argument("-v", "--verbose", action="count", default=0)
    parser.add_argument("-b", "--become", action="store_true")
    parser.add_argument("playbook", nargs="+")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return UNEXPECTED if exc.code else 0
    try:
        extra = parse_extra_vars(args.extra_vars)
        inventory_path = inventory_source(args.inventory)
        inventory_text = "\n".join(Path(p).read_text() for p in inventory_path.split(","))
        url = sim_url()
    except (OSError, ValueError) as exc:
        print(f"ERROR! {exc}", file=sys.stderr)
        return UNEXPECTED
    code = 0
    for playbook in args.playbook:
        body = json.dumps({"playbook": playbook, "inventory": inventory_text, "inventory_path": inventory_path,
                           "extra_vars": extra, "limit": args.limit}).encode()
        req = urllib.request.Request(f"{url}/_sim/external/ansible-playbook", data=body,
                                     headers={"Content-Type": "application/json"}, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=3600) as resp:
                result = json.loads(resp.read())
        except (urllib.error.URLError, OSError, ValueError) as exc:
            print(f"ERROR! cannot reach the simulator at {url}: {exc}", file=sys.stderr)
            return UNEXPECTED
        sys.stdout.write(result.get("stdout", ""))
        sys.stderr.write(result.get("stderr", ""))
        code = int(result.get("exit", UNEXPECTED))
        if code != 0:
            break
    sys.stdout.flush()
    return code


def entry() -> None:
    """Console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":
    entry()
