"""Lease checks that need the Temporal server itself (:mod:`workflows.kit.lease`): which of a set
of lease workflow IDs run now. Read-only; the activity uses the worker's own client
(``temporalio.activity.client()``)."""
