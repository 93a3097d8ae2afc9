"""The package's layers read downwards: records, then the stages, then the application.

Checked on the source (every module of memflow/, simulator/ and search/ as installed:
memflow.simulator, memflow.search): which project modules each imports, that none is
imported inside a function (but the CLI's one deferred import, which keeps ``--help``
instant, and the lazy public names of ``memflow/__init__.py``), that no private name
crosses a module boundary, and that the records, the simulator and the search never
import torch.
"""
from __future__ import annotations

import ast
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"memflow": ROOT / "memflow", "memflow.simulator": ROOT / "simulator", "memflow.search": ROOT / "search"}

#: the bottom layer: records and the small utilities they use (no torch)
RECORDS = {"errors", "kinds", "units", "typed", "fileio", "forking", "procs", "gcfreeze", "devices", "linkprobe", "cluster",
           "buckets", "strategy", "schedule", "graph.record", "records", "request", "planfile", "config", "modelenv",
           "progress"}
#: the top layer: what puts the stages together for a user
APPLICATION = {"planner", "runner", "fit", "summary", "report", "plot", "cli", "__init__", "__main__"}


def _modules() -> dict[str, Path]:
    out = {}
    for pkg, root in PACKAGES.items():
        for f in sorted(root.rglob("*.py")):
            parts = f.relative_to(root).with_suffix("").parts
            name = ".".join([pkg, *[p for p in parts if p != "__init__"]])
            out[name] = f
    return out


MODULES = _modules()


def _layer(name: str) -> int:
    rel = name.removeprefix("memflow").lstrip(".") or "__init__"
    if rel in RECORDS:
        return 0
    if rel.split(".")[0] in APPLICATION or rel in APPLICATION:
        return 2
    return 1


def _resolve(module: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    parts = module.split(".")
    if not is_pkg:
        parts = parts[:-1]
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def _imports(name: str, path: Path):
    """(target module, imported names, inside a function?, line) for every import of a project module."""
    tree = ast.parse(path.read_text())
    is_pkg = path.name == "__init__.py"
    out = []

    def visit(node, in_func):
        for child in ast.iter_child_nodes(node):
            f = in_func or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.ImportFrom):
                tgt = _resolve(name, is_pkg, child)
                if tgt.startswith("memflow"):
                    out.append((tgt, [a.name for a in child.names], in_func, child.lineno))
            elif isinstance(child, ast.Import):
                for a in child.names:
                    if a.name.startswith("memflow"):
                        out.append((a.name, [], in_func, child.lineno))
            visit(child, f)

    visit(tree, False)
    return out


def _module_of(target: str, names: list[str]) -> list[str]:
    """The project modules an import statement loads (``from pkg import sub`` loads pkg.sub)."""
    subs = [f"{target}.{n}" for n in names if f"{target}.{n}" in MODULES]
    return subs if names and len(subs) == len(names) else [target, *subs]


def test_no_function_level_imports_of_the_project():
    bad = [f"{name}:{line} imports {tgt}" for name, path in MODULES.items()
           for tgt, _, in_func, line in _imports(name, path) if in_func]
    assert not bad, "\n".join(bad)


def test_no_private_name_crosses_a_module():
    files = dict(MODULES)
    files.update({f"tests.{f.stem}": f for f in (ROOT / "tests").glob("test_*.py")})
    bad = []
    for name, path in files.items():
        for tgt, names, _, line in _imports(name, path):
            for n in names:
                if n.startswith("_") and not n.startswith("__") and f"{tgt}.{n}" not in MODULES:
                    bad.append(f"{name}:{line} imports {n} from {tgt}")
        tree = ast.parse(path.read_text())
        aliases = {a.asname or a.name: a.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                   for a in node.names if a.name.startswith("memflow")}
        aliases.update({a.asname or a.name: f"{_resolve(name, path.name == '__init__.py', node)}.{a.name}"
                        for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                        for a in node.names if f"{_resolve(name, path.name == '__init__.py', node)}.{a.name}" in MODULES})
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                    and node.attr.startswith("_") and not node.attr.startswith("__")):
                bad.append(f"{name}:{node.lineno} uses {aliases[node.value.id]}.{node.attr}")
    assert not bad, "\n".join(bad)


def test_layers_read_downwards():
    bad = []
    for name, path in MODULES.items():
        for tgt, names, _, line in _imports(name, path):
            for mod in _module_of(tgt, names):
                if mod in MODULES and _layer(mod) > _layer(name):
                    bad.append(f"{name} (layer {_layer(name)}):{line} imports {mod} (layer {_layer(mod)})")
    assert not bad, "\n".join(bad)


def test_simulator_and_search_use_only_records():
    """The simulator and the search see the task graph and the strategy, never how they are made or run."""
    bad = []
    for name, path in MODULES.items():
        if not name.startswith(("memflow.simulator", "memflow.search")):
            continue
        for tgt, names, _, line in _imports(name, path):
            for mod in _module_of(tgt, names):
                ok = mod.startswith(("memflow.simulator", "memflow.search")) or _layer(mod) == 0
                if mod in MODULES and not ok:
                    bad.append(f"{name}:{line} imports {mod}")
    assert not bad, "\n".join(bad)


def test_records_simulator_and_search_do_not_import_torch():
    mods = sorted(m for m in MODULES if _layer(m) == 0 or m.startswith(("memflow.simulator", "memflow.search")))
    code = "import sys\n" + "".join(f"import {m}\n" for m in mods) + "print('torch' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "False"


@pytest.mark.parametrize("argv", [["--help"], ["plan", "--help"], ["run", "--help"], ["profile", "--help"]])
def test_help_is_fast_and_plain(argv):
    """``--help`` is answered before torch is imported: well under a second, plain text."""
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "memflow", *argv], capture_output=True, text=True, timeout=60)
        times.append(time.perf_counter() - t0)
        assert r.returncode == 0, r.stderr
    assert min(times) < 1.0, times
    assert "``" not in r.stdout and "examples:" in r.stdout


@pytest.mark.parametrize("cmd", ["plan", "run", "simulate", "profile", "report"])
def test_every_option_has_help_text(cmd):
    from memflow.cli.args import build_parser

    for action in build_parser(cmd)._actions:
        assert action.help, f"memflow {cmd} {action.option_strings or action.dest}: no help text"
