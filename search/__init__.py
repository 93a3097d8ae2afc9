"""MemFlow's search: Metropolis–Hastings over strategies with a memory-aware
objective, seeds, baselines, an exact solver for small instances and the
Pareto front of (step time, max peak memory).

``search(graphs, global_batch, cluster, ...) -> SearchResult`` is the entry point.
"""
from .api import SearchResult, default_iterations, search
from .baselines import chen_sqrt_strategies, fixed_baselines, memory_unaware_search
from .context import MeshLimits, SearchContext, balanced_partition, divisors, mesh_choices
from .exact import ExactResult, solve_exact, space_size
from .mcmc import ChainParams, ChainResult, Evaluator, run_chain
from .moves import MOVE_WEIGHTS, MOVES, REPAIR_WEIGHTS, REPAIRS, State
from .pareto import ParetoFront, is_non_dominated, pareto_front
from .seeds import seed_strategies

__all__ = [
    "search", "SearchResult", "default_iterations", "SearchContext", "MeshLimits", "mesh_choices",
    "balanced_partition", "divisors",
    "solve_exact", "ExactResult", "space_size", "ChainParams", "ChainResult", "Evaluator", "run_chain",
    "MOVES", "MOVE_WEIGHTS", "REPAIRS", "REPAIR_WEIGHTS", "State", "ParetoFront", "pareto_front",
    "is_non_dominated", "seed_strategies", "chen_sqrt_strategies", "fixed_baselines", "memory_unaware_search",
]
