"""machine-config-daemon annotation keys on a Node (MCO pkg/daemon/constants): what the daemon
reports (current config, state, reason, last applied drain) and what the controller (or
lockkeeper standing in for it) asks for (desired config, desired drain)."""

MCO_PREFIX = "machineconfiguration.openshift.io/"
ANN_CURRENT_CONFIG = MCO_PREFIX + "currentConfig"
ANN_DESIRED_CONFIG = MCO_PREFIX + "desiredConfig"
ANN_STATE = MCO_PREFIX + "state"
ANN_REASON = MCO_PREFIX + "reason"
ANN_DESIRED_DRAIN = MCO_PREFIX + "desiredDrain"
ANN_LAST_APPLIED_DRAIN = MCO_PREFIX + "lastAppliedDrain"

__all__ = ["MCO_PREFIX", "ANN_CURRENT_CONFIG", "ANN_DESIRED_CONFIG", "ANN_STATE", "ANN_REASON", "ANN_DESIRED_DRAIN",
           "ANN_LAST_APPLIED_DRAIN"]
