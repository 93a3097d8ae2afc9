#!/usr/bin/env bash
# One lent GPU session's checks, in one call of the device tool (see BENCHMARKS.md's GPU section):
# install MemFlow into the machine's torch environment, run `python -m bench gpu` (its predictions made
# beforehand without the GPU, `python -m bench.bench_gpu --predict 'NVIDIA H200:150109880320'`, read
# from bench/runs/gpu-predicted.json), then the CUDA tests of the paths new since the last GPU session.
# Each part has its own time limit, and what it wrote comes back under $OUT even when a part ran out of
# time. 5.5 minutes in all on an H200 on 2026-11-28 (TEST_S=170 BENCH_S=330, timeout_s 570, the tests
# first then); 342 s on 2026-12-04 (TEST_S=125 BENCH_S=385, timeout_s 570: the bench 241 s, its
# predictions made beforehand; the tests 90 s). ALLOC=expandable,default runs each plan with torch's
# default allocator too. Keep what comes back: gpu-rows.json as bench/runs/gpu-rows.json and
# gpu-alloc.tgz (every run's allocator events) as bench/runs/gpu-alloc.tgz, then python -m
# bench.bench_gpu --replay bench/runs/gpu-rows.json here (--repredict after changes to the tracing,
# --phases ROWS STRATEGY... to compare a plan phase by phase).
set -u
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/memflow-gpu-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/install.log" 2>&1 || echo "install failed"
if ! python3 -c "import memflow.simulator" 2>/dev/null; then  # (an old setuptools: the layout by links)
  echo "editable install failed; linking the namespace"; for d in simulator search configs; do ln -sfn "../$d" "memflow/$d"; done
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
python3 -c "import torch, memflow.simulator, memflow.search; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
t0=$(date +%s)
MEMFLOW_BENCH_GPU_ALLOC="${ALLOC:-expandable}" timeout "${BENCH_S:-360}" python3 -m bench gpu > "$OUT/bench.log" 2>&1
echo "bench gpu: rc $? in $(( $(date +%s) - t0 )) s"; grep "^bench gpu:" "$OUT/bench.log" | cut -c1-700
tail -5 "$OUT/bench.log" | cut -c1-400
cp bench/runs/gpu-rows.json "$OUT/" 2>/dev/null  # (kept now: the tests below may outrun the call)
t0=$(date +%s)
timeout "${TEST_S:-180}" python3 -m pytest tests/test_gpu.py tests/test_gpu_autocast.py -n 0 -p no:cacheprovider -q -rfE \
  -k "${TESTS:-host or swap or reserved}" > "$OUT/pytest.log" 2>&1
echo "tests: rc $? in $(( $(date +%s) - t0 )) s"; tail -25 "$OUT/pytest.log" | cut -c1-400
tar czf "$OUT/gpu-alloc.tgz" -C bench/runs gpu-alloc 2>/dev/null
cp bench/runs/gpu-rows.json bench/runs/gpu.jsonl BENCHMARKS.md "$OUT/" 2>/dev/null
true
