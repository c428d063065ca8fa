"""``systemctl``, ``rpm`` and ``yum`` of the host interpreter (RHEL 7: systemd 219, rpm 4.11, yum 3.4).

Outputs and exit codes (procedures-spec §8.3, systemd ``systemctl(1)`` "EXIT STATUS" and LSB
status codes):

- ``is-active``: ``active`` (0), ``inactive`` (3), ``unknown`` for a unit that does not exist (3);
- ``is-enabled``: ``enabled`` (0), ``disabled`` (1); a missing unit prints
  ``Failed to get unit file state for X.service: No such file or directory`` (1);
- ``stop`` of a missing unit: ``Failed to stop X.service: Unit X.service not loaded.`` (5);
  ``start``: ``Failed to start X.service: Unit not found.`` (5);
- ``enable``/``disable`` of a missing unit: ``Failed to execute operation: No such file or directory`` (1);
- ``reload`` changes nothing on an active unit (its configuration is re-read); a missing unit
  prints ``Failed to reload X.service: Unit X.service not loaded.`` (5), an inactive one
  ``X.service is not active, cannot reload.`` (1);
- ``rpm -q P``: ``P-VERSION-RELEASE.ARCH`` or ``package P is not installed``; the exit code is
  the number of packages not installed;
- ``yum -y remove|install``: a transaction summary ending in ``Complete!``; an unknown package
  to install prints ``No package P available.`` and ``Error: Nothing to do`` (1).
"""

from __future__ import annotations

from clustersim.hosts.ctx import Ctx, SessionDropped
from clustersim.hosts.model import Unit, norm

Result = tuple[str, str, int]
WANTS = "/etc/systemd/system/multi-user.target.wants"


def _unit(name: str) -> str:
    return name[: -len(".service")] if name.endswith(".service") else name


def set_active(ctx: Ctx, name: str, active: bool) -> None:
    """Change a unit's active state and tell the world (Node readiness, runtime containers)."""
    unit = ctx.host.units[name]
    was = unit.active
    unit.active = active
    if was != active:
        ctx.world.unit_changed(ctx.host, name, was)


async def cmd_systemctl(ctx: Ctx) -> Result:
    """``systemctl [-q] VERB UNIT...`` (see module docstring); ``reboot`` raises SessionDropped."""
    args = [a for a in ctx.args if not a.startswith("-")]
    quiet = "-q" in ctx.args or "--quiet" in ctx.args
    if not args:
        return "", "systemctl: list-units is not simulated\n", 1
    verb, names = args[0], [_unit(a) for a in args[1:]]
    host = ctx.host
    if verb == "daemon-reload":
        return "", "", 0
    if verb == "reboot":
        ctx.world.request_reboot(host)
        raise SessionDropped
    if verb not in ("start", "stop", "restart", "reload", "enable", "disable", "is-active", "is-enabled", "status"):
        return "", f'Unknown operation \'{verb}\'.\n', 1
    if not names:
        return "", "Too few arguments.\n", 1
    out, err, code = [], [], 0
    for n in names:
        u = host.units.get(n)
        svc = f"{n}.service"
        if verb == "is-active":
            state = "unknown" if u is None else ("active" if u.active else "inactive")
            if not quiet:
                out.append(state + "\n")
            code = code or (0 if state == "active" else 3)
        elif verb == "is-enabled":
            if u is None:
                err.append(f"Failed to get unit file state for {svc}: No such file or directory\n")
                code = 1
            else:
                if not quiet:
                    out.append(("enabled" if u.enabled else "disabled") + "\n")
                code = code or (0 if u.enabled else 1)
        elif u is None:
            if verb == "stop":
                err.append(f"Failed to stop {svc}: Unit {svc} not loaded.\n")
                code = 5
            elif verb in ("start", "restart"):
                err.append(f"Failed to {verb} {svc}: Unit not found.\n")
                code = 5
            elif verb == "reload":
                err.append(f"Failed to reload {svc}: Unit {svc} not loaded.\n")
                code = 5
            elif verb == "status":
                err.append(f"Unit {svc} could not be found.\n")
                code = 4
            else:
                err.append("Failed to execute operation: No such file or directory\n")
                code = 1
        elif verb == "stop":
            set_active(ctx, n, False)
        elif verb == "start":
            set_active(ctx, n, True)
        elif verb == "restart":
            set_active(ctx, n, False)
            set_active(ctx, n, True)
        elif verb == "reload":
            if not u.active:
                err.append(f"{svc} is not active, cannot reload.\n")
                code = code or 1
        elif verb == "enable":
            if not u.enabled:
                err.append(f"Created symlink from {WANTS}/{svc} to /usr/lib/systemd/system/{svc}.\n")
            u.enabled = True
        elif verb == "disable":
            if u.enabled:
                err.append(f"Removed symlink {WANTS}/{svc}.\n")
            u.enabled = False
        elif verb == "status":
            state = "active (running)" if u.active else "inactive (dead)"
            vendor = "enabled" if u.enabled else "disabled"
            out.append(f"\u25cf {svc}\n   Loaded: loaded (/usr/lib/systemd/system/{svc}; {vendor}; "
                       f"vendor preset: disabled)\n   Active: {state}\n")
            code = code or (0 if u.active else 3)
    return "".join(out), "".join(err), code


def _nvra(ctx: Ctx, name: str) -> str:
    cat = ctx.world.catalog().get(name)
    arch = cat.arch if cat else "x86_64"
    return f"{name}-{ctx.host.packages[name]}.{arch}"


def _queryformat(fmt: str, ctx: Ctx, name: str) -> str:
    version = ctx.host.packages[name]
    ver, _, rel = version.partition("-")
    cat = ctx.world.catalog().get(name)
    text = (fmt.replace("%{NAME}", name).replace("%{VERSION}", ver).replace("%{RELEASE}", rel)
            .replace("%{ARCH}", cat.arch if cat else "x86_64"))
    # rpm expands C escapes in --queryformat itself (the shell passed them literally).
    return text.replace("\\n", "\n").replace("\\t", "\t")


async def cmd_rpm(ctx: Ctx) -> Result:
    """``rpm -q P...`` / ``rpm -qa`` with ``--qf``/``--queryformat`` (%{NAME} %{VERSION} %{RELEASE} %{ARCH})."""
    args = list(ctx.args)
    fmt: str | None = None
    if "--qf" in args or "--queryformat" in args:
        i = args.index("--qf") if "--qf" in args else args.index("--queryformat")
        if i + 1 >= len(args):
            return "", "rpm: option requires an argument -- 'queryformat'\n", 1
        fmt = args[i + 1]
        del args[i:i + 2]
    for a in list(args):
        if a.startswith("--qf=") or a.startswith("--queryformat="):
            fmt = a.split("=", 1)[1]
            args.remove(a)
    if args[:1] == ["-qa"] or (args[:1] == ["-q"] and "-a" in args):
        names = sorted(ctx.host.packages)
        if fmt is not None:
            return "".join(_queryformat(fmt, ctx, n) for n in names), "", 0
        return "".join(_nvra(ctx, n) + "\n" for n in names), "", 0
    if args[:1] != ["-q"]:
        return "", "rpm: only -q and -qa are simulated\n", 1
    out, missing = [], 0
    for name in args[1:]:
        if name in ctx.host.packages:
            out.append(_queryformat(fmt, ctx, name) if fmt is not None else _nvra(ctx, name) + "\n")
        else:
            out.append(f"package {name} is not installed\n")
            missing += 1
    return "".join(out), "", min(missing, 255)


def remove_package(ctx: Ctx, name: str) -> None:
    """Erase ``name``: its units stop and vanish, its files go, modified config files stay as
    ``PATH.rpmsave`` (what rpm does with a ``%config`` file changed since install)."""
    host = ctx.host
    pdef = ctx.world.catalog().get(name)
    del host.packages[name]
    if pdef is None:
        return
    for u in pdef.units:
        if u in host.units:
            if host.units[u].active:
                set_active(ctx, u, False)
            del host.units[u]
    for path in pdef.files:
        p = norm(path)
        if p in pdef.config_files and p in host.files:
            host.files[p + ".rpmsave"] = host.files[p]
        host.files.pop(p, None)


def pick_version(ctx: Ctx, name: str, pin: str | None = None) -> str | None:
    """The VERSION-RELEASE ``yum install NAME[-PIN]`` would install: the catalog's ``latest``
    (else ``version``) unpinned; with ``pin`` (a VERSION such as ``3.11.161``) whichever of the
    two has that VERSION, or None when no such build exists."""
    pdef = ctx.world.catalog()[name]
    builds = [v for v in (pdef.latest, pdef.version) if v]
    if pin is None:
        return builds[0]
    return next((v for v in builds if v.split("-", 1)[0] == pin), None)


def install_package(ctx: Ctx, name: str, version: str | None = None) -> None:
    """Install ``name`` from the catalog at ``version`` (default: :func:`pick_version`): its
    units appear (disabled, inactive), its files are written."""
    host = ctx.host
    pdef = ctx.world.catalog()[name]
    host.packages[name] = version or pick_version(ctx, name) or pdef.version
    for u in pdef.units:
        host.units.setdefault(u, Unit())
    for path, content in pdef.files.items():
        host.files[norm(path)] = (content.replace("{ip}", host.ip).replace("{name}", host.name)
                                  .replace("{group}", host.node_group))


async def cmd_yum(ctx: Ctx) -> Result:
    """``yum [-y] remove|erase|install P...`` against the catalog (see module docstring)."""
    args = [a for a in ctx.args if a not in ("-y", "--assumeyes", "-q")]
    yes = len(args) != len(ctx.args)
    if not args or args[0] not in ("remove", "erase", "install"):
        return "", "yum: only install/remove are simulated\n", 1
    verb, names = args[0], args[1:]
    host = ctx.host
    if verb in ("remove", "erase"):
        todo = [n for n in names if n in host.packages]
        out = [f"No Match for argument: {n}\n" for n in names if n not in host.packages]
        if not todo:
            return "".join(out) + "No Packages marked for removal\n", "", 0
        if not yes:
            return "".join(out) + "Is this ok [y/N]: Exiting on user command\n", "", 1
        lines = [f"  {n}.{(ctx.world.catalog().get(n).arch if ctx.world.catalog().get(n) else 'x86_64')} 0:{host.packages[n]}"
                 for n in todo]
        for n in todo:
            remove_package(ctx, n)
        return "".join(out) + "\nRemoved:\n" + "\n".join(lines) + "\n\nComplete!\n", "", 0
    catalog = ctx.world.catalog()
    unknown = [n for n in names if n not in catalog]
    out = [f"No package {n} available.\n" for n in unknown]
    todo = [n for n in names if n in catalog and n not in host.packages]
    out += [f"Package {n}-{host.packages[n]}.{catalog[n].arch} already installed and latest version\n"
            for n in names if n in host.packages]
    if not todo:
        return "".join(out), "Error: Nothing to do\n" if unknown else "", 1 if unknown else 0
    if not yes:
        return "".join(out) + "Is this ok [y/d/N]: Exiting on user command\n", "", 1
    for n in todo:
        install_package(ctx, n)
    lines = [f"  {n}.{catalog[n].arch} 0:{host.packages[n]}" for n in todo]
    return "".join(out) + "\nInstalled:\n" + "\n".join(lines) + "\n\nComplete!\n", "", 0
