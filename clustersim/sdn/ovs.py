"""``ovs-vsctl`` emulation for the one interface the SDN model keeps: ``vxlan0``.

Supported (Open vSwitch 2.9 ``utilities/ovs-vsctl.c`` / ``lib/db-ctl-base.c`` wording):

- ``ovs-vsctl get Interface vxlan0 options:dst_port`` -> ``"4789"`` (quoted, as OVS prints a string
  map value; origin's AlreadySetUp compares it with the quotes);
- ``ovs-vsctl get Interface vxlan0 options`` -> ``{dst_port="4789", key=flow, remote_ip=flow}``;
- ``ovs-vsctl set Interface vxlan0 options:dst_port=N`` -> no output, exit 0;
- ``ovs-vsctl list-br`` -> ``br0``; global options (``--timeout=N``, ``-t N``, ``--if-exists``) are
  accepted and ignored; a leading ``--`` is skipped.

Errors: another row -> ``ovs-vsctl: no row "X" in table Interface`` (1); another column ->
``ovs-vsctl: Interface does not contain a column whose name matches "X"`` (1); an unknown command
-> ``ovs-vsctl: unknown command 'X'; use --help for help`` (1); OVS not running ->
``ovs-vsctl: unix:/var/run/openvswitch/db.sock: database connection failed (No such file or
directory)`` (1).
"""

from __future__ import annotations

from collections.abc import Callable

Result = tuple[str, str, int]
DB_DOWN = ("ovs-vsctl: unix:/var/run/openvswitch/db.sock: database connection failed "
           "(No such file or directory)\n")


def _strip_options(argv: list[str]) -> list[str]:
    out: list[str] = []
    skip = False
    for a in argv:
        if skip:
            skip = False
            continue
        if a == "-t":
            skip = True
            continue
        if a.startswith("-") and not out:
            continue  # global options come before the command
        out.append(a)
    return out


def ovs_vsctl(argv: list[str], *, get_port: Callable[[], int], set_port: Callable[[int], None],
              available: bool) -> Result:
    """Run ``ovs-vsctl ARGS`` (``argv[0]`` is the program) against one node's vxlan0 port.

    ``get_port``/``set_port`` read and change the node's dst_port; ``available`` False means the
    OVS database is not reachable (OVS pod or host down). Returns (stdout, stderr, exit code)."""
    args = _strip_options(argv[1:])
    if not available:
        return "", DB_DOWN, 1
    if not args:
        return "", "ovs-vsctl: missing command name (use --help for help)\n", 1
    cmd = args[0]
    if cmd == "list-br":
        return "br0\n", "", 0
    if cmd not in ("get", "set"):
        return "", f"ovs-vsctl: unknown command '{cmd}'; use --help for help\n", 1
    if len(args) < 4:
        return "", f"ovs-vsctl: '{cmd}' command requires at least 3 arguments\n", 1
    table, record = args[1], args[2]
    if table.lower() != "interface":
        return "", f'ovs-vsctl: unknown table "{table}"\n', 1
    if record != "vxlan0":
        return "", f'ovs-vsctl: no row "{record}" in table Interface\n', 1
    if cmd == "get":
        out = []
        for col in args[3:]:
            if col == "options":
                out.append(f'{{dst_port="{get_port()}", key=flow, remote_ip=flow}}')
            elif col == "options:dst_port":
                out.append(f'"{get_port()}"')
            elif col.startswith("options:"):
                return "", f'ovs-vsctl: no key "{col.split(":", 1)[1]}" in Interface record "vxlan0" column options\n', 1
            else:
                return "", f'ovs-vsctl: Interface does not contain a column whose name matches "{col}"\n', 1
        return "".join(f"{line}\n" for line in out), "", 0
    for assignment in args[3:]:
        col, sep, value = assignment.partition("=")
        if not sep:
            return "", f'ovs-vsctl: {assignment}: argument does not end in "=" followed by a value.\n', 1
        if col != "options:dst_port":
            return "", f'ovs-vsctl: Interface does not contain a column whose name matches "{col}"\n', 1
        value = value.strip('"')
        if not value.isdigit() or not 0 < int(value) < 65536:
            return "", f'ovs-vsctl: "{value}" is not a valid integer\n', 1
        set_port(int(value))
    return "", "", 0
