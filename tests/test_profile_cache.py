"""The profile cache gives a model's own graph: what its build read beyond the model file (its own
environment variables, helper modules, data files) is recorded with each entry and checked."""
from __future__ import annotations

import os
import sys

import pytest

import memflow.profile as prof
import memflow.profile.deps as deps_mod
from memflow.cli.main import main
from memflow.graph.record import TaskGraph
from memflow.model_file import load_model_file
from memflow.planfile import load_plan
from memflow.planner import check_model
from memflow.profile.cache import ProfileCache
from memflow.profile.deps import record

ENV_MODEL = '''
import os
import torch
from torch import nn

LAYERS = int(os.environ.get("TOY_LAYERS", "2"))  # read when the file is imported


def build_model():
    vocab = int(os.getenv("TOY_VOCAB", "64"))  # read when the model is built
    return nn.Sequential(nn.Embedding(vocab, 16), *[nn.Linear(16, 16) for _ in range(LAYERS)],
                         nn.Linear(16, vocab))


def example_batch(batch_size):
    return torch.randint(0, 64, (batch_size, 8)), torch.randint(0, 64, (batch_size, 8))


def loss_fn(output, target):
    return nn.functional.cross_entropy(output.flatten(0, 1), target.flatten())
'''

HELPER_MODEL = '''
import importlib.util
from pathlib import Path

import torch
from torch import nn

import toyhelper  # an ordinary import (the model's directory is on sys.path)


def _by_path(name):  # as the examples load examples/_hf.py
    spec = importlib.util.spec_from_file_location("toy_" + name, Path(__file__).with_name(name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


DEPTH = _by_path("toydepth").DEPTH
SHAPE = [int(x) for x in (Path(__file__).with_name("toy.cfg")).read_text().split()]


def build_model():
    w = toyhelper.WIDTH
    return nn.Sequential(nn.Linear(SHAPE[0], w), *[nn.Linear(w, w) for _ in range(DEPTH)], nn.Linear(w, 2))


def example_batch(batch_size):
    return torch.randn(batch_size, SHAPE[0]), torch.randint(0, 2, (batch_size,))


def loss_fn(output, target):
    return nn.functional.cross_entropy(output, target)
'''


@pytest.fixture
def captures(monkeypatch, tmp_path):
    """The sizes each plan captured (nothing: every graph came from the cache)."""
    monkeypatch.setenv("MEMFLOW_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    seen: list = []
    real = prof.capture_graphs

    def counting(spec, sizes, **kw):
        seen.append(list(sizes))
        return real(spec, sizes, **kw)

    monkeypatch.setattr(prof, "capture_graphs", counting)
    return seen


def _plan(path, out, gpu="v100-16gb", batch=4):
    rc = main(["plan", str(path), "--gpus", "2", "--gpu-type", gpu, "--batch-size", str(batch),
               "--iterations", "200", "--quiet", "-o", str(out)])
    assert rc == 0
    p = load_plan(out)
    check_model(p)  # what `memflow run` checks first: the model as it is now is the one planned
    return p


def test_a_models_own_environment_variables_key_its_graphs(tmp_path, monkeypatch, captures):
    path = tmp_path / "envmodel.py"
    path.write_text(ENV_MODEL)
    small = _plan(path, tmp_path / "a.yaml")
    monkeypatch.setenv("TOY_LAYERS", "8")  # read at import
    monkeypatch.setenv("TOY_VOCAB", "4096")  # read by build_model
    big = _plan(path, tmp_path / "b.yaml")
    assert len(big.node_names) > len(small.node_names) and big.fingerprint != small.fingerprint
    assert max(big.predicted.peak_bytes) > 10 * max(small.predicted.peak_bytes)
    assert len(captures) == 2
    monkeypatch.delenv("TOY_LAYERS")
    monkeypatch.delenv("TOY_VOCAB")
    again = _plan(path, tmp_path / "c.yaml")  # each setting keeps its own entries
    assert again.fingerprint == small.fingerprint and len(captures) == 2


def test_a_changed_helper_module_or_data_file_is_a_miss(tmp_path, monkeypatch, captures):
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "toyhelper.py").write_text("WIDTH = 16\n")
    (tmp_path / "toydepth.py").write_text("DEPTH = 1\n")
    (tmp_path / "toy.cfg").write_text("8\n")
    path = tmp_path / "helpermodel.py"
    path.write_text(HELPER_MODEL)

    def plan_in_a_new_process(name):
        monkeypatch.delitem(sys.modules, "toyhelper", raising=False)  # as a new `memflow plan` imports it
        return _plan(path, tmp_path / name)

    first = plan_in_a_new_process("a.yaml")
    assert plan_in_a_new_process("b.yaml").fingerprint == first.fingerprint and len(captures) == 1  # a hit
    for edit in [("toyhelper.py", "WIDTH = 32\n"), ("toydepth.py", "DEPTH = 3\n"), ("toy.cfg", "12\n")]:
        (tmp_path / edit[0]).write_text(edit[1])
        p = plan_in_a_new_process(f"{edit[0]}.yaml")
        assert p.fingerprint != first.fingerprint, edit
    assert len(captures) == 4


def test_measured_cpu_profiles_follow_the_environment_too(tmp_path, monkeypatch, captures):
    # batch 2: micro-batches 2 and 1 timed by the cpu-2 processes (batch 4 added a third size, the same path)
    path = tmp_path / "envmodel.py"
    path.write_text(ENV_MODEL)
    small = _plan(path, tmp_path / "a.yaml", gpu="cpu", batch=2)
    monkeypatch.setenv("TOY_LAYERS", "6")
    big = _plan(path, tmp_path / "b.yaml", gpu="cpu", batch=2)
    assert len(big.node_names) > len(small.node_names)


def test_a_stale_spec_is_not_cached(tmp_path, monkeypatch):
    """A ModelSpec loaded before its variable changed builds another model than the file does now:
    its graph is not stored under what the file reads now."""
    path = tmp_path / "envmodel.py"
    path.write_text(ENV_MODEL)
    spec = load_model_file(path)  # TOY_LAYERS unset: 2 layers
    monkeypatch.setenv("TOY_LAYERS", "5")
    store = ProfileCache(tmp_path / "cache")
    g = prof.profile_model(spec, 2, device="v100-16gb", cache=store)
    assert len(g.nodes) < 5 and list((tmp_path / "cache").glob("*.json")) == []
    fresh = prof.profile_model(load_model_file(path), 2, device="v100-16gb", cache=store)
    assert len(fresh.nodes) > 5 and len(list((tmp_path / "cache").glob("*.deps.json"))) == 1


def test_record_sees_imports_files_and_variables(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "toyhelper.py").write_text("WIDTH = 16\n")
    (tmp_path / "toydepth.py").write_text("DEPTH = 1\n")
    (tmp_path / "toy.cfg").write_text("8\n")
    (tmp_path / "helpermodel.py").write_text(HELPER_MODEL)
    import toyhelper  # noqa: F401 - imported before: the record must still see it
    deps = record(str(tmp_path / "helpermodel.py"), 2)
    assert {str(tmp_path / f) for f in ("toyhelper.py", "toydepth.py", "toy.cfg", "helpermodel.py")} <= set(deps.files)
    assert deps.holds()
    (tmp_path / "env.py").write_text(ENV_MODEL)
    deps = record(str(tmp_path / "env.py"), 2)
    assert deps.env == {"TOY_LAYERS": None, "TOY_VOCAB": None}
    monkeypatch.setenv("TOY_VOCAB", "64")
    assert not deps.holds()


def test_plain_keys_keep_plain_entries(tmp_path):
    g = TaskGraph(model_name="m", batch_size=1, dtype="fp32", nodes=[], buffers=[])
    store = ProfileCache(tmp_path)
    store.put("k", g)
    assert [p.name for p in tmp_path.iterdir()] == ["k.json"] and store.get("k") is not None


def test_record_without_fork_runs_here_and_restores_the_environment(tmp_path, monkeypatch):
    class NoFork:
        def __init__(self, fn):
            pass

        def result(self):
            return None

    monkeypatch.setattr(deps_mod, "ForkedJobs", NoFork)
    real = os.environ
    (tmp_path / "env.py").write_text(ENV_MODEL)
    got = record(str(tmp_path / "env.py"), 2)
    assert os.environ is real
    assert got.env == {"TOY_LAYERS": None, "TOY_VOCAB": None} and str(tmp_path / "env.py") in got.files


def test_how_memflow_runs_is_not_a_model_setting(monkeypatch):
    """The guard's time limit and the fork server say how MemFlow runs, not what the model is: they key no
    profile, are recorded with no plan, and a plan's settings applied for its run leave them as given
    (a MEMFLOW_MODEL_TIMEOUT_S given to `memflow run` held until now only if the plan was made with it)."""
    from memflow.modelenv import applied, model_env

    monkeypatch.setenv("MEMFLOW_MODEL_TIMEOUT_S", "300")
    monkeypatch.setenv("MEMFLOW_FORKSERVER", "/tmp/x.sock")
    monkeypatch.setenv("MEMFLOW_LSTM_LAYERS", "3")
    assert not {"MEMFLOW_MODEL_TIMEOUT_S", "MEMFLOW_FORKSERVER"} & set(model_env())
    assert model_env()["MEMFLOW_LSTM_LAYERS"] == "3"
    with applied({"MEMFLOW_EXAMPLE_SCALE": "tiny"}):  # a plan made at tiny scale, without the others
        assert os.environ["MEMFLOW_MODEL_TIMEOUT_S"] == "300" and os.environ["MEMFLOW_FORKSERVER"] == "/tmp/x.sock"
        assert "MEMFLOW_LSTM_LAYERS" not in os.environ  # a model setting the plan was made without
    assert os.environ["MEMFLOW_LSTM_LAYERS"] == "3"
