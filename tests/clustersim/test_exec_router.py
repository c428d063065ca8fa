"""ExecRouter: registered handlers first (first match wins), then the built-in commands."""

from __future__ import annotations

from clustersim.execsim import ExecRequest, ExecResult, ExecRouter

POD = {"metadata": {"name": "p", "namespace": "ns", "labels": {"app": "x"}}, "spec": {"nodeName": "n1"}}


def req(*argv: str, stdin: bytes | None = None) -> ExecRequest:
    return ExecRequest("ns", POD, "c", list(argv), stdin, False)


async def test_builtins() -> None:
    r = ExecRouter()
    assert (await r.run(req("true")))[0] == ExecResult()
    assert (await r.run(req("/bin/false")))[0].exit_code == 1
    assert (await r.run(req("echo", "a", "b")))[0].stdout == b"a b\n"
    assert (await r.run(req("cat", stdin=b"in")))[0].stdout == b"in"
    missing = (await r.run(req("nope", "x")))[0]
    assert missing.exit_code == 126
    assert missing.stderr.decode() == ('OCI runtime exec failed: exec failed: unable to start container process: '
                                       'exec: "nope": executable file not found in $PATH: unknown\n')


async def test_shell_sequences() -> None:
    r = ExecRouter()

    async def sh(script: str) -> ExecResult:
        return (await r.run(req("sh", "-c", script)))[0]

    assert await sh("echo a; echo b") == ExecResult(stdout=b"a\nb\n")
    assert await sh("false && echo no") == ExecResult(exit_code=1)
    assert await sh("false || echo yes") == ExecResult(stdout=b"yes\n")
    assert await sh("echo x; exit 7; echo never") == ExecResult(stdout=b"x\n", exit_code=7)
    assert (await sh("echo 'quoted ; text'")).stdout == b"quoted ; text\n"
    assert (await sh("&& true")).exit_code == 2
    assert (await sh("nope")).exit_code == 126


async def test_registered_handlers_first_match_and_shell_dispatch() -> None:
    r = ExecRouter()
    calls: list[str] = []

    def make(tag: str, code: int = 0):  # noqa: ANN202 - a tiny handler factory
        async def handler(q: ExecRequest) -> ExecResult:
            calls.append(tag)
            return ExecResult(stdout=f"{tag}:{' '.join(q.argv)}\n".encode(), exit_code=code)
        return handler

    r.register("gluster", lambda q: q.argv[:1] == ["gluster"], make("g1"))
    r.register("any-on-n1", lambda q: q.node_name == "n1" and q.argv[:1] != ["echo"], make("n1"))
    assert r.names == ["gluster", "any-on-n1"]
    assert (await r.run(req("gluster", "volume", "list"))) == (ExecResult(stdout=b"g1:gluster volume list\n"),
                                                                "gluster")
    assert (await r.run(req("ovs-vsctl", "show")))[1] == "any-on-n1"
    assert (await r.run(req("echo", "hi")))[1] == "builtin"
    # A broad matcher takes `sh` itself; without it, sh -c dispatches each simple command again.
    out, route = await r.run(req("sh", "-c", "gluster volume status && echo done"))
    assert (out.stdout, route) == (b"n1:sh -c gluster volume status && echo done\n", "any-on-n1")
    r.unregister("any-on-n1")
    out, route = await r.run(req("sh", "-c", "gluster volume status && echo done"))
    assert (out.stdout, route) == (b"g1:gluster volume status\ndone\n", "builtin")
    # Re-registering a name replaces the route in place.
    r.register("gluster", lambda q: q.argv[:1] == ["gluster"], make("g2", code=2))
    assert (await r.run(req("gluster")))[0].exit_code == 2


async def test_failing_handler_is_exit_1_not_a_hang() -> None:
    r = ExecRouter()

    async def boom(q: ExecRequest) -> ExecResult:
        raise RuntimeError("emulator bug")

    r.register("boom", lambda q: True, boom)
    res, route = await r.run(req("anything"))
    assert (res.exit_code, route) == (1, "boom") and b"emulator bug" in res.stderr
