"""Activities of the nodeSelector migration (R3e): the scan, rollout state and pod states."""
