import os
import shutil
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# the suite is written for the tiny examples, whatever the shell says (module-scoped fixtures run
# before a test's own monkeypatch); the tests that want full scale set it themselves
os.environ["MEMFLOW_EXAMPLE_SCALE"] = "tiny"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# the suite runs more processes than there are cores (a worker per core, each starting ranks and
# profiling processes): OpenMP threads that spin while they wait for work take the cores from the
# processes that have work (measured: the suite 487 s against 507 s on two cores); set before any
# test imports torch, and inherited by every process the tests start
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# one timed step per measurement (memflow.profile.timing.timed_repeats): the suite checks memory and
# behaviour, never how fast a step is (bench/ measures that), and a cpu-N profile's timing processes
# were a third of a planned run's test (gru: 114 s -> 75 s beside a sweep); one step is never
# "unsteady", so every profile is cached for the tests after it
os.environ.setdefault("MEMFLOW_TIMING_REPEATS", "1")
# one profile cache for the session, fresh: no test reads what an earlier run (or the user) left in
# ~/.cache/memflow, and tests of the same model share its costs and this host's link figures (a test
# of the cache itself, or of a first run, sets a directory of its own). Under pytest-xdist the
# workers share the controller's (its entries are written atomically).
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
_CACHE = os.environ.get("MEMFLOW_TEST_SHARED_CACHE") if _WORKER else None
_OWN_CACHE = _CACHE is None
if _CACHE is None:
    _CACHE = tempfile.mkdtemp(prefix="memflow-test-cache-")
    os.environ["MEMFLOW_TEST_SHARED_CACHE"] = _CACHE
os.environ["MEMFLOW_CACHE_DIR"] = _CACHE

import pytest  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

# A warm fork server for each process that runs tests (memflow.forkserver): each rank of the ~60 real
# runs, and each concurrent profiling process, is forked from a process that imported torch, the
# worker and the examples' libraries once, instead of importing them itself (2-5 s of CPU each). The
# tests of how ranks start, stop and die with their launcher run without it (tests/test_faults.py).
_SERVER = None


def _start_fork_server(config) -> None:
    global _SERVER
    controller = bool(getattr(config.option, "numprocesses", None)) and not _WORKER  # (xdist: runs no test)
    if controller or not sys.platform.startswith("linux") or os.environ.get("MEMFLOW_TEST_FORKSERVER", "1") != "1":
        return
    sock = os.path.join(_CACHE, f"forkserver-{os.getpid()}.sock")
    _SERVER = subprocess.Popen(
        [sys.executable, "-m", "memflow.forkserver", sock, "memflow.executor.worker", "memflow.profile.concurrent",
         "torch.export", "torch.utils.checkpoint", "transformers", "transformers.models.gpt2.modeling_gpt2",
         "transformers.models.bert.modeling_bert", "transformers.models.llama.modeling_llama"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.environ["MEMFLOW_FORKSERVER"] = sock


# Cases marked ``full`` widen a matrix the default suite already covers (another fraction, a
# larger model of a shape already run); MEMFLOW_TEST_FULL=1 runs them too. The default suite
# takes 20-30 minutes on two cores (two workers), most of it real multi-process runs and cpu-N profiles.
FULL = os.environ.get("MEMFLOW_TEST_FULL") == "1"


def pytest_xdist_auto_num_workers(config):
    """``-n auto``: a worker per core, at most 4 (each real run starts up to 4 ranks of its own)."""
    return max(1, min(4, os.cpu_count() or 1))


def pytest_configure(config):
    config.addinivalue_line("markers", "full: widens a covered matrix; runs with MEMFLOW_TEST_FULL=1")
    _start_fork_server(config)


def pytest_collection_modifyitems(config, items):
    if FULL:
        return
    skip = pytest.mark.skip(reason="a wider case of a covered matrix: MEMFLOW_TEST_FULL=1 runs it")
    for item in items:
        if "full" in item.keywords:
            item.add_marker(skip)


def pytest_sessionfinish(session, exitstatus):
    if _SERVER is not None:
        _SERVER.kill()
        _SERVER.wait()
    if _OWN_CACHE:
        shutil.rmtree(_CACHE, ignore_errors=True)
