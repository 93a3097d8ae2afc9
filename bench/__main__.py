"""``python -m bench NAME``: run a benchmark and write its table into BENCHMARKS.md.

Names: profile, simulator, search, sweep, suite, fidelity, maxbatch, deeper, unaware, prediction, gpu,
seeds, unseen, selective, llama7b, tp, tp-runs, megatron-sel, patterns, bf16, fakerun, hostopt, swaphost, random, outside, outside3, outside4, outside5, outside6, outside7, outside8, outside9, outside10, outside11, outside12, outside13, outside14, outside15, quick (small versions of profile, simulator, search and fidelity: their *-quick sections), all.
``python -m bench NAME --quick`` runs NAME's small version (where it has one) into its own ``NAME-quick`` section.
"""
from __future__ import annotations

import importlib
import os
import sys
import time

BENCHES = {  # ``all`` runs them in this order: the short ones first
    "fidelity": "bench.bench_fidelity",
    "simulator": "bench.bench_simulator",
    "profile": "bench.bench_profile",
    "search": "bench.bench_search",
    "sweep": "bench.bench_sweep",
    "suite": "bench.bench_suite",
    "unaware": "bench.bench_unaware",
    "maxbatch": "bench.bench_maxbatch",
    "deeper": "bench.bench_deeper",
    "prediction": "bench.bench_prediction",  # gathers the executor runs of the three above and of the tests
    "gpu": "bench.bench_gpu",  # only where torch sees CUDA; elsewhere it leaves its section alone
    "seeds": "bench.bench_seeds",  # the seed papers' capacity figures like for like (simulated; one CPU row)
    "unseen": "bench.bench_unseen",  # plans run on models the project was not built on, at two memory caps
    "selective": "bench.bench_selective",  # per-op selective recompute: held bytes, replay time, executor peaks
    "llama7b": "bench.bench_llama7b",  # Llama-7B planned on 8 × V100, 4 × A100-40GB, 1 × A100-80GB (simulated)
    "megatron-sel": "bench.bench_megatron_sel",  # GPT-2 small's recompute policies beside Megatron's figures
    "tp-runs": "bench.bench_tp_runs",  # tp plans on cpu-2/cpu-4: losses against plain training, peaks predicted
    "tp": "bench.bench_tp",  # GPT-2 large and Llama-7B with tensor parallelism, against Megatron-style baselines
    "patterns": "bench.bench_patterns",  # forced keep/recompute/swap patterns on one rank: peaks predicted vs run
    "bf16": "bench.bench_bf16",  # ZeRO-3 in bf16 (cast-only parameters gathered in bf16): peaks predicted vs run
    "fakerun": "bench.bench_fakerun",  # single-GPU plans run on fake tensors as a GPU runs them vs the simulator
    "hostopt": "bench.bench_hostopt",  # the host optimizer step: simulator.hostopt against steps measured
    "swaphost": "bench.bench_swaphost",  # swap plans on one rank: device and host peaks against a run
    "random": "bench.bench_random",  # seeded random plans on cpu-2: every rank's peak predicted vs run
    "outside": "bench.bench_outside",  # model files written from the outside, planned and run on cpu-2
    "outside3": "bench.bench_outside3",  # a third round of them
    "outside4": "bench.bench_outside4",  # a fourth round of them
    "outside5": "bench.bench_outside5",  # a fifth round of them
    "outside6": "bench.bench_outside6",  # a sixth round of them
    "outside7": "bench.bench_outside7",  # a seventh round of them
    "outside8": "bench.bench_outside8",  # an eighth round
    "outside9": "bench.bench_outside9",  # a ninth round
    "outside10": "bench.bench_outside10",  # a tenth round
    "outside11": "bench.bench_outside11",  # an eleventh round
    "outside12": "bench.bench_outside12",  # a twelfth round
    "outside13": "bench.bench_outside13",  # a thirteenth round
    "outside14": "bench.bench_outside14",  # a fourteenth round
    "outside15": "bench.bench_outside15",  # a fifteenth round
}
# (prediction's after-the-fact check of logged runs is tested in tests/test_fidelity.py; its quick
# run re-profiled every logged run, the longest part of CI's bench step)
QUICK = ["profile", "simulator", "search", "fidelity"]
LOGGED = ("fidelity", "maxbatch", "deeper", "gpu")  # benches whose executor runs go to bench/runs/NAME.jsonl


def run(name: str, quick: bool = False) -> None:
    from pathlib import Path

    from .common import env

    mod = importlib.import_module(BENCHES[name])
    t0 = time.time()
    log = Path(__file__).resolve().parent / "runs" / f"{name}{'-quick' if quick else ''}.jsonl"
    tmp = log.with_suffix(".jsonl.tmp")
    # a finished bench replaces its log; a failed one leaves the last good one
    logged = dict(MEMFLOW_RUN_LOG=str(tmp), MEMFLOW_RUN_LOG_SOURCE=name) if name in LOGGED else {}
    tmp.unlink(missing_ok=True)
    try:
        with env(**logged):  # each bench starts from the same settings (one left SCALE=full behind it)
            mod.main(quick=quick) if "quick" in mod.main.__code__.co_varnames else mod.main()
        if tmp.exists():
            os.replace(tmp, log)
    finally:
        tmp.unlink(missing_ok=True)
    print(f"[bench {name}: {time.time() - t0:.0f} s]", file=sys.stderr)


def main(argv: list[str]) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from .common import same_checkout

    same_checkout()
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    name = argv[0]
    if name == "all":
        t0 = time.time()
        for n in BENCHES:
            try:
                importlib.import_module(BENCHES[n])
            except ModuleNotFoundError:
                print(f"[bench {n}: not available]", file=sys.stderr)
                continue
            run(n)
        print(f"[bench all: {time.time() - t0:.0f} s]", file=sys.stderr)
        return 0
    if name == "quick":
        os.environ["MEMFLOW_BENCH_QUICK"] = "1"
        for n in QUICK:
            run(n, quick=True)
        return 0
    if name not in BENCHES:
        print(f"bench: unknown benchmark {name!r}; valid: {', '.join(BENCHES)}, quick, all", file=sys.stderr)
        return 2
    if "--quick" in argv[1:]:
        os.environ["MEMFLOW_BENCH_QUICK"] = "1"
        run(name, quick=True)
        return 0
    run(name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
