"""The model file contract: bad files fail with one clear line; every example
loads, runs, and exports with torch.export (tiny scale on CPU, full scale on
the meta device)."""
from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from memflow.errors import ModelLoadError  # noqa: E402
from memflow.graph.build import capture_program  # noqa: E402
from memflow.model_file import (  # noqa: E402
    DEFAULT_BATCH_SIZE,
    LossModule,
    ModelSpec,
    batch_size_of,
    flatten,
    load_model_file,
    unflatten,
)

ROOT = Path(__file__).resolve().parents[1]
BAD = Path(__file__).resolve().parent / "bad_models"
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.py") if not p.name.startswith("_"))
EXAMPLE_IDS = [p.stem for p in EXAMPLES]


def _export(module, flat):
    with warnings.catch_warnings():
        # nn.LSTM re-assigns its _flat_weights list while traced; harmless.
        warnings.filterwarnings("ignore", message=".*were assigned during export.*")
        return torch.export.export(module, tuple(flat), strict=False)


# ---------------------------------------------------------------------------
# bad model files
# ---------------------------------------------------------------------------
# file -> (stage that fails, fragments the message must contain)
BAD_CASES = {
    "no_build_model.py": ("load", ["does not define build_model()"]),
    "no_example_batch.py": ("load", ["does not define example_batch(batch_size)"]),
    "import_raises.py": ("load", ["RuntimeError: cannot find the tokenizer"]),
    "syntax_error.py": ("load", ["syntax error at line 4"]),
    "build_not_callable.py": ("load", ["build_model is int, expected a function"]),
    "negative_batch_size.py": ("load", ["BATCH_SIZE must be a positive int, got -3"]),
    "build_raises.py": ("check", ["build_model() raised RuntimeError"]),
    "build_returns_non_module.py": ("check", ["returned dict", "torch.nn.Module"]),
    "batch_wrong_type.py": ("check", ["example_batch(2) returned a tuple of length 3", "expected a dict of tensors"]),
    "inputs_not_tensors.py": ("check", ["returned inputs", "expected a dict of tensors"]),
    "batch_setting.py": ("check", ["'return_loss' is bool", "return_loss=True belongs in the model",
                                   "build_model can return a wrapper"]),
    "wrong_batch_size.py": ("check", ["leading dimension 7, expected the batch size 2"]),
    "shape_mismatch.py": ("check", ["the batch from example_batch(2) does not run through the model: RuntimeError: "]),
    "no_loss.py": ("check", ["output (a tensor of shape (2, 3)) is not a scalar loss and has no .loss",
                             "define loss_fn(output, target) in"]),
    "loss_not_scalar.py": ("check", ["loss_fn(output, target) is a tensor of shape (2,)", "scalar"]),
    "bad_batch_shape.py": ("check", ["does not run through the model: RuntimeError: "]),
    "lazy_forward_fails.py": ("check", ["the first forward that shapes its lazy modules (LazyLinear) raised RuntimeError"]),
    # runs eagerly; fails only where the step is captured (tests/test_capture_errors.py)
    "data_dependent_branch.py": ("capture", []),
    "hf_loss_branch.py": ("capture", []),
    # models written from the outside, read where they stand (a path from the repository's root)
    "bench/outside5/grad_penalty.py": ("capture", []),
    "bench/outside5/nystromformer.py": ("capture", []),
    "bench/outside5/adaptive_softmax.py": ("capture", []),
    # flat EmbeddingBag ids first: the batch size is read from the first tensor; the line names one to put first
    "bench/outside6/two_tower.py": ("check", ["leading dimension", "expected the batch size 2",
                                              "put 'hist_offsets', whose leading dimension is the batch, first"]),
    "packed_sequence.py": ("capture", []),
    "dirty_function.py": ("capture", []),
    "routed_experts.py": ("capture", []),
    "sparse_embedding.py": ("capture", []),
    "data_clamp.py": ("capture", []),
    "layerdrop.py": ("capture", []),
    "ctc_concat.py": ("capture", []),
    "hf_library_branch.py": ("capture", []),
    "bn_cumulative.py": ("capture", []),
}


def test_every_bad_file_has_a_case():
    assert sorted(p.name for p in BAD.glob("*.py")) == sorted(k for k in BAD_CASES if "/" not in k)


@pytest.mark.parametrize("name", sorted(BAD_CASES))
def test_bad_model_file(name):
    stage, fragments = BAD_CASES[name]
    path = BAD / name if "/" not in name else BAD.parents[1] / name
    if stage == "capture":
        load_model_file(path).check(batch_size=2)
        return
    with pytest.raises(ModelLoadError) as info:
        spec = load_model_file(path)
        assert stage == "check", f"{name} loaded although it should not"
        spec.check(batch_size=2)
    msg = str(info.value)
    assert "\n" not in msg, msg
    assert str(path) in msg, msg
    for fragment in fragments:
        assert fragment in msg, msg


def test_missing_file(tmp_path):
    path = tmp_path / "nope.py"
    with pytest.raises(ModelLoadError, match="model file not found") as info:
        load_model_file(path)
    assert str(path) in str(info.value)


def test_not_a_py_file(tmp_path):
    path = tmp_path / "model.txt"
    path.write_text("def build_model(): pass\n")
    with pytest.raises(ModelLoadError, match=r"not a \.py file") as info:
        load_model_file(path)
    assert str(path) in str(info.value)
    with pytest.raises(ModelLoadError, match="not a file"):
        load_model_file(tmp_path)


def test_defaults_and_optimizer(tmp_path):
    path = tmp_path / "mini.py"
    path.write_text(
        "import torch\nfrom torch import nn\n"
        "def build_model():\n    return nn.Linear(3, 1)\n"
        "def example_batch(batch_size):\n"
        "    return (torch.ones(batch_size, 3),), torch.zeros(batch_size, 1)\n"
        "def loss_fn(output, target):\n    return ((output - target) ** 2).mean()\n"
    )
    spec = load_model_file(str(path))
    assert isinstance(spec, ModelSpec)
    assert spec.name == "mini" and spec.batch_size == DEFAULT_BATCH_SIZE == 8
    assert spec.optimizer_factory is None
    model = spec.build()
    opt = spec.make_optimizer(model.parameters())
    assert isinstance(opt, torch.optim.AdamW)
    assert opt.defaults["lr"] == 1e-3 and opt.defaults["foreach"] is False
    batch = spec.batch(3)
    assert batch_size_of(batch) == 3
    flat, tree = flatten(batch)
    assert len(flat) == 2
    again = unflatten(flat, tree)
    assert torch.equal(again[0][0], batch[0][0]) and torch.equal(again[1], batch[1])
    # loading twice gives independent modules
    assert load_model_file(path).build_model is not spec.build_model


def test_export_errors_are_not_rewritten(tmp_path):
    """A failure while torch.export traces is a capture problem, not a contract one."""
    path = tmp_path / "branchy.py"
    path.write_text(
        "import torch\nfrom torch import nn\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n        super().__init__(); self.fc = nn.Linear(3, 1)\n"
        "    def forward(self, x):\n"
        "        y = self.fc(x)\n"
        "        return y * 2 if y.sum() > 0 else y\n"
        "def build_model():\n    return Net()\n"
        "def example_batch(batch_size):\n"
        "    return torch.ones(batch_size, 3), torch.zeros(batch_size, 1)\n"
        "def loss_fn(output, target):\n    return ((output - target) ** 2).mean()\n"
    )
    spec = load_model_file(path)
    spec.check()
    model, batch = spec.build(), spec.batch(2)
    flat, tree = flatten(batch)
    with pytest.raises(Exception) as info:
        _export(LossModule(spec, model, tree), flat)
    assert not isinstance(info.value, ModelLoadError)


# ---------------------------------------------------------------------------
# examples
# ---------------------------------------------------------------------------
def test_examples_present():
    assert {"gpt2", "gpt2_medium", "gpt2_large", "bert", "bert_large", "llama",
            "llama7b", "resnet", "lstm"} <= set(EXAMPLE_IDS)


@pytest.mark.parametrize("path", EXAMPLES, ids=EXAMPLE_IDS)
def test_example_tiny(path, monkeypatch):
    monkeypatch.setenv("MEMFLOW_EXAMPLE_SCALE", "tiny")
    spec = load_model_file(path)
    assert spec.name == path.stem
    spec.check()

    torch.manual_seed(0)
    model = spec.build()
    batch = spec.batch(2)
    expected = spec.loss(model, batch)
    flat, tree = flatten(batch)
    assert all(isinstance(t, torch.Tensor) for t in flat)
    loss_module = LossModule(spec, model, tree)
    assert loss_module.model is model
    got = loss_module(*flat)
    assert got.dim() == 0
    torch.testing.assert_close(got, expected)

    ep = _export(loss_module, flat)
    assert any(s.target and s.target.startswith("model.") for s in ep.graph_signature.input_specs)

    # one training step with the file's optimizer
    opt = spec.make_optimizer(model.parameters())
    spec.loss(model, batch).backward()
    opt.step()


@pytest.mark.parametrize("path", EXAMPLES, ids=EXAMPLE_IDS)
def test_example_full_scale_exports_on_meta(path, monkeypatch):
    monkeypatch.setenv("MEMFLOW_EXAMPLE_SCALE", "full")
    spec = load_model_file(path)
    with torch.device("meta"):
        model = spec.build()
        batch = spec.batch(spec.batch_size)
    flat, tree = flatten(batch)
    assert all(t.device.type == "meta" for t in flat)
    assert batch_size_of(batch) == spec.batch_size
    _export(LossModule(spec, model, tree), flat)


def test_llama7b_parameter_count(monkeypatch):
    monkeypatch.setenv("MEMFLOW_EXAMPLE_SCALE", "full")
    spec = load_model_file(ROOT / "examples" / "llama7b.py")
    assert spec.batch_size == 8
    with torch.device("meta"):
        model = spec.build()
    n = sum(p.numel() for p in model.parameters())
    assert 6.5e9 < n < 7e9, n
    assert all(p.device.type == "meta" for p in model.parameters())


def test_scale_env_is_validated(monkeypatch):
    monkeypatch.setenv("MEMFLOW_EXAMPLE_SCALE", "huge")
    for name in ("gpt2.py", "resnet.py", "lstm.py"):
        with pytest.raises(ModelLoadError, match="MEMFLOW_EXAMPLE_SCALE"):
            load_model_file(ROOT / "examples" / name)


def test_depth_and_layer_env(monkeypatch):
    monkeypatch.setenv("MEMFLOW_EXAMPLE_SCALE", "tiny")
    monkeypatch.setenv("MEMFLOW_LSTM_LAYERS", "3")
    assert len(load_model_file(ROOT / "examples" / "lstm.py").build().blocks) == 3
    monkeypatch.setenv("MEMFLOW_RESNET_DEPTH", "18")
    model = load_model_file(ROOT / "examples" / "resnet.py").build()
    assert [len(s) for s in model.stages] == [2, 2, 2, 2]
    monkeypatch.setenv("MEMFLOW_RESNET_DEPTH", "7")
    with pytest.raises(ModelLoadError, match="MEMFLOW_RESNET_DEPTH"):
        load_model_file(ROOT / "examples" / "resnet.py")


def test_a_process_with_threads_still_guards_the_model_file(tmp_path):
    """Where other threads run (a fork would copy only this one), the model file's trial runs in a new
    interpreter: a file that ends its process at import is still an error, not this process's end."""
    import threading

    from memflow.errors import ModelLoadError
    from memflow.model_file import load_model_file

    f = tmp_path / "exits.py"
    f.write_text("import os\nos._exit(0)\n")
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, daemon=True)
    t.start()
    try:
        assert threading.active_count() > 1
        with pytest.raises(ModelLoadError, match="exited with code 0 during import"):
            load_model_file(f)
    finally:
        stop.set()
        t.join()


@pytest.mark.parametrize("form,ret", [("dict", "loss"), ("pair", "loss"), ("dict", "(loss, h)"), ("dict", "h, loss"),
                                      ("dict", "[h, h.sum().long(), loss]"), ("dict-pair", "loss")])
def test_a_model_that_returns_its_loss_needs_no_loss_fn(tmp_path, form, ret):
    """A forward that returns a 0-dim tensor is the loss (most hand-written training modules), also as
    the first item of a tuple (HF's order) or its one floating 0-dim item (nanoGPT's ``logits, loss``), its
    inputs a dict, a tuple, or a dict beside a target (``model(**inputs)``); it captures, and the captured
    step's loss is the eager one."""
    batch = {"dict": '{"x": torch.randn(b, 3, generator=g), "y": torch.randn(b, 1, generator=g)}',
             "pair": "((torch.randn(b, 3, generator=g), torch.randn(b, 1, generator=g)), torch.zeros(b))",
             "dict-pair": '({"x": torch.randn(b, 3, generator=g), "y": torch.randn(b, 1, generator=g)}, torch.zeros(b))',
             }[form]
    path = tmp_path / "own_loss.py"
    path.write_text(
        "import torch\nfrom torch import nn\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n        super().__init__(); self.fc = nn.Linear(3, 1)\n"
        "    def forward(self, x, y):\n        h = torch.relu_(self.fc(x))\n        loss = ((h - y) ** 2).mean()\n"
        f"        return {ret}\n"
        "def build_model():\n    return Net()\n"
        f"def example_batch(b):\n    g = torch.Generator().manual_seed(0)\n    return {batch}\n"
    )
    spec = load_model_file(path)
    torch.manual_seed(0)
    want = spec.loss(spec.build(), spec.batch(4))
    _, prog, _, _ = capture_program(spec, 4, fake=False, seed=0)
    got = prog.run_step(flatten(spec.batch(4))[0])
    assert float(want.detach()) > 0 and float(got) == pytest.approx(float(want.detach()), rel=1e-6)


def test_a_tuple_with_two_scalars_after_its_logits_is_no_loss(tmp_path):
    """Which of two 0-dim items is the loss is not guessed: the one line asks for loss_fn."""
    path = tmp_path / "two.py"
    path.write_text(
        "import torch\nfrom torch import nn\n"
        "class Net(nn.Linear):\n"
        "    def forward(self, x):\n        h = super().forward(x)\n        return h, h.mean(), h.std()\n"
        "def build_model():\n    return Net(3, 5)\n"
        "def example_batch(b):\n    return torch.ones(b, 3), torch.zeros(b, dtype=torch.long)\n"
    )
    with pytest.raises(ModelLoadError, match=r"output \(tuple\) is not a scalar loss.*define loss_fn"):
        load_model_file(path).check(2)


def test_a_tensor_output_that_is_not_a_scalar_says_so(tmp_path):
    path = tmp_path / "logits.py"
    path.write_text(
        "import torch\nfrom torch import nn\n"
        "def build_model():\n    return nn.Linear(3, 5)\n"
        "def example_batch(b):\n    return torch.ones(b, 3), torch.zeros(b, dtype=torch.long)\n"
    )
    with pytest.raises(ModelLoadError, match=r"output \(a tensor of shape \(2, 5\)\) is not a scalar loss"):
        load_model_file(path).check(2)
