"""``memflow`` command line: one module per subcommand, each with ``main(argv) -> int``.

Every :class:`memflow.errors.MemflowError` becomes one line on stderr and exit
code 2; bad flags too (never a usage dump or a traceback).
"""
from __future__ import annotations

import argparse
import atexit
import gc
import importlib
import os
import sys

from ..errors import MemflowError

__all__ = ["main", "entry", "ArgParser", "COMMANDS"]

COMMANDS = {
    "plan": "find the fastest strategy that fits the devices' memory",
    "run": "run a plan (or an experiment YAML) with torch.distributed",
    "simulate": "simulate a plan: step time, memory curves, Chrome trace",
    "profile": "profile a model file's training step as a task graph",
    "report": "write a self-contained HTML report of a plan",
}


class ArgParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line and a MemflowError (exit 2)."""

    def error(self, message: str):  # noqa: D401
        raise MemflowError(f"{self.prog}: {message}")


def _dispatch(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: memflow COMMAND [options]\n\ncommands:")
        for name, text in COMMANDS.items():
            print(f"  {name:<9} {text}")
        print("\n'memflow COMMAND --help' for a command's options")
        return 0
    if argv[0] == "--version":
        from .. import __version__

        print(f"memflow {__version__}")
        return 0
    cmd = argv[0]
    if cmd not in COMMANDS:
        raise MemflowError(f"unknown command {cmd!r}; valid: {', '.join(COMMANDS)}")
    mod = importlib.import_module(f"memflow.cli.{cmd}_cmd")
    return int(mod.main(argv[1:]) or 0)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 ok, 2 user error, 1 internal error)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        return _dispatch(argv)
    except MemflowError as e:
        print(f"memflow: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("memflow: interrupted", file=sys.stderr)
        return 130
    except SystemExit as e:  # --help inside a subcommand
        return int(e.code or 0) if isinstance(e.code, int) else 0
    except Exception as e:  # noqa: BLE001 - a bug of ours: one line, the traceback on request
        if os.environ.get("MEMFLOW_DEBUG"):
            raise
        first = (str(e).strip().splitlines() or [""])[0][:300]
        print(f"memflow: internal error: {type(e).__name__}: {first} (set MEMFLOW_DEBUG=1 for the traceback)",
              file=sys.stderr)
        return 1


def entry() -> None:
    from ..gcfreeze import long_lived

    with long_lived():  # what a command keeps to its end is not walked by every collection
        code = main()
    # the process ends here: the collector need not walk every object once more on the way out
    # (1-2 s after a cold plan), nor need the interpreter tear down every module of torch and the
    # model's libraries one by one (~0.2 s); the exit handlers still run and the streams are flushed
    gc.freeze()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said on it
            pass
    os._exit(code)
