"""Host commands: models (:mod:`.models`), backends (:mod:`.executors`, :mod:`.debug_pod`,
:mod:`.factory`) and the ``run_node_command`` activity (:mod:`.activities`).

Imports nothing, so workflows can import :mod:`activities.host.models` alone."""
