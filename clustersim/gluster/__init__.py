"""GlusterFS for clustersim: peers, volumes, bricks, the heal model, faults and the ``gluster`` CLI.

Modules: ``config`` (the scenario section), ``model`` (pure state), ``textfmt``/``xmlfmt``
(CLI output formats), ``cli`` (argv dispatch), ``component`` (store/host coupling, exec route,
admin endpoints). ``GlusterComponent`` is the factory named in ``clustersim.components.FACTORIES``.
"""

from clustersim.gluster.component import GlusterComponent

__all__ = ["GlusterComponent"]
