"""Long work shows progress on stderr as it goes, and nothing with --quiet or --json."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LSTM = str(ROOT / "examples" / "lstm.py")


def _timed_stderr(argv: list[str], cwd: Path, env: dict) -> tuple[int, list[tuple[float, str]], str]:
    """Run ``memflow argv``; every piece of stderr (split at newlines and carriage returns) with the time
    it arrived, and stdout."""
    proc = subprocess.Popen([sys.executable, "-m", "memflow", *argv], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    pieces: list[tuple[float, str]] = []

    def read() -> None:
        buf = b""
        while True:
            chunk = os.read(proc.stderr.fileno(), 4096)
            if not chunk:
                break
            buf += chunk
            *done, buf = re.split(rb"[\r\n]", buf)
            now = time.perf_counter()
            pieces.extend((now, p.decode(errors="replace")) for p in done if p.strip())

    t = threading.Thread(target=read)
    t.start()
    out = proc.stdout.read().decode()
    proc.wait(timeout=300)
    t.join()
    return proc.returncode, pieces, out


def _env(tmp_path) -> dict:
    return dict(os.environ, MEMFLOW_EXAMPLE_SCALE="tiny", MEMFLOW_CACHE_DIR=str(tmp_path / "cache"))


def test_plan_shows_progress_throughout(tmp_path):
    """From the first progress line to the end, stderr is never silent for more than 2 s: profiling
    (per micro-batch size) and the search (its iterations and best time) each draw a bar whose elapsed
    time ticks."""
    rc, pieces, _ = _timed_stderr(["plan", LSTM, "--gpus", "2", "--gpu-type", "cpu", "--time-budget", "4",
                                   "-o", "p.yaml"], tmp_path, _env(tmp_path))
    assert rc == 0, pieces[-5:]
    texts = [p for _, p in pieces]
    assert any(p.startswith("memflow: profiling") or p.startswith("memflow: timing") for p in texts), texts
    assert any(p.startswith("memflow: searching") and " it [" in p for p in texts), texts
    times = [t for t, _ in pieces]
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert max(gaps) <= 2.0, (max(gaps), pieces)


def test_quiet_and_json_show_nothing(tmp_path):
    env = _env(tmp_path)
    for flag in ("--quiet", "--json"):
        rc, pieces, out = _timed_stderr(["plan", LSTM, "--gpus", "2", "--iterations", "200", "-o", f"q{flag}.yaml",
                                         flag], tmp_path, env)
        assert rc == 0 and pieces == [], (flag, pieces)
        assert out.strip()


def test_the_api_takes_a_line_callback(monkeypatch):
    """``memflow.plan(..., progress=print)`` (any callable taking one line) reports each stage as lines;
    anything else is a TypeError naming what it takes."""
    import pytest

    import memflow

    monkeypatch.setenv("MEMFLOW_EXAMPLE_SCALE", "tiny")
    lines: list[str] = []
    p = memflow.plan(LSTM, gpus=2, gpu_type="v100-16gb", batch_size=8, iterations=300, progress=lines.append)
    assert p.fits
    starts = [x for x in lines if x.endswith(" ...")]
    assert any(x.startswith("profiling") for x in starts) or any("cache" in x for x in lines), lines
    assert any(x.startswith("searching") for x in starts), lines
    # every task that started says it is done, and the search's notes carry the best plan so far
    for s in starts:
        assert any(x.startswith(s[:-4] + ": done") for x in lines), (s, lines)
    assert any("best" in x for x in lines if x.startswith("searching")), lines
    with pytest.raises(TypeError, match="callable taking one line"):
        memflow.plan(LSTM, gpus=2, gpu_type="v100-16gb", batch_size=8, iterations=300, progress=3)
