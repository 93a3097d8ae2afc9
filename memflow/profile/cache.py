"""An on-disk cache of profiled task graphs, keyed by fingerprint and device.

Entries are JSON files written atomically (temp file + ``os.replace``). A
corrupt entry (or one under a different key) is recomputed with a warning,
never a crash; one written by another format version is recomputed silently.
"""
from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Callable

from ..fileio import atomic_write_text
from ..graph.record import TaskGraph

__all__ = ["ProfileCache", "FORMAT_VERSION"]

FORMAT_VERSION = 6  # 5: per-node transients under the CPU executor's swap; 2: per-node batch-input reads; 3: bf16 steps count their parameter casts;
# 4: a node's inputs die with their last use; 6: model state the step never reads is counted


def _default_dir() -> Path:
    return Path(os.environ.get("MEMFLOW_CACHE_DIR", Path.home() / ".cache" / "memflow")) / "profiles"


class ProfileCache:
    def __init__(self, directory: str | os.PathLike | None = None):
        self.dir = Path(directory) if directory else _default_dir()

    def _path(self, key: str) -> Path:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in key)
        return self.dir / f"{safe}.json"

    def get(self, key: str) -> TaskGraph | None:
        path = self._path(key)
        if not path.exists():
            return None
        try:
            blob = json.loads(path.read_text())
            if blob.get("version") != FORMAT_VERSION:
                return None  # written by another version of MemFlow: recomputed silently
            if blob.get("key") != key:
                raise ValueError("stale entry")
            return TaskGraph.from_dict(blob["graph"])
        except Exception as e:  # noqa: BLE001 - any damage means recompute
            warnings.warn(f"profile cache entry {path} is unreadable ({type(e).__name__}: {e}); recomputing",
                          stacklevel=2)
            return None

    def put(self, key: str, graph: TaskGraph) -> None:
        """Store ``graph`` under ``key``; not one whose measured times disagreed with their own
        repeats (``meta["steady_times"]`` False: a busy host's costs are not kept as the truth)."""
        if graph.meta.get("steady_times") is False:
            return
        atomic_write_text(self._path(key), json.dumps({"version": FORMAT_VERSION, "key": key,
                                                       "graph": graph.to_dict()}))

    def get_or_compute(self, key: str, compute: Callable[[], TaskGraph]) -> TaskGraph:
        g = self.get(key)
        if g is None:
            g = compute()
            self.put(key, g)
        return g
