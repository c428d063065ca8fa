"""Activities of the container-runtime migration (R4): Node records and re-registration, the
GlusterFS pod on a node. Imports nothing, so workflows can
import :mod:`.models` alone."""
