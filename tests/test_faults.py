"""Faults of runs and processes (issue #21): each is one line and exit code 2, never silence, a hang,
a traceback or a process left behind.

Model files that end their process, crash or hang; profiling processes killed or
interrupted; a run's work directory, sockets, checkpoints and losses.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from memflow.cli.main import main
from memflow.errors import ModelLoadError
from memflow.model_file import load_model_file

ROOT = Path(__file__).resolve().parents[1]

#: a two-block model small enough to plan and run in seconds
TINY = '''
import torch
from torch import nn
BATCH_SIZE = 4
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(8, 8) for _ in range(2)])
        self.head = nn.Linear(8, 1)
    def forward(self, x):
        for b in self.blocks:
            x = torch.relu(b(x))
        return self.head(x)
def build_model():
    return M()
def example_batch(n):
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, 8, generator=g), torch.randn(n, 1, generator=g)
def loss_fn(out, y):
    return ((out - y) ** 2).mean()
'''


def model(tmp_path: Path, name: str, code: str, base: str = "") -> str:
    p = tmp_path / f"{name}.py"
    p.write_text(base + "\n" + code + "\n")
    return str(p)


def cli(argv: list[str], timeout: float = 120, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memflow", *argv], capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, **(env or {})), cwd=ROOT)


def one_error_line(stderr: str) -> str:
    lines = stderr.strip().split("\n")  # (a bar redrawn with \r: one terminal line)
    assert 1 <= len(lines) <= 3 and "Traceback" not in stderr, stderr
    return lines[-1]


# ------------------------------------------------------------ model files that end their process
ENDINGS = {
    "exit0_at_import": ("import os\nos._exit(0)", "", "exited with code 0 during import"),
    "exit3_with_words": ("import os, sys\nprint('no GPU here', file=sys.stderr)\nos._exit(3)", "",
                         "exited with code 3 during import; its last words: no GPU here"),
    "segfault_at_import": ("import ctypes\nctypes.string_at(0)", "", "crashed (signal 11, SIGSEGV) during import"),
    "exit_in_build_model": ("def build_model():\n    import os\n    os._exit(0)", TINY,
                            "exited with code 0 in build_model()"),
    "killed_in_example_batch": ("def example_batch(n):\n    import os, signal\n    os.kill(os.getpid(), signal.SIGKILL)",
                                TINY, "was killed by signal 9 (SIGKILL: out of host memory?) in example_batch(4)"),
}


@pytest.mark.parametrize("case", list(ENDINGS))
def test_a_model_file_that_ends_its_process_is_one_error(tmp_path, case):
    code, base, words = ENDINGS[case]
    path = model(tmp_path, case, code, base)
    with pytest.raises(ModelLoadError) as ei:
        load_model_file(path)
    assert str(ei.value) == f"{path}: the model file {words}"


def test_a_model_file_that_segfaults_is_exit_code_2_in_the_cli(tmp_path):
    path = model(tmp_path, "segv", "import ctypes\nctypes.string_at(0)")
    r = cli(["profile", path])
    assert r.returncode == 2
    assert one_error_line(r.stderr) == f"memflow: error: {path}: the model file crashed (signal 11, SIGSEGV) during import"


def test_a_model_file_that_hangs_is_stopped_after_the_time_limit(tmp_path):
    path = model(tmp_path, "loop", "while True:\n    pass")
    t0 = time.monotonic()
    r = cli(["plan", path, "--quiet"], timeout=90, env={"MEMFLOW_MODEL_TIMEOUT_S": "3"})
    assert r.returncode == 2 and time.monotonic() - t0 < 60
    assert one_error_line(r.stderr).endswith(
        "the model file did not finish importing within 3 s (the limit is MEMFLOW_MODEL_TIMEOUT_S)")


def test_a_bad_time_limit_is_one_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MEMFLOW_MODEL_TIMEOUT_S", "soon")
    assert main(["profile", model(tmp_path, "ok", "", TINY)]) == 2
    assert "MEMFLOW_MODEL_TIMEOUT_S must be a positive number of seconds, got 'soon'" in capsys.readouterr().err


def test_a_good_model_file_prints_once_and_loads(tmp_path, capfd):
    path = model(tmp_path, "chatty", "print('hello from the model file')", TINY)
    spec = load_model_file(path)
    assert spec.batch_size == 4
    assert capfd.readouterr().out.count("hello from the model file") == 1  # the guard's child is silent


def test_the_command_imports_the_model_file_once_in_the_child_that_carries_it_on(tmp_path):
    """The command line's guard: the trial child, once the file's code returned, is the command (the first
    process only waits and ends as it ends), so the file is imported once by the command, in that child,
    and what its import printed is shown once."""
    log = tmp_path / "imports.log"
    path = model(tmp_path, "chatty", "import os, sys\nprint('hello from the model file')\n"
                 "print('a word at import', file=sys.stderr)\n"
                 f"open({str(log)!r}, 'a').write(f'{{os.getpid()}} {{os.getppid()}}\\n')", TINY)
    proc = subprocess.Popen([sys.executable, "-m", "memflow", "plan", path, "--gpus", "2", "--gpu-type",
                             "v100-16gb", "--quiet", "--no-cache"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=tmp_path)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert out.count("hello from the model file") == 1 and err.count("a word at import") == 1
    pids = [tuple(map(int, line.split())) for line in log.read_text().split("\n") if line]
    assert not [p for p, _ in pids if p == proc.pid]  # the first process never imported it
    assert len([p for p, parent in pids if parent == proc.pid]) == 1  # its child did, once
    # (forked helpers of that child may import it again: the dependency recorder does)


def test_a_hand_over_that_cannot_fork_loads_the_file_here(tmp_path, monkeypatch):
    """No child to carry the command on (the process limit): the file is loaded in this process, as the
    API loads it, not an internal error; the hand-over is spent either way."""
    import memflow.model_guard as guard

    def no_fork():
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(guard.os, "fork", no_fork)
    guard.allow_handover()
    spec = load_model_file(model(tmp_path, "ok", "", TINY))
    assert spec.batch_size == 4 and not guard.take_handover()


def test_a_crash_after_the_load_ends_the_command_with_that_signal(tmp_path):
    """A crash past the trial (the real build, in the child that carries the command on) ends the first
    process with the same signal: as the command itself had crashed."""
    path = model(tmp_path, "late", "import ctypes\n_build = build_model\ndef build_model():\n"
                 "    if torch.empty(0).device.type != 'meta':\n        ctypes.string_at(0)\n    return _build()", TINY)
    r = cli(["plan", path, "--gpus", "2", "--gpu-type", "v100-16gb", "--quiet", "--no-cache"])
    assert r.returncode == -signal.SIGSEGV, r.stderr


# ------------------------------------------------------------ profiling processes
def marked(mark: str, what: str = "") -> list[int]:
    """Live processes whose environment holds MEMFLOW_TEST_MARK=mark (and whose command line holds ``what``)."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            env = (d / "environ").read_bytes().split(b"\0")
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if f"MEMFLOW_TEST_MARK={mark}".encode() in env and what in cmd and state != "Z":
            out.append(int(d.name))
    return out


def wait_for(cond, timeout: float, step: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(step)
    return cond()


@pytest.fixture(autouse=True, scope="module")
def own_processes():
    """These tests watch how ranks are started and stopped: without the session's fork server."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("MEMFLOW_FORKSERVER", raising=False)
        yield


@pytest.fixture
def mark(monkeypatch) -> str:
    m = uuid.uuid4().hex
    monkeypatch.setenv("MEMFLOW_TEST_MARK", m)
    return m


@pytest.fixture
def link_cached(tmp_path, monkeypatch):
    """A cache dir holding this host's gloo link figures, so that planning cpu-N runs no link probe."""
    import socket

    key = f"{socket.gethostname()}-{os.cpu_count()}cpu"
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / f"gloo-link-{key}.json").write_text(
        json.dumps({"format": 1, "key": key, "bandwidth": 2e9, "latency": 2e-5}))
    monkeypatch.setenv("MEMFLOW_CACHE_DIR", str(tmp_path / "cache"))


#: in the profiling processes only (``python -m memflow.profile.concurrent DIR RANK``)
IN_PROFILING = "import os, sys, signal, time\nPROFILING = sys.argv[0].endswith('concurrent.py')\n"


def test_a_killed_profiling_process_is_reported_at_once(tmp_path, mark):
    from memflow.errors import CaptureError
    from memflow.profile.concurrent import concurrent_phase_times

    path = model(tmp_path, "oom", IN_PROFILING + TINY +
                 "if PROFILING and sys.argv[-1] == '1':\n    os.kill(os.getpid(), signal.SIGKILL)\n")
    t0 = time.monotonic()
    with pytest.raises(CaptureError, match=r"profiling process 1 was killed by signal 9 \(SIGKILL: out of host memory\?\)"):
        concurrent_phase_times(load_model_file(path), [2], 2, repeats=1)
    assert time.monotonic() - t0 < 60  # the children's start, not the barrier's 600 s
    assert not marked(mark, "memflow.profile.concurrent")  # rank 0, waiting at the barrier, was stopped


def test_profiling_runs_at_most_one_process_per_core(tmp_path, monkeypatch):
    import memflow.profile.concurrent as conc

    started, lines = [], []
    real = conc.popen
    monkeypatch.setattr(conc, "host_cores", lambda: 1)
    monkeypatch.setattr(conc, "popen", lambda cmd, **kw: started.append(cmd) or real(cmd, **kw))
    out = conc.concurrent_phase_times(load_model_file(model(tmp_path, "tiny", "", TINY)), [2], 3, repeats=1,
                                      progress=lines.append)
    assert len(started) == 1
    assert lines == ["timing 3 ranks in 1 concurrent process, one per core of this host; phase times scaled by 3/1"]
    assert all(t > 0 for t in out[2]["keep"])


def interrupt(argv: list[str], tmp_path: Path, mark: str, children: str, sig: int, gone_s: float) -> tuple[int, str]:
    """Start ``memflow ARGV``, wait until two processes whose command line holds ``children`` run, send
    ``sig``, and check that every process of the command is gone within ``gone_s`` seconds; returns its exit
    status and stderr. Its temporary files go to tmp_path/tmp."""
    (tmp_path / "tmp").mkdir()
    # SIGINT at its default in the child, as a terminal's Ctrl-C finds it: a test process started as a
    # background job of a non-interactive shell (CI scripts, ``cmd &``) ignores SIGINT, the planner would
    # inherit that, and Python then installs no KeyboardInterrupt handler at all
    proc = subprocess.Popen([sys.executable, "-m", "memflow", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=tmp_path, env=dict(os.environ, TMPDIR=str(tmp_path / "tmp")),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        started = wait_for(lambda: len(marked(mark, children)) == 2 or proc.poll() is not None, 120)
        if not started or proc.poll() is not None:
            proc.kill()
            pytest.fail(f"{children} did not start: {proc.communicate()[1][-2000:]}")
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
        assert wait_for(lambda: not marked(mark), gone_s), f"a process of memflow {argv[0]} outlived it"
    finally:
        proc.kill()
    return proc.returncode, err


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_profiling_processes_die_with_the_planner(tmp_path, mark, link_cached, sig):
    path = model(tmp_path, "slow", IN_PROFILING + TINY + "if PROFILING:\n    time.sleep(600)\n")
    rc, err = interrupt(["plan", path, "--gpus", "2", "--gpu-type", "cpu"], tmp_path, mark,
                        "-m memflow.profile.concurrent", sig, 5)
    if sig != signal.SIGKILL:
        assert rc == 130 and one_error_line(err) == "memflow: interrupted"
        assert not list((tmp_path / "tmp").glob("memflow_*"))  # the timing processes' directory is gone


def test_ctrl_c_at_a_terminal_interrupts_the_command_once(tmp_path, mark, link_cached):
    """A terminal's Ctrl-C reaches the whole foreground process group, the first process (which only
    waits) and its child (which carries the command on, memflow.model_guard.continue_in_child) alike:
    the command stops with one "interrupted", exit 130, no traceback, and no process left."""
    import pty
    import select

    path = model(tmp_path, "slow", IN_PROFILING + TINY + "if PROFILING:\n    time.sleep(600)\n")
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the command, on the terminal's end
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.chdir(tmp_path)
        os.execvp(sys.executable, [sys.executable, "-m", "memflow", "plan", path, "--gpus", "2", "--gpu-type", "cpu"])
    said = b""
    try:
        started = wait_for(lambda: len(marked(mark, "-m memflow.profile.concurrent")) == 2, 120)
        assert started, "the profiling processes did not start"
        os.write(fd, b"\x03")  # the terminal's interrupt character
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if select.select([fd], [], [], 0.2)[0]:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:  # the command ended: the terminal's other end is closed
                    break
                if not chunk:
                    break
                said += chunk
        _, status = os.waitpid(pid, 0)
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.close(fd)
    text = said.decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 130, text
    assert text.count("memflow: interrupted") == 1 and "Traceback" not in text, text
    assert wait_for(lambda: not marked(mark), 5), "a process of the command outlived it"


def test_link_probe_processes_die_with_their_parent(mark):
    proc = subprocess.Popen([sys.executable, "-c", "from memflow.linkprobe import probe; probe()"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_for(lambda: len(marked(mark, "-m memflow.linkprobe")) == 2, 60), "the probe did not start"
        proc.kill()
        proc.wait()
        assert wait_for(lambda: not marked(mark), 2), "a link probe process outlived its parent"
    finally:
        proc.kill()


# ------------------------------------------------------------ runs
#: in the executor's ranks only (``python -m memflow.executor.worker CONFIG``)
IN_RANKS = "import os, sys, time\nRANK = sys.argv[0].endswith('worker.py')\n"


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    """plan(name, code, gpus) -> a plan file for a model file of that code (named GPUs: planned without
    profiling processes; run with --on-cpu here, under the accounted cap)."""
    import memflow

    d = tmp_path_factory.mktemp("planned")

    def plan(name: str, code: str, gpus: int = 2) -> str:
        path = d / f"{name}.py"
        path.write_text(code)
        out = d / f"{name}.{gpus}.plan.yaml"
        memflow.plan(str(path), gpus=gpus, iterations=50, cache=False).save(out)
        return str(out)

    return plan


@pytest.fixture
def own_tmp(tmp_path, monkeypatch) -> Path:
    """This process's temporary directory, to see what a run leaves behind."""
    import tempfile

    d = tmp_path / "tmp"
    d.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    return d


def test_a_nan_loss_stops_the_run_naming_step_rank_and_stage(planned, own_tmp, capsys):
    plan = planned("nan", TINY + "def loss_fn(out, y):\n    return ((out - y) ** 2).mean() * float('nan')\n")
    assert main(["run", plan, "--on-cpu", "--steps", "3", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert re.fullmatch(r"memflow: error: rank \d \(stage \d\): the loss is nan at step 1/3; the run was stopped",
                        one_error_line(err)), err
    assert len(err.strip().splitlines()) == 1  # --quiet: no progress lines
    assert not list(own_tmp.glob("memflow_*"))  # the run's work directory went with it


def test_a_loss_without_grad_is_an_error_before_training(planned, capsys):
    plan = planned("nograd", TINY + "def loss_fn(out, y):\n    return ((out - y) ** 2).mean().detach()\n")
    assert main(["run", plan, "--on-cpu", "--steps", "3", "--quiet"]) == 2
    assert re.fullmatch(r"memflow: error: rank \d: the loss does not require grad .* before its first backward pass",
                        one_error_line(capsys.readouterr().err))


def listening(inodes: set[str]) -> list[str]:
    """Local addresses (hex, as /proc/net/tcp* write them) of the listening sockets among ``inodes``."""
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            f = row.split()
            if f[3] == "0A" and f[9] in inodes:
                out.append(f[1])
    return out


def socket_inodes(pids: list[int]) -> set[str]:
    out = set()
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                link = os.readlink(fd)
                if link.startswith("socket:["):
                    out.add(link[8:-1])
        except OSError:
            continue
    return out


def test_a_run_reports_every_step_as_it_happens_and_listens_on_loopback_only(planned, own_tmp, mark, capsys,
                                                                             monkeypatch):
    """Progress lines reach the CLI within ~2 s of each step; while the run is up, none of its processes
    listens on a wildcard address (0.0.0.0, ::); its work directory is gone afterwards."""
    import memflow.runner

    steps_at = own_tmp.parent / "steps.txt"
    monkeypatch.setenv("STEP_LOG", str(steps_at))
    plan = planned("slow_batches", IN_RANKS + TINY.replace("def example_batch(n):", "def _batch(n):") + '''
def example_batch(n):
    if RANK:  # each step of the run reads a batch: a slow data loader
        time.sleep(0.7)
        with open(os.environ["STEP_LOG"], "a") as f:
            f.write(f"{time.time()}\\n")
    return _batch(n)
''', gpus=1)
    got: list[tuple[float, str]] = []
    sockets: list[str] = []
    real = memflow.runner.run

    def run(*a, progress=None, **kw):
        def seen(line):
            got.append((time.time(), line))
            if "ready" in line:  # every rank is up: the store, gloo's pairs
                # (this process hosts the rendezvous store of a one-machine run)
                sockets.extend(listening(socket_inodes(marked(mark) + [os.getpid()])))
            progress(line)
        return real(*a, progress=seen, **kw)

    monkeypatch.setattr("memflow.cli.run_cmd.run", run)
    assert main(["run", plan, "--on-cpu", "--steps", "4"]) == 0
    err = capsys.readouterr().err
    assert "memflow: launching 1 rank(s)" in err and "memflow: rank 0: step 4/4, loss " in err
    batches = [float(x) for x in steps_at.read_text().split()][-4:]  # (the first: the rank's capture)
    step_lines = [(t, line) for t, line in got if ": step " in line]
    assert len(step_lines) == 4
    for (arrived, line), read_at in zip(step_lines, batches):
        assert arrived - read_at < 2.0, (line, arrived - read_at)
    assert sockets and all(a.startswith("0100007F:") for a in sockets), sockets  # 127.0.0.1, nothing else
    assert not list(own_tmp.glob("memflow_*"))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_runs_processes_die_with_it(planned, tmp_path, mark, sig):
    plan = planned("slow_ranks", IN_RANKS + "if RANK:\n    time.sleep(600)\n" + TINY)
    rc, err = interrupt(["run", plan, "--on-cpu", "--quiet"], tmp_path, mark, "-u -m memflow.executor.worker", sig, 10)
    if sig == signal.SIGTERM:
        assert rc == 130 and one_error_line(err) == "memflow: interrupted"
        assert not list((tmp_path / "tmp").glob("memflow_*"))


def test_resume_refuses_what_cannot_be_resumed_in_one_line(planned, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MEMFLOW_CACHE_DIR", str(tmp_path / "cache"))
    plan = planned("ckpt", TINY)
    ck = tmp_path / "ck"

    def refused(*argv: str) -> str:
        assert main(["run", plan, "--on-cpu", "--quiet", "--checkpoint-dir", str(ck), *argv]) == 2
        return one_error_line(capsys.readouterr().err).removeprefix("memflow: error: ")

    assert refused("--resume") == f"cannot resume: the checkpoint directory {ck} does not exist"
    ck.mkdir()
    assert refused("--resume").startswith(f"cannot resume: {ck} holds no complete checkpoint")
    assert main(["run", plan, "--on-cpu", "--quiet", "--checkpoint-dir", str(ck), "--checkpoint-every", "2", "--steps", "2"]) == 0
    capsys.readouterr()
    step = ck / "step_000002"
    assert (tmp_path / "cache" / "checkpoint.key").stat().st_mode & 0o777 == 0o600
    assert refused("--resume", "--steps", "2") == (
        f"nothing to run: the checkpoint {step} already holds 2 steps, and the run is 2 steps long "
        "(ask for more steps to train further)")

    refuse = "refusing to load it (a checkpoint is code, like a pickle)"
    data = (step / "__0_0.distcp").read_bytes()
    (step / "__0_0.distcp").write_bytes(data + b"\0")
    assert refused("--resume", "--steps", "3") == \
        f"checkpoint {step}: __0_0.distcp was changed since MemFlow wrote it; {refuse}"
    (step / "__0_0.distcp").write_bytes(data)
    sig = (step / "memflow.sig").read_text()
    forged = json.loads(sig)
    forged["hmac"] = "0" * 64
    (step / "memflow.sig").write_text(json.dumps(forged))
    assert refused("--resume", "--steps", "3") == f"checkpoint {step}: its digest was not made with this user's key; {refuse}"
    (step / "memflow.sig").unlink()
    assert refused("--resume", "--steps", "3") == f"checkpoint {step} has no MemFlow digest (memflow.sig); {refuse}"

    # a checkpoint MemFlow wrote for another plan: one line naming it, not DCP's traceback of every rank
    (step / "memflow.sig").write_text(sig)
    other = planned("ckpt", TINY, gpus=1)
    assert main(["run", other, "--on-cpu", "--quiet", "--checkpoint-dir", str(ck), "--resume", "--steps", "3"]) == 2
    msg = one_error_line(capsys.readouterr().err)
    assert msg.startswith(f"memflow: error: rank 0: cannot load the checkpoint {step} (written for another plan?): ")
    assert len(msg) < 500, msg


def test_a_checkpoint_key_others_can_read_is_refused(tmp_path, monkeypatch):
    from memflow.errors import ConfigError
    from memflow.executor.signing import key

    monkeypatch.setenv("MEMFLOW_CACHE_DIR", str(tmp_path))
    k = key()
    assert len(k) == 32 and key() == k
    (tmp_path / "checkpoint.key").chmod(0o644)
    with pytest.raises(ConfigError, match="must be this user's and private"):
        key()
