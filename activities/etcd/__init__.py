"""etcd: models (:mod:`.models`), member plumbing (:mod:`.members`), activities (:mod:`.activities`).

Imports nothing, so workflows can import :mod:`activities.etcd.models` alone."""
