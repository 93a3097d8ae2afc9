"""bench/outside6/two_tower.py's model with its batch reordered so that the first tensor is the batch (age first,
the flat watch-history ids after it): a two-tower retrieval model whose user tower averages a variable-length
history with nn.EmbeddingBag over flat ids and per-user offsets."""
import importlib.util
import sys
from pathlib import Path

_NAME = "memflow_tests_outside6_two_tower"
if _NAME not in sys.modules:
    _spec = importlib.util.spec_from_file_location(
        _NAME, Path(__file__).resolve().parents[2] / "bench" / "outside6" / "two_tower.py")
    sys.modules[_NAME] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules[_NAME])
_bench = sys.modules[_NAME]

BATCH_SIZE = _bench.BATCH_SIZE
TwoTower = _bench.TwoTower
build_model = _bench.build_model


def example_batch(b):
    batch = _bench.example_batch(b)
    return {"age": batch.pop("age"), **batch}  # (the batch size is read from the first tensor)
