"""Capture a training step and run it node by node.

``capture`` exports and splits the step into node modules, ``program`` runs them
(``actions`` wraps a node for recompute or swap), ``record`` is the TaskGraph record
the profiler fills in. Import the submodules: this package imports nothing itself, so the
record layer (``memflow.graph.record``) stays free of torch.
"""
