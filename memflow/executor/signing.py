"""Checkpoint digests: only checkpoints MemFlow wrote (as this user) are ever loaded.

A checkpoint is code, like a pickle: ``torch.distributed.checkpoint`` unpickles
its metadata, so a crafted one runs whatever it likes when loaded. Every
checkpoint MemFlow writes therefore carries ``memflow.sig``: the SHA-256 of
each of its files and an HMAC-SHA256 of those (and of the checkpoint's own
name, so a signed checkpoint cannot pose as another step) under a key of this
user's (``checkpoint.key`` in the cache directory, mode 0600, made on first
use). :func:`verify` checks all of it before anything of the checkpoint is
read by torch; a checkpoint without a digest, or whose digest does not match,
is refused with one line. Several machines resuming one checkpoint need the
same key (a shared ``MEMFLOW_CACHE_DIR``, or the key file copied).
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path

from ..devices import cache_dir
from ..errors import ConfigError, ExecutionError
from ..fileio import atomic_write_text

__all__ = ["SIGNATURE", "key", "sign", "verify"]

SIGNATURE = "memflow.sig"
_FORMAT = 1


def _key_path() -> Path:
    return cache_dir() / "checkpoint.key"


def key(create: bool = True) -> bytes:
    """This user's checkpoint key (made, 32 random bytes, mode 0600, where ``create`` and there is none).
    A key file that others may read or write is refused."""
    path = _key_path()
    if create and not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # made meanwhile by another process
            pass
        else:
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_hex(32))
    try:
        st = path.stat()
        raw = path.read_text().strip()
    except OSError as e:
        raise ConfigError(f"cannot read the checkpoint key {path}: {e.strerror or e}") from None
    if st.st_mode & 0o077 or st.st_uid != os.getuid():
        raise ConfigError(f"the checkpoint key {path} must be this user's and private (chmod 600 {path})")
    try:
        return bytes.fromhex(raw)
    except ValueError:
        raise ConfigError(f"the checkpoint key {path} is damaged (remove it: checkpoints signed with it are then "
                          "refused)") from None


def _digests(directory: Path) -> dict[str, str]:
    out = {}
    for f in sorted(directory.iterdir()):
        if f.name == SIGNATURE or f.name.startswith(f".{SIGNATURE}."):
            continue
        h = hashlib.sha256()
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        out[f.name] = h.hexdigest()
    return out


def _mac(k: bytes, name: str, files: dict[str, str]) -> str:
    return hmac.new(k, json.dumps([name, files], sort_keys=True).encode(), hashlib.sha256).hexdigest()


def sign(directory: str | os.PathLike, k: bytes) -> None:
    """Write ``memflow.sig`` into the (complete) checkpoint ``directory``."""
    d = Path(directory)
    files = _digests(d)
    atomic_write_text(d / SIGNATURE, json.dumps({"format": _FORMAT, "files": files, "hmac": _mac(k, d.name, files)}))


def verify(directory: str | os.PathLike) -> None:
    """Raise ExecutionError (one line, naming the checkpoint) unless ``directory`` carries a digest of
    this user's key that matches every file in it."""
    d = Path(directory)
    refuse = "refusing to load it (a checkpoint is code, like a pickle)"
    try:
        sig = json.loads((d / SIGNATURE).read_text())
        files, mac = dict(sig["files"]), str(sig["hmac"])
    except FileNotFoundError:
        raise ExecutionError(f"checkpoint {d} has no MemFlow digest ({SIGNATURE}); {refuse}") from None
    except (OSError, ValueError, KeyError, TypeError):
        raise ExecutionError(f"checkpoint {d}: its digest {SIGNATURE} is unreadable; {refuse}") from None
    if not _key_path().exists():
        raise ExecutionError(f"checkpoint {d}: there is no checkpoint key here ({_key_path()}) to check its digest "
                             f"with; {refuse}")
    if not hmac.compare_digest(_mac(key(create=False), d.name, files), mac):
        raise ExecutionError(f"checkpoint {d}: its digest was not made with this user's key; {refuse}")
    try:
        found = _digests(d)
    except OSError as e:
        raise ExecutionError(f"checkpoint {d}: cannot read {e.filename}: {e.strerror or e}") from None
    for name in sorted(set(files) | set(found)):
        if files.get(name) != found.get(name):
            what = "is missing" if name not in found else "is not in its digest" if name not in files else "was changed"
            raise ExecutionError(f"checkpoint {d}: {name} {what} since MemFlow wrote it; {refuse}")
