"""A one-tensor-at-a-time optimizer step's temporaries: the profiler's rates (measured on stand-ins) priced
by ``simulator.optstep.step_temps`` against the same optimizer stepping real parameters of other sizes.

Found on a pipelined LSTM: the stage holding only the embedding was priced with 3 × its bytes (the model's
largest parameter's ratio, stepped after another weight whose ``denom`` still lived) and stepped with 2 ×:
16% over its run."""
from __future__ import annotations

import random

import pytest
import torch

from memflow.profile.optstep import single_step_rates, step_temps_measured
from simulator.optstep import step_temps

OPTIMIZERS = {
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-3, foreach=False),
    "adam-l2": lambda ps: torch.optim.Adam(ps, lr=1e-3, weight_decay=0.1, foreach=False),
    "sgd-momentum": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, foreach=False),
    "adagrad": lambda ps: torch.optim.Adagrad(ps, foreach=False),
    "rmsprop": lambda ps: torch.optim.RMSprop(ps, foreach=False),
}


def _measured(make, sizes: list[int]) -> int:
    """A steady-state step's most bytes above its state, fp32 parameters of ``sizes`` elements in that order."""
    ps = [torch.nn.Parameter(torch.randn(n)) for n in sizes]
    return step_temps_measured(make(ps), ps)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_priced_temporaries_equal_a_real_step_in_order_and_bound_it_in_any(name):
    make = OPTIMIZERS[name]
    rates = single_step_rates(make([torch.nn.Parameter(torch.zeros(1))]))
    assert rates is not None
    rng = random.Random(0)
    for _ in range(6):
        sizes = [rng.choice([64, 300, 1024, 5000, 12288]) for _ in range(rng.randint(1, 5))]
        got = _measured(make, sizes)
        # in the order stepped: to the byte, up to the 4-byte scalars (a step counter) the stand-ins
        # price per byte
        assert abs(step_temps([4 * n for n in sizes], rates, ordered=True) - got) <= 4 * len(sizes), (sizes, got)
        # in any order: never below
        assert step_temps([4 * n for n in sizes], rates) >= got - 4 * len(sizes), (sizes, got)


def test_one_parameter_alone_has_nothing_carried_into_its_step():
    """AdamW: 2 × a parameter alone, 2 × the second plus 1 × the first after it (its denom)."""
    rates = single_step_rates(OPTIMIZERS["adamw"]([torch.nn.Parameter(torch.zeros(1))]))
    assert step_temps([12800], rates) == step_temps([12800], rates, ordered=True) == 2 * 12800
    assert step_temps([12800, 16384], rates, ordered=True) == 2 * 16384 + 12800
    assert step_temps([16384, 12800], rates, ordered=True) == 2 * 12800 + 16384
    assert step_temps([16384, 64], rates, ordered=True) == 2 * 16384


def test_an_optimizer_that_cannot_be_copied_falls_back():
    class Custom(torch.optim.SGD):
        def __init__(self, params, scale):  # a constructor its defaults do not fill
            super().__init__(params, lr=0.1 * scale)

    assert single_step_rates(Custom([torch.nn.Parameter(torch.zeros(1))], 2.0)) is None
