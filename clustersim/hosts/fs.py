"""File-system commands of the host interpreter, over :class:`HostState`'s virtual file system.

Messages and exit codes follow GNU coreutils 8.22 / grep 2.20 / findutils 4.5 on RHEL 7
(e.g. ``cat: X: No such file or directory`` exit 1, ``grep`` exit 1 without a match and 2 for a
missing file). Only the options lockkeeper's procedures use are accepted; anything else exits 1
with the tool's ``invalid option`` message, so a procedure relying on more fails loudly.
"""

from __future__ import annotations

import hashlib
import re

from clustersim.hosts.model import HostState, norm

Result = tuple[str, str, int]


def _split_opts(args: list[str], allowed: str) -> tuple[set[str], list[str], str | None]:
    """Short flags (``-rf`` -> {r, f}) before the operands; returns (flags, operands, bad flag)."""
    flags: set[str] = set()
    rest: list[str] = []
    it = iter(args)
    for a in it:
        if a == "--":
            rest.extend(it)
            break
        if a.startswith("-") and len(a) > 1 and not rest:
            for ch in a[1:]:
                if ch not in allowed:
                    return flags, rest, ch
                flags.add(ch)
        else:
            rest.append(a)
    return flags, rest, None


def remove_tree(host: HostState, path: str) -> bool:
    """Delete ``path`` and everything below it; True when something existed."""
    path = norm(path)
    prefix = path.rstrip("/") + "/"
    found = path in host.files or path in host.dirs
    for p in [p for p in host.files if p == path or p.startswith(prefix)]:
        del host.files[p]
        found = True
    for d in [d for d in host.dirs if d == path or d.startswith(prefix)]:
        host.dirs.discard(d)
        found = True
    return found


def _parent(path: str) -> str:
    return norm(path).rsplit("/", 1)[0] or "/"


def _ensure_parent_dirs(host: HostState, path: str) -> None:
    # Keep directories that become empty visible (rm -rf DIR/* leaves DIR).
    parent = _parent(path)
    while parent != "/":
        host.dirs.add(parent)
        parent = _parent(parent)


def children(host: HostState, d: str) -> list[str]:
    """Names directly inside directory ``d``, sorted."""
    d = norm(d)
    prefix = "/" if d == "/" else d + "/"
    names = set()
    for p in [*host.files, *host.dirs, *host.sockets()]:
        if p.startswith(prefix) and p != d:
            names.add(p[len(prefix):].split("/", 1)[0])
    return sorted(names)


def cmd_cat(host: HostState, args: list[str], stdin: bytes) -> Result:
    """``cat [FILE...]`` (no file: stdin); /proc/sys/kernel/random/boot_id and /etc/hostname are live."""
    if not args:
        return stdin.decode(errors="replace"), "", 0
    out, err, code = [], [], 0
    for a in args:
        p = norm(a)
        if p == "/proc/sys/kernel/random/boot_id":
            out.append(host.boot_id + "\n")
        elif p == "/etc/hostname":
            out.append(host.name + "\n")
        elif p in host.files:
            out.append(host.files[p])
        elif host.is_dir(p):
            err.append(f"cat: {a}: Is a directory\n")
            code = 1
        else:
            err.append(f"cat: {a}: No such file or directory\n")
            code = 1
    return "".join(out), "".join(err), code


def cmd_tee(host: HostState, args: list[str], stdin: bytes) -> Result:
    """``tee [-a] FILE...``: stdin to the files (parent directory must exist) and to stdout."""
    flags, paths, bad = _split_opts(args, "a")
    if bad:
        return "", f"tee: invalid option -- '{bad}'\n", 1
    text = stdin.decode(errors="replace")
    for p in paths:
        p = norm(p)
        if host.is_dir(p):
            return text, f"tee: {p}: Is a directory\n", 1
        if not host.is_dir(_parent(p)):
            return text, f"tee: {p}: No such file or directory\n", 1
        host.files[p] = host.files.get(p, "") + text if "a" in flags else text
    return text, "", 0


def cmd_rm(host: HostState, args: list[str], stdin: bytes) -> Result:
    """``rm [-rfv] PATH...`` (no glob; ``/`` refused as GNU rm does)."""
    flags, paths, bad = _split_opts(args, "rfRv")
    if bad:
        return "", f"rm: invalid option -- '{bad}'\nTry 'rm --help' for more information.\n", 1
    err, code = [], 0
    for a in paths:
        p = norm(a)
        if p == "/":
            return "", "rm: it is dangerous to operate recursively on '/'\nrm: use --no-preserve-root to override this failsafe\n", 1
        if host.is_dir(p) and not ({"r", "R"} & flags):
            err.append(f"rm: cannot remove '{a}': Is a directory\n")
            code = 1
            continue
        if not remove_tree(host, p) and "f" not in flags:
            err.append(f"rm: cannot remove '{a}': No such file or directory\n")
            code = 1
        else:
            _ensure_parent_dirs(host, p)
    return "", "".join(err), code


def _copy_or_move(host: HostState, tool: str, args: list[str], move: bool) -> Result:
    flags, ops, bad = _split_opts(args, "fTpav")
    if bad:
        return "", f"{tool}: invalid option -- '{bad}'\nTry '{tool} --help' for more information.\n", 1
    if len(ops) != 2:
        return "", f"{tool}: missing destination file operand after '{ops[0] if ops else ''}'\n", 1
    src, dst = norm(ops[0]), norm(ops[1])
    if src in host.files:
        if host.is_dir(dst) and "T" not in flags:
            dst = norm(dst + "/" + src.rsplit("/", 1)[1])
        if not host.is_dir(_parent(dst)):
            return "", f"{tool}: cannot create regular file '{ops[1]}': No such file or directory\n", 1
        host.files[dst] = host.files[src]
        if move:
            del host.files[src]
        return "", "", 0
    if host.is_dir(src):
        if not move and "a" not in flags:
            return "", f"{tool}: omitting directory '{ops[0]}'\n", 1
        if host.is_dir(dst) and "T" not in flags:
            dst = norm(dst + "/" + src.rsplit("/", 1)[1])
        pre = src + "/"
        for p in [p for p in host.files if p.startswith(pre)]:
            host.files[dst + "/" + p[len(pre):]] = host.files[p]
        for d in [d for d in host.dirs if d == src or d.startswith(pre)]:
            host.dirs.add(dst + d[len(src):])
        host.dirs.add(dst)
        if move:
            remove_tree(host, src)
        return "", "", 0
    return "", f"{tool}: cannot stat '{ops[0]}': No such file or directory\n", 1


def cmd_cp(host: HostState, args: list[str], stdin: bytes) -> Result:
    """``cp [-f] [-T] [-a] SRC DST`` (DST may be a directory)."""
    return _copy_or_move(host, "cp", args, move=False)


def cmd_mv(host: HostState, args: list[str], stdin: bytes) -> Result:
    """``mv [-f] [-T] SRC DST`` (a rename: the atomic replace of a written temp file)."""
    return _copy_or_move(host, "mv", args, move=True)


def cmd_install(host: HostState, args: list[str], stdin: bytes) -> Result:
    """``install [-m MODE] [-D] SRC DST`` (mode ignored; ``/dev/stdin`` as SRC reads stdin)."""
    ops, i, mkdirs = [], 0, False
    while i < len(args):
        if args[i] in ("-m", "-o", "-g"):
            i += 2
            continue
        if args[i] == "-D":
            mkdirs = True
        else:
            ops.append(args[i])
        i += 1
    if len(ops) != 2:
        return "", "install: missing destination file operand\n", 1
    src, dst = ops
    if src == "/dev/stdin":
        content = stdin.decode(errors="replace")
    elif norm(src) in host.files:
        content = host.files[norm(src)]
    else:
        return "", f"install: cannot stat '{src}': No such file or directory\n", 1
    if mkdirs:
        _ensure_parent_dirs(host, dst)
    elif not host.is_dir(_parent(dst)):
        return "", f"install: cannot create regular file '{dst}': No such file or directory\n", 1
    host.files[norm(dst)] = content
    return "", "", 0


def cmd_mkdir(host: HostState, args: list[str], stdin: bytes) -> Result:
    """``mkdir [-p] DIR...``."""
    flags, paths, bad = _split_opts(args, "p")
    if bad:
        return "", f"mkdir: invalid option -- '{bad}'\n", 1
    for a in paths:
        p = norm(a)
        if host.exists(p) and "p" not in flags:
            return "", f"mkdir: cannot create directory '{a}': File exists\n", 1
        if not host.is_dir(_parent(p)) and "p" not in flags:
            return "", f"mkdir: cannot create directory '{a}': No such file or directory\n", 1
        host.dirs.add(p)
        _ensure_parent_dirs(host, p)
    return "", "", 0


def cmd_test(host: HostState, args: list[str], stdin: bytes) -> Result:
    """``test [!] -e|-f|-d|-S|-s PATH`` (exit 0 true, 1 false, 2 bad usage)."""
    negate = False
    if args and args[0] == "!":
        negate, args = True, args[1:]
    if len(args) != 2 or args[0] not in ("-e", "-f", "-d", "-S", "-s"):
        return "", f"test: {' '.join(args)}: unary operator expected\n", 2
    op, p = args[0], norm(args[1])
    result = {
        "-e": host.exists(p),
        "-f": p in host.files,
        "-s": bool(host.files.get(p)),
        "-d": host.is_dir(p),
        "-S": p in host.sockets(),
    }[op]
    return "", "", 0 if result != negate else 1


def cmd_ls(host: HostState, args: list[str], stdin: bytes) -> Result:
    """``ls [-1A] [PATH...]``: names one per line; missing path exit 2."""
    flags, paths, bad = _split_opts(args, "1A")
    if bad:
        return "", f"ls: invalid option -- '{bad}'\n", 2
    out, err, code = [], [], 0
    for a in paths or ["/"]:
        p = norm(a)
        if p in host.files or p in host.sockets():
            out.append(a + "\n")
        elif host.is_dir(p):
            out.extend(n + "\n" for n in children(host, p))
        else:
            err.append(f"ls: cannot access {a}: No such file or directory\n")
            code = 2
    return "".join(out), "".join(err), code


def cmd_stat(host: HostState, args: list[str], stdin: bytes) -> Result:
    """``stat [-c FORMAT] PATH``; FORMAT supports %n (name), %s (size), %F (file type)."""
    fmt = None
    if len(args) >= 2 and args[0] == "-c":
        fmt, args = args[1], args[2:]
    elif args and args[0].startswith("--format="):
        fmt, args = args[0].split("=", 1)[1], args[1:]
    out, err, code = [], [], 0
    for a in args:
        p = norm(a)
        if p in host.files:
            kind, size = "regular file", len(host.files[p].encode())
        elif p in host.sockets():
            kind, size = "socket", 0
        elif host.is_dir(p):
            kind, size = "directory", 4096
        else:
            err.append(f"stat: cannot stat '{a}': No such file or directory\n")
            code = 1
            continue
        if fmt is not None:
            out.append(fmt.replace("%n", a).replace("%s", str(size)).replace("%F", kind) + "\n")
        else:
            out.append(f"  File: '{a}'\n  Size: {size:<15} Blocks: {(size + 511) // 512:<10} IO Block: 4096   {kind}\n")
    return "".join(out), "".join(err), code


def bre_to_python(pattern: str) -> str:
    r"""A POSIX basic regular expression as a Python one: in a BRE ``+ ? | ( ) { }`` are
    literals and ``\+ \? \| \( \) \{ \}`` the operators (GNU extensions)."""
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            out.append(nxt if nxt in "+?|(){}" else "\\" + nxt)
            i += 2
            continue
        out.append("\\" + ch if ch in "+?|(){}" else ch)
        i += 1
    return "".join(out)


def cmd_grep(host: HostState, args: list[str], stdin: bytes) -> Result:
    """``grep [-q] [-c] [-F] [-E] [-v] [-i] [--] PATTERN [FILE...]``."""
    flags, rest, bad = _split_opts(args, "qcFEvi")
    if bad is not None:
        return "", f"grep: invalid option -- '{bad}'\n", 2
    if not rest:
        return "", "Usage: grep [OPTION]... PATTERN [FILE]...\n", 2
    pattern, files = rest[0], rest[1:]
    if "F" in flags:
        rx = re.compile(re.escape(pattern), re.I if "i" in flags else 0)
    else:
        rx = re.compile(pattern if "E" in flags else bre_to_python(pattern), re.I if "i" in flags else 0)
    sources: list[tuple[str, str | None]] = []
    err, missing = [], False
    for f in files or ["-"]:
        if f == "-":
            sources.append((f, stdin.decode(errors="replace")))
        elif norm(f) in host.files:
            sources.append((f, host.files[norm(f)]))
        else:
            err.append(f"grep: {f}: No such file or directory\n")
            missing = True
    out, matched = [], False
    for f, text in sources:
        count = 0
        for line in (text or "").splitlines():
            if bool(rx.search(line)) != ("v" in flags):
                count += 1
                if "c" not in flags and "q" not in flags:
                    out.append(f"{f}:{line}\n" if len(files) > 1 else line + "\n")
        if "c" in flags:
            out.append(f"{f}:{count}\n" if len(files) > 1 else f"{count}\n")
        matched = matched or count > 0
    if "q" in flags:
        out = []
        if matched:
            return "", "", 0
    return "".join(out), "".join(err), 2 if missing and not matched else (0 if matched else 1)


def cmd_find(host: HostState, args: list[str], stdin: bytes) -> Result:
    """``find DIR -mindepth 1 -maxdepth 1 [-exec rm -rf {} +]``: list or wipe a directory's
    entries (the glob-free form of ``rm -rf DIR/*``, spec §6.3 step 9)."""
    if not args:
        return "", "find: missing starting point\n", 1
    d, rest = args[0], args[1:]
    expect = ["-mindepth", "1", "-maxdepth", "1"]
    if rest[:4] != expect or rest[4:] not in ([], ["-exec", "rm", "-rf", "{}", "+"], ["-exec", "rm", "-fr", "{}", "+"]):
        return "", f"find: unsupported expression: {' '.join(rest)}\n", 1
    if not host.is_dir(d):
        return "", f"find: '{d}': No such file or directory\n", 1
    entries = [norm(d + "/" + n) for n in children(host, d)]
    if rest[4:]:
        for e in entries:
            remove_tree(host, e)
        host.dirs.add(norm(d))
        return "", "", 0
    return "".join(e + "\n" for e in entries), "", 0


def cmd_sha256sum(host: HostState, args: list[str], stdin: bytes) -> Result:
    """``sha256sum FILE...`` (coreutils two-space format)."""
    out, err, code = [], [], 0
    for a in args:
        if norm(a) not in host.files:
            err.append(f"sha256sum: {a}: No such file or directory\n")
            code = 1
            continue
        out.append(f"{hashlib.sha256(host.files[norm(a)].encode()).hexdigest()}  {a}\n")
    return "".join(out), "".join(err), code


FS_COMMANDS = {
    "cat": cmd_cat, "tee": cmd_tee, "rm": cmd_rm, "cp": cmd_cp, "mv": cmd_mv, "install": cmd_install,
    "mkdir": cmd_mkdir, "test": cmd_test, "ls": cmd_ls, "stat": cmd_stat, "grep": cmd_grep,
    "find": cmd_find, "sha256sum": cmd_sha256sum,
}
