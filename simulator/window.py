"""The buffers a pipeline stage can see, found without walking the whole graph.

:func:`simulator.stage.build_layout` walks every buffer of the graph for each
stage ``[a, b)`` it lays out and skips the ones that touch none of the stage's
nodes: a buffer made, read and freed only by nodes before ``a`` (or only by
nodes from ``b`` on) is neither the stage's, nor received, nor relayed by it;
a parameter's gradient lives on a stage only if one of the stage's nodes reads
that parameter; a buffer made in the optimizer phase, or of no bytes, is never
carried. A search lays out a few hundred stages of graphs with thousands of
buffers, so :class:`BufferWindow` works out once per graph which nodes each
buffer touches and hands ``build_layout`` the graph with only the buffers that
can matter to a stage, in their order (the layout is the same: tested
against the whole graph for every stage).
"""
from __future__ import annotations

import numpy as np

from memflow.graph.record import KIND_GRAD, TaskGraph

__all__ = ["BufferWindow"]


class _StageView:
    """``graph`` with only some of its buffers (everything else read through)."""

    __slots__ = ("_graph", "buffers")

    def __init__(self, graph: TaskGraph, buffers: list):
        self._graph = graph
        self.buffers = buffers

    def __getattr__(self, name: str):
        return getattr(self._graph, name)

    @property
    def whole(self) -> TaskGraph:
        """The graph with all its buffers."""
        return self._graph


class BufferWindow:
    """Per buffer, the first and last node it touches; :meth:`view` keeps those a stage can see."""

    def __init__(self, graph: TaskGraph):
        self.graph = graph
        n = graph.n
        readers: dict[str, list[int]] = {}
        for nd in graph.nodes:
            for name in nd.read_params:
                readers.setdefault(name, []).append(nd.index)
        lo = np.full(len(graph.buffers), n, dtype=np.int64)  # lo = n, hi = -1: never seen
        hi = np.full(len(graph.buffers), -1, dtype=np.int64)
        for i, buf in enumerate(graph.buffers):
            pa = buf.alloc_phase
            if buf.nbytes <= 0 or pa >= 2 * n:
                continue
            if buf.kind == KIND_GRAD and buf.param in readers:
                nodes = readers[buf.param]  # on the stages that read its parameter
            else:
                nodes = [pa if pa < n else 2 * n - 1 - pa]
                nodes += [u if u < n else 2 * n - 1 - u for u in buf.uses if u < 2 * n]
                pf = buf.free_phase
                if pf < 2 * n:
                    nodes.append(pf if pf < n else 2 * n - 1 - pf)
            lo[i], hi[i] = min(nodes), max(nodes)
        self.lo, self.hi = lo, hi

    def view(self, a: int, b: int) -> _StageView:
        """The graph as stage ``[a, b)`` sees it: buffers touching no node of ``[a, b)`` left out."""
        keep = np.flatnonzero((self.hi >= a) & (self.lo < b)).tolist()
        bufs = self.graph.buffers
        return _StageView(self.graph, [bufs[i] for i in keep])
