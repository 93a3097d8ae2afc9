"""Prediction vs execution over every executor run the benchmarks and the executor tests make.

``python -m bench fidelity``, ``maxbatch`` and ``deeper`` log each executor
run they make (``memflow.runlog``, one JSON line per run) to
``bench/runs/NAME.jsonl``; this benchmark runs the executor tests
(``tests/test_executor.py``) into ``bench/runs/executor-tests.jsonl`` the same
way, then gathers the four logs into one table: per rank, predicted vs
measured peak memory and step time; median and worst error per source.

Runs launched without a prediction (the tests' plans and the max-batch
bench's plain timing runs are strategies, not plans) get their peak predicted
here, after the fact, by the same path a plan takes: the model's task graph at
that micro-batch, traced on this host (``profile_model``, measured mode), and
the simulator on ``cpu-N``. Their step time is not predicted after the fact (a
profile taken at another time on this shared host would compare two machine
speeds), and runs that timed fewer than 3 steps are left out of the step-time
columns: one step right after launch is not a steady-state figure.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path

from memflow import runlog

from .common import ROOT, env, md_table, write_section

__all__ = ["main", "RUNS_DIR", "SOURCES", "predict_peaks"]

RUNS_DIR = ROOT / "bench" / "runs"
SOURCES = ["fidelity", "maxbatch", "deeper", "executor-tests"]
MIN_TIMED = 3  # steps a run must time for its step time to count


def predict_peaks(rec: dict) -> list[int]:
    """Each rank's predicted peak for a logged run: its graph traced on this host, simulated on cpu-N."""
    from memflow.cluster import Cluster
    from memflow.model_file import load_model_file
    from memflow.profile import profile_model
    from memflow.strategy import Strategy
    from memflow.simulator import Simulator

    path = Path(rec["model_file"])
    if not path.is_file() and (ROOT / "examples" / path.name).is_file():
        path = ROOT / "examples" / path.name  # a log made in another checkout
    with env(model=rec.get("env", {})):
        spec = load_model_file(str(path))
        st = Strategy.from_dict(rec["strategy"])
        cl = Cluster.load(f"cpu-{st.num_devices}")
        g = profile_model(spec, st.microbatch_size(rec["batch_size"]), device=cl.device,
                          dtype=rec.get("dtype", "fp32"), granularity=rec.get("granularity", "auto"), measure=True)
        return [int(x) for x in Simulator(g, cl).evaluate(st, detail=True).peak_bytes]


def run_executor_tests(path: Path) -> int:
    """``pytest tests/test_executor.py`` with its runs logged to ``path``; returns pytest's exit status."""
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.unlink(missing_ok=True)
    sub_env = dict(os.environ, MEMFLOW_RUN_LOG=str(tmp), MEMFLOW_RUN_LOG_SOURCE="executor-tests",
               MEMFLOW_EXAMPLE_SCALE="tiny")  # the tests' scale (a module fixture runs before their own)
    rc = subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(ROOT / "tests" / "test_executor.py")], cwd=ROOT, env=sub_env)
    if tmp.exists():
        os.replace(tmp, path)
    return rc


def _model(rec: dict) -> str:
    name = Path(rec["model_file"]).stem
    extra = [f"{k.removeprefix('MEMFLOW_').lower()}={v}" for k, v in rec.get("env", {}).items()
             if k != "MEMFLOW_EXAMPLE_SCALE"]
    return name + (f" ({', '.join(extra)})" if extra else "")


def _strategy(rec: dict) -> str:
    from memflow.strategy import Strategy

    return Strategy.from_dict(rec["strategy"]).summary()


def rows_of(source: str, records: list[dict]) -> list[dict]:
    """One row per rank: measured and predicted peak (predicted after the fact where the run had none)."""
    rows = []
    for rec in records:
        preds = None
        if any(r.get("predicted_peak_bytes") is None for r in rec["ranks"]):
            try:
                preds = predict_peaks(rec)
            except Exception as e:  # noqa: BLE001 - a run we cannot re-trace is listed, not fatal
                print(f"[prediction: could not predict {_model(rec)} {rec['strategy']}: {e}]", file=sys.stderr)
        timed = rec.get("steps", 0) - rec.get("warmup", 0)
        for r in rec["ranks"]:
            pp = r.get("predicted_peak_bytes")
            after = pp is None
            if after and preds is not None and r["rank"] < len(preds):
                pp = preds[r["rank"]]
            pt = r.get("predicted_step_time_s") if timed >= MIN_TIMED else None
            rows.append(dict(source=source, model=_model(rec), batch=rec["batch_size"], strategy=_strategy(rec),
                             rank=r["rank"], mp=r["measured_peak_bytes"], pp=pp, after=after,
                             mt=r.get("measured_step_time_s"), pt=pt, timed=timed))
    return rows


def _err(pred, meas):
    return None if pred is None or not meas else 100.0 * (pred / meas - 1.0)


def _stats(errs: list[float]) -> tuple[str, str]:
    if not errs:
        return "—", "—"
    a = [abs(e) for e in errs]
    return f"{statistics.median(a):.1f}%", f"{max(a):.1f}%"


def summary(rows: list[dict], sources: list[str]) -> str:
    out = []
    for src in sources + ["all"]:
        sel = [r for r in rows if src == "all" or r["source"] == src]
        if not sel:
            continue
        pe = [e for e in (_err(r["pp"], r["mp"]) for r in sel) if e is not None]
        te = [e for e in (_err(r["pt"], r["mt"]) for r in sel) if e is not None]
        runs = len({(r["model"], r["batch"], r["strategy"]) for r in sel})
        out.append([f"**{src}**" if src == "all" else src, runs, len(sel), len(pe), *_stats(pe), len(te),
                    *_stats(te)])
    return md_table(["source", "configurations", "ranks", "ranks with a peak prediction", "peak median |error|",
                     "peak worst |error|", "ranks with a timed prediction", "step median |error|",
                     "step worst |error|"], out)


def detail(rows: list[dict]) -> str:
    body = []
    for r in rows:
        pe, te = _err(r["pp"], r["mp"]), _err(r["pt"], r["mt"])
        body.append([r["source"], r["model"], r["batch"], r["strategy"], r["rank"], f"{r['mp'] / 2**20:.2f}",
                     "—" if r["pp"] is None else f"{r['pp'] / 2**20:.2f}" + (" (after)" if r["after"] else ""),
                     "—" if pe is None else f"{pe:+.1f}%",
                     "—" if r["mt"] is None else f"{r['mt'] * 1e3:.1f} ({r['timed']})",
                     "—" if r["pt"] is None else f"{r['pt'] * 1e3:.1f}", "—" if te is None else f"{te:+.1f}%"])
    return md_table(["source", "model", "batch", "strategy", "rank", "measured peak MiB", "predicted MiB", "error",
                     "measured ms (timed steps)", "predicted ms", "error"], body)


def main(quick: bool = False) -> None:
    os.environ.setdefault("MEMFLOW_EXAMPLE_SCALE", "tiny")
    suffix = "-quick" if quick else ""
    if not quick:  # the quick version gathers the logs there are; the tests take minutes
        rc = run_executor_tests(RUNS_DIR / "executor-tests.jsonl")
        if rc:
            print(f"[prediction: the executor tests failed (exit {rc}); their passing runs are still logged]",
                  file=sys.stderr)
    rows, have = [], []
    for src in SOURCES:
        path = RUNS_DIR / f"{src}{suffix}.jsonl"
        if src == "executor-tests":
            path = RUNS_DIR / "executor-tests.jsonl"
        recs = runlog.read(path)
        if recs:
            span = f"{recs[0]['at'][:16]}–{recs[-1]['at'][11:16]}"
            have.append(f"`{path.relative_to(ROOT)}` ({len(recs)} runs, {span})")
            rows.extend(rows_of(src, recs))
    if not rows:
        print("[prediction: no run logs; run python -m bench fidelity / maxbatch / deeper first]", file=sys.stderr)
        return
    text = ("**Every executor run the benchmarks and the executor tests made: each rank's predicted peak memory "
            "and step time against its measurement.** Error = predicted / measured − 1.\n\n"
            "Logs read: " + "; ".join(have) + ". Each benchmark rewrites its own log when it runs; this table "
            + ("gathers the logs there are (the quick version does not re-run the tests).\n\n" if quick else
               "re-runs `tests/test_executor.py` into its log and gathers all four.\n\n")
            + summary(rows, SOURCES) + "\n\n"
            "`(after)`: the run had no prediction of its own (a test's or a plain baseline's strategy, not a "
            "plan); its peak is predicted here from the model's graph traced on this host, simulated on "
            f"`cpu-N`. Step times count only for runs with predicted times and at least {MIN_TIMED} timed steps "
            "(the tests time 1–2 steps right after launch; the max-batch and deeper confirming runs time "
            "2–4). The fidelity section above lists its own rows with more steps.\n\n"
            "<details><summary>Every rank</summary>\n\n" + detail(rows) + "\n\n</details>")
    write_section("prediction", "Prediction vs execution: every run", text,
                  command="python -m bench prediction" + (" --quick" if quick else ""))


if __name__ == "__main__":
    main()
