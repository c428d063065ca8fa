"""Logging: secret masking, Temporal context flattening, stdlib and activity logs in one format."""

from __future__ import annotations

import dataclasses
import io
import json
import logging
from collections.abc import Iterator

import pytest
import structlog
from temporalio import activity
from temporalio.testing import ActivityEnvironment

from workers.logging import (
    MASK,
    configure_logging,
    flatten_temporal_context,
    get_logger,
    is_secret_key,
    mask_secrets,
    mask_text,
)


@pytest.fixture
def json_logs() -> Iterator[io.StringIO]:
    buf = io.StringIO()
    configure_logging("info", "json", stream=buf)
    yield buf  # tests/conftest.py's _root_logging_restored takes the handler back
    structlog.reset_defaults()


def lines(buf: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in buf.getvalue().splitlines() if line.strip()]


@pytest.mark.parametrize(
    "key", ["token", "password", "api_key", "temporal_api_key", "Authorization", "client-key-data", "secret", "key"]
)
def test_secret_keys(key: str) -> None:
    assert is_secret_key(key)


@pytest.mark.parametrize("key", ["keyword", "monkey", "node", "pool", "tokens_used_total", "event"])
def test_ordinary_keys(key: str) -> None:
    assert not is_secret_key(key)


def test_mask_nested_structures() -> None:
    ed = {
        "event": "request",
        "headers": {"Authorization": "Bearer eyJhbGciOi.xyz", "Accept": "application/json"},
        "users": [{"name": "admin", "user": {"token": "abc123", "client-key-data": "LS0t"}}],
        "node": "worker-1",
    }
    out = mask_secrets(None, "info", ed)
    assert out["headers"] == {"Authorization": MASK, "Accept": "application/json"}
    assert out["users"][0]["user"] == {"token": MASK, "client-key-data": MASK}
    assert out["users"][0]["name"] == "admin" and out["node"] == "worker-1"


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("GET /api with Authorization: Bearer abcdef123456", "abcdef123456"),
        ("connect api_key=sk-live-123 ok", "sk-live-123"),
        ('{"token": "t0k3n-value"}', "t0k3n-value"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----", "MIIE"),
    ],
)
def test_mask_text(text: str, secret: str) -> None:
    masked = mask_text(text)
    assert secret not in masked and MASK in masked


def test_event_text_masked_but_kept_readable() -> None:
    out = mask_secrets(None, "info", {"event": "using token=abcdef for node worker-1"})
    assert out["event"] == f"using token={MASK} for node worker-1"


def test_flatten_activity_context() -> None:
    ed = {
        "event": "draining",
        "temporal_activity": {
            "activity_id": "3",
            "activity_type": "drain_node",
            "attempt": 2,
            "workflow_id": "mcr-1/node/w1/1",
            "workflow_run_id": "run-9",
            "workflow_type": "NodeRolloutWorkflow",
            "task_queue": "lockkeeper",
        },
    }
    out = flatten_temporal_context(None, "info", ed)
    assert "temporal_activity" not in out
    assert (out["workflow_id"], out["run_id"], out["activity_type"], out["attempt"]) == (
        "mcr-1/node/w1/1",
        "run-9",
        "drain_node",
        2,
    )


def test_structlog_and_stdlib_share_json_and_masking(json_logs: io.StringIO) -> None:
    get_logger("lockkeeper.test").info("connecting", api_key="sk-123", node="w1")
    logging.getLogger("temporalio.worker").warning("poll failed: Bearer abcdef123456")
    first, second = lines(json_logs)
    assert first["event"] == "connecting" and first["api_key"] == MASK and first["node"] == "w1"
    assert first["level"] == "info" and "timestamp" in first
    assert second["logger"] == "temporalio.worker" and second["level"] == "warning"
    assert "abcdef123456" not in second["event"]


def test_activity_logger_carries_workflow_and_activity_ids(json_logs: io.StringIO) -> None:
    @activity.defn(name="cordon_node")
    def cordon_node(node: str) -> str:
        activity.logger.info("cordoning %s", node)
        return node

    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info, workflow_id="mcr-7", workflow_run_id="r-7", activity_type="cordon_node"
    )
    assert env.run(cordon_node, "worker-2") == "worker-2"
    (rec,) = [r for r in lines(json_logs) if r["logger"] == "temporalio.activity"]
    assert rec["event"] == "cordoning worker-2"  # context is in keys, not appended to the text
    assert (rec["workflow_id"], rec["run_id"], rec["activity_type"]) == ("mcr-7", "r-7", "cordon_node")
