"""MemFlow's memory-aware training-step simulator.

``simulate(graph, strategy, cluster) -> SimResult`` and :class:`Simulator`
for the search's repeated (and delta) evaluations.
"""
from .core import BUCKET_BYTES, HOST_MEM_BANDWIDTH, HOST_TENSOR_S, Simulator, simulate
from .result import Evaluation, SimResult
from .synthetic import chain_graph, gpt2_like_graph, random_graph

__all__ = [
    "Simulator", "simulate", "SimResult", "Evaluation", "chain_graph", "random_graph", "gpt2_like_graph",
    "BUCKET_BYTES", "HOST_MEM_BANDWIDTH", "HOST_TENSOR_S",
]
