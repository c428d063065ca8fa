"""Prometheus alerts for health gates (issue 37): which active alerts block a procedure now.

``models``: :class:`~activities.alerts.models.CheckAlertsInput` and
:class:`~activities.alerts.models.AlertsAnswer` (workflows import them); ``activities``: the
``check_alerts`` activity over Prometheus' ``/api/v1/alerts``. The gate that waits on it is
:mod:`workflows.kit.alerts`.
"""
