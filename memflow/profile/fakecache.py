"""An op's result as a warm ``FakeTensorMode`` cache gives it, without a warm-up step.

``FakeTensorMode`` caches op results by the inputs' metadata (one cache for the
whole process). A result from the cache can differ from a fresh one in how its
outputs alias (``mkldnn_rnn_layer_backward`` returns its bias gradient twice;
only the fresh call returns one storage), so a traced step has to meet the
cache that a step at its own shapes leaves behind. A traced step used to be
preceded by such a warm-up step; :func:`warm_call` gives the same answers
without it: when an op (or an op it runs internally) missed the cache, the
first result is dropped and the op is called again, now answered from the
entry the first call made, as a warm-up would have left it. A hit or an op the
cache does not hold runs once, as before.

Calling an op twice is safe under fake tensors: they hold no data, and the
version counter is bumped above the dispatch modes, once per op. Ops that
change an input's metadata (in-place views, ``resize_``, ``set_``: tagged
``inplace_view``) are never repeated.
"""
from __future__ import annotations

from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

__all__ = ["warm_call"]

_INPLACE_VIEW = torch.Tag.inplace_view


def warm_call(func, args: Any, kwargs: dict) -> Any:
    """``func(*args, **kwargs)``, answered as by a fake-tensor cache that has seen this op."""
    misses = FakeTensorMode.cache_misses
    out = func(*args, **kwargs)
    if FakeTensorMode.cache_misses != misses and _INPLACE_VIEW not in func.tags:
        out = func(*args, **kwargs)
    return out
