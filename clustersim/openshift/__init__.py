"""OpenShift 3.11 kinds and controllers for clustersim.

Kinds (served through the store's resource table, see ``clustersim.openshift.kinds``):
``apps.openshift.io/v1`` DeploymentConfig (status, scale; short ``dc``), ``v1``
ReplicationController (status, scale; ``rc``), ``apps/v1`` StatefulSet, ``batch/v1`` CronJob
(stored and listed, no controller) and ``network.openshift.io/v1`` ClusterNetwork (cluster-scoped,
top-level fields ``network``, ``hostsubnetlength``, ``serviceNetwork``, ``pluginName``,
``vxlanPort`` (optional), ``clusterNetworks: [{CIDR, hostSubnetLength}]``).

Controllers (``clustersim.openshift.controllers.OpenShiftControllers``): DeploymentConfig,
ReplicationController and the image-trigger controller. One instance per ``ClusterSim`` is
shared by whoever needs it (``acquire``/``release``): the ``masters`` component (they run in the
masters' controllers process, so they pause while no master's controllers run) and the ``sdn``
component (image triggers on the ``sdn`` DaemonSet). A scenario with DeploymentConfigs therefore
needs a ``masters:`` section (see ``clustersim.masters.model``).

Writing a scenario with these kinds: put the objects under the scenario's ``objects:`` list as
plain API objects. A DeploymentConfig needs ``metadata.name/namespace``, ``spec.replicas``,
``spec.selector`` (a map), ``spec.template`` (labels + containers), optionally
``spec.triggers: [{type: ConfigChange}]`` (the default when ``triggers`` is absent) and
``spec.strategy: {type: Rolling, rollingParams: {timeoutSeconds: 600}}``. Leave its status out:
the controller creates RC ``<dc>-1`` and its pods, which the core scheduler places. Example::

    objects:
      - apiVersion: apps.openshift.io/v1
        kind: DeploymentConfig
        metadata: {name: docker-registry, namespace: default}
        spec:
          replicas: 1
          selector: {deploymentconfig: docker-registry}
          strategy: {type: Rolling, rollingParams: {timeoutSeconds: 600}}
          triggers: [{type: ConfigChange}]
          template:
            metadata: {labels: {deploymentconfig: docker-registry}}
            spec:
              nodeSelector: {region: infra}
              containers: [{name: registry, image: "docker.io/openshift/origin-docker-registry:v3.9.0"}]

The ``masters:`` section's ``image_streams`` (ImageStreamTag ``ns/name:tag`` -> image) and
``trigger_seconds`` configure the image-trigger controller.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clustersim.openshift.controllers import OpenShiftControllers
    from clustersim.sim import ClusterSim

DEFAULT_IMAGE_STREAMS = {"openshift-sdn/node:v3.11": "registry.redhat.io/openshift3/ose-node:v3.11"}

_SHARED: weakref.WeakKeyDictionary[Any, list[Any]] = weakref.WeakKeyDictionary()


async def acquire(sim: ClusterSim, *, image_streams: dict[str, str] | None = None,
                  trigger_seconds: float | None = None) -> OpenShiftControllers:
    """The sim's shared, started ``OpenShiftControllers`` (created and started on first use).

    Options come from the first caller (the ``masters`` section when there is one).
    Each ``acquire`` needs one ``release``; the last release stops the controllers."""
    from clustersim.openshift.controllers import OpenShiftControllers

    entry = _SHARED.get(sim)
    if entry is None:
        ctl = OpenShiftControllers(sim.store, sim.clock, image_streams=image_streams or DEFAULT_IMAGE_STREAMS,
                                   trigger_seconds=2.0 if trigger_seconds is None else trigger_seconds)
        entry = [ctl, 0]
        _SHARED[sim] = entry
        await ctl.start()
    entry[1] += 1
    return entry[0]  # type: ignore[no-any-return]


async def release(sim: ClusterSim) -> None:
    """Drop one reference to the shared controllers; stop them when it was the last."""
    entry = _SHARED.get(sim)
    if entry is None:
        return
    entry[1] -= 1
    if entry[1] <= 0:
        _SHARED.pop(sim, None)
        await entry[0].stop()
