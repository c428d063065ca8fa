"""``lockkeeper setup``: register lockkeeper's search attributes in the namespace, on their own
(the worker does the same at start; :mod:`workers.search_attributes`).

Exit codes: 0 when every attribute is registered (added now or already there); 3 when Temporal is
unreachable or refuses the registration (the message names the attributes and the
``temporal operator search-attribute create`` commands to run instead).
"""

from __future__ import annotations

import typer

from lockkeeper.cli.common import EXIT_NOT_FOUND, EXIT_OK, CliError, OutputOpt, check_output, cli_settings, run


def setup(ctx: typer.Context, output: str = OutputOpt) -> None:
    """Register lockkeeper's search attributes (LockkeeperCluster, LockkeeperProcedure,
    LockkeeperStatus, LockkeeperPools) in the namespace; safe to run again."""
    output = check_output(output)
    settings = cli_settings(ctx)

    async def body() -> int:
        from lockkeeper import output as out
        from lockkeeper.cli.common import connect, err
        from workers.search_attributes import SEARCH_ATTRIBUTES, SearchAttributesRefused, ensure_search_attributes

        client = await connect(settings)
        try:
            added = await ensure_search_attributes(client, settings.temporal_namespace)
        except SearchAttributesRefused as exc:
            raise CliError(str(exc), EXIT_NOT_FOUND) from None
        rows = [
            {"name": n, "type": t, "state": "added" if n in added else "present"} for n, t in SEARCH_ATTRIBUTES.items()
        ]
        if output == "table":
            for r in rows:
                print(f"{r['name']:<22} {r['type']:<12} {r['state']}")
            err(f"search attributes ready in namespace {settings.temporal_namespace}")
        else:
            print(out.dump({"namespace": settings.temporal_namespace, "search_attributes": rows}, output))
        return EXIT_OK

    run(body())


def register(app: typer.Typer) -> None:
    """Add ``setup``."""
    app.command("setup")(setup)
