"""Webhook notifications (``LOCKKEEPER_NOTIFY_URL``): the activity that posts a procedure's
events (gate opened/decided/timed out, node degraded, drain blocked, paused, failed, completed)
as JSON with a Slack-compatible ``text`` field. Workflows decide what to send
(:mod:`workflows.kit.notify`); this package only sends."""
