"""Patch decisions a child run is started with, instead of asking ``workflow.patched`` again.

Every ``workflow.patched(id)`` of a new run records a ``core_patch`` marker and an upsert of the
``TemporalChangeVersion`` search attribute: two history events per patch, in every run. A node run
asks four or five, so on a 2,000-node pool that is 8 to 10 events per node (issue 16) that only
ever say "this run has the current code".

A parent that starts a child knows the child runs the current code, so it passes the IDs of the
patches the child should take as given (``features``, a list in the child's input). The input is
part of the child's first history event, so replay decides exactly as the first run did:

- ``features`` given: a patch is on when its ID is in the list (no marker, no upsert);
- ``features`` None (runs started before the field, or a caller that does not pass it): the
  run asks ``workflow.patched`` as before, so their stored histories replay unchanged.

Patch IDs keep their names either way. Workflow code only.
"""

from __future__ import annotations

from collections.abc import Iterable

from temporalio import workflow


class Features:
    """``on(patch_id) -> bool``: from the given IDs when the run was started with them, else from
    ``workflow.patched`` (records the marker on a first run, reads it on replay)."""

    def __init__(self, given: Iterable[str] | None = None) -> None:
        self.given: frozenset[str] | None = frozenset(given) if given is not None else None

    def on(self, patch_id: str) -> bool:
        if self.given is None:
            return workflow.patched(patch_id)
        return patch_id in self.given
