"""Typed records from plain data (YAML, JSON): every value checked against its field's type.

:func:`from_data` builds a dataclass from a mapping, recursing into nested
dataclasses, lists, dicts, optionals and ``Literal`` choices. Anything that does
not match is a one-line :class:`~memflow.errors.ConfigError` naming the field's
path, what it expects and what it got: a hand-edited or damaged file is an
error a person can act on, never a traceback later.
"""
from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any, Literal, Union, get_args, get_origin

from .errors import ConfigError

__all__ = ["from_data", "to_data", "check_value"]

_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    h = _HINTS.get(cls)
    if h is None:
        h = _HINTS[cls] = typing.get_type_hints(cls)
    return h


def _describe(tp: Any) -> str:
    origin = get_origin(tp)
    if tp is Any:
        return "anything"
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(tp))
    if origin in (Union, types.UnionType):
        return " or ".join(_describe(a) for a in get_args(tp))
    if origin in (list, tuple):
        return f"a list of {_describe(get_args(tp)[0])}" if get_args(tp) else "a list"
    if origin is dict:
        return "a mapping"
    if tp is type(None):
        return "null"
    if dataclasses.is_dataclass(tp):
        return "a mapping"
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(tp, tp.__name__)


def check_value(tp: Any, v: Any, where: str) -> Any:
    """``v`` as type ``tp`` (a dataclass from a mapping, a float from an int), or ConfigError."""
    origin = get_origin(tp)
    if tp is Any:
        return v
    if origin is Literal:
        if v in get_args(tp) and type(v) is type(next(a for a in get_args(tp) if a == v)):
            return v
    elif origin in (Union, types.UnionType):
        for a in get_args(tp):
            try:
                return check_value(a, v, where)
            except ConfigError:
                continue
    elif tp is type(None):
        if v is None:
            return None
    elif origin in (list, tuple):
        if isinstance(v, (list, tuple)):
            (item,) = get_args(tp)[:1] or (Any,)
            return [check_value(item, x, f"{where}[{i}]") for i, x in enumerate(v)]
    elif origin is dict:
        if isinstance(v, dict):
            kt, vt = get_args(tp) or (Any, Any)
            return {check_value(kt, k, where): check_value(vt, x, f"{where}.{k}") for k, x in v.items()}
    elif dataclasses.is_dataclass(tp):
        if isinstance(v, tp):
            return v
        if isinstance(v, dict):
            return from_data(tp, v, where)
    elif tp is bool:
        if isinstance(v, bool):
            return v
    elif tp is int:
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    elif tp is float:
        if isinstance(v, (int, float)) and not isinstance(v, bool) and (math.isfinite(v) or math.isinf(v)):
            return float(v)
    elif tp is str:
        if isinstance(v, str):
            return v
    elif isinstance(v, tp):
        return v
    raise ConfigError(f"{where} must be {_describe(tp)}, got {_show(v)}")


def _show(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 60 else s[:57] + "..."


def from_data(cls: type, data: Any, where: str) -> Any:
    """A ``cls`` (a dataclass) from the mapping ``data``: unknown keys, missing required fields and
    values of the wrong type are ConfigErrors that name the field (``where.field``); the dataclass's
    own ``__post_init__`` checks run last (their ValueErrors become ConfigErrors too). A dataclass's
    ``upgrade_data`` (plain data -> plain data: an older or shown form read into its fields; the
    inverse of ``plain_data``) runs first."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where} must be a mapping, got {_show(data)}")
    up = getattr(cls, "upgrade_data", None)
    if up is not None:
        try:
            data = up(data)
        except ConfigError:
            raise
        except ValueError as e:
            raise ConfigError(f"{where}: {e}") from None
    fields = [f for f in dataclasses.fields(cls) if f.init]
    names = {f.name for f in fields}
    unknown = sorted(str(k) for k in data if k not in names)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; valid: {sorted(names)}")
    missing = sorted(f.name for f in fields if f.name not in data and f.default is dataclasses.MISSING
                     and f.default_factory is dataclasses.MISSING)
    if missing:
        raise ConfigError(f"{where}: missing {missing}")
    hints = _hints(cls)
    kw = {k: check_value(hints[k], v, f"{where}.{k}") for k, v in data.items()}
    try:
        return cls(**kw)
    except ConfigError:
        raise
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{where}: {e}") from None


def to_data(x: Any) -> Any:
    """Plain containers and scalars (dataclasses, tuples, numpy scalars, str subclasses → builtins), for
    safe YAML and JSON. A dataclass with a ``plain_data`` method gives its own (a strategy's ``offload``)."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        hook = getattr(type(x), "plain_data", None)
        if hook is not None:
            return to_data(hook(x))
        return {f.name: to_data(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, dict):
        return {str(k): to_data(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [to_data(v) for v in x]
    if isinstance(x, bool) or x is None:
        return x
    if isinstance(x, str):
        return str(x)
    if isinstance(x, int):
        return int(x)
    if isinstance(x, float):
        return float(x)
    if hasattr(x, "item"):  # numpy scalar
        return to_data(x.item())
    return str(x)
