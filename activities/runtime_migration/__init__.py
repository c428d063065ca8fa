"""Activities of the container-runtime migration (R4): Node records and re-registration, the
record ConfigMap. Imports nothing, so workflows can import :mod:`.models` alone."""
