"""Loading and validating a user's model file (``model.py``).

The model file contract
=======================

A model file is a plain Python file, loaded by path (never as part of a
package). It must define:

``build_model() -> torch.nn.Module``
    Builds a fresh model (in training mode). It may be called under
    ``with torch.device("meta"):`` for models larger than host memory, so it
    should create parameters on the default device.

``example_batch(batch_size: int)``
    Returns one batch of ``batch_size`` samples, either

    * a ``dict`` of tensors: the model is called as ``model(**batch)`` and the
      loss defaults to ``output.loss`` (an attribute or a dict key), or
    * a pair ``(inputs, target)`` as a data loader yields it: the model is
      called as ``model(inputs)`` (``inputs`` a tensor), ``model(*inputs)``
      (``inputs`` a tuple of tensors) or ``model(**inputs)`` (a dict of them:
      an HF model given no labels, its loss in ``loss_fn``); ``target`` (a
      tensor or a tuple / list / dict of tensors) goes only to the loss.

    The leading dimension of the first tensor is the batch dimension and
    must equal ``batch_size`` (the planner splits batches into micro-batches
    along it).

It may define:

``loss_fn(output, target) -> Tensor``
    A scalar loss. For dict batches ``target`` is the batch itself. Required
    where the model output has no ``loss``; when defined it takes precedence
    over ``output.loss``.

``optimizer(params) -> torch.optim.Optimizer``
    Default: ``torch.optim.AdamW(params, lr=1e-3, foreach=False)``.
    ``foreach=False`` makes the optimizer step update one parameter at a
    time, so its transient memory is one parameter's worth rather than a
    copy of all of them -- the step's memory stays predictable.

``BATCH_SIZE``
    The default (per step, global) batch size, a positive ``int``; 8 when
    absent.

``ENV``
    The names of the environment variables the file reads besides
    ``MEMFLOW_*`` ones (a list of strings). A plan records their values, and
    ``memflow simulate`` / ``report`` / ``run`` set them again, so the model
    they rebuild is the one that was planned.

``KNOBS``
    What ``memflow fit --max depth|seq|experts`` may grow: a mapping from the
    knob's name to the environment variable the file reads for it, or to
    ``{"env": NAME, "min": M, "step": S}`` where only ``M, M+S, ...`` are
    valid. These variables are recorded with a plan too.

Every contract violation is raised as a one-line
:class:`~memflow.errors.ModelLoadError` that names the file.
"""
from __future__ import annotations

import importlib
import importlib.util
import itertools
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch
import torch.utils._pytree as pytree
from torch import nn
from torch.nn.modules.lazy import LazyModuleMixin

from memflow.errors import ModelLoadError
from memflow.gcfreeze import freeze, paused_collection
from memflow.model_guard import continue_in_child, first_in_child, phases_to_stdout, take_handover

__all__ = [
    "import_export_modules",
    "DEFAULT_BATCH_SIZE",
    "ModelSpec",
    "LossModule",
    "load_model_file",
    "flatten",
    "unflatten",
    "batch_size_of",
]

DEFAULT_BATCH_SIZE = 8
"""Batch size used when the model file defines no ``BATCH_SIZE``."""

_EXPECTED_BATCH = (
    "expected a dict of tensors (called as model(**batch)) or a pair "
    "(inputs, target) with inputs a tensor, a tuple of tensors or a dict of them"
)

_module_counter = itertools.count()


# --------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------
def _first_line(exc: BaseException) -> str:
    """``"ExcType: first line of the message"`` (or just the type)."""
    lines = str(exc).strip().splitlines()
    msg = lines[0].strip() if lines else ""
    return f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__


def _type_name(obj: Any) -> str:
    return type(obj).__name__


def _tracing() -> bool:
    """True while torch.export / torch.compile traces the code.

    Errors raised while tracing are the tracer's business (a capture
    problem, not a contract violation), so they propagate unchanged.
    """
    try:
        return bool(torch.compiler.is_exporting() or torch.compiler.is_compiling())
    except Exception:  # pragma: no cover - very old torch
        return False


def flatten(batch: Any) -> tuple[list[torch.Tensor], pytree.TreeSpec]:
    """Flattens a batch into its tensors and a treespec (``torch.utils._pytree``)."""
    leaves, spec = pytree.tree_flatten(batch)
    return list(leaves), spec


def unflatten(tensors: Any, spec: pytree.TreeSpec) -> Any:
    """Inverse of :func:`flatten`: rebuilds the batch from its tensors."""
    return pytree.tree_unflatten(list(tensors), spec)


def batch_size_of(batch: Any) -> int:
    """The batch dimension: the leading dim of the batch's first tensor."""
    for leaf in pytree.tree_leaves(batch):
        if isinstance(leaf, torch.Tensor) and leaf.dim() > 0:
            return int(leaf.shape[0])
    raise ValueError("the batch holds no tensor with a leading (batch) dimension")


# --------------------------------------------------------------------------
# ModelSpec
# --------------------------------------------------------------------------
@dataclass
class ModelSpec:
    """A loaded, validated model file.

    Attributes:
        path: the model file.
        name: the file's stem (``"gpt2"`` for ``examples/gpt2.py``).
        build_model: the file's ``build_model``.
        example_batch: the file's ``example_batch``.
        loss_fn: the file's ``loss_fn`` or ``None`` (then ``output.loss``).
        optimizer_factory: the file's ``optimizer`` or ``None`` (then AdamW).
        batch_size: the file's ``BATCH_SIZE`` (default 8), samples per step.
    """

    path: Path
    name: str
    build_model: Callable[[], nn.Module]
    example_batch: Callable[[int], Any]
    loss_fn: Callable[[Any, Any], torch.Tensor] | None = None
    optimizer_factory: Callable[[Any], torch.optim.Optimizer] | None = None
    batch_size: int = DEFAULT_BATCH_SIZE
    env_vars: tuple[str, ...] = ()  # the file's ENV (and KNOBS'): environment variables it reads besides MEMFLOW_*
    knobs: dict[str, Any] = field(default_factory=dict)  # the file's KNOBS: knob -> env var (or {env, min, step})
    # the tensor-parallel degree its step is captured for (memflow.graph.tp): a program of tp > 1 is
    # one rank's share of every split node; set by the planner, not by the file
    tp: int = 1
    # with tp > 1, whether the ops between Megatron's pairs are split by tokens (sequence parallelism,
    # memflow.graph.sp_rules); set by the planner (a plan searches both) and by the executor from the plan
    sequence: bool = True

    # -- construction -------------------------------------------------------
    def build(self) -> nn.Module:
        """Calls ``build_model()`` and checks that it returns an ``nn.Module``."""
        try:
            model = self.build_model()
        except Exception as exc:
            raise ModelLoadError(
                f"{self.path}: build_model() raised {_first_line(exc)}"
            ) from exc
        if not isinstance(model, nn.Module):
            raise ModelLoadError(
                f"{self.path}: build_model() returned {_type_name(model)}, "
                "expected a torch.nn.Module"
            )
        self._materialize(model)
        return model

    def _materialize(self, model: nn.Module) -> None:
        """Lazy modules (``nn.LazyLinear``, ``LazyConv2d``) get their shapes from a first forward: one on
        a batch of two, in eval mode (no batch-norm statistics move) and without gradients, as torch
        asks ("call forward with a dummy batch"). Every build does the same (the plan's capture in fake
        mode, each rank's, plain training's), so their weights stay alike."""
        lazy = [m for m in model.modules() if isinstance(m, LazyModuleMixin) and m.has_uninitialized_params()]
        if not lazy:
            return
        modes = {m: m.training for m in model.modules()}
        model.eval()
        batch = self.batch(2)
        if any(p.device.type == "meta" for p in model.parameters()):  # (built on meta: memflow.graph.fakebuild)
            batch = pytree.tree_map(lambda t: t.to("meta") if isinstance(t, torch.Tensor) else t, batch)
        try:
            with torch.no_grad():
                self.loss(model, batch)
        except Exception as exc:
            cause = exc.__cause__ if isinstance(exc, ModelLoadError) and exc.__cause__ else exc  # (the model's own)
            raise ModelLoadError(f"{self.path}: the first forward that shapes its lazy modules "
                                 f"({type(lazy[0]).__name__}) raised {_first_line(cause)}") from exc
        finally:
            for m, t in modes.items():
                m.training = t

    def batch(self, batch_size: int | None = None) -> Any:
        """Calls ``example_batch(batch_size)`` and validates the batch's structure.

        ``batch_size`` defaults to :attr:`batch_size`. Returns the batch as
        the file made it (a dict, or a ``(inputs, target)`` pair).
        """
        if batch_size is None:
            batch_size = self.batch_size
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ModelLoadError(
                f"{self.path}: batch size must be a positive int, got {batch_size!r}"
            )
        where = f"{self.path}: example_batch({batch_size})"
        try:
            batch = self.example_batch(batch_size)
        except Exception as exc:
            raise ModelLoadError(f"{where} raised {_first_line(exc)}") from exc

        if isinstance(batch, Mapping):
            if not batch:
                raise ModelLoadError(f"{where} returned an empty dict; {_EXPECTED_BATCH}")
            for key, value in batch.items():
                if not isinstance(key, str):
                    raise ModelLoadError(
                        f"{where} returned a dict with key {key!r}; keys must be "
                        "str (they become keyword arguments of the model)"
                    )
                if not isinstance(value, torch.Tensor):
                    raise ModelLoadError(
                        f"{where} returned a dict whose {key!r} is "
                        f"{_type_name(value)}; {_EXPECTED_BATCH}"
                        + (f" (a setting such as {key}={value!r} belongs in the model: build_model can return "
                           f"a wrapper whose forward calls the model with it)"
                           if isinstance(value, (bool, int, float, str)) or value is None else "")
                    )
        elif isinstance(batch, (tuple, list)):
            if len(batch) != 2:
                raise ModelLoadError(
                    f"{where} returned a {_type_name(batch)} of length {len(batch)}; "
                    f"{_EXPECTED_BATCH}"
                )
            inputs, target = batch
            if isinstance(inputs, Mapping):
                if not inputs or not all(isinstance(k, str) and isinstance(t, torch.Tensor) for k, t in inputs.items()):
                    raise ModelLoadError(
                        f"{where} returned inputs as a dict that is not str keys to tensors; {_EXPECTED_BATCH}"
                    )
            elif isinstance(inputs, (tuple, list)):
                if not inputs or not all(isinstance(t, torch.Tensor) for t in inputs):
                    raise ModelLoadError(
                        f"{where} returned inputs of types "
                        f"({', '.join(_type_name(t) for t in inputs) or 'empty'}); "
                        f"{_EXPECTED_BATCH}"
                    )
            elif not isinstance(inputs, torch.Tensor):
                raise ModelLoadError(
                    f"{where} returned inputs of type {_type_name(inputs)}; "
                    f"{_EXPECTED_BATCH}"
                )
            leaves = pytree.tree_leaves(target)
            if not leaves or not all(isinstance(t, torch.Tensor) for t in leaves):
                raise ModelLoadError(
                    f"{where} returned a target of type {_type_name(target)}; "
                    "expected a tensor or a tuple/list/dict of tensors"
                )
        else:
            raise ModelLoadError(f"{where} returned {_type_name(batch)}; {_EXPECTED_BATCH}")

        try:
            leading = batch_size_of(batch)
        except ValueError:
            raise ModelLoadError(
                f"{where} returned only 0-dim tensors; the first tensor's leading "
                "dimension must be the batch dimension"
            ) from None
        if leading != batch_size:
            # (MemFlow reads the batch size from the first tensor: one whose leading dimension is the batch, put
            # first, is the fix where another input is flat: EmbeddingBag's ids and offsets)
            rows = [pytree.keystr(path).strip("[]") for path, t in pytree.tree_flatten_with_path(batch)[0]
                    if isinstance(t, torch.Tensor) and t.dim() > 0 and t.shape[0] == batch_size]
            raise ModelLoadError(
                f"{where} returned a batch whose first tensor has leading dimension "
                f"{leading}, expected the batch size {batch_size}"
                + (f" (the batch size is read from the first tensor: put {rows[0]}, whose leading dimension is "
                   "the batch, first)" if rows else "")
            )
        return batch

    def make_optimizer(self, params: Any) -> torch.optim.Optimizer:
        """The file's ``optimizer(params)``, or ``AdamW(params, lr=1e-3, foreach=False)``.

        ``foreach=False`` keeps the step's transient memory to one parameter
        at a time, so the optimizer's peak memory is predictable.
        """
        if self.optimizer_factory is None:
            return torch.optim.AdamW(params, lr=1e-3, foreach=False)
        try:
            opt = self.optimizer_factory(params)
        except Exception as exc:
            raise ModelLoadError(
                f"{self.path}: optimizer(params) raised {_first_line(exc)}"
            ) from exc
        if not isinstance(opt, torch.optim.Optimizer):
            raise ModelLoadError(
                f"{self.path}: optimizer(params) returned {_type_name(opt)}, "
                "expected a torch.optim.Optimizer"
            )
        return opt

    # -- the training step's loss ------------------------------------------
    def loss(self, model: nn.Module, batch: Any) -> torch.Tensor:
        """The canonical training-step loss of ``model`` on ``batch``.

        Dict batches: ``output = model(**batch)``; pairs: ``model(inputs)``,
        ``model(*inputs)`` or ``model(**inputs)``. The loss is ``loss_fn(output, target)`` when the
        file defines ``loss_fn`` (``target`` is the batch for dict batches),
        otherwise the output itself where the model returns a 0-dim tensor (or
        a tuple led by one, or holding exactly one floating one), else ``output.loss``. The result must be a 0-dim tensor.

        There is no Python control flow on tensor values here, so this is
        what :class:`LossModule` exports.
        """
        if isinstance(batch, Mapping):
            call = lambda: model(**batch)  # noqa: E731
            target = batch
        else:
            inputs, target = batch
            if isinstance(inputs, Mapping):
                call = lambda: model(**inputs)  # noqa: E731
            elif isinstance(inputs, (tuple, list)):
                call = lambda: model(*inputs)  # noqa: E731
            else:
                call = lambda: model(inputs)  # noqa: E731

        tracing = _tracing()
        try:
            output = call()
        except Exception as exc:
            if tracing or isinstance(exc, ModelLoadError):
                raise
            raise ModelLoadError(
                f"{self.path}: the batch from example_batch({_safe_bs(batch)}) does "
                f"not run through the model: {_first_line(exc)}"
            ) from exc

        if self.loss_fn is not None:
            try:
                loss = self.loss_fn(output, target)
            except Exception as exc:
                if tracing or isinstance(exc, ModelLoadError):
                    raise
                raise ModelLoadError(
                    f"{self.path}: loss_fn(output, target) raised {_first_line(exc)}"
                ) from exc
            what = "loss_fn(output, target)"
        else:
            loss = _output_loss(output)
            if loss is None:
                got = (f"a tensor of shape {tuple(output.shape)}" if isinstance(output, torch.Tensor)
                       else _type_name(output))
                raise ModelLoadError(
                    f"{self.path}: the model's output ({got}) is not a "
                    f"scalar loss and has no .loss; return the loss from forward or define "
                    f"loss_fn(output, target) in {self.path}"
                )
            what = "output.loss"

        if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
            got = (
                f"a tensor of shape {tuple(loss.shape)}"
                if isinstance(loss, torch.Tensor)
                else _type_name(loss)
            )
            raise ModelLoadError(
                f"{self.path}: {what} is {got}, expected a scalar (0-dim) tensor"
            )
        return loss

    def check(self, batch_size: int = 2) -> float:
        """Builds the model and computes one loss on a small batch.

        Validates the whole contract early with clear errors; returns the
        loss value. The loss must be a floating-point tensor that depends on
        the model's parameters (so that ``backward()`` works).
        """
        model = self.build()
        batch = self.batch(batch_size)
        loss = self.loss(model, batch)
        if not loss.is_floating_point():
            raise ModelLoadError(
                f"{self.path}: the loss has dtype {loss.dtype}, expected a floating-point tensor"
            )
        if torch.is_grad_enabled() and not loss.requires_grad:
            raise ModelLoadError(
                f"{self.path}: the loss does not depend on any trainable parameter "
                "(loss.requires_grad is False)"
            )
        return float(loss.detach())

    # method forms of the module-level helpers, for convenience
    flatten = staticmethod(flatten)
    unflatten = staticmethod(unflatten)
    batch_size_of = staticmethod(batch_size_of)


def _safe_bs(batch: Any) -> str:
    try:
        return str(batch_size_of(batch))
    except Exception:
        return "?"


def _output_loss(output: Any) -> Any:
    """The output itself where it is a 0-dim tensor (a model that returns its loss), its first item where
    it is a tuple or list led by one (``(loss, logits, ...)``, HF's ``return_dict=False`` order), else its
    one 0-dim floating-point item (nanoGPT's ``(logits, loss)``), ``output.loss`` (attribute) or
    ``output["loss"]`` (key), else None."""
    if isinstance(output, (tuple, list)) and output:
        scalars = [t for t in output if isinstance(t, torch.Tensor) and t.dim() == 0 and t.is_floating_point()]
        if isinstance(output[0], torch.Tensor) and output[0].dim() == 0:
            return output[0]
        return scalars[0] if len(scalars) == 1 else None
    if isinstance(output, torch.Tensor):
        return output if output.dim() == 0 else None
    if isinstance(output, Mapping) and "loss" in output:
        return output["loss"]
    return getattr(output, "loss", None)


# --------------------------------------------------------------------------
# LossModule
# --------------------------------------------------------------------------
class LossModule(nn.Module):
    """``model`` + loss as one module taking the batch's flat tensors.

    ``LossModule(spec, model, treespec)(*flat)`` equals
    ``spec.loss(model, unflatten(flat, treespec))``, where ``flat, treespec =
    flatten(batch)``. This is the module captured with ``torch.export``; the
    user's model is registered as the submodule ``model``.
    """

    def __init__(self, spec: ModelSpec, model: nn.Module, treespec: pytree.TreeSpec):
        super().__init__()
        self.spec = spec
        self.model = model
        self.treespec = treespec

    def forward(self, *flat_tensors: torch.Tensor) -> torch.Tensor:
        return self.spec.loss(self.model, unflatten(flat_tensors, self.treespec))


# --------------------------------------------------------------------------
# loading
# --------------------------------------------------------------------------
def _module_name(path: Path) -> str:
    stem = re.sub(r"\W", "_", path.stem) or "model"
    return f"memflow_user_model_{stem}_{next(_module_counter)}"


def load_model_file(path: str | os.PathLike, *, guard: bool = True) -> ModelSpec:
    """Imports the model file at ``path`` and validates its top-level contract.

    The file is imported under a fresh, unique module name each call (so
    loading it again re-runs it, e.g. after an environment variable
    changed). Raises :class:`ModelLoadError` (one line, naming the file)
    when the file is missing, is not a ``.py`` file, has a syntax error,
    raises on import, lacks a callable ``build_model`` / ``example_batch``,
    has a non-callable ``loss_fn`` / ``optimizer``, or a ``BATCH_SIZE`` that
    is not a positive int. It does not build the model; see
    :meth:`ModelSpec.check`.

    ``guard`` (Linux): the file is first imported, built (under fake
    tensors) and asked for a batch in a forked child
    (:func:`memflow.model_guard.first_in_child`), and a file that ends that
    process (``os._exit``, a crash) or hangs (``MEMFLOW_MODEL_TIMEOUT_S``)
    is a ModelLoadError. Processes whose parent already loaded the same file
    (the executor's ranks, the profiling processes) pass ``guard=False``.
    """
    shown = os.fspath(path)
    p = Path(shown)
    if not p.exists():
        raise ModelLoadError(f"{shown}: model file not found")
    if not p.is_file():
        raise ModelLoadError(f"{shown}: not a file (expected a model.py file)")
    if p.suffix != ".py":
        raise ModelLoadError(f"{shown}: not a .py file (a model file is a Python file)")
    # no cyclic collection while modules load (what they make lives on: a collection would walk torch's
    # objects for nothing, and the guard's child, forked meanwhile, inherits the pause for its imports)
    with paused_collection():
        if guard:
            # first: torch._dynamo, which the capture after every load needs and which building on the meta
            # device imports (seconds, cold); imported here, the child inherits it instead of importing it again
            _import_dynamo()
            freeze()
            # the command line: the child that ran the file's code carries on (None: no child forked)
            got = continue_in_child(lambda mark: _trial(p, shown, mark, keep=True)) if take_handover() else None
            if got is not None:
                spec, ended = got
                if ended is not None:
                    raise ModelLoadError(f"{shown}: the model file {ended}")
                freeze()
                return spec
            ended = first_in_child(lambda mark: _trial(p, shown, mark),
                                   spawn=[sys.executable, "-m", "memflow.model_file", str(p), shown],
                                   meanwhile=import_export_modules)
            freeze()  # and torch.export's modules, imported meanwhile
            if ended is not None:
                raise ModelLoadError(f"{shown}: the model file {ended}")
        return _load(p, shown)


def _trial(p: Path, shown: str, mark: Callable[[str, str], None], keep: bool = False) -> ModelSpec:
    """What the guard's child runs: the import, ``build_model()`` on the meta device (cheap at any size;
    the contract allows it) and one ``example_batch``. ``keep`` (the child carries on as the program):
    an error of the build or the batch is not the load's (the program meets it where it builds)."""
    mark("during import", "did not finish importing")
    spec = _load(p, shown)
    try:
        with torch.device("meta"):
            mark("in build_model()", "build_model() did not return")
            spec.build()
            mark(f"in example_batch({spec.batch_size})", f"example_batch({spec.batch_size}) did not return")
            spec.batch()
    except Exception:  # noqa: BLE001 - see above
        if not keep:
            raise
    return spec


def _import_dynamo() -> None:
    try:
        importlib.import_module("torch._dynamo")
    except Exception:  # noqa: BLE001 - only a head start; the capture meets any error itself
        pass


def import_export_modules() -> None:
    """The modules of ``torch.export`` its first export imports (a few tenths of a second, cold):
    imported while the guard's child runs, and inherited by the profiler's forked processes (which
    import them first where that child did not run: the command line's child carries on instead)."""
    for name in ("torch.export._trace", "torch._functorch.aot_autograd"):
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - only a head start
            pass


def _load(p: Path, shown: str) -> ModelSpec:
    name = _module_name(p)
    import_spec = importlib.util.spec_from_file_location(name, p)
    if import_spec is None or import_spec.loader is None:  # pragma: no cover
        raise ModelLoadError(f"{shown}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(import_spec)
    sys.modules[name] = module
    try:
        import_spec.loader.exec_module(module)
    except SyntaxError as exc:
        sys.modules.pop(name, None)
        if exc.filename and Path(exc.filename).resolve() == p.resolve():
            raise ModelLoadError(
                f"{shown}: syntax error at line {exc.lineno}: {exc.msg}"
            ) from exc
        raise ModelLoadError(
            f"{shown}: importing the model file raised SyntaxError in "
            f"{exc.filename} at line {exc.lineno}: {exc.msg}"
        ) from exc
    except (Exception, SystemExit) as exc:
        sys.modules.pop(name, None)
        raise ModelLoadError(
            f"{shown}: importing the model file raised {_first_line(exc)}"
        ) from exc

    for required in ("build_model", "example_batch"):
        if not hasattr(module, required):
            sig = "build_model()" if required == "build_model" else "example_batch(batch_size)"
            raise ModelLoadError(f"{shown}: the model file does not define {sig}")
        if not callable(getattr(module, required)):
            raise ModelLoadError(
                f"{shown}: {required} is {_type_name(getattr(module, required))}, "
                "expected a function"
            )
    for optional in ("loss_fn", "optimizer"):
        value = getattr(module, optional, None)
        if value is not None and not callable(value):
            raise ModelLoadError(
                f"{shown}: {optional} is {_type_name(value)}, expected a function"
            )

    batch_size = getattr(module, "BATCH_SIZE", DEFAULT_BATCH_SIZE)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ModelLoadError(
            f"{shown}: BATCH_SIZE must be a positive int, got {batch_size!r}"
        )

    env_vars = getattr(module, "ENV", ())
    if isinstance(env_vars, str) or not isinstance(env_vars, (list, tuple)) or \
            not all(isinstance(v, str) and v for v in env_vars):
        raise ModelLoadError(f"{shown}: ENV must be a list of environment variable names, got {env_vars!r}")

    knobs = _knobs(getattr(module, "KNOBS", {}), shown)
    knob_vars = [k if isinstance(k, str) else k["env"] for k in knobs.values()]

    return ModelSpec(
        path=p,
        name=p.stem,
        build_model=module.build_model,
        example_batch=module.example_batch,
        loss_fn=getattr(module, "loss_fn", None),
        optimizer_factory=getattr(module, "optimizer", None),
        batch_size=batch_size,
        env_vars=tuple(dict.fromkeys([*env_vars, *knob_vars])),
        knobs=knobs,
    )


def _knobs(knobs: Any, shown: str) -> dict[str, Any]:
    """A model file's KNOBS, checked: knob name -> env var name, or {"env": name, "min": int, "step": int}."""
    bad = f"{shown}: KNOBS must map knob names to an environment variable name or to {{'env': NAME, 'min': M, " \
          f"'step': S}}, got {knobs!r}"
    if not isinstance(knobs, Mapping):
        raise ModelLoadError(bad)
    for name, k in knobs.items():
        if not isinstance(name, str):
            raise ModelLoadError(bad)
        if isinstance(k, str) and k:
            continue
        if not (isinstance(k, Mapping) and isinstance(k.get("env"), str) and k["env"]
                and set(k) <= {"env", "min", "step"}
                and all(isinstance(k.get(x, 1), int) and not isinstance(k.get(x, 1), bool) and k.get(x, 1) >= 1
                        for x in ("min", "step"))):
            raise ModelLoadError(bad)
    return dict(knobs)


if __name__ == "__main__":  # the model guard's spawned trial: python -m memflow.model_file PATH SHOWN
    phases_to_stdout(lambda mark: _trial(Path(sys.argv[1]), sys.argv[2], mark))
    sys.stdout.flush()
    os._exit(0)
