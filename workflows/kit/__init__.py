"""The procedure kit: procedure-agnostic, deterministic building blocks every procedure uses.

One module per concept of DESIGN.md ("Concepts"): :mod:`.spec` (what a procedure is to the worker
and the CLI), models, control, gates, procedure (the uniform operator surface), lease, calls,
metrics, health, barrier, records and host. The kit imports no procedure package.
"""
