"""A model that changes its trainable parameters in place in ``forward`` runs one micro-batch per step.

A WGAN critic clipping its weights in ``forward`` (``with torch.no_grad(): p.clamp_(-c, c)``) changes
tensors the same forward then saves for its backward. Two forwards before a backward (micro-batches
in flight: GPipe's, 1F1B's warm-up, any pipeline stage but the last) find the first one's saved
weights changed, and autograd stops the run ("... has been modified by an inplace operation"): plain
PyTorch accumulating gradients over such a model fails the same way. The profile names those
parameters (``TaskGraph.meta["written_params"]``, :func:`memflow.graph.aliases.written_params`); the
search then keeps one micro-batch per step (``MeshLimits.max_microbatches = 1``), with one warning line,
and a request for more is one clear error.

A forward that keeps tensors in plain attributes for its next call (a Transformer-XL memory, a stateful
LSTM's ``self.hidden = (h.detach(), c.detach())``), or sets a flag or counter (Glow's ActNorm initialising
from the first batch: ``self.initialized = True``), is captured once: the planned step runs the program
traced with the attributes as they stood then, and never sets them again (the capture puts them back,
``TaskGraph.meta["carried_attrs"]``). Plain PyTorch's later steps read the last step's state: the
losses part. That is one warning line (:func:`carried_state`), not an error: a forward that only keeps
a value to look at (attention maps for a plot) trains the same.
"""
from __future__ import annotations

import dataclasses
import sys
from typing import Any

from .errors import ConfigError

__all__ = ["written_in_forward", "one_in_flight", "carried_state", "routed_sizes", "warn_once"]

_warned: set = set()  # (model name, warning): each printed once per process (a plan searches per tp degree)


def warn_once(name: str, text: str) -> None:
    """``memflow: warning: {name} {text}`` on stderr, once per process."""
    if (name, text) not in _warned:
        _warned.add((name, text))
        print(f"memflow: warning: {name} {text}", file=sys.stderr, flush=True)


def written_in_forward(graphs: Any) -> list[str]:
    """The trainable parameters any of ``graphs`` (TaskGraphs) records as changed in place in forward."""
    return sorted({p for g in graphs for p in g.meta.get("written_params", [])})


def one_in_flight(graphs: Any, limits: Any, name: str) -> Any:
    """``limits`` (a MeshLimits) bounded to one micro-batch per step where the model changes parameters
    in forward (warned once on stderr); a fixed micro-batch count above one is a ConfigError."""
    written = written_in_forward(graphs)
    if not written:
        return limits
    what = ", ".join(p.removeprefix("model.") for p in written[:3]) + (f" and {len(written) - 3} more"
                                                                        if len(written) > 3 else "")
    if limits.microbatches is not None and limits.microbatches > 1:
        raise ConfigError(f"{name} changes parameters in place in forward ({what}): with {limits.microbatches} "
                          "micro-batches a second forward would change what the first saved for its backward; "
                          "use one micro-batch per step")
    if limits.max_microbatches != 1:
        warn_once(name, f"changes parameters in place in forward ({what}): planned with one micro-batch per "
                        "step (a second forward before a backward would change what the first saved)")
        limits = dataclasses.replace(limits, max_microbatches=1)
    return limits


def carried_state(graphs: Any, name: str) -> list[str]:
    """The plain attributes any of ``graphs`` records as set in forward to tensors or to new numbers or
    flags (module docstring), warned once on stderr."""
    carried = sorted({a for g in graphs for a in g.meta.get("carried_attrs", [])})
    if carried:
        what = ", ".join(carried[:3]) + (f" and {len(carried) - 3} more" if len(carried) > 3 else "")
        warn_once(name, f"keeps state for its next forward in plain attributes ({what}): a planned step runs "
                        "the forward as captured, with the values they had then, and never sets them, so where a "
                        "later forward reads them its training differs from plain PyTorch's (keep such state in a "
                        "buffer updated in place, or pass it in the batch; a one-time initialisation belongs in "
                        "build_model)")
    return carried


def routed_sizes(graphs: Any, name: str) -> list[str]:
    """The modules any of ``graphs`` records as sizing tensors by numbers read from tensors (a mixture of
    experts' per-expert token counts, ``.tolist()``: :func:`memflow.graph.diagnose.routed_sizes`), warned
    once on stderr: their memory is the profiled batch's routing, and another batch's moves the peak."""
    routed: list[str] = []
    for g in graphs:  # (in step order; a module inside one already named is left out)
        for m in g.meta.get("routed", []):
            if m not in routed:
                routed.append(m)
    routed = [m for m in routed if not any(m.startswith(o + ".") for o in routed)]
    if routed:
        what = ", ".join(routed[:2]) + (f" and {len(routed) - 2} more" if len(routed) > 2 else "")
        warn_once(name, f"sizes tensors by values it reads from tensors ({what}: tokens split per expert by "
                        "their counts): the plan's memory is the profiled batch's routing, and another batch's "
                        "moves the peak (HF JetMoE: 0.06% above the plan measured), so keep --headroom above 0")
    return routed
