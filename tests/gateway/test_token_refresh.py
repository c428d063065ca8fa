"""The kubernetes client's token refresh hook runs at most once a second (issue 16: it re-read
every proxy variable of the environment before each request)."""

from __future__ import annotations

from typing import Any

from activities.kube.kubeconfig import throttle_token_refresh


class _Conf:
    def __init__(self) -> None:
        self.calls = 0
        self.refresh_api_key_hook: Any = self._hook

    def _hook(self, conf: Any) -> None:
        # As kubernetes.config.kube_config: the hook re-applies the kubeconfig and installs a
        # fresh closure of itself.
        self.calls += 1
        conf.refresh_api_key_hook = lambda c: self._hook(c)


def test_the_hook_runs_at_most_once_per_interval_and_stays_wrapped(monkeypatch: Any) -> None:
    import activities.kube.kubeconfig as kc

    now = [100.0]
    monkeypatch.setattr(kc.time, "monotonic", lambda: now[0])
    conf = _Conf()
    throttle_token_refresh(conf, interval=1.0)
    wrapper = conf.refresh_api_key_hook
    for _ in range(50):
        conf.refresh_api_key_hook(conf)
    assert conf.calls == 1 and conf.refresh_api_key_hook is wrapper  # re-wrapped after the hook replaced itself
    now[0] += 0.5
    conf.refresh_api_key_hook(conf)
    assert conf.calls == 1
    now[0] += 0.6
    conf.refresh_api_key_hook(conf)
    conf.refresh_api_key_hook(conf)
    assert conf.calls == 2 and conf.refresh_api_key_hook is wrapper


def test_no_hook_nothing_to_do() -> None:
    class Bare:
        refresh_api_key_hook = None

    bare = Bare()
    throttle_token_refresh(bare)
    assert bare.refresh_api_key_hook is None


def test_a_gateway_from_a_token_kubeconfig_throttles_its_hook(tmp_path: Any) -> None:
    """The real client: a kubeconfig with a bearer token gets the hook, wrapped once."""
    from activities.kube.gateway import KubeGateway

    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: abc}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    gw = KubeGateway.from_kubeconfig(path)
    conf = gw._api_client.configuration
    hook = conf.refresh_api_key_hook
    assert hook is not None and hook.__name__ == "throttled"
    conf.get_api_key_with_prefix("BearerToken")
    conf.get_api_key_with_prefix("BearerToken")
    assert conf.refresh_api_key_hook is hook and conf.api_key["BearerToken"].endswith("abc")
