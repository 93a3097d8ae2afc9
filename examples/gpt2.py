"""GPT-2 small (HF GPT2LMHeadModel), causal language modelling.

full: 12 layers, d_model 768, 12 heads, vocab 50257, sequence 1024, BATCH_SIZE 8.
tiny: 2 layers, d_model 64, 4 heads, vocab 512, sequence 32, BATCH_SIZE 4.
Batch: dict(input_ids, labels); the loss is output.loss. Dropout is off and
attention uses SDPA (torch.export captures it as one op).
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
build_model, example_batch, BATCH_SIZE = _hf.gpt2_files("small")
