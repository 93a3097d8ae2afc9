"""``memflow`` command line: parsers in :mod:`memflow.cli.args`, one module per subcommand.

The arguments are parsed before anything heavy is imported; then the
subcommand's module (``memflow.cli.<command>_cmd``, which imports torch and
the planner) runs ``main(args) -> int``. Every
:class:`memflow.errors.MemflowError` becomes one line on stderr and exit code
2 (3: nothing fits); bad flags too (never a usage dump or a traceback).
"""
from __future__ import annotations

import atexit
import gc
import importlib
import os
import sys

from .. import __version__
from ..errors import MemflowError
from ..gcfreeze import freeze, long_lived, paused_collection
from ..model_guard import allow_handover
from ..settings import check as check_settings
from .args import COMMANDS, build_parser, top_help

__all__ = ["main", "entry"]


def _dispatch(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(top_help())
        return 0
    if argv[0] == "--version":
        print(f"memflow {__version__}")
        return 0
    cmd = argv[0]
    if cmd not in COMMANDS:
        raise MemflowError(f"unknown command {cmd!r}; valid: {', '.join(COMMANDS)}")
    args = build_parser(cmd).parse_args(argv[1:])
    check_settings()  # (MEMFLOW_* settings: a bad one in one line before any work)
    # the one deferred import of the package's own code: a command's module imports torch and the
    # planner, which --help and a mistyped flag must not wait for (tests/test_layers.py)
    # (torch's hundreds of thousands of objects: no collection walks them as they load, and once
    # loaded they join the objects the collector skips; ~0.3 s)
    with paused_collection():
        mod = importlib.import_module(f"memflow.cli.{cmd}_cmd")
    freeze()
    return int(mod.main(args) or 0)


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
    except BrokenPipeError:  # whoever read the output went away (``memflow plan --json | head``)
        _stdout_to_devnull()
        return 141  # as a shell reports a command ended by SIGPIPE, and quietly, as such a command ends
    except SystemExit as e:  # --help inside a subcommand
        return int(e.code or 0) if isinstance(e.code, int) else 0
    except Exception as e:  # noqa: BLE001 - a bug of ours: one line, the traceback on request
        if os.environ.get("MEMFLOW_DEBUG"):
            raise
        first = (str(e).strip().splitlines() or [""])[0][:300]
        print(f"memflow: internal error: {type(e).__name__}: {first} (set MEMFLOW_DEBUG=1 for the traceback)",
              file=sys.stderr)
        return 1


def _stdout_to_devnull() -> None:
    """Nothing more can be written to stdout: what is still buffered goes nowhere, not into an error
    at exit."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
        os.close(fd)
    except (OSError, ValueError, AttributeError):  # a replaced sys.stdout (tests): nothing to redirect
        pass


def entry() -> None:
    allow_handover()  # a command and nothing else: the model file's trial child may carry it on
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
            if stream is sys.stdout and code == 0:
                code = 141  # what was still buffered did not reach the reader (see main)
    os._exit(code)
