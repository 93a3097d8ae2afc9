"""``F.ctc_loss`` (every CTC speech model) has no fake-tensor kernel in torch: ``torch.export`` refused it
("DynamicOutputShapeException: aten._ctc_loss.Tensor") and no model with it could be planned.
:mod:`memflow.graph.fake_kernels` gives it one: ``log_alpha``, saved for the backward, sized by the padded
targets' width (the longest target where the batch fills it, an upper bound otherwise)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from tests.onerank import predicted_ranks

ROOT = Path(__file__).resolve().parents[1]
PATH = ROOT / "tests" / "models" / "ctc_asr.py"


@pytest.mark.parametrize("longest", [6, 4])
def test_the_fake_kernel_gives_the_real_kernels_shapes_or_more(longest):
    """Outputs of ``aten._ctc_loss`` under fake tensors against torch's own kernel: equal shapes where a
    target fills the padding, ``log_alpha`` no smaller where none does; the backward's gradient is the
    log-probabilities' shape."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    import memflow.graph.fake_kernels  # noqa: F401 - registers

    t, b, c, s = 20, 4, 12, 6
    g = torch.Generator().manual_seed(0)
    lp = torch.randn(t, b, c, generator=g).log_softmax(-1)
    tg = torch.randint(1, c, (b, s), generator=g)
    il, tl = torch.full((b,), t), torch.full((b,), longest)
    real = torch.ops.aten._ctc_loss.Tensor(lp, tg, il, tl)
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        fake = torch.ops.aten._ctc_loss.Tensor(*(mode.from_tensor(x) for x in (lp, tg, il, tl)))
        grad = torch.ops.aten._ctc_loss_backward.Tensor(torch.ones(b), mode.from_tensor(lp), mode.from_tensor(tg),
                                                        mode.from_tensor(il), mode.from_tensor(tl), *fake, 0)
    assert fake[0].shape == real[0].shape and grad.shape == lp.shape
    if longest == s:
        assert fake[1].shape == real[1].shape
    else:
        assert fake[1].shape[:2] == real[1].shape[:2] and fake[1].shape[2] > real[1].shape[2]


@pytest.mark.parametrize("dp,pp,m,acts", [(1, 2, 2, {4: "recompute"}), (2, 1, 2, {2: "swap"})], ids=["pp2", "dp2"])
def test_a_ctc_model_plans_and_runs_as_predicted_with_plain_losses(dp, pp, m, acts):
    """A conv + bidirectional LSTM recogniser with ``F.ctc_loss`` in its forward, captured with fake
    tensors for a named GPU and with real ones here; a pipeline (its LSTM recomputed) and data parallel
    (a conv's saved tensors swapped) run on ``cpu-2``: each rank's peak within 5% over its measured one,
    never under, and the losses of plain training."""
    from memflow.cluster import Cluster
    from memflow.executor import plain_losses
    from memflow.planner import GraphSource, resolve_spec
    from memflow.profile.build import capture_graph
    from memflow.strategy import Strategy

    spec = resolve_spec(str(PATH))
    assert [n.name for n in capture_graph(spec, 4).nodes][-2:] == ["rnn", "head"]  # fake: predicted costs
    n = 6
    st = Strategy(dp=dp, pp=pp, stage_of=[0] * 4 + [pp - 1] * 2, actions=[acts.get(i, "keep") for i in range(n)],
                  microbatches=m)
    g = GraphSource(spec, Cluster.load("cpu-2"))(st.microbatch_size(8))
    _, rep = predicted_ranks(str(PATH), g, st, batch=8)
    for r in rep.ranks:
        assert r.measured_peak_bytes <= r.predicted_peak_bytes <= 1.05 * r.measured_peak_bytes, (
            r.rank, r.measured_peak_bytes, r.predicted_peak_bytes, r.peak_at)
    want = plain_losses(str(PATH), 8, 3, seed=0, pieces=dp * m)
    assert all(abs(a - b) <= 1e-5 * abs(b) for a, b in zip(rep.losses, want)), (rep.losses, want)
