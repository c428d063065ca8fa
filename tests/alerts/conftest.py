"""Fixtures of the alert tests: ``prometheus_factory`` (a real Prometheus scraping running
simulators, tests/promserver.py) next to the shared ``sim_factory``."""

from promserver import prometheus_factory  # noqa: F401 - a fixture, found by name
