"""Mixed selective plans against a fake run of the step, peak and every phase (printed, not a section).

For each model of ``bench/unseen`` and ``tests/models`` (``python -m bench fakerun``'s files), in fp32 and
bf16, four single-stage plans for one H100: every node selective; selective/keep alternating; keep/selective;
selective/swap. Per plan: the simulator's peak beside the fake run's (:func:`memflow.reserved.fake_reserved`,
the executor's GPU step on fake tensors), and the phase where the simulator is furthest under the fake run
(0: none under). Ends with one summary line.

``python -m bench.selective_sweep [MODEL ...]`` (default: every model), from this checkout (the benches'
one-line stop where memflow is another checkout's).
"""
from __future__ import annotations

import statistics
import sys

from memflow.cluster import Cluster
from memflow.model_file import load_model_file
from memflow.profile import profile_model
from memflow.reserved import fake_reserved
from memflow.simulator import Simulator

from .bench_fakerun import BATCH, _files, _plan
from .common import same_checkout

PATTERNS = ("selective", "selective,keep", "keep,selective", "selective,swap")


def main(argv: list[str]) -> None:
    same_checkout()
    cl = Cluster.for_gpus(1, "h100-80gb")
    errs, unders = [], []
    for f in _files():
        if argv and f.stem not in argv:
            continue
        spec = load_model_file(f)
        for dt in ("fp32", "bf16"):
            g = profile_model(spec, BATCH, device=cl.device, dtype=dt, cache=False)
            for pattern in PATTERNS:
                st, kw = _plan(g, cl, pattern, 1, False)
                sim = Simulator(g, cl)
                pred, pb = sim.evaluate(st).peak_bytes[0], sim.phase_bytes(st)[0]
                r = fake_reserved(spec, BATCH, list(st.actions), dtype=dt, workspace=0, **kw)
                worst = min(((pb[p] - v, p) for p, v in r["phase_peaks"].items() if p < len(pb)), default=(0, -1))
                err = pred / r["peak_live"] - 1
                errs.append(err)
                if worst[0] < 0:
                    unders.append((f.stem, dt, pattern, worst[1], worst[0]))
                print(f"{f.stem} {dt} {pattern}: predicted {pred:,} fake run {r['peak_live']:,} {100 * err:+.3f}%; "
                      f"worst phase {min(0, worst[0]):+,} B" + (f" (phase {worst[1]})" if worst[0] < 0 else ""),
                      flush=True)
    over = [e for e in errs if e > 1e-4]
    print(f"{len(errs)} plans: {sum(abs(e) <= 1e-4 for e in errs)} within 0.01%, {len(over)} over (median "
          f"{100 * statistics.median(over) if over else 0:+.2f}%, worst {100 * max(errs, default=0):+.2f}%), "
          f"{sum(e < -1e-4 for e in errs)} under at the peak; phases under the fake run: "
          f"{', '.join(f'{m} {d} {p} phase {ph} {b:+,} B' for m, d, p, ph, b in unders) or 'none'}")


if __name__ == "__main__":
    main(sys.argv[1:])
