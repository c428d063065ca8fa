"""Scenario specs that take one of two fields refuse neither and both, naming the two fields."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from clustersim.scenario_specs import CertExpirySpec, PdbSpec


def test_a_pdb_takes_exactly_one_of_min_available_and_max_unavailable() -> None:
    assert PdbSpec(name="p", namespace="n", selector={}, min_available=1).max_unavailable is None
    assert PdbSpec(name="p", namespace="n", selector={}, max_unavailable="25%").min_available is None
    for both_or_none in ({}, {"min_available": 1, "max_unavailable": 1}):
        with pytest.raises(ValidationError, match="PDB p: set exactly one of min_available / max_unavailable"):
            PdbSpec(name="p", namespace="n", selector={}, **both_or_none)


def test_a_cert_expiry_takes_exactly_one_of_expiry_and_expires_in_hours() -> None:
    assert CertExpirySpec(subject="CN=ca", expires_in_hours=2).expiry is None
    for both_or_none in ({}, {"expiry": "2030-01-01T00:00:00Z", "expires_in_hours": 2}):
        with pytest.raises(ValidationError, match="cert expiry CN=ca: set exactly one of expiry / expires_in_hours"):
            CertExpirySpec(subject="CN=ca", **both_or_none)
