"""Synthetic TaskGraphs with consistent buffers, for tests and benchmarks.

Phases follow :mod:`memflow.graph.record`: F_k = k, B_k = 2n-1-k, OPT = 2n.
Transients are what a profiler would report: the bytes allocated in a phase
and alive at its end plus the bytes freed during it, plus a workspace.
"""
from __future__ import annotations

import random

from memflow.graph.record import KIND_ACTIVATION, KIND_GRAD, KIND_INPUT_GRAD, Buffer, Node, TaskGraph

__all__ = ["chain_graph", "random_graph", "gpt2_like_graph"]


def _finish(name: str, nodes: list, buffers: list, *, input_bytes: int, opt_transient: int, batch_size: int,
            ws_fwd: list, ws_bwd: list, bwd_dominates: bool) -> TaskGraph:
    n = len(nodes)
    alloc_alive = [0] * (2 * n + 1)
    freed = [0] * (2 * n + 1)
    for b in buffers:
        if b.alloc_phase < 2 * n + 1 and b.free_phase > b.alloc_phase:
            alloc_alive[b.alloc_phase] += b.nbytes
        if b.free_phase < 2 * n + 1 and b.free_phase > b.alloc_phase:
            freed[b.free_phase] += b.nbytes
    for k, nd in enumerate(nodes):
        f, bp = k, 2 * n - 1 - k
        nd.fwd_transient_bytes = alloc_alive[f] + freed[f] + ws_fwd[k]
        nd.bwd_transient_bytes = alloc_alive[bp] + freed[bp] + ws_bwd[k]
        if bwd_dominates:
            nd.bwd_transient_bytes = max(nd.bwd_transient_bytes, nd.fwd_transient_bytes)
        nd.out_bytes = sum(b.nbytes for b in buffers if b.alloc_phase == f and any(u != f and u < n for u in b.uses))
        nd.saved_bytes = sum(b.nbytes for b in buffers if b.alloc_phase == f and b.free_phase == bp)
    return TaskGraph(model_name=name, batch_size=batch_size, dtype="fp32", nodes=nodes, buffers=buffers,
                     device="synthetic", time_source="predicted", opt_transient_bytes=opt_transient,
                     input_bytes=input_bytes)


def chain_graph(n: int, act_bytes: int = 1 << 20, saved_bytes: int = 1 << 20, param_bytes: int = 1 << 20,
                fwd_s: float = 1e-3, bwd_s: float = 2e-3, *, optimizer_factor: float = 2.0,
                input_bytes: int = 0, ws_fwd: int = 0, ws_bwd: int = 0, opt_transient: int = 0,
                batch_size: int = 1, name: str = "chain") -> TaskGraph:
    """A chain of ``n`` identical nodes. Node k's buffers:

    * ``out_k`` (act_bytes): made in F_k, read in F_{k+1} and B_{k+1} (the next node
      saves its input), freed in B_{k+1}; the last node's output is freed in B_{n-1};
    * ``saved_k`` (saved_bytes): made in F_k, read and freed in B_k;
    * ``grad_k`` (param_bytes, kind grad): made in B_k, read in OPT, survives the step;
    * ``dx_k`` (act_bytes, input_grad) for k > 0: made in B_k, read and freed in B_{k-1}.
    """
    nodes, bufs = [], []
    for k in range(n):
        nodes.append(Node(index=k, name=f"n{k}", module_path=f"layers.{k}", param_bytes=param_bytes,
                          grad_bytes=param_bytes, optimizer_bytes=int(param_bytes * optimizer_factor),
                          fwd_time_s=fwd_s, bwd_time_s=bwd_s))
        F, B = k, 2 * n - 1 - k
        if k < n - 1:
            bufs.append(Buffer(act_bytes, F, 2 * n - 1 - (k + 1), KIND_ACTIVATION, [k + 1, 2 * n - 1 - (k + 1)]))
        else:
            bufs.append(Buffer(act_bytes, F, B, KIND_ACTIVATION, [B]))
        if saved_bytes:
            bufs.append(Buffer(saved_bytes, F, B, KIND_ACTIVATION, [B]))
        if param_bytes:
            bufs.append(Buffer(param_bytes, B, 2 * n + 1, KIND_GRAD, [2 * n]))
        if k > 0:
            bufs.append(Buffer(act_bytes, B, B + 1, KIND_INPUT_GRAD, [B + 1]))
    return _finish(name, nodes, bufs, input_bytes=input_bytes, opt_transient=opt_transient, batch_size=batch_size,
                   ws_fwd=[ws_fwd] * n, ws_bwd=[ws_bwd] * n, bwd_dominates=False)


def random_graph(n: int, seed: int = 0, *, max_bytes: int = 64 << 20, skip_prob: float = 0.3,
                 bwd_dominates: bool = True) -> TaskGraph:
    """A random DAG of ``n`` nodes in topological order with consistent buffers:
    each node's output feeds the next node and, with ``skip_prob``, a later one;
    consumers save their inputs at random; every node has saved-for-backward
    buffers, parameter gradients and input gradients. With ``bwd_dominates`` the
    backward transient is at least the forward one (the usual case)."""
    rng = random.Random(seed)
    nodes, bufs = [], []

    def rb(lo=0.05):
        return int(max_bytes * rng.uniform(lo, 1.0))

    for k in range(n):
        p = rb() if rng.random() < 0.8 else 0
        nodes.append(Node(index=k, name=f"r{k}", module_path=f"m.{k}", param_bytes=p, grad_bytes=p,
                          optimizer_bytes=2 * p, fwd_time_s=rng.uniform(1e-4, 5e-3),
                          bwd_time_s=rng.uniform(2e-4, 1e-2)))
    for k in range(n):
        F, B = k, 2 * n - 1 - k
        consumers = [k + 1] if k + 1 < n else []
        if k + 2 < n and rng.random() < skip_prob:
            consumers.append(rng.randrange(k + 2, n))
        out = rb()
        uses = []
        for c in consumers:
            uses.append(c)
            if rng.random() < 0.6:
                uses.append(2 * n - 1 - c)  # the consumer saves it for backward
            # gradient of this input, made in the consumer's backward, read in B_k
            bufs.append(Buffer(out, 2 * n - 1 - c, B, KIND_INPUT_GRAD, [B]))
        if rng.random() < 0.3 or not consumers:
            uses.append(B)  # also read by its own backward
        bufs.append(Buffer(out, F, max(uses), KIND_ACTIVATION, sorted(set(uses))))
        for _ in range(rng.randrange(0, 3)):
            bufs.append(Buffer(rb(), F, B, KIND_ACTIVATION, [B]))  # saved for backward
        if nodes[k].grad_bytes:
            free = 2 * n + 1 if rng.random() < 0.7 else 2 * n
            bufs.append(Buffer(nodes[k].grad_bytes, B, free, KIND_GRAD, [2 * n]))
    ws_f = [rb() // 4 for _ in range(n)]
    ws_b = [rb() // 4 for _ in range(n)]
    return _finish(f"random{seed}", nodes, bufs, input_bytes=rb() // 8, opt_transient=rb() // 2, batch_size=1,
                   ws_fwd=ws_f, ws_bwd=ws_b, bwd_dominates=bwd_dominates)


def gpt2_like_graph(micro_batch: int = 8, seq: int = 1024, *, bytes_per: int = 2, d: int = 768,
                    layers: int = 12, name: str = "gpt2-like") -> TaskGraph:
    """``layers + 3`` nodes shaped like GPT-2 (embedding, blocks of width ``d``, final norm, LM head
    + loss; small by default, ``d=1024, layers=24`` for medium) at a micro-batch of ``micro_batch``
    × ``seq`` tokens, bf16 activations, fp32 state, with V100-ish times. Figures are approximate,
    for benchmarking the simulator and the search."""
    V, L = 50257, layers
    tok = micro_batch * seq
    act = tok * d * bytes_per
    n = L + 3
    nodes, bufs = [], []
    blk_p = 12 * d * d * 4 + 13 * d * 4
    params = [V * d * 4 + 1024 * d * 4] + [blk_p] * L + [2 * d * 4, 0]
    flops_blk = 2 * tok * 12 * d * d + 2 * tok * seq * d * 2
    fl = [tok * d * 2] + [flops_blk] * L + [tok * d * 10, 2 * tok * d * V]
    rate = 60e12
    names = ["wte"] + [f"h.{i}" for i in range(L)] + ["ln_f", "lm_head"]
    for k in range(n):
        nodes.append(Node(index=k, name=names[k],
                          module_path="", param_bytes=params[k], grad_bytes=params[k],
                          optimizer_bytes=2 * params[k], fwd_flops=fl[k], bwd_flops=2 * fl[k],
                          fwd_time_s=fl[k] / rate + 2e-5, bwd_time_s=2 * fl[k] / rate + 4e-5))
    for k in range(n):
        F, B = k, 2 * n - 1 - k
        if k < n - 1:
            bufs.append(Buffer(act, F, 2 * n - 2 - k, KIND_ACTIVATION, [k + 1, 2 * n - 2 - k]))
            if k > 0:
                bufs.append(Buffer(act, B, B + 1, KIND_INPUT_GRAD, [B + 1]))
        saved = 0
        if 1 <= k <= L:
            saved = 16 * act + micro_batch * (d // 64) * seq * seq * bytes_per  # attention probs etc.
        elif k == L + 2:
            saved = tok * V * 4  # logits
        if saved:
            bufs.append(Buffer(saved, F, B, KIND_ACTIVATION, [B]))
        if params[k]:
            bufs.append(Buffer(params[k], B, 2 * n + 1, KIND_GRAD, [2 * n]))
    g = _finish(name, nodes, bufs, input_bytes=tok * 8 * 2, opt_transient=params[1] * 2,
                batch_size=micro_batch, ws_fwd=[act * 2] * n, ws_bwd=[act * 4] * n, bwd_dominates=True)
    return g
