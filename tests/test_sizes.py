"""Micro-batch sizes a model cannot train at are left out of the search, not the end of the plan."""
from __future__ import annotations

from pathlib import Path

import pytest

from memflow.errors import CaptureError, ConfigError
from search.context import MeshLimits, mesh_choices

MODEL = str(Path(__file__).resolve().parent / "models" / "binarised.py")


def test_mesh_choices_leave_out_the_skipped_sizes():
    """Batch 8 on 4 devices: every (dp, m) whose micro-batch B // (dp m) is skipped goes, a dp left with
    none goes, and a mesh nothing but skipped sizes allows is a one-line error."""
    assert mesh_choices(4, 8, MeshLimits(max_microbatches=8)) == {1: [1, 2, 4, 8], 2: [1, 2, 4], 4: [1, 2]}
    got = mesh_choices(4, 8, MeshLimits(max_microbatches=8, skip_sizes=frozenset({1})))
    assert got == {1: [1, 2, 4], 2: [1, 2], 4: [1]}
    assert mesh_choices(4, 4, MeshLimits(skip_sizes=frozenset({1}))) == {1: [1, 2], 2: [1]}
    with pytest.raises(ConfigError, match="cannot run at micro-batch size"):
        mesh_choices(2, 2, MeshLimits(skip_sizes=frozenset({1, 2})))


def test_a_model_that_cannot_train_at_one_sample_plans_at_the_sizes_it_can(capsys):
    """BatchNorm1d at one sample per micro-batch raises in training: batch 4 on two devices profiles
    sizes 4, 2 and 1; size 1 is left out with a warning naming it and the module, and the plan uses a
    size it can train at. At batch 1 (no other size) the capture's error is the user's, as before."""
    from memflow.planner import plan

    p = plan(MODEL, gpus=2, gpu_type="v100-16gb", batch_size=4, iterations=200, cache=False)
    err = capsys.readouterr().err
    assert "cannot train at micro-batch size(s) 1;" in err and "BatchNorm1d" in err, err
    assert p.strategy.microbatch_size(4) >= 2
    with pytest.raises(CaptureError, match="Expected more than 1 value per channel"):
        plan(MODEL, gpus=1, gpu_type="v100-16gb", batch_size=1, iterations=50, cache=False)
