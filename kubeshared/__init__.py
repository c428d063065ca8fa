"""Kubernetes and OpenShift API facts that lockkeeper and the simulator (``clustersim``) both need.

Pure and dependency-free: it imports nothing of the project (an import-linter contract keeps it
so), which lets ``clustersim`` share it although it may not import lockkeeper's packages.
:mod:`.labels` (``metav1.LabelSelector`` matching), :mod:`.mco` (machine-config-daemon annotation
keys).
"""
