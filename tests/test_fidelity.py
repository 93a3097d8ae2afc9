"""Predicted vs measured peak per rank: the simulator and the executor agree on pipelined memory
(sent values held until their gradients return, per-micro-batch inputs, swap, in-flight copies),
on the CPU executor's swap (saved tensors back one by one as the backward asks for them), on the
data-parallel gradient sync and ZeRO-1's shards, and on the plans the search makes under tight
memory for models shaped unlike the examples (tests/models)."""
import math
from pathlib import Path

import pytest

from bench.bench_fidelity import run_case
from bench.bench_unseen import planned_run
from memflow.executor import RunConfig, run_plan
from memflow.graph.record import replay
from memflow.model_file import load_model_file
from memflow.profile.build import capture_graph
from memflow.profile.measure import measure_plain_step
from memflow.strategy import Strategy

MODELS = Path(__file__).resolve().parent / "models"


# the ResNet cases repeat a rule the GPT-2 ones check (a CNN's pipeline: tests/test_inplace.py, test_executor.py).
# Batches are chosen so that cases share their profiles (the session's cache): GPT-2's pp2-m4-swap at 32 runs
# micro-batches of 8 as pp2 at 8 does (cpu-2); the LSTM's rec-alt at 32 runs the micro-batch of 32
# m2-swap-chain runs at 64 (cpu-1). (The bench's cases run them at 64.)
@pytest.mark.parametrize("model,batch,kind,ranks", [("gpt2", 32, "pp2-m4-swap", 2),
                                                   pytest.param("resnet", 32, "pp2", 2, marks=pytest.mark.full),
                                                   ("gpt2", 64, "m2-swap-mid", 1),
                                                   pytest.param("resnet", 32, "m2-swap-mid", 1, marks=pytest.mark.full),
                                                   ("lstm", 64, "m2-swap-chain", 1), ("lstm", 32, "rec-alt", 1),
                                                   ("gpt2", 8, "pp2", 2)])  # stage 0's peak: its optimizer step
def test_peak_per_rank_is_predicted(model, batch, kind, ranks):
    env = {"MEMFLOW_LSTM_LAYERS": "4"} if model == "lstm" else {}
    rows = run_case(model, env, batch, kind, steps=3, runs=1)
    assert len(rows) == ranks
    for r in rows:
        assert abs(r["pp"] / r["mp"] - 1) <= 0.02, r


@pytest.mark.parametrize("model,batch", [("lstm", 32), ("resnet", 8)])
def test_recomputed_blocks_that_save_their_own_output_are_predicted(model, batch):
    """Every block but the first and last node recomputed, LSTM blocks and ResNet stages, each of which saves
    its own output (an LSTM's output sequence, a ReLU's) that the next block also reads: the replay in its
    backward makes it again after the readers' backwards freed the original, one copy. The model counted
    a second copy and over-predicted these by 3.9% (LSTM) and 5.7% (ResNet)."""
    env = {"MEMFLOW_LSTM_LAYERS": "4"} if model == "lstm" else {}
    rows = run_case(model, env, batch, "rec-blocks", steps=2, runs=1, warmup=1)
    for r in rows:
        assert abs(r["pp"] / r["mp"] - 1) <= 0.01, r


def test_a_recomputed_node_whose_forward_consumes_its_input_is_predicted():
    """A GRU language model with its GRUs recomputed: the embedding's output is read by the first GRU's
    forward only, and the all-keep trace frees it there, inside that forward's traced transient. The
    recompute's checkpoint holds it until the node's backward, where it is counted as carried, and the
    replay of the forward counted it again: over-predicted by 3.3% (65,536 B at B1, batch 8)."""
    rows = run_case(str(MODELS / "gru.py"), {}, 8, "rec-blocks", steps=2, runs=1, warmup=1)
    for r in rows:
        assert -0.01 <= r["pp"] / r["mp"] - 1 <= 0.01, r


def test_a_recomputed_node_that_saves_no_tensor_holds_nothing():
    """GPT-2's ``transformer.drop`` (the embeddings' sum, dropout 0 at tiny scale) saves no tensor for its
    backward. Recomputed, torch's non-reentrant checkpoint then keeps nothing of it, its inputs
    included; the model held its inputs until its backward as for any recomputed node: over-predicted
    by 1.7% (73,728 B at h.0's backward) with every block recomputed."""
    rows = run_case("gpt2", {}, 8, "rec-blocks", steps=2, runs=1, warmup=1)
    for r in rows:
        assert -0.01 <= r["pp"] / r["mp"] - 1 <= 0.01, r


def test_a_recomputed_nodes_output_saved_by_a_swapped_node_leaves_the_device():
    """ResNet with its nodes recomputed and swapped in turn: the stem (recomputed) makes an output the
    first stage (swapped) saves. The stem's checkpoint drops it and the stage's pack hook copies it to
    the host, so nothing holds it on the device until the stage's backward; the model kept it there
    for that saver as for a kept one: over-predicted by 6.8% (512 KiB, batch 8)."""
    rows = run_case("resnet", {}, 8, "pattern:RSRSRSR", steps=2, runs=1, warmup=1)
    for r in rows:
        assert -0.01 <= r["pp"] / r["mp"] - 1 <= 0.01, r


@pytest.mark.parametrize("kind", ["dp2-host", "dp2-zero1"])
def test_gradient_sync_peak_per_rank_is_predicted(kind):
    """A model whose tied embedding is most of its bytes, at batch 2 with its optimizer on the host:
    each rank peaks while its gradient bucket is flattened beside the gradients (the sync's only
    copy); predicted under by 5.3% while the simulator had no sync phase."""
    rows = run_case(str(MODELS / "tied.py"), {}, 2, kind, steps=2, runs=1, warmup=1)
    assert len(rows) == 2
    for r in rows:
        assert abs(r["pp"] / r["mp"] - 1) <= 0.01, r


# the swapped case: the planned GRU runs (below, and python -m bench unseen) meet swaps too. The recomputed
# case at batch 4: its micro-batch is one of the planned GRU run's (below), profiled once for both
@pytest.mark.parametrize("kind,batch", [("pp2-rec-first", 4), pytest.param("pp2-m4-swap", 8, marks=pytest.mark.full)])
def test_gru_stages_recomputed_or_swapped_are_predicted(kind, batch):
    """A GRU stage whose first node (its input received from the stage before) is recomputed peaks in
    that node's backward, where its forward runs again beside the received activation and its
    output's gradient: under-predicted by 7.1% while the replay was counted above the carried bytes
    alone. GRU nodes swapped on both stages (four micro-batches): each rank within 1%."""
    rows = run_case(str(MODELS / "gru.py"), {}, batch, kind, steps=2, runs=1, warmup=1)
    assert len(rows) == 2
    for r in rows:
        assert -0.01 <= r["pp"] / r["mp"] - 1 <= 0.01, r


def test_stacked_lstm_program_holds_what_eager_holds():
    """The single-device peak ``memflow profile`` reports is the exported step's, run node by node as
    the executor runs it; for a stacked-LSTM language model (four batch-first LSTMs with dropout
    between them, a 5k vocabulary, 64 steps) it is a plain eager step's live bytes to the byte."""
    spec = load_model_file(MODELS / "stacked_lstm.py")
    g = capture_graph(spec, 4, measure=True, repeats=0)
    assert replay(g).peak_bytes == measure_plain_step(spec, 4, repeats=1).peak_bytes


def test_run_log_records_each_rank_and_predicts_after_the_fact(tmp_path, monkeypatch):
    """A run launched without a prediction is logged (memflow.runlog); the prediction bench's
    after-the-fact peak for it (graph traced on this host, simulated on cpu-N) matches each rank.
    (The 4-layer LSTM at micro-batches of 32: the cpu-1 profile the peak cases above made, which both
    after-the-fact predictions below read from the session's cache.)"""
    from bench.bench_prediction import predict_peaks, rows_of
    from memflow import runlog

    log = tmp_path / "runs.jsonl"
    monkeypatch.setenv("MEMFLOW_RUN_LOG", str(log))
    monkeypatch.setenv("MEMFLOW_EXAMPLE_SCALE", "tiny")
    monkeypatch.setenv("MEMFLOW_LSTM_LAYERS", "4")
    st = Strategy.from_boundaries(6, [3], dp=1, microbatches=2,
                                  actions=["keep", "swap", "keep", "recompute", "keep", "recompute"])
    cfg = RunConfig(model_file="examples/lstm.py", batch_size=64, strategy=st.to_dict(), steps=2)
    report = run_plan(cfg, nproc=2, timeout_s=240)
    monkeypatch.delenv("MEMFLOW_LSTM_LAYERS")  # the record carries the model's settings
    monkeypatch.delenv("MEMFLOW_RUN_LOG")  # (logged; a profile's cache key holds every MEMFLOW_* setting)
    (rec,) = runlog.read(log)
    assert rec["env"]["MEMFLOW_LSTM_LAYERS"] == "4" and rec["batch_size"] == 64 and len(rec["ranks"]) == 2
    assert [r["measured_peak_bytes"] for r in rec["ranks"]] == [r.measured_peak_bytes for r in report.ranks]
    assert all(r["predicted_peak_bytes"] is None for r in rec["ranks"])
    preds = predict_peaks(rec)
    for r, p in zip(rec["ranks"], preds):
        assert abs(p / r["measured_peak_bytes"] - 1) <= 0.02, (p, r)
    rows = rows_of("t", [rec])
    assert [r["pp"] for r in rows] == preds and all(r["after"] and r["pt"] is None for r in rows)


# model file (tests/models) -> its losses equal plain training's (no dropout, whose random masks differ)
PLANNED = {"tied": True, "reuse": True, "encdec": True, "gru": True, "stacked_lstm": False}
PLAN_BATCH = 4


# each model at one fraction in the default suite (the cheaper one where its search is slow), the
# other with MEMFLOW_TEST_FULL=1
DEFAULT_FRAC = {"tied": 0.3, "reuse": 0.3, "encdec": 0.3, "gru": 0.6, "stacked_lstm": 0.6}


@pytest.mark.parametrize("name,frac", [pytest.param(n, f, marks=() if DEFAULT_FRAC[n] == f else pytest.mark.full)
                                       for n in PLANNED for f in (0.3, 0.6)])
def test_planned_run_peaks_as_predicted(name, frac):
    """Each model planned on cpu-2 at a fraction of plain data parallel's peak (a short search) and
    run: a plan predicted to fit runs under its capacity without running out of memory (one that
    nothing fits is run uncapped), its losses are finite (and plain training's where no dropout
    draws masks), and every rank's measured peak is within 5% of its prediction, never more than
    1% above it. Tied weights across stages, blocks reused in depth, an encoder-decoder, a GRU
    and a stacked LSTM with a 5k vocabulary found the gradient sync, ZeRO-1's shards and the
    recomputed first node of a stage under-predicted."""
    r = planned_run(MODELS / f"{name}.py", frac, batch=PLAN_BATCH, compare_losses=PLANNED[name])
    st = r["strategy"]
    assert not r["oom"], f"{name} at {frac} of plain: {r['summary']} {st.actions} predicted to fit: {r['oom']}"
    assert r["losses"] and all(math.isfinite(x) for x in r["losses"])
    if PLANNED[name]:
        assert r["loss_diff"] <= 1e-5, (r["losses"], r["loss_diff"])
    off = [(x.rank, x.peak_at, x.predicted_peak_bytes, x.measured_peak_bytes) for x, e in zip(r["ranks"], r["errors"])
           if not -0.01 <= e <= 0.05]
    assert not off, (r["summary"], st.stage_of, st.actions, off)
