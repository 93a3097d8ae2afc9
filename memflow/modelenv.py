"""The environment a model file is built under, recorded with a plan and set again to rebuild it.

A model file may read ``MEMFLOW_*`` variables (the examples' scale, depth)
and any others it names in ``ENV``. A plan records their values and the
file's SHA-256; ``memflow simulate``, ``report`` and ``run`` set the same
values before they load the file, so they rebuild the model that was planned
(a plan made with ``MEMFLOW_EXAMPLE_SCALE=tiny`` is simulated tiny without
the variable being given again).
"""
from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path
from typing import Iterable, Iterator

__all__ = ["model_env", "file_sha256", "applied"]

#: MEMFLOW_* variables that say where MemFlow keeps things, how it runs or reports, not what the model is:
#: never recorded with a plan or in a profile's key, and never unset when a plan's settings are applied
#: (a ``MEMFLOW_MODEL_TIMEOUT_S`` given to ``memflow run`` holds whatever the plan was made with); the
#: last five are the test suite's and benches' own
NOT_MODEL = ("MEMFLOW_CACHE_DIR", "MEMFLOW_RUN_LOG", "MEMFLOW_RUN_LOG_SOURCE", "MEMFLOW_BENCH_QUICK", "MEMFLOW_DEBUG",
             "MEMFLOW_MODEL_TIMEOUT_S", "MEMFLOW_FORKSERVER", "MEMFLOW_STORE_FD",
             "MEMFLOW_TEST_SHARED_CACHE", "MEMFLOW_TEST_MARK", "MEMFLOW_TEST_FULL", "MEMFLOW_TEST_FORKSERVER",
             "MEMFLOW_SEED_RUNS")


def model_env(declared: Iterable[str] = ()) -> dict[str, str]:
    """The ``MEMFLOW_*`` settings in effect (those that can change the model) and the ``declared``
    variables that are set, by name."""
    names = set(declared)
    return {k: v for k, v in sorted(os.environ.items())
            if (k.startswith("MEMFLOW_") and k not in NOT_MODEL) or k in names}


def file_sha256(path: str | os.PathLike) -> str:
    """The SHA-256 of a file's bytes ('' if it cannot be read)."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return ""


@contextlib.contextmanager
def applied(env: dict[str, str]) -> Iterator[None]:
    """``env`` set in ``os.environ`` (so child processes see it too); MEMFLOW_* variables not in it are
    unset for the duration (the plan was made without them); everything restored afterwards."""
    saved = dict(os.environ)
    for k in [k for k in os.environ if k.startswith("MEMFLOW_") and k not in NOT_MODEL and k not in env]:
        del os.environ[k]
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
