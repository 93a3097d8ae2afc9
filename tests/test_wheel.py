"""The built wheel, installed non-editable in a fresh venv, is a working tool on its own.

The wheel is built from this checkout (no build isolation: setuptools comes from the test's
environment), installed with ``--no-deps`` into a new venv whose only other path is this
environment's site-packages (for torch and the other dependencies; that directory holds no
``memflow`` package of its own, an editable install being only a finder), and used from a
directory outside the repository: ``memflow plan`` on a copied example, ``memflow simulate --plot``.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"  # a copy: setuptools' build/ directory is not left in the checkout, nor stale files taken from it
    src.mkdir()
    for name in ("memflow", "simulator", "search", "configs", "bench"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    r = _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp / "dist"),
              str(src)])
    assert r.returncode == 0, r.stderr[-2000:]
    (whl,) = (tmp / "dist").glob("memflow-*.whl")
    env_dir = tmp / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    site = Path(_run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    (site / "_memflow_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    r = _run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(whl)])
    assert r.returncode == 0, r.stderr[-2000:]
    return env_dir, site, tmp


def test_wheel_installs_one_namespace_with_presets(wheel_venv):
    env_dir, site, _ = wheel_venv
    top = sorted(p.name for p in site.iterdir())
    for name in ("simulator", "search", "bench", "configs", "tests", "examples"):
        assert name not in top, f"the wheel installed a top-level {name!r}: {top}"
    assert (site / "memflow" / "simulator" / "core.py").is_file()
    assert (site / "memflow" / "search" / "mcmc.py").is_file()
    assert (site / "memflow" / "configs" / "devices" / "v100-16gb.yaml").is_file()
    assert (site / "memflow" / "configs" / "clusters" / "a100-8-nvlink.yaml").is_file()


def test_wheel_plans_and_plots_outside_the_repository(wheel_venv, tmp_path):
    env_dir, _, _ = wheel_venv
    work = tmp_path / "user"
    work.mkdir()
    for f in ("gpt2.py", "_hf.py"):
        shutil.copy(ROOT / "examples" / f, work / f)
    # a user's own search.py / simulator.py in the working directory must not shadow MemFlow's
    (work / "search.py").write_text("raise SystemExit('the user search.py was imported')\n")
    (work / "simulator.py").write_text("raise SystemExit('the user simulator.py was imported')\n")
    env = dict(os.environ, MEMFLOW_EXAMPLE_SCALE="tiny", MEMFLOW_CACHE_DIR=str(tmp_path / "cache"),
               HF_HUB_OFFLINE="1", PYTHONPATH="")
    memflow = str(env_dir / "bin" / "memflow")
    r = _run([memflow, "plan", "gpt2.py", "--gpus", "4", "-o", "p.yaml", "--quiet"], cwd=work, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (work / "p.yaml").is_file()
    r = _run([memflow, "simulate", "p.yaml", "--plot", "m.png"], cwd=work, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (work / "m.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the package the command ran is the installed one, not the checkout
    r = _run([str(env_dir / "bin" / "python"), "-c", "import memflow.simulator as s; print(s.__file__)"], cwd=work,
             env=env)
    assert r.returncode == 0 and str(env_dir) in r.stdout, r.stdout + r.stderr
