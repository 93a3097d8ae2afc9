"""The graph as a ZeRO-3 stage that gathers in bf16 sees it: :func:`low_view`.

Under bf16 autocast a ZeRO-3 unit gathers the parameters autocast only casts in bf16
(:mod:`memflow.graph.casts`, :mod:`memflow.executor.zero3`): the node reads the gathered slice where
plain autocast made (and saved) a bf16 copy of the parameter. Everything else of the step is the
same (the gradient goes back to the fp32 parameter through the same conversion), so the graph such a
stage sees is the traced one less the buffers the profiler tagged as those casts (``Buffer.cast``),
with each node's transients as traced without them (``Node.low_*_transient_bytes``; under the
selective policy too, ``Node.low_sel_*``: a GRU's replay casts its weights once per time step). The gathered
bf16 bytes themselves are :mod:`simulator.zero3`'s (``Zero3Facts.low``).
"""
from __future__ import annotations

import dataclasses

__all__ = ["LowView", "low_view", "low_bytes"]


class LowView:
    """``graph`` without its tagged casts, its nodes' transients those traced without them."""

    def __init__(self, graph):
        self._graph = graph
        low = set(graph.cast_params)
        self.buffers = [b for b in graph.buffers if not (b.cast and b.cast in low)]
        self.nodes = [dataclasses.replace(
            nd, fwd_transient_bytes=nd.low_fwd_transient_bytes, bwd_transient_bytes=nd.low_bwd_transient_bytes,
            rec_fwd_transient_bytes=nd.low_rec_fwd_transient_bytes if nd.rec_fwd_transient_bytes >= 0 else -1,
            held_bwd_transient_bytes=nd.low_held_bwd_transient_bytes,
            rec_held_bwd_transient_bytes=nd.low_rec_held_bwd_transient_bytes,
            held_fwd_transient_bytes=-1,  # (not traced without the casts)
            **(dict(sel_saved_bytes=nd.low_sel_saved_bytes, sel_bwd_transient_bytes=nd.low_sel_bwd_transient_bytes,
                    sel_held_bwd_transient_bytes=-1, sel_steady_bwd_transient_bytes=-1,
                    sel_fwd_transient_bytes=nd.low_sel_fwd_transient_bytes)
               if nd.low_sel_bwd_transient_bytes >= 0 and nd.sel_saved_bytes >= 0 else {}))
            if nd.low_fwd_transient_bytes >= 0 else nd for nd in graph.nodes]

    def __getattr__(self, name: str):
        return getattr(self._graph, name)


def low_view(graph) -> LowView | None:
    """The view, or None where the graph has no parameter gathered in bf16."""
    return LowView(graph) if getattr(graph, "cast_params", None) else None


def low_bytes(graph, a: int, b: int) -> tuple:
    """Per node of ``[a, b)``, the fp32 bytes of its parameters gathered in bf16."""
    low = set(getattr(graph, "cast_params", ()) or ())
    out = []
    for nd in graph.nodes[a:b]:
        out.append(sum(int(graph.params[k][1]) for k in nd.param_names if k in low and k in graph.params))
    return tuple(out)
