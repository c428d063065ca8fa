"""Strategic merge patch directives, merge patch and JSON patch (clustersim.patch)."""

from __future__ import annotations

import pytest

from clustersim.patch import PatchError, apply_patch, merge_patch, strategic_merge_patch

POD = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "p", "labels": {"a": "1", "b": "2"}, "finalizers": ["x", "y"]},
    "spec": {
        "containers": [
            {"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
             "ports": [{"containerPort": 80, "protocol": "TCP"}]},
            {"name": "side", "image": "side:1"},
        ],
        "volumes": [{"name": "v", "emptyDir": {}}],
        "tolerations": [{"key": "k", "operator": "Exists"}],
    },
}


def test_merge_key_lists_merge_and_null_deletes() -> None:
    out = strategic_merge_patch(POD, {"metadata": {"labels": {"a": None, "c": "3"}},
                                      "spec": {"containers": [{"name": "side", "image": "side:2"},
                                                              {"name": "new", "image": "new:1"}]}}, "v1", "Pod")
    assert out["metadata"]["labels"] == {"b": "2", "c": "3"}
    assert [(c["name"], c["image"]) for c in out["spec"]["containers"]] == [
        ("app", "app:1"), ("side", "side:2"), ("new", "new:1")]
    assert out["spec"]["containers"][0]["env"] == POD["spec"]["containers"][0]["env"]
    # Lists without a merge strategy (tolerations) are replaced.
    out = strategic_merge_patch(POD, {"spec": {"tolerations": [{"key": "z", "operator": "Exists"}]}}, "v1", "Pod")
    assert out["spec"]["tolerations"] == [{"key": "z", "operator": "Exists"}]
    assert POD["spec"]["containers"][1]["image"] == "side:1"  # input untouched


def test_patch_directives() -> None:
    out = strategic_merge_patch(POD, {"spec": {"containers": [{"name": "app", "env": [
        {"name": "A", "$patch": "delete"}]}]}}, "v1", "Pod")
    assert out["spec"]["containers"][0]["env"] == [{"name": "B", "value": "2"}]
    out = strategic_merge_patch(POD, {"spec": {"containers": [{"name": "only", "image": "o"},
                                                              {"$patch": "replace"}]}}, "v1", "Pod")
    assert out["spec"]["containers"] == [{"name": "only", "image": "o"}]
    out = strategic_merge_patch(POD, {"metadata": {"labels": {"$patch": "replace", "z": "9"}}}, "v1", "Pod")
    assert out["metadata"]["labels"] == {"z": "9"}
    out = strategic_merge_patch(POD, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"],
                                                   "finalizers": ["w"]}}, "v1", "Pod")
    assert out["metadata"]["finalizers"] == ["y", "w"]
    out = strategic_merge_patch(POD, {"spec": {"$setElementOrder/containers": [{"name": "side"}, {"name": "app"}],
                                               "containers": [{"name": "side", "image": "side:3"}]}}, "v1", "Pod")
    assert [c["name"] for c in out["spec"]["containers"]] == ["side", "app"]
    out = strategic_merge_patch(POD, {"spec": {"volumes": [{"name": "v", "$retainKeys": ["name", "hostPath"],
                                                            "hostPath": {"path": "/x"}}]}}, "v1", "Pod")
    assert out["spec"]["volumes"] == [{"name": "v", "hostPath": {"path": "/x"}}]


def test_crd_without_schema_replaces_lists() -> None:
    mc = {"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
          "metadata": {"name": "m"}, "spec": {"config": {"storage": {"files": [{"path": "/a"}, {"path": "/b"}]}}}}
    out = strategic_merge_patch(mc, {"spec": {"config": {"storage": {"files": [{"path": "/c"}]}}}},
                                mc["apiVersion"], "MachineConfig")
    assert out["spec"]["config"]["storage"]["files"] == [{"path": "/c"}]


def test_merge_and_json_patch() -> None:
    assert merge_patch({"a": {"b": 1, "c": 2}, "l": [1, 2]}, {"a": {"b": None}, "l": [3]}) == {"a": {"c": 2},
                                                                                           "l": [3]}
    out = apply_patch("application/json-patch+json", POD,
                      b'[{"op":"add","path":"/metadata/labels/d","value":"4"}]', "v1", "Pod")
    assert out["metadata"]["labels"]["d"] == "4"
    with pytest.raises(PatchError) as exc:
        apply_patch("application/json-patch+json", POD, b'[{"op":"remove","path":"/nope"}]', "v1", "Pod")
    assert exc.value.status == 422
    with pytest.raises(ValueError):
        apply_patch("application/apply-patch+yaml", POD, b"{}", "v1", "Pod")
