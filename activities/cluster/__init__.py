"""Generic node and workload activities that every procedure uses: node reads and writes
(:mod:`.nodes`), drain (:mod:`.drain`), workloads (:mod:`.workloads`), records (:mod:`.records`),
all bound to one gateway through :mod:`.base`; models in :mod:`.models`. :mod:`.activities`
combines them for a worker.

Imports nothing, so workflows can import the models alone."""
