"""Store keys and well-known names of the OpenShift 3.11 / extra Kubernetes kinds clustersim serves.

The rows themselves live in the store's resource table (``clustersim.resources.RESOURCES``):
DeploymentConfigs (``apps.openshift.io/v1``, status + scale, short ``dc``), ReplicationControllers
(``v1``, status + scale, short ``rc``), StatefulSets (``apps/v1``, short ``sts``), CronJobs
(``batch/v1``, short ``cj``) and ClusterNetworks (``network.openshift.io/v1``, cluster-scoped).
Annotation and label keys follow origin 3.11 ``pkg/apps/apis/apps/types.go`` and
``pkg/image/apis/image/v1/trigger`` (``image.openshift.io/triggers``).
"""

from __future__ import annotations

DC = "deploymentconfigs.apps.openshift.io"
RC = "replicationcontrollers"
STS = "statefulsets.apps"
CRONJOB = "cronjobs.batch"
CLUSTERNETWORK = "clusternetworks.network.openshift.io"


# origin pkg/apps/apis/apps/types.go
ANN_DC_NAME = "openshift.io/deployment-config.name"
ANN_DC_LATEST_VERSION = "openshift.io/deployment-config.latest-version"
ANN_DEPLOYMENT_PHASE = "openshift.io/deployment.phase"
ANN_DEPLOYMENT_NAME = "openshift.io/deployment.name"
ANN_DEPLOYER_POD = "openshift.io/deployer-pod.name"
ANN_ENCODED_DC = "openshift.io/encoded-deployment-config"
ANN_DESIRED_REPLICAS = "kubectl.kubernetes.io/desired-replicas"
ANN_STATUS_REASON = "openshift.io/deployment.status-reason"
LABEL_DEPLOYMENT = "deployment"
LABEL_DC = "deploymentconfig"
LABEL_DC_NAME = "openshift.io/deployment-config.name"

# origin pkg/image/apis/image: the trigger annotation the image-trigger controller follows.
ANN_IMAGE_TRIGGERS = "image.openshift.io/triggers"

PHASE_NEW = "New"
PHASE_RUNNING = "Running"
PHASE_COMPLETE = "Complete"
PHASE_FAILED = "Failed"

