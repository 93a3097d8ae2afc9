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

# Cases marked ``full`` widen a matrix the default suite already covers (another fraction, a
# larger model of a shape already run); MEMFLOW_TEST_FULL=1 runs them too. The default suite
# takes about 14 minutes on two cores, most of it real multi-process runs and cpu-N profiles.
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
    shutil.rmtree(_CACHE, ignore_errors=True)
