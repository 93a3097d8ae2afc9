import os
import shutil
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# the suite is written for the tiny examples, whatever the shell says (module-scoped fixtures run
# before a test's own monkeypatch); the tests that want full scale set it themselves
os.environ["MEMFLOW_EXAMPLE_SCALE"] = "tiny"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# one profile cache for the session, fresh: no test reads what an earlier run (or the user) left in
# ~/.cache/memflow, and tests of the same model share its costs and this host's link figures (a test
# of the cache itself, or of a first run, sets a directory of its own)
_CACHE = tempfile.mkdtemp(prefix="memflow-test-cache-")
os.environ["MEMFLOW_CACHE_DIR"] = _CACHE

import pytest  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

# A warm fork server for the session (memflow.forkserver): each rank of the ~60 real runs, and each
# concurrent profiling process, is forked from a process that imported torch, the worker and the
# examples' libraries once, instead of importing them itself (2-5 s of CPU each). The tests of how
# ranks start, stop and die with their launcher run without it (tests/test_faults.py).
_SERVER = None
if sys.platform.startswith("linux") and os.environ.get("MEMFLOW_TEST_FORKSERVER", "1") == "1":
    _sock = os.path.join(_CACHE, "forkserver.sock")
    _SERVER = subprocess.Popen(
        [sys.executable, "-m", "memflow.forkserver", _sock, "memflow.executor.worker", "memflow.profile.concurrent",
         "torch.export", "torch.utils.checkpoint", "transformers", "transformers.models.gpt2.modeling_gpt2",
         "transformers.models.bert.modeling_bert", "transformers.models.llama.modeling_llama"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.environ["MEMFLOW_FORKSERVER"] = _sock

# Cases marked ``full`` widen a matrix the default suite already covers (another fraction, a
# larger model of a shape already run); MEMFLOW_TEST_FULL=1 runs them too. The default suite
# takes about 10 minutes on two cores, most of it real multi-process runs and cpu-N profiles.
FULL = os.environ.get("MEMFLOW_TEST_FULL") == "1"


def pytest_configure(config):
    config.addinivalue_line("markers", "full: widens a covered matrix; runs with MEMFLOW_TEST_FULL=1")


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
    shutil.rmtree(_CACHE, ignore_errors=True)
