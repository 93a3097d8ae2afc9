"""The optimizer state and optimizer phase, handed from the size-1 process to the planner's.

With two processes, :func:`memflow.profile.build.capture_graphs` forks one for
the fixed-size (size-1) export. That process makes the optimizer state
(:meth:`~memflow.profile.build.SharedCapture.make_state`), records the optimizer
phase of a steady-state step without a program (:func:`loose_opt_phase`; the
phase depends on neither the batch nor the program, only on the parameters
and their order) and sends both before its export (:func:`send`); the planning
process goes straight to the symbolic export, then rebuilds the state from its
description and adopts the phase for its program (:func:`take`). So neither
process steps an optimizer for a traced size. Fake tensors hold no values: a
state is fully described by its tensors' layouts. Where the phase cannot be
adopted (the program steps other parameters, or nothing came) the planning
process makes the state itself and its first size steps in full.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import multiprocessing as mp

import torch

from ..graph.training import autocast, casts, dense_grad, grad_meta, opt_params, unique_params
from .trace import node_state, opt_phase_alone

__all__ = ["pipe", "grad_layouts", "send", "take", "loose_opt_phase", "adopt", "describe_state", "rebuild_state"]

LOOSE_PHASE = 2  # the phase a loose optimizer phase is recorded at (moved to 2n by adopt)


def pipe():
    """A one-way pipe that survives a fork (None where there is no fork)."""
    try:
        return mp.get_context("fork").Pipe(duplex=False)
    except (ValueError, OSError):
        return None


def _receive(conn, timeout_s: float = 120.0) -> Any:
    """What the other end sent, or None if it sent nothing (it failed, or exited first)."""
    try:
        return conn.recv() if conn.poll(timeout_s) else None
    except (EOFError, OSError):
        return None
    finally:
        conn.close()


def grad_layouts(shared: Any) -> dict | None:
    """What ``make_state`` gives every trainable parameter as its gradient (its own layout:
    :func:`~memflow.graph.training.grad_meta`), without stepping; None under autocast."""
    if casts(shared.dtype):
        return None
    with shared.mode:
        return {p: grad_meta(dense_grad(p)) for p in unique_params(shared.model) if p.requires_grad}


def send(shared: Any, state: Any, conn) -> tuple | None:
    """Send ``(state description, loose optimizer phase)`` on ``conn`` and close it; returns
    the loose phase (for the sender's own program too)."""
    loose = loose_opt_phase(shared, state)
    try:
        conn.send((describe_state(shared, state), loose))
    finally:
        conn.close()
    return loose


def take(shared: Any, conn, layouts: dict, program: Any) -> dict | None:
    """The optimizer state the size-1 process made, rebuilt here from its description, with
    the optimizer phase it recorded adopted for ``program``. Without both (that process
    failed, or ``program`` steps other parameters) the state is made here and the first
    size steps in full."""
    got = _receive(conn)
    desc, loose = got if isinstance(got, tuple) and len(got) == 2 else (None, None)
    if desc is None or loose is None or program is None or not adopt(shared, loose, program):
        shared.opt_phase = None
        return shared.make_state()
    shared.made_grads = layouts
    return rebuild_state(shared, desc)


def loose_opt_phase(shared: Any, state: Any) -> tuple | None:
    """``(order, OptPhase)``: the optimizer phase of a steady-state step recorded without a
    program (:func:`memflow.profile.trace.opt_phase_alone`): the optimizer over every model
    parameter, in the model's order, on gradients of the layouts ``make_state`` assumed.
    ``order`` (what was stepped) holds positions in the model's parameters, ``reads``
    ``("param", position)``. None without a state made that way, or if the step fails."""
    if state is None or shared.made_grads is None:
        return None
    params = unique_params(shared.model)
    pos = {id(p): i for i, p in enumerate(params)}
    try:
        with shared.mode:
            opt = shared.spec.make_optimizer(params)
            for prm in params:
                if prm in state:
                    opt.state[prm] = state[prm]
            tracked = list(params) + list(shared.model.buffers())
            tracked += [v for st in opt.state.values() for v in st.values() if isinstance(v, torch.Tensor)]
            with autocast(shared.dtype):
                rec = opt_phase_alone(params, opt, shared.made_grads, phase=LOOSE_PHASE,
                                      key_of={k: ("param", i) for k, i in pos.items()}, state=tracked)
    except Exception:  # noqa: BLE001 - the first size traces the optimizer step in full instead
        return None
    return None if rec is None else (tuple(range(len(params))), rec)


def adopt(shared: Any, loose: tuple, program: Any) -> bool:
    """Take ``loose`` (:func:`loose_opt_phase`) as ``program``'s optimizer phase, if the
    program's optimizer steps the same parameters (the optimizer's buffers come in their
    order): its reads are named as the program names them and its phases moved to ``2n``."""
    order, rec = loose
    model_params = unique_params(shared.model)
    pos = {id(p): i for i, p in enumerate(model_params)}
    if tuple(pos.get(id(p), -1) for p in opt_params(shared.model, program.split)) != order:
        return False
    names_by_id = node_state(program, None)[2]
    names = [names_by_id.get(id(model_params[i])) for _, i in rec.reads]
    if not all(names):
        return False
    p0, p = LOOSE_PHASE, 2 * program.n

    def move(v: int) -> int:
        return v - p0 + p if v >= p0 else v

    bufs = tuple((nb, move(free), frozenset(move(u) for u in uses), kind) for nb, free, uses, kind in rec.buffers)
    shared.opt_phase = (program, replace(rec, reads=frozenset(names), buffers=bufs))
    return True


def describe_state(shared: Any, state: Any) -> dict | None:
    """``state`` (fake tensors: no values) as plain data: per model-parameter position, each
    entry's tensor layout or value. None if a tensor is not the whole of a storage of its own."""
    if state is None:
        return None
    pos = {id(p): i for i, p in enumerate(unique_params(shared.model))}
    out, storages = {}, set()
    for prm, st in state.items():
        if id(prm) not in pos:
            return None
        ent = {}
        for k, v in st.items():
            if isinstance(v, torch.Tensor):
                sto = v.untyped_storage()
                if v.storage_offset() or sto.nbytes() != v.numel() * v.element_size() or id(sto) in storages:
                    return None
                storages.add(id(sto))
                ent[k] = ("tensor", tuple(v.shape), tuple(v.stride()), v.dtype, str(v.device))
            else:
                ent[k] = ("value", v)
        out[pos[id(prm)]] = ent
    return out


def rebuild_state(shared: Any, desc: dict) -> dict:
    """The state :func:`describe_state` described, as fake tensors of the same layouts."""
    params = unique_params(shared.model)
    state: dict = {}
    with shared.mode:
        for i, ent in desc.items():
            state[params[i]] = {
                k: (torch.empty_strided(v[1], v[2], dtype=v[3], device=v[4]) if v[0] == "tensor" else v[1])
                for k, v in ent.items()}
    return state
