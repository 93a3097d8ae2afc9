"""Where a command writes: checked before any work, never onto what is not a regular file."""
from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import ConfigError

__all__ = ["checked_output", "free_name"]


def checked_output(path: str | os.PathLike, flag: str) -> Path:
    """``path`` if a command may write a file there: it is not a link, a directory, a device or any
    other non-regular file, and its directory exists and is writable. Checked before the work, so
    a long plan never ends in a write that fails."""
    p = Path(path)
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise ConfigError(f"{flag} {p}: {e.strerror or e}") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        kind = ("a symbolic link" if stat.S_ISLNK(st.st_mode) else "a directory" if stat.S_ISDIR(st.st_mode)
                else "a device or special file")
        raise ConfigError(f"{flag} {p}: is {kind}, not a regular file; give a file path")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise ConfigError(f"{flag} {p}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f"{flag} {p}: directory {parent} is not writable")
    return p


def free_name(path: Path) -> Path:
    """``path``, or where it exists the first of ``stem.1.yaml``, ``stem.2.yaml``, ... that does not."""
    if not os.path.lexists(path):
        return path
    name, dot, ext = path.name.partition(".")
    for i in range(1, 10_000):
        cand = path.with_name(f"{name}.{i}{dot}{ext}" if dot else f"{name}.{i}")
        if not os.path.lexists(cand):
            return cand
    raise ConfigError(f"no free file name next to {path}; pass -o")
