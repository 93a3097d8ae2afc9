import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# the suite is written for the tiny examples, whatever the shell says (module-scoped fixtures run
# before a test's own monkeypatch); the tests that want full scale set it themselves
os.environ["MEMFLOW_EXAMPLE_SCALE"] = "tiny"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
