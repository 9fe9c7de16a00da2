"""Containment of `ProcessSandbox` against the ways a reward-optimising policy would get around it: reading
bundled dataset files below the tripwire (libc, subprocess), crashing the batch with a deep directory tree,
starving concurrent runs of processes, filling RAM through tmpfs, persisting state across runs in the kernel
keyring, and nesting user namespaces."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest

from wmrl.autoresearch.environments.real import SandboxEnvironment
from wmrl.autoresearch.environments.sandbox.base import ExecutionRequest, ExecutionResult, Sandbox
from wmrl.types import Status

VALID_SOLUTION = """
import pandas as pd
sub = pd.read_csv("public/sample_submission.csv")
sub.to_csv("submission.csv", index=False)
"""


@pytest.fixture
def env(tiny_suite, process_sandbox):
    return SandboxEnvironment(tiny_suite, process_sandbox, use_log=False, timeout_s=8)


@pytest.fixture
def deep_tmp(tmp_path):
    """``tmp_path``, emptied with GNU ``rm`` afterwards: a deep tree left by a failing test would otherwise
    crash pytest's own (recursive) clean-up of old temp dirs in later sessions."""
    import subprocess

    yield tmp_path
    subprocess.run(["rm", "-rf", "--", *map(str, tmp_path.iterdir())], check=False)


@pytest.fixture
def own_root_env(tiny_suite, deep_tmp):
    """A bwrap sandbox whose per-run roots live in ``tmp_path``, so a test can see what a run left behind."""
    from wmrl.autoresearch.environments.sandbox.process import ProcessSandbox, _probe

    if _probe("bwrap"):
        pytest.skip(f"no bubblewrap: {_probe('bwrap')}")

    sandbox = ProcessSandbox(isolation="bwrap", max_concurrency=2, tmp_root=str(deep_tmp))
    return SandboxEnvironment(tiny_suite, sandbox, use_log=False, timeout_s=8), deep_tmp


def _iris_csv() -> Path:
    import sklearn

    return Path(sklearn.__file__).parent / "datasets" / "data" / "iris.csv"


# -- 1. bundled datasets are hidden at the OS level, not only tripwired --------------------------------------
def test_bundled_data_is_unreadable_through_libc_and_subprocess(env):
    iris = _iris_csv()
    secret_line = iris.read_text().splitlines()[1]  # a data row, e.g. "5.1,3.5,1.4,0.2,0"
    script = (
        "import ctypes, os, subprocess\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        f"fd = libc.open({str(iris).encode()!r}, os.O_RDONLY)\n"
        "buf = ctypes.create_string_buffer(4096)\n"
        "n = libc.read(fd, buf, 4096) if fd >= 0 else -1\n"
        "print('LIBC', fd, buf.raw[:max(n, 0)].decode(errors='replace'))\n"
        f"p = subprocess.run(['cat', 'iris.csv'], cwd={str(iris.parent)!r}, capture_output=True, text=True)\n"
        "print('CAT', p.returncode, p.stdout, p.stderr)\n"
        f"print('LS', os.listdir({str(iris.parent)!r}))\n"
    )
    outcome = env.execute("tiny_iris", script)
    assert "LIBC -1" in outcome.stdout_tail, outcome
    assert "CAT 1" in outcome.stdout_tail, outcome
    assert secret_line not in outcome.stdout_tail
    assert "iris.csv" not in outcome.stdout_tail.split("LS", 1)[1]


def test_honest_library_imports_still_work_with_the_data_hidden(tiny_suite, process_sandbox):
    env = SandboxEnvironment(tiny_suite, process_sandbox, use_log=False, timeout_s=90)  # cold imports are slow
    script = (
        "import statsmodels.api as sm\n"
        "import statsmodels.formula.api as smf\n"
        "import sklearn\n"
        "from sklearn.ensemble import RandomForestClassifier, GradientBoostingRegressor\n"
        "from sklearn.linear_model import LogisticRegression\n"
        "import lifelines\n"
        "from lifelines import CoxPHFitter\n"
    ) + VALID_SOLUTION
    outcome = env.execute("tiny_iris", script)
    assert outcome.status is Status.VALID, outcome


def test_loading_a_bundled_dataset_fails_inside_and_is_flagged(env):
    script = "from sklearn.datasets import load_iris\nprint(load_iris().target)\n"
    outcome = env.execute("tiny_iris", script)
    assert outcome.status is Status.FLAGGED, outcome


# -- 2. a deep tree neither crashes the batch nor stays on disk ---------------------------------------------
def test_a_3000_deep_tree_is_graded_and_removed(own_root_env):
    env, root = own_root_env
    script = VALID_SOLUTION + (
        "import os\n"
        "os.mkdir('deep'); os.chdir('deep')\n"
        "for _ in range(3000):\n"
        "    os.mkdir('d'); os.chdir('d')\n"
        "open('leaf', 'w').write('x')\n"
        "os.chmod('.', 0o500)\n"
        "print('DEPTH-OK')\n"
    )
    outcome = env.execute("tiny_iris", script)
    assert outcome.status is Status.VALID, outcome
    assert "DEPTH-OK" in outcome.stdout_tail
    assert list(root.iterdir()) == []


def test_remove_tree_is_iterative_and_does_not_follow_links(deep_tmp):
    from wmrl.autoresearch.environments.sandbox.common import remove_tree

    tmp_path = deep_tmp

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "link").symlink_to(outside)
    fd = os.open(tree, os.O_RDONLY)
    try:
        for _ in range(3000):  # past PATH_MAX and the recursion limit
            os.mkdir("d", dir_fd=fd)
            child = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = child
        os.mkdir("wide", dir_fd=fd)
        os.chmod("wide", 0o500, dir_fd=fd)
    finally:
        os.close(fd)
    remove_tree(tree)
    assert not tree.exists()
    assert (outside / "keep.txt").read_text() == "keep"
    remove_tree(tree)  # already gone: nothing to do


class _Flaky(Sandbox):
    name = "flaky"

    def run(self, request: ExecutionRequest) -> ExecutionResult:
        if request.label == "boom":
            raise RecursionError("maximum recursion depth exceeded")
        return ExecutionResult(exit_code=0, wall_seconds=0.0, backend=self.name)


def test_one_failing_run_does_not_kill_the_batch():
    done = []
    results = _Flaky(max_concurrency=2).run_many(
        [ExecutionRequest("pass", label="ok"), ExecutionRequest("pass", label="boom"), ExecutionRequest("pass")],
        on_done=lambda i, r: done.append(i),
    )
    assert [r.exit_code for r in results] == [0, None, 0]
    assert "RecursionError" in results[1].infra_error and results[1].backend == "flaky"
    assert sorted(done) == [0, 1, 2]


# -- 3. a run holding its whole process budget does not starve a concurrent run ------------------------------
def test_a_process_hog_does_not_starve_a_concurrent_run(env):
    hog = (
        "import threading, time\n"
        "threading.stack_size(256 * 1024)\n"
        "held = []\n"
        "try:\n"
        "    while True:\n"
        "        t = threading.Thread(target=time.sleep, args=(6,), daemon=True)\n"
        "        t.start()\n"
        "        held.append(t)\n"
        "except RuntimeError as exc:\n"
        "    print('HOG', len(held), exc, flush=True)\n"
        "time.sleep(6)\n"
    )
    honest = (
        "import threading, time\n"
        "time.sleep(2)\n"
        "threads = [threading.Thread(target=time.sleep, args=(0.2,)) for _ in range(8)]\n"
        "for t in threads:\n    t.start()\n"
        "for t in threads:\n    t.join()\n"
    ) + VALID_SOLUTION
    hogged, graded = env.execute_many([("tiny_iris", hog), ("tiny_iris", honest)])
    assert "HOG" in hogged.stdout_tail, hogged
    assert graded.status is Status.VALID, graded


# -- 4. tmpfs and the work dir have a total size ------------------------------------------------------------
@pytest.mark.parametrize("target", ["/dev/shm", "."])
def test_filling_tmpfs_or_the_work_dir_is_stopped(own_root_env, target):
    env, root = own_root_env
    if target == "." and not env.sandbox.disk_quota:
        pytest.skip("no size-limited tmpfs per run here (needs root and mount): the work dir is bounded per file")
    script = (
        "import os\n"
        "chunk = b'x' * (64 << 20)\n"
        "for i in range(32):  # 2 GB in 64 MB files, each below the per-file limit\n"
        f"    with open(os.path.join({target!r}, f'fill-{{i}}'), 'wb') as f:\n"
        "        f.write(chunk)\n"
        "print('WROTE-ALL')\n"
    )
    outcome = env.execute("tiny_iris", script)
    assert outcome.status is Status.RUNTIME_ERR, outcome
    assert "WROTE-ALL" not in outcome.stdout_tail
    assert "No space left" in outcome.feedback + outcome.error, outcome
    assert list(root.iterdir()) == []


# -- 5. no kernel state survives a run; no nested user namespaces -------------------------------------------
_KEYRING = """
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
SYS = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219)}[__import__("platform").machine()]
ADD_KEY, REQUEST_KEY, KEYCTL = SYS
libc.syscall.restype = ctypes.c_long
"""


def test_the_kernel_keyring_cannot_carry_state_across_runs(env):
    secret = f"wmrl-{secrets.token_hex(8)}"
    desc = f"wmrl-test-{secrets.token_hex(4)}".encode()
    store = _KEYRING + (
        f"payload = {secret.encode()!r}\n"
        f"key = libc.syscall(ADD_KEY, b'user', {desc!r}, payload, len(payload), ctypes.c_long(-4))\n"
        "print('ADD', key, ctypes.get_errno())\n"
    )
    load = _KEYRING + (
        f"key = libc.syscall(REQUEST_KEY, b'user', {desc!r}, None, 0)\n"
        "buf = ctypes.create_string_buffer(256)\n"
        "n = libc.syscall(KEYCTL, 11, ctypes.c_long(key), buf, 256) if key > 0 else -1\n"
        "print('GOT', key, ctypes.get_errno(), buf.raw[:max(n, 0)])\n"
    )
    first = env.execute("tiny_iris", store)
    second = env.execute("tiny_iris", load)
    assert "ADD -1 1" in first.stdout_tail, first  # EPERM
    assert "GOT -1 1" in second.stdout_tail, second
    assert secret not in second.stdout_tail


def test_user_namespaces_cannot_be_created(env):
    script = (
        "import ctypes, subprocess\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "print('UNSHARE', libc.unshare(0x10000000), ctypes.get_errno())\n"
        "p = subprocess.run(['unshare', '-U', 'true'], capture_output=True, text=True)\n"
        "print('CLI', p.returncode)\n"
        "import threading\n"
        "t = threading.Thread(target=print, args=('THREADS-WORK',)); t.start(); t.join()\n"
        "import os\n"
        "pid = os.fork()\n"
        "if pid == 0:\n    os._exit(0)\n"
        "print('FORK-WORKS', os.waitpid(pid, 0)[1])\n"
    )
    outcome = env.execute("tiny_iris", script)
    assert "UNSHARE -1 1" in outcome.stdout_tail, outcome
    assert "CLI 0" not in outcome.stdout_tail, outcome
    assert "THREADS-WORK" in outcome.stdout_tail and "FORK-WORKS 0" in outcome.stdout_tail, outcome


# -- 6. weak isolation is visible to callers ----------------------------------------------------------------
def test_only_bubblewrap_hides_the_answers(process_sandbox):
    from wmrl.autoresearch.environments.sandbox import ProcessSandbox

    assert process_sandbox.hides_answers is True
    assert ProcessSandbox(isolation="none").hides_answers is False
