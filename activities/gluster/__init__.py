"""GlusterFS activities (R3a and the ``gluster_healthy`` gate): the CLI run in a GlusterFS pod
through the Kubernetes gateway's exec, parsed by :mod:`.parse` into the models of :mod:`.models`.

This ``__init__`` imports nothing, so the models and parsers load without the cluster client.
"""
