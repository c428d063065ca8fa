"""Pure helpers of the gateway that need no client: secret masking and the kubeconfig check.

:func:`check_kubeconfig_file` reads the kubeconfig's shape (YAML, contexts, clusters) before the
``kubernetes`` client does, so a broken file gives a message that names the problem instead of
the client's stack trace. Format: the kubeconfig v1 layout (``contexts[].context.cluster``,
``clusters[].cluster.server``, ``current-context``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from activities.kube.errors import KubeconfigError

_SECRET_PATTERNS = [
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]+"),
    re.compile(r"(?i)((?:token|password|client-key-data|api[_-]?key|authorization)[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]+"),
]


#: Seconds between two runs of the client's token refresh hook (see :func:`throttle_token_refresh`).
TOKEN_REFRESH_INTERVAL_SECONDS = 1.0


def throttle_token_refresh(configuration: Any, interval: float = TOKEN_REFRESH_INTERVAL_SECONDS) -> None:
    """Run the ``kubernetes`` client's ``refresh_api_key_hook`` at most once per ``interval`` seconds.

    A configuration loaded from a kubeconfig with a token gets a hook that runs before every
    request (``Configuration.get_api_key_with_prefix``). It re-applies the whole kubeconfig:
    setting ``host`` again reads every proxy variable of the environment (``urllib``'s
    ``getproxies_environment``), 3 to 4 % of a busy worker's CPU (py-spy, 600-node rollout,
    issue 16). The hook reloads a credential only when it expires within five minutes
    (``kubernetes.config.kube_config``, ``EXPIRY_SKEW_PREVENTION_DELAY``), so running it once a
    second never lets an expired token through. The hook installs a fresh copy of itself each time
    it runs; the wrapper takes its place again. No hook (a client certificate, in-cluster): nothing
    to do."""
    hook = getattr(configuration, "refresh_api_key_hook", None)
    if hook is None:
        return
    state: dict[str, Any] = {"hook": hook, "next": 0.0}

    def throttled(conf: Any) -> None:
        now = time.monotonic()
        if now < state["next"]:
            return
        state["next"] = now + interval
        inner: Callable[[Any], None] = state["hook"]
        inner(conf)
        fresh = conf.refresh_api_key_hook
        if fresh is not throttled and fresh is not None:
            state["hook"] = fresh
            conf.refresh_api_key_hook = throttled

    configuration.refresh_api_key_hook = throttled


def mask_secrets(text: str) -> str:
    """Replace bearer tokens, passwords and keys in ``text`` with ``***``."""
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub(lambda m: m.group(1) + "***", text)
    return text


def check_kubeconfig_file(path: Path, context: str | None) -> str:
    """Validate a kubeconfig's shape before the client reads it, for clear messages.

    Returns the context that will be used. Raises :class:`KubeconfigError` for a missing or
    unreadable file, invalid YAML, no or an unknown context, or a cluster without server.
    """
    if not path.is_file():
        raise KubeconfigError(f"kubeconfig {path} does not exist or is not a file")
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise KubeconfigError(f"kubeconfig {path} cannot be read: {exc}") from None
    except yaml.YAMLError as exc:
        raise KubeconfigError(f"kubeconfig {path} is not valid YAML: {mask_secrets(str(exc))}") from None
    if not isinstance(raw, dict):
        raise KubeconfigError(f"kubeconfig {path} is not a YAML mapping (got {type(raw).__name__})")
    contexts = {c.get("name"): c.get("context") or {} for c in raw.get("contexts") or [] if isinstance(c, dict)}
    clusters = {c.get("name"): c.get("cluster") or {} for c in raw.get("clusters") or [] if isinstance(c, dict)}
    name = context or raw.get("current-context")
    if not name:
        raise KubeconfigError(f"kubeconfig {path} has no current-context and no context was given")
    if name not in contexts:
        known = ", ".join(sorted(str(n) for n in contexts)) or "none"
        raise KubeconfigError(f"kubeconfig {path} has no context {name!r} (contexts: {known})")
    cluster_name = contexts[name].get("cluster") if isinstance(contexts[name], dict) else None
    cluster = clusters.get(cluster_name)
    if not isinstance(cluster, dict) or not cluster.get("server"):
        raise KubeconfigError(f"kubeconfig {path}: context {name!r} names cluster {cluster_name!r} which has no server")
    return str(name)
