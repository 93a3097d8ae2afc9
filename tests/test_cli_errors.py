"""Bad input anywhere (CLI flags, YAML, plan files, model files) is one line on stderr and exit 2."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from memflow.cli.main import main
from memflow.cluster import Cluster
from memflow.planfile import PLAN_VERSION

ROOT = Path(__file__).resolve().parent.parent
EX = str(ROOT / "examples" / "lstm.py")
BAD = ROOT / "tests" / "bad_models"


def _plan_dict(**over):
    d = {
        "model_file": EX, "model_name": "lstm", "batch_size": 4,
        "strategy": {"dp": 1, "pp": 2, "stage_of": [0, 0, 1, 1], "actions": ["keep"] * 4, "microbatches": 1,
                     "schedule": "1f1b", "sharding": ["none", "none"], "optimizer_on_host": [False, False]},
        "cluster": Cluster.load("cpu-2").to_dict(),
        "node_names": ["embedding", "blocks.0", "blocks.1", "decoder"],
        "fingerprint": "0000",
        "predicted": {"fits": True, "step_time_s": 0.01, "peak_bytes": [1, 1], "capacity_bytes": [2**30, 2**30]},
        "version": PLAN_VERSION,
    }
    d.update(over)
    return d


def _strategy(**over):
    s = dict(_plan_dict()["strategy"])
    s.update(over)
    return s


def _write(tmp_path, name, obj):
    p = tmp_path / name
    p.write_text(obj if isinstance(obj, str) else yaml.safe_dump(obj))
    return str(p)


EXP = {"kind": "experiment", "model": EX, "batch_size": 4, "cluster": {"preset": "cpu-2"}}

CASES = [
    # (id, argv builder(tmp_path) -> argv, expected text in the message)
    ("unknown command", lambda t: ["frobnicate"], "unknown command"),
    ("plan missing model", lambda t: ["plan", "nope.py"], "not found"),
    ("plan model not .py", lambda t: ["plan", str(ROOT / "README.md")], ".py"),
    ("plan gpus 0", lambda t: ["plan", EX, "--gpus", "0"], "--gpus"),
    ("plan gpus negative", lambda t: ["plan", EX, "--gpus", "-2"], "--gpus"),
    ("plan gpus not int", lambda t: ["plan", EX, "--gpus", "abc"], "--gpus"),
    ("plan negative memory", lambda t: ["plan", EX, "--gpu-memory", "-1GiB"], "--gpu-memory"),
    ("plan bad memory unit", lambda t: ["plan", EX, "--gpu-memory", "12XB"], "--gpu-memory"),
    ("plan zero memory", lambda t: ["plan", EX, "--gpu-memory", "0"], "--gpu-memory"),
    ("plan unknown gpu type", lambda t: ["plan", EX, "--gpu-type", "voodoo-5"], "voodoo-5"),
    ("plan ambiguous gpu name", lambda t: ["plan", EX, "--gpu-type", "a100"], "did you mean a100-40gb or a100-80gb"),
    ("plan unknown cluster", lambda t: ["plan", EX, "--cluster", "nosuch-cluster"], "nosuch-cluster"),
    ("plan cluster and gpu-type", lambda t: ["plan", EX, "--cluster", "cpu-2", "--gpu-type", "l4"], "not both"),
    ("plan batch 0", lambda t: ["plan", EX, "--batch-size", "0"], "--batch-size"),
    ("plan negative budget", lambda t: ["plan", EX, "--time-budget", "-5"], "--time-budget"),
    ("plan zero iterations", lambda t: ["plan", EX, "--iterations", "0"], "--iterations"),
    ("plan granularity 0", lambda t: ["plan", EX, "--granularity", "0"], "--granularity"),
    ("plan granularity text", lambda t: ["plan", EX, "--granularity", "fine"], "--granularity"),
    ("plan bad dtype", lambda t: ["plan", EX, "--dtype", "fp8"], "--dtype"),
    ("plan headroom 1", lambda t: ["plan", EX, "--headroom", "1"], "--headroom"),
    ("plan unknown flag", lambda t: ["plan", EX, "--turbo"], "--turbo"),
    ("plan dp not dividing devices", lambda t: ["plan", EX, "--gpus", "4", "--dp", "3"], "dp 3"),
    ("plan dp × pp ≠ devices", lambda t: ["plan", EX, "--gpus", "4", "--dp", "2", "--pp", "4"], "≠ 4 devices"),
    ("plan microbatches not dividing", lambda t: ["plan", EX, "--gpus", "2", "--batch-size", "8",
                                                  "--microbatches", "3"], "microbatches 3"),
    ("plan microbatches over bound", lambda t: ["plan", EX, "--microbatches", "4", "--max-microbatches", "2"],
     "--max-microbatches"),
    ("plan negative seed", lambda t: ["plan", EX, "--seed", "-5"], "--seed"),
    ("plan syntax error model", lambda t: ["plan", str(BAD / "syntax_error.py")], "syntax error"),
    ("plan model without build_model", lambda t: ["plan", str(BAD / "missing_build_model.py"), "--gpus", "1"],
     "build_model"),
    ("cluster yaml unknown key", lambda t: ["plan", EX, "--cluster", _write(t, "c.yaml", {
        "name": "x", "num_nodes": 1, "devices_per_node": 2, "device": "l4", "speed": 3})], "speed"),
    ("cluster yaml negative memory", lambda t: ["plan", EX, "--cluster", _write(t, "c.yaml", {
        "name": "x", "num_nodes": 1, "devices_per_node": 2, "device": "l4", "device_memory": "-4GiB"})], "memory"),
    ("cluster yaml bad host optimizer", lambda t: ["plan", EX, "--cluster", _write(t, "c.yaml", {
        "name": "x", "devices_per_node": 2, "device": "l4", "intra_link": {"bandwidth": "20GB/s", "latency": "10us"},
        "host_memory": "64GiB", "host_optimizer": {"bandwidth": "fast"}})], "host_optimizer.bandwidth"),
    ("run missing file", lambda t: ["run", "nope.yaml"], "not found"),
    ("run corrupt yaml", lambda t: ["run", _write(t, "p.yaml", "a: [1, 2\nb: }")], "YAML"),
    ("run yaml list", lambda t: ["run", _write(t, "p.yaml", "- 1\n- 2\n")], "mapping"),
    ("run plan unknown key", lambda t: ["run", _write(t, "p.yaml", _plan_dict(colour="red"))], "colour"),
    ("run plan old version", lambda t: ["run", _write(t, "p.yaml", _plan_dict(version=99))], "version"),
    ("run plan dp×pp ≠ devices", lambda t: ["run", _write(t, "p.yaml", _plan_dict(
        strategy=_strategy(dp=2, sharding=["none"] * 2, optimizer_on_host=[False] * 2)))], "= 4 devices"),
    ("run plan stage jump", lambda t: ["run", _write(t, "p.yaml", _plan_dict(
        strategy=_strategy(stage_of=[0, 1, 0, 1])))], "jumps from stage"),
    ("run plan unknown action", lambda t: ["run", _write(t, "p.yaml", _plan_dict(
        strategy=_strategy(actions=["keep", "drop", "keep", "keep"])))], "drop"),
    ("run plan swap-in depth 0", lambda t: ["run", _write(t, "p.yaml", _plan_dict(
        strategy=_strategy(prefetch=0)))], "prefetch"),
    ("run plan missing keys", lambda t: ["run", _write(t, "p.yaml", {"version": PLAN_VERSION, "model_file": EX})],
     "missing"),
    ("run steps 0", lambda t: ["run", _write(t, "p.yaml", _plan_dict()), "--steps", "0"], "--steps"),
    ("run node rank out of range", lambda t: ["run", _write(t, "p.yaml", _plan_dict()), "--nnodes", "2",
                                              "--node-rank", "3"], "--node-rank"),
    ("run stale plan", lambda t: ["run", _write(t, "p.yaml", _plan_dict())], "no longer matches"),
    ("experiment unknown key", lambda t: ["run", _write(t, "e.yaml", {**EXP, "turbo": True})], "turbo"),
    ("experiment negative gpus", lambda t: ["run", _write(t, "e.yaml", {**EXP, "cluster": {"gpus": -1}})],
     "gpus"),
    ("experiment steps 0", lambda t: ["run", _write(t, "e.yaml", {**EXP, "run": {"steps": 0}})], "steps"),
    ("experiment unknown search key", lambda t: ["run", _write(t, "e.yaml", {**EXP, "search": {"temp": 1}})],
     "temp"),
    ("experiment bad kind", lambda t: ["run", _write(t, "e.yaml", {**EXP, "kind": "benchmark"})], "kind"),
    ("simulate missing plan", lambda t: ["simulate", "nope.yaml"], "not found"),
    ("simulate a model file", lambda t: ["simulate", EX], f"{EX}: a Python file, not a plan file; plan the model "
                                                          f"first: memflow plan {EX} -o plan.yaml"),
    ("run a model file", lambda t: ["run", EX], "a Python file, not a plan or experiment file; plan the model first"),
    ("report missing plan", lambda t: ["report", "nope.yaml"], "not found"),
    ("profile unknown gpu", lambda t: ["profile", EX, "--gpu-type", "voodoo-5"], "voodoo-5"),
    ("profile bad batch", lambda t: ["profile", EX, "--batch-size", "-1"], "--batch-size"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2(case, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _, build, expect = case
    rc = main(build(tmp_path))
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err
    assert expect.lower() in err.lower(), err


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this host has a GPU to measure on")
def test_measure_on_a_gpu_without_cuda_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc = main(["plan", EX, "--gpu-type", "l4", "--measure", "--batch-size", "4"])
    err = capsys.readouterr().err.strip().split("\n")
    assert rc == 2
    assert [ln for ln in err if not ln.startswith("memflow: profiling")] == [err[-1]]
    assert "needs a CUDA GPU" in err[-1] and "Traceback" not in err[-1]


def test_at_least_thirty_kinds():
    assert len(CASES) >= 30


KILLED_CHILD_MODEL = '''
import os, signal, sys
if sys.argv[0].endswith(os.path.join("profile", "concurrent.py")):  # only the timing processes die
    os.kill(os.getpid(), signal.SIGKILL)
import torch
def build_model():
    return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 2))
def example_batch(batch_size):
    return torch.randn(batch_size, 8), torch.randint(0, 2, (batch_size,))
def loss_fn(output, target):
    return torch.nn.functional.cross_entropy(output, target)
'''


def test_killed_cpu_timing_process_is_one_line(tmp_path, capsys, monkeypatch):
    """A cpu-N plan times its nodes in N processes; one killed without a word (out of host memory)
    is named as such in one line, exit 2."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMFLOW_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "m.py").write_text(KILLED_CHILD_MODEL)
    rc = main(["plan", "m.py", "--gpus", "2", "--gpu-type", "cpu", "--batch-size", "4", "--quiet"])
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "killed by signal 9" in err and "concurrent CPU profiling failed" in err, err


@pytest.mark.parametrize("name,says", [("batch_setting.py", "example_batch("),
                                       ("data_dependent_branch.py", "data-dependent control flow"),
                                       ("no_loss.py", "the model's output (a tensor of shape (8, 3)) is not a "
                                                      "scalar loss")])
def test_a_model_files_error_is_its_own_line_where_ranks_are_timed(name, says, capsys):
    """On cpu-N the costs are timed in N processes: a model file's error is said as the file's own one-line
    error, not as a profiling process's failure: a batch error before they start (with where a setting in
    the batch belongs), a capture error as the process that met it said it."""
    bad = str(BAD / name)
    assert main(["plan", bad, "--cluster", "cpu-2", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "profiling process" not in err, err
    assert err.startswith(f"memflow: error: {bad}: {says}"), err
    assert "return_loss=True" in err or name != "batch_setting.py", err


@pytest.mark.parametrize("argv", [["--help"], ["plan", "--help"], ["--version"]])
def test_output_to_a_closed_pipe_ends_quietly(argv):
    """``memflow ... | head``: the reader went away before memflow wrote; memflow ends quietly, with nothing
    on stderr (it said "internal error: BrokenPipeError"): 141 as a shell reports a command ended by
    SIGPIPE, or 0 where argparse's help printer swallowed the error itself."""
    r, w = os.pipe()
    os.close(r)  # every write to w now fails with EPIPE
    try:
        proc = subprocess.run([sys.executable, "-m", "memflow", *argv], stdout=w, stderr=subprocess.PIPE,
                              text=True, timeout=60)
    finally:
        os.close(w)
    assert proc.returncode in (0, 141) and proc.stderr == "", proc.stderr


@pytest.mark.parametrize("cmd", ["plan", "fit", "run", "simulate", "profile", "report"])
def test_q_is_quiet_on_every_command(cmd):
    """``-q`` is ``--quiet`` wherever ``--quiet`` is (the first thing two outside users typed)."""
    from memflow.cli.args import build_parser

    p = build_parser(cmd)
    quiet = next(a for a in p._actions if "--quiet" in a.option_strings)
    assert "-q" in quiet.option_strings
