"""Shared pieces of the benchmarks: machine facts and the BENCHMARKS.md section writer.

Each benchmark owns one section of BENCHMARKS.md between
``<!-- bench:NAME -->`` and ``<!-- /bench:NAME -->`` markers and rewrites
only that section, stamped with the command that produced it, the machine
and the date.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import os
import platform
import re
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
BENCH_FILE = ROOT / "BENCHMARKS.md"

HEADER = """# MemFlow benchmarks

Every table below was produced by the command written above it, on the machine
named there; re-run it to regenerate that section (`python -m bench all` for all).
Timings on this 2-core shared machine are noisy: medians of repeats, and ratios
measured side by side in one run.
"""

__all__ = ["machine", "write_section", "median", "ROOT", "md_table", "env", "same_checkout"]


def same_checkout() -> None:
    """Stop (one line) unless memflow and the packages the wheel maps into it (``memflow.simulator``,
    ``memflow.search``) are imported from this checkout: an editable install of another checkout maps
    those two to its own directories, so a benchmark run from a clone beside it would time and predict
    with the other checkout's simulator and search, and write their figures here."""
    import importlib

    for name in ("memflow", "memflow.simulator", "memflow.search"):
        where = Path(importlib.import_module(name).__file__).resolve()
        if ROOT not in where.parents:
            sys.exit(f"bench: {name} is imported from {where.parent}, not from this checkout ({ROOT}); install "
                     f"this checkout (pip install -e {ROOT}) or run the benchmark from the installed one")


def machine() -> str:
    return (f"{platform.node()} ({platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
            f"{torch.get_num_threads()} threads, Python {platform.python_version()})")


def median(xs):
    return statistics.median(xs) if xs else float("nan")


@contextlib.contextmanager
def env(model: dict | None = None, **kw):
    """A block with ``MEMFLOW_*`` settings changed, every one of them restored afterwards: ``kw`` set,
    and with ``model`` the model file's settings (:func:`memflow.modelenv.model_env`'s keys) replaced
    by these."""
    from memflow.modelenv import model_env

    saved = {k: v for k, v in os.environ.items() if k.startswith("MEMFLOW_")}
    if model is not None:
        for k in model_env():
            del os.environ[k]
        os.environ.update(model)
    os.environ.update({k: str(v) for k, v in kw.items()})
    try:
        yield
    finally:
        for k in [k for k in os.environ if k.startswith("MEMFLOW_")]:
            del os.environ[k]
        os.environ.update(saved)


def md_table(header: list[str], rows: list[list]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(x) for x in r) + " |")
    return "\n".join(out)


def write_section(name: str, title: str, body: str, command: str | None = None) -> None:
    """Replace (or append) section ``name`` of BENCHMARKS.md (``NAME-quick`` under ``python -m bench quick``,
    so a quick run never overwrites the full tables)."""
    same_checkout()
    command = command or f"python -m bench {name}"
    if os.environ.get("MEMFLOW_BENCH_QUICK"):
        name, title = f"{name}-quick", f"{title} (quick)"
        command = command if "--quick" in command else "python -m bench quick"
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    block = (f"<!-- bench:{name} -->\n## {title}\n\n`{command}` — {machine()}, {stamp}\n\n{body.strip()}\n"
             f"<!-- /bench:{name} -->")
    text = BENCH_FILE.read_text() if BENCH_FILE.exists() else HEADER
    pat = re.compile(rf"<!-- bench:{re.escape(name)} -->.*?<!-- /bench:{re.escape(name)} -->", re.S)
    text = pat.sub(lambda _: block, text) if pat.search(text) else text.rstrip() + "\n\n" + block + "\n"
    tmp = BENCH_FILE.with_suffix(".md.tmp")
    tmp.write_text(text)
    os.replace(tmp, BENCH_FILE)
    print(block, file=sys.stdout)
