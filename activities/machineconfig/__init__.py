"""MachineConfig procedure activities: models (:mod:`.models`), the rollout's activities
(:mod:`.activities`) and the read-only pool diagnosis (:mod:`.diagnose`).

Imports nothing, so workflows can import :mod:`activities.machineconfig.models` alone."""
