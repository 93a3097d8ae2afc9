"""The swap action's saved-tensor hooks, in one process on the CPU.

A swapped node copies to the host what it saved for its backward: its saved
inputs too, never its parameters, once per tensor, a broadcast view as its
memory. Swapping every node changes no loss, also where a node
mutates a tensor in place (BatchNorm's batch counter) or frees one whose
memory a later tensor of the same shape takes.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from memflow.graph.actions import HostSwap, make_wrap
from memflow.graph.build import capture_program
from memflow.memory import LiveBytes
from memflow.model_file import flatten, load_model_file
from memflow.graph.training import unique_params
from tests.reference import plain_losses

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _tiny(monkeypatch):
    monkeypatch.setenv("MEMFLOW_EXAMPLE_SCALE", "tiny")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.mark.parametrize("model", ["resnet", "gpt2", "lstm"])
def test_swapping_every_node_changes_no_loss(model):
    path = str(ROOT / "examples" / f"{model}.py")
    spec = load_model_file(path)
    cap, prog, _, _ = capture_program(spec, 8, fake=False, seed=0)
    params = unique_params(cap.split)
    opt = spec.make_optimizer(params)
    swap = HostSwap(None, {t.untyped_storage().data_ptr() for t in params})
    wrap = make_wrap(["swap"] * prog.n, swap)
    got = []
    for t in range(3):
        torch.manual_seed(1000 + t)
        flat, _ = flatten(spec.batch(8))
        got.append(float(prog.run_step(flat, wrap=wrap)))
        opt.step()
        opt.zero_grad(set_to_none=True)
    assert got == plain_losses(path, 8, 3)


def test_swap_copies_each_saved_tensor_once_and_no_parameter():
    w = torch.nn.Parameter(torch.randn(64, 64))
    x = torch.randn(32, 64, requires_grad=True)

    def node(x, w):
        h = x @ w  # saves x (copied) and w (a parameter: stays)
        return (h.sin() + h.cos()).sum()  # sin and cos both save h: one copy

    live = LiveBytes()
    swap = HostSwap(live, {w.untyped_storage().data_ptr()})
    fn = make_wrap(["swap"], swap)(0, node)
    with live:
        out = fn(x, w)
        copied = live.host_live
        out.backward()
    h = x.detach() @ w.detach()
    assert copied == (h.numel() + x.numel()) * h.element_size()
    ref_x = x.detach().clone().requires_grad_(True)
    ref_w = w.detach().clone().requires_grad_(True)
    node(ref_x, ref_w).backward()  # the same computation without the hooks
    assert torch.equal(x.grad, ref_x.grad) and torch.equal(w.grad, ref_w.grad)


def test_a_broadcast_view_is_copied_as_its_memory():
    bias = torch.randn(1, 1, 64, 64)
    x = torch.randn(8, 4, 64, 64, requires_grad=True)

    def node(x, bias):
        b = (bias * 2).expand(8, 4, 64, 64)  # 16 KiB of memory seen as 512 KiB
        return (x * b).sum()  # mul saves b (the broadcast view) for x's gradient, and x for none

    live = LiveBytes()
    swap = HostSwap(live, set())
    with live:
        out = make_wrap(["swap"], swap)(0, node)(x, bias)
        copied = live.host_live
        out.backward()
    assert copied == bias.numel() * bias.element_size()
    ref = x.detach().clone().requires_grad_(True)
    node(ref, bias).backward()
    assert torch.equal(x.grad, ref.grad)


def test_a_device_run_counts_host_bytes_by_where_the_storage_is():
    # on CUDA the executor's accounting has a device type: a device tensor made inside ``host()`` (an
    # optimizer's state left on the GPU) is device memory, a CPU tensor anywhere is host memory; the
    # meta device stands in for the GPU here
    live = LiveBytes(device_type="meta")
    with live:
        a = torch.empty(1000, device="meta")
        with live.host():
            b = torch.empty(1000, device="meta")
            c = torch.empty(500)
        d = torch.empty(250)
        assert (live.live, live.host_live) == (8000, 3000)
        del a, b, c, d
    # a CPU run has no device type: the block decides
    cpu = LiveBytes()
    with cpu:
        e = torch.empty(1000)
        with cpu.host():
            f = torch.empty(500)
        assert (cpu.live, cpu.host_live) == (4000, 2000)
        del e, f


def test_a_swapped_tensor_is_found_again_only_where_it_lives_on_unchanged():
    """The GPU swap reads a saved tensor in place where something else still holds it when its backward
    comes (memflow.graph.actions.device_original): the rebuilt tensor shares the original's storage and
    view; once the tensor it was saved as is written in place, or its storage has died, it is not found
    (the host copy is what the backward must read then)."""
    import gc
    import weakref

    from memflow.graph.actions import device_original, original_of

    base = torch.arange(24, dtype=torch.float32)
    t = base[4:16].view(3, 4)  # (a view: what is copied is t itself; its anchor the base)
    keep = original_of(t, t, weakref.ref(base))
    got = device_original(keep)
    assert got is not None and got.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
    assert (got.shape, got.stride(), got.storage_offset()) == (t.shape, t.stride(), t.storage_offset())
    assert torch.equal(got, t)
    base.add_(1)  # written in place after it was saved: the original no longer holds the saved values
    assert device_original(keep) is None
    other = torch.ones(8)
    keep = original_of(other, other, weakref.ref(other))
    del other, got, t, base
    gc.collect()
    assert device_original(keep) is None  # (its storage died)


def test_a_gpu_swap_copies_a_storage_whole_once_and_no_more_than_it_in_views():
    """The GPU swap's choice per saved tensor (memflow.graph.actions.storage_piece): a tensor covering its
    storage makes a whole copy that the storage's later views are rebuilt from (a scan's decay factors,
    saved whole by ``exp`` and step by step by ``mul``); views saved first are copied on their own until
    they and the next one would add up to more than the storage, which is then copied whole; a write in
    place, another dtype or another storage is another piece. Every rebuilt view reads what it viewed."""
    from memflow.graph.actions import SwapRecord, note_piece, storage_piece, view_of, whole_storage

    def swap(pieces, t):
        """What the CUDA path keeps for t: (a record of what was copied and its view, the view to read)."""
        key = t.untyped_storage().data_ptr()
        rec, whole = storage_piece(pieces, t, key)
        if rec is not None:
            return rec, view_of(t), "shared"
        src, view = whole_storage(t) if whole else (t, None)
        rec = SwapRecord([src.clone(), view])
        note_piece(pieces, t, key, rec, whole)
        return rec, view, "whole" if whole else "own"

    def read(rec, view):
        return rec[0] if view is None else rec[0].as_strided(*view)

    a = torch.randn(4, 16, 8)
    pieces, held = {}, []
    got = [swap(pieces, a)] + [swap(pieces, a[:, i]) for i in range(16)]
    held += [g[0] for g in got]
    assert [g[2] for g in got] == ["whole"] + ["shared"] * 16
    assert all(torch.equal(read(r, v), a if i == 0 else a[:, i - 1]) for i, (r, v, _) in enumerate(got))
    # slices first: each copied on its own while they add up to no more than the storage; past it, whole
    b = torch.randn(6, 8)
    pieces = {}
    kinds = [swap(pieces, b[:, i:i + 3]) for i in (0, 3)]  # 2 x 18 of 48 elements
    held += [k[0] for k in kinds]
    third = swap(pieces, b[:, 1:5])  # 24 more: 60 > 48
    held.append(third[0])
    assert [k[2] for k in kinds] + [third[2]] == ["own", "own", "whole"]
    assert swap(pieces, b[2])[2] == "shared" and torch.equal(read(third[0], third[1]), b[:, 1:5])
    # written in place since: another piece; another dtype of the same storage: another piece
    b.add_(1)
    assert swap(pieces, b[:, 0:2])[2] == "own"
    assert swap(pieces, b.view(torch.int32)[:, 0:2])[2] == "own"
