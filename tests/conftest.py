import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MEMFLOW_EXAMPLE_SCALE", "tiny")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
