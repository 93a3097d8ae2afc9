"""Shared helpers for the example model files (not a model file itself).

Model files are loaded by path, not as a package, so the examples import
this module by path too::

    _hf = _load_helper()   # see any example

Scale: every example reads ``MEMFLOW_EXAMPLE_SCALE`` -- ``"full"`` (default,
the published configuration) or ``"tiny"`` (a small configuration that
trains a step on CPU in well under a second; used by the tests).
"""
from __future__ import annotations

import os

import torch

__all__ = ["scale", "random_tokens", "gpt2_files", "bert_files", "llama_files"]

SCALES = ("full", "tiny")


def scale() -> str:
    """``MEMFLOW_EXAMPLE_SCALE``: ``"full"`` (default) or ``"tiny"``."""
    value = os.environ.get("MEMFLOW_EXAMPLE_SCALE", "full").strip().lower() or "full"
    if value not in SCALES:
        raise ValueError(
            f"MEMFLOW_EXAMPLE_SCALE={value!r} is not one of {', '.join(SCALES)}"
        )
    return value


def env_int(name: str, default: int, minimum: int = 1) -> int:
    """An integer environment variable with a default and a lower bound."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not an integer") from None
    if value < minimum:
        raise ValueError(f"{name}={value} must be >= {minimum}")
    return value


def random_tokens(high: int, shape: tuple[int, ...], seed: int = 0) -> torch.Tensor:
    """Deterministic random int64 tokens in ``[0, high)`` on the default device.

    Drawn on the CPU with a seeded generator, then moved to the current
    default device (so ``with torch.device("meta"):`` gives a meta batch).
    """
    g = torch.Generator(device="cpu").manual_seed(seed)
    tokens = torch.randint(0, high, shape, generator=g, device="cpu")
    return tokens.to(torch.get_default_device())


def causal_lm_batch(vocab: int, batch_size: int, seq: int) -> dict[str, torch.Tensor]:
    """``dict(input_ids, labels)`` for a causal LM (HF shifts the labels)."""
    ids = random_tokens(vocab, (batch_size, seq))
    return {"input_ids": ids, "labels": ids.clone()}


# ---------------------------------------------------------------------------
# GPT-2
# ---------------------------------------------------------------------------
GPT2_CONFIGS = {
    # name: (n_layer, n_embd, n_head)
    "small": (12, 768, 12),
    "medium": (24, 1024, 16),
    "large": (36, 1280, 20),
}
GPT2_TINY = dict(n_layer=2, n_embd=64, n_head=4, vocab_size=512, n_positions=64)
GPT2_SEQ = {"full": 1024, "tiny": 32}


def gpt2_config(size: str, s: str):
    from transformers import GPT2Config

    if s == "tiny":
        dims = dict(GPT2_TINY)
    else:
        n_layer, n_embd, n_head = GPT2_CONFIGS[size]
        dims = dict(n_layer=n_layer, n_embd=n_embd, n_head=n_head,
                    vocab_size=50257, n_positions=1024)
    eos = dims["vocab_size"] - 1  # 50256 (<|endoftext|>) at full scale
    return GPT2Config(
        **dims,
        bos_token_id=eos,
        eos_token_id=eos,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        use_cache=False,
        attn_implementation="sdpa",
    )


def gpt2_files(size: str):
    """``(build_model, example_batch, BATCH_SIZE)`` for a GPT-2 size."""

    s = scale()

    def build_model():
        from transformers import GPT2LMHeadModel

        model = GPT2LMHeadModel(gpt2_config(size, s))
        # HF infers the loss from the class name and cannot for GPT2LMHeadModel
        # (it warns, then uses this same default); say it explicitly.
        model.loss_type = "ForCausalLM"
        return model

    def example_batch(batch_size: int):
        vocab = GPT2_TINY["vocab_size"] if s == "tiny" else 50257
        return causal_lm_batch(vocab, batch_size, GPT2_SEQ[s])

    return build_model, example_batch, (4 if s == "tiny" else 8)


# ---------------------------------------------------------------------------
# BERT (masked LM)
# ---------------------------------------------------------------------------
BERT_CONFIGS = {
    # name: (layers, hidden, heads, intermediate)
    "base": (12, 768, 12, 3072),
    "large": (24, 1024, 16, 4096),
}
BERT_TINY = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                 intermediate_size=128, vocab_size=512, max_position_embeddings=64)
BERT_SEQ = {"full": 512, "tiny": 32}
BERT_MASK_ID = 103  # [MASK] in bert-base-uncased's vocabulary


def bert_config(size: str, s: str):
    from transformers import BertConfig

    if s == "tiny":
        dims = dict(BERT_TINY)
    else:
        layers, hidden, heads, inter = BERT_CONFIGS[size]
        dims = dict(num_hidden_layers=layers, hidden_size=hidden,
                    num_attention_heads=heads, intermediate_size=inter,
                    vocab_size=30522, max_position_embeddings=512)
    return BertConfig(
        **dims,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        use_cache=False,
        attn_implementation="sdpa",
    )


def bert_files(size: str):
    """``(build_model, example_batch, BATCH_SIZE)`` for a BERT size."""

    s = scale()

    def build_model():
        from transformers import BertForMaskedLM

        return BertForMaskedLM(bert_config(size, s))

    def example_batch(batch_size: int):
        vocab = BERT_TINY["vocab_size"] if s == "tiny" else 30522
        seq = BERT_SEQ[s]
        ids = random_tokens(vocab, (batch_size, seq), seed=0)
        # mask 15% of the positions (a fixed, seeded pattern); the loss is
        # computed on those only (labels = -100 elsewhere).
        g = torch.Generator(device="cpu").manual_seed(1)
        masked = torch.rand((batch_size, seq), generator=g, device="cpu") < 0.15
        masked[:, 0] = True  # at least one masked token per row
        masked = masked.to(ids.device)
        labels = torch.where(masked, ids, torch.full_like(ids, -100))
        input_ids = torch.where(masked, torch.full_like(ids, BERT_MASK_ID % vocab), ids)
        attention_mask = torch.ones_like(ids)
        return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}

    return build_model, example_batch, (4 if s == "tiny" else 8)


# ---------------------------------------------------------------------------
# Llama
# ---------------------------------------------------------------------------
LLAMA_CONFIGS = {
    # name: (layers, hidden, heads, intermediate, vocab, seq)
    "tiny-llama": (4, 256, 4, 688, 32000, 512),
    "7b": (32, 4096, 32, 11008, 32000, 2048),
}
LLAMA_TINY = (2, 64, 4, 172, 512, 32)


def llama_dims(size: str, s: str) -> tuple[int, int, int, int, int, int]:
    return LLAMA_TINY if s == "tiny" else LLAMA_CONFIGS[size]


def llama_config(size: str, s: str):
    from transformers import LlamaConfig

    layers, hidden, heads, inter, vocab, seq = llama_dims(size, s)
    return LlamaConfig(
        num_hidden_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        intermediate_size=inter,
        vocab_size=vocab,
        max_position_embeddings=seq,
        attention_dropout=0.0,
        tie_word_embeddings=False,
        use_cache=False,
        attn_implementation="sdpa",
    )


def llama_files(size: str, batch_size: int = 8):
    """``(build_model, example_batch, BATCH_SIZE)`` for a Llama size."""

    s = scale()

    def build_model():
        from transformers import LlamaForCausalLM

        return LlamaForCausalLM(llama_config(size, s))

    def example_batch(batch_size: int):
        _, _, _, _, vocab, seq = llama_dims(size, s)
        return causal_lm_batch(vocab, batch_size, seq)

    return build_model, example_batch, (4 if s == "tiny" else batch_size)
