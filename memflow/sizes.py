"""Micro-batch sizes a model cannot train at: left out of the search, not the end of the plan.

A plan profiles every micro-batch size its meshes can use (``B // (dp × m)``). Some models cannot run
at some of them: a ``BatchNorm1d`` in training raises at one sample per channel ("Expected more than
1 value per channel when training"), and so does plain PyTorch training at that size. Where profiling
fails, each size is captured alone on fake tensors (no costs: the export and the split only); the sizes
whose capture fails are left out of the search (``MeshLimits.skip_sizes``) with a one-line warning,
and the plan goes on with the rest. Where the largest size fails, or none does alone (the failure was
not the size's), the error is the user's, as before.
"""
from __future__ import annotations

import sys
from typing import Any

from .errors import CaptureError, ModelLoadError
from .graph.build import capture_program
from .graph.diagnose import quiet_capture

__all__ = ["failing_sizes", "profile_sizes"]


def failing_sizes(spec: Any, sizes: list[int], *, dtype: str = "fp32", granularity: Any = "auto") -> dict[int, str]:
    """``{size: the capture's one-line error}`` of the sizes in ``sizes`` whose fake capture fails, the
    largest first: where it fails, every size is reported failing unchecked (the failure is not a small
    size's)."""
    bad = {}
    for b in sorted(sizes, reverse=True):
        try:
            with quiet_capture():
                capture_program(spec, b, granularity=granularity, fake=True, dtype=dtype)
        except (CaptureError, ModelLoadError) as e:
            if not bad and b == max(sizes):
                return {s: str(e) for s in sizes}
            bad[b] = str(e)
    return bad


def profile_sizes(source: Any, sizes: list[int]) -> tuple[dict[int, Any], dict[int, str]]:
    """``source.all(sizes)`` (a :class:`memflow.planner.GraphSource`), and ``{}``; where that fails with a
    capture error, the graphs of the sizes that capture alone and ``{size: error}`` of those that do not
    (warned about on stderr). Raises the original error where every size fails or none fails alone."""
    try:
        return source.all(sizes), {}
    except CaptureError:
        bad = failing_sizes(source.spec, sizes, dtype=source.dtype, granularity=source.granularity)
        if not bad or len(bad) == len(sizes):
            raise
    first = bad[min(bad)]
    why = first.split(": ", 1)[1] if first.startswith(str(source.spec.path)) else first
    print(f"memflow: warning: {source.spec.name} cannot train at micro-batch size(s) "
          f"{', '.join(map(str, sorted(bad)))}; plans use only {', '.join(str(b) for b in sizes if b not in bad)} "
          f"({why})", file=sys.stderr, flush=True)
    return source.all([b for b in sizes if b not in bad]), bad
