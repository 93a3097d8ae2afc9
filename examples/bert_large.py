"""BERT large (HF BertForMaskedLM): 24 layers, hidden 1024, 16 heads, 4096.

Vocab 30522, sequence 512, BATCH_SIZE 8 at full scale; tiny as in bert.py.
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
build_model, example_batch, BATCH_SIZE = _hf.bert_files("large")
