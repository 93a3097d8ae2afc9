"""BERT base (HF BertForMaskedLM), masked language modelling.

full: 12 layers, hidden 768, 12 heads, intermediate 3072, vocab 30522,
sequence 512, BATCH_SIZE 8. tiny: 2 layers, hidden 64, 4 heads, vocab 512,
sequence 32, BATCH_SIZE 4. Batch: dict(input_ids, attention_mask, labels)
with a fixed 15% of the positions masked (labels -100 elsewhere).
"""
import importlib.util
from pathlib import Path


def _load_helper():
    """Imports examples/_hf.py by path (model files are not a package)."""
    path = Path(__file__).resolve().with_name("_hf.py")
    spec = importlib.util.spec_from_file_location("memflow_examples_hf", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_hf = _load_helper()
SCALE = _hf.scale()  # MEMFLOW_EXAMPLE_SCALE: "full" (default) or "tiny"
build_model, example_batch, BATCH_SIZE = _hf.bert_files("base")
