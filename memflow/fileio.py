"""Small file helpers: an atomic text write, and reading a YAML file as one-line errors."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import yaml

from .errors import ConfigError

__all__ = ["atomic_write_text", "atomic_write_bytes", "read_yaml", "read_yaml_mapping"]


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename: readers never see half a file,
    and a failed write leaves what was there."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """:func:`atomic_write_bytes` of ``text`` in UTF-8."""
    atomic_write_bytes(path, text.encode("utf-8"))


def read_yaml(path: str | os.PathLike, what: str = "file") -> Any:
    """The YAML document in ``path``; a missing, unreadable, binary or malformed file is a one-line
    ConfigError (``what`` names it: "plan file", "cluster file", ...)."""
    path = Path(path)
    if path.suffix == ".py" and path.is_file() and "plan" in what:  # a model file where its plan was meant
        raise ConfigError(f"{path}: a Python file, not a {what}; plan the model first: "
                          f"memflow plan {path} -o plan.yaml")
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{path}: {what} not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a {what}") from None
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text file (a {what} is YAML)") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}: not valid YAML{where}") from None
    except RecursionError:
        raise ConfigError(f"{path}: not valid YAML (nested too deeply)") from None


def read_yaml_mapping(path: str | os.PathLike, what: str = "file") -> dict[str, Any]:
    """:func:`read_yaml` of a file that must hold a mapping at the top level."""
    data = read_yaml(path, what)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    return data
