"""The Pareto front of (step time, max peak memory) over evaluated strategies."""
from __future__ import annotations

import bisect
from typing import Any, Iterable

__all__ = ["ParetoFront", "pareto_front", "is_non_dominated"]


class ParetoFront:
    """Non-dominated (step_time_s, max_peak_bytes, strategy) points, sorted by time
    (so peaks strictly decrease). ``add`` is O(front size)."""

    def __init__(self) -> None:
        self._t: list[float] = []
        self._p: list[int] = []
        self._s: list[Any] = []

    def add(self, t: float, peak: int, strategy: Any) -> bool:
        i = bisect.bisect_left(self._t, t)
        # dominated by an earlier (faster or equal) point with no larger peak?
        if i > 0 and self._p[i - 1] <= peak:
            return False
        if i < len(self._t) and self._t[i] == t and self._p[i] <= peak:
            return False
        # remove later points this one dominates (time ≥ t, peak ≥ peak)
        j = i
        while j < len(self._t) and self._p[j] >= peak:
            j += 1
        del self._t[i:j], self._p[i:j], self._s[i:j]
        self._t.insert(i, t)
        self._p.insert(i, peak)
        self._s.insert(i, strategy)
        return True

    def extend(self, points: Iterable) -> None:
        for t, p, s in points:
            self.add(t, p, s)

    def points(self) -> list[tuple]:
        return list(zip(self._t, self._p, self._s))

    def __len__(self) -> int:
        return len(self._t)


def pareto_front(points: Iterable) -> list[tuple]:
    """The sorted non-dominated subset of ``(time, peak, strategy)`` points."""
    f = ParetoFront()
    for t, p, s in sorted(points, key=lambda x: (x[0], x[1])):
        f.add(t, p, s)
    return f.points()


def is_non_dominated(points: list[tuple]) -> bool:
    """True when no point is dominated by another (≤ in both, < in one)."""
    for i, (t1, p1, _) in enumerate(points):
        for j, (t2, p2, _) in enumerate(points):
            if i != j and t2 <= t1 and p2 <= p1 and (t2 < t1 or p2 < p1):
                return False
    return True
