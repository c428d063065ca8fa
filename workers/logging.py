"""structlog set-up shared by every lockkeeper entrypoint (CLI, worker, demo).

One processor chain for everything: structlog loggers, the standard library, and Temporal's own
loggers (``temporalio.*``, including ``activity.logger`` and ``workflow.logger``) all end in the
same :class:`structlog.stdlib.ProcessorFormatter` on one stderr handler. On a terminal the output
is structlog's console renderer; otherwise one JSON object per line.

Two processors matter for operators:
- :func:`flatten_temporal_context` lifts the ``temporal_activity`` / ``temporal_workflow`` dicts
  that temporalio puts on log records (``extra``) to top-level keys ``workflow_id``, ``run_id``,
  ``activity_type``, ``workflow_type``, ``activity_id``, ``attempt``, ``task_queue``, so a log
  search by workflow ID finds the activity lines of that rollout.
- :func:`mask_secrets` replaces the value of any key that looks like a credential (token,
  password, secret, key, authorization, api_key, ...) and bearer tokens / API keys inside
  strings, so a logged request, settings dump or exception text never carries them.

Call :func:`configure_logging` once per process; further calls only change the level/format.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Mapping, MutableMapping
from typing import Any, TextIO

import structlog

MASK = "***"

# Keys whose values are credentials. Matched case-insensitively against the whole key or its
# last segment after '_'/'-', so "temporal_api_key", "Authorization", "bearer_token",
# "client-key-data" match but "keyword" or "monkey" do not.
_SECRET_KEY_RE = re.compile(
    r"(^|[_\-.])(token|password|passwd|secret|key|api[_\-]?key|apikey|authorization|auth|"
    r"credentials?|key[_\-]data|client[_\-]key[_\-]data|private[_\-]key)$",
    re.IGNORECASE,
)
# Credentials inside free text: "Bearer <tok>", "Authorization: <x>", "api_key=<x>", "token: <x>",
# and PEM private key blocks.
_TEXT_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{6,}"), r"\1 " + MASK),
    (
        re.compile(
            r"(?i)\b(authorization|api[_\-]?key|x-api-key|token|password|passwd|secret)"
            r"(\"?\s*[:=]\s*\"?)(?!\*\*\*)([^\s\"',;&}]+)"
        ),
        r"\1\2" + MASK,
    ),
    (
        re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.DOTALL),
        "-----BEGIN PRIVATE KEY-----" + MASK + "-----END PRIVATE KEY-----",
    ),
]

_TEMPORAL_KEYS = {
    "workflow_id": "workflow_id",
    "workflow_run_id": "run_id",
    "run_id": "run_id",
    "activity_type": "activity_type",
    "activity_id": "activity_id",
    "workflow_type": "workflow_type",
    "attempt": "attempt",
    "task_queue": "task_queue",
    "namespace": "namespace",
}


def is_secret_key(key: str) -> bool:
    """True when a mapping key names a credential (see module docstring)."""
    return bool(_SECRET_KEY_RE.search(key))


def mask_text(text: str) -> str:
    """Replace bearer tokens, ``key=value`` credentials and PEM private keys inside ``text``."""
    for pattern, repl in _TEXT_PATTERNS:
        text = pattern.sub(repl, text)
    return text


def _mask_value(key: str | None, value: Any, depth: int = 0) -> Any:
    if key is not None and is_secret_key(key) and value not in (None, "", False):
        return MASK
    if depth > 6:
        return value
    if isinstance(value, str):
        return mask_text(value)
    if isinstance(value, Mapping):
        return {k: _mask_value(str(k), v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_mask_value(None, v, depth + 1) for v in value)
    # SecretStr and friends render as '**********' already; other objects are rendered later
    # by the renderer through repr/str, which we cannot see here: mask their text form.
    if value is not None and not isinstance(value, int | float | bool) and hasattr(value, "__dict__"):
        return mask_text(str(value))
    return value


def mask_secrets(_logger: Any, _name: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: mask credentials in every key/value, recursively (see module doc)."""
    for k in list(event_dict.keys()):
        if k in ("_record", "_from_structlog"):
            continue
        event_dict[k] = _mask_value(k if k != "event" else None, event_dict[k])
    return event_dict


def flatten_temporal_context(
    _logger: Any, _name: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """structlog processor: lift temporalio's ``temporal_activity``/``temporal_workflow`` extras.

    temporalio's ``activity.logger`` adds ``extra={"temporal_activity": {activity_id,
    activity_type, attempt, namespace, task_queue, workflow_id, workflow_run_id, workflow_type}}``
    and ``workflow.logger`` adds ``temporal_workflow`` with workflow_id/run_id/workflow_type/...
    Keys already present in the event are not overwritten.
    """
    for extra_key in ("temporal_activity", "temporal_workflow"):
        details = event_dict.pop(extra_key, None)
        if isinstance(details, Mapping):
            for src, dst in _TEMPORAL_KEYS.items():
                if src in details and dst not in event_dict:
                    event_dict[dst] = details[src]
    return event_dict


def _extract_record_extras(
    _logger: Any, _name: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    # Standard-library records carry `extra=` as record attributes; only the temporal ones
    # matter here (plus anything passed explicitly as a dict under known names).
    record = event_dict.get("_record")
    if record is not None:
        for attr in ("temporal_activity", "temporal_workflow"):
            val = getattr(record, attr, None)
            if val is not None and attr not in event_dict:
                event_dict[attr] = val
    return event_dict


def shared_processors() -> list[Any]:
    """The processors every record goes through before rendering (structlog and stdlib alike)."""
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        _extract_record_extras,
        flatten_temporal_context,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
        structlog.processors.format_exc_info,
        mask_secrets,
    ]


def _want_console(fmt: str, stream: TextIO) -> bool:
    if fmt == "console":
        return True
    if fmt == "json":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


HANDLER_NAME = "lockkeeper-structlog"
"""The name of the root handler :func:`configure_logging` installs (one per process)."""


def configure_logging(level: str = "info", fmt: str = "auto", stream: TextIO | None = None) -> None:
    """Configure structlog and the standard library once for this process; logs go to ``stream``
    (default ``sys.stderr``: stdout is for data).

    ``level``: debug|info|warning|error. ``fmt``: auto (console on a TTY, else JSON)|console|json.
    Replaces a handler installed by an earlier call, so calling again (e.g. from a test) is safe.
    """
    stream = stream or sys.stderr
    console = _want_console(fmt, stream)
    renderer: Any = (
        structlog.dev.ConsoleRenderer(colors=getattr(stream, "isatty", lambda: False)())
        if console
        else structlog.processors.JSONRenderer()
    )
    pre = shared_processors()
    structlog.configure(
        processors=[*pre, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=pre,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            # structlog-originated events are processed above already; masking again is cheap
            # and covers values that only became strings in the formatter.
            mask_secrets,
            renderer,
        ],
    )
    handler = logging.StreamHandler(stream)
    handler.set_name(HANDLER_NAME)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for h in list(root.handlers):
        if h.get_name() == HANDLER_NAME:
            root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # temporalio logs through stdlib loggers; make sure they propagate to our root handler.
    for name in ("temporalio", "temporalio.activity", "temporalio.workflow", "temporalio.worker"):
        logging.getLogger(name).propagate = True
    # temporalio also appends its context dict to the message text; we carry it as keys instead
    # (flatten_temporal_context), so keep messages clean.
    import temporalio.activity
    import temporalio.workflow

    temporalio.activity.logger.activity_info_on_message = False
    temporalio.workflow.logger.workflow_info_on_message = False
    # Quiet chatty libraries unless debugging.
    if level.lower() != "debug":
        for noisy in ("urllib3", "kubernetes", "asyncio", "aiohttp.access"):
            logging.getLogger(noisy).setLevel(logging.WARNING)


def get_logger(name: str | None = None) -> Any:
    """A structlog logger (``structlog.stdlib.BoundLogger``) for non-workflow code."""
    return structlog.get_logger(name)
