"""Llama 7B (HF LlamaForCausalLM), about 6.7e9 parameters.

full: 32 layers, hidden 4096, 32 heads, intermediate 11008, vocab 32000,
sequence 2048, BATCH_SIZE 8 -- 27 GB of float32 parameters alone: build
it under ``with torch.device("meta"):`` and capture it in meta / fake mode.
tiny: the same small model as llama.py at tiny scale.
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
build_model, example_batch, BATCH_SIZE = _hf.llama_files("7b")
