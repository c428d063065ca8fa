"""Activities of the control-plane upgrade (R3d masters): one master's API readiness and its
mirror pods."""
