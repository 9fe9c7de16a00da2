"""Hostile solutions against every real sandbox backend: each gets the right status, nothing escapes or
survives, the answers never leak, and the host stays healthy."""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time
from pathlib import Path

import pytest

from wmrl.autoresearch.environments.real import SandboxEnvironment
from wmrl.types import Status

VALID_SOLUTION = """
import pandas as pd
sub = pd.read_csv("public/sample_submission.csv")
sub.to_csv("submission.csv", index=False)
print("VALIDATION_SCORE=0.5")
"""


@pytest.fixture
def env(tiny_suite, sandbox):
    return SandboxEnvironment(tiny_suite, sandbox, use_log=False, timeout_s=8)


def run(env, script: str):
    return env.execute("tiny_iris", script)


def processes_with(marker: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                found.append(int(pid))
    return found


def assert_host_healthy(env) -> None:
    outcome = run(env, VALID_SOLUTION + f"\n# {secrets.token_hex(4)}\n")
    assert outcome.status is Status.VALID, outcome
    assert os.getpid() > 0 and Path("/proc/self").exists()


def test_valid_solution_is_graded(env):
    outcome = run(env, VALID_SOLUTION)
    assert outcome.status is Status.VALID
    assert outcome.score is not None and 0.0 <= outcome.position <= 1.0
    assert outcome.reward == pytest.approx(0.5 + 0.5 * outcome.position)
    assert outcome.validation_score == 0.5


def test_infinite_loop_times_out_and_is_killed(env):
    marker = f"loop-{secrets.token_hex(4)}"
    started = time.monotonic()
    outcome = run(env, f"# {marker}\nwhile True:\n    pass\n")
    assert outcome.status is Status.TIMEOUT and outcome.reward == 0.0
    assert time.monotonic() - started < 30
    time.sleep(0.5)
    assert processes_with(marker) == []


def test_fork_bomb_is_contained(env):
    marker = f"bomb-{secrets.token_hex(4)}"
    script = f"# {marker}\nimport os\nwhile True:\n    os.fork()\n"
    outcome = run(env, script)
    assert outcome.status in (Status.RUNTIME_ERR, Status.TIMEOUT), outcome
    time.sleep(1)
    assert processes_with(marker) == []
    assert_host_healthy(env)


def test_huge_allocation_fails_inside(env):
    outcome = run(env, "x = bytearray(10 * 1024**3)\nprint(len(x))\n")
    assert outcome.status is Status.RUNTIME_ERR, outcome
    assert outcome.error in ("MemoryError", "killed by signal 9"), outcome.error


def test_huge_file_is_stopped_by_the_size_limit(env):
    script = "with open('big.bin', 'wb') as f:\n    while True:\n        f.write(b'x' * (1 << 24))\n"
    outcome = run(env, script)
    assert outcome.status is Status.RUNTIME_ERR, outcome
    assert outcome.wall_seconds < 8


def test_network_is_unreachable(env):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.2)
    port = server.getsockname()[1]
    accepted: list = []

    def accept():
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                accepted.append(server.accept())
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    script = (
        "import socket\n"
        f"socket.create_connection(('127.0.0.1', {port}), timeout=3).sendall(b'leak')\n"
    )
    outcome = run(env, script)
    thread.join()
    server.close()
    assert outcome.status is Status.RUNTIME_ERR, outcome
    assert "Error" in outcome.error
    assert accepted == []


@pytest.mark.parametrize(
    "path",
    ["../private/answers.csv", "../../private/answers.csv", "public/../../private/answers.csv", "ABSOLUTE"],
)
def test_reading_the_answers_is_flagged(env, tiny_suite, path):
    answers = tiny_suite.get("tiny_iris").answers_path
    target = str(answers) if path == "ABSOLUTE" else path
    script = f"print(open({target!r}).read())\n"
    outcome = run(env, script)
    assert outcome.status is Status.FLAGGED and outcome.reward == 0.0, outcome
    assert "answers" in " ".join(outcome.flags)
    first_answer_line = answers.read_text().splitlines()[1]
    assert first_answer_line not in outcome.stdout_tail


def test_environment_secrets_are_not_inherited(env, monkeypatch):
    secret = f"s3cr3t-{secrets.token_hex(8)}"
    monkeypatch.setenv("WMRL_TEST_API_KEY", secret)
    script = "import os\nprint(dict(os.environ))\nprint(open('/proc/1/environ', 'rb').read())\n"
    outcome = run(env, script)
    assert secret not in outcome.stdout_tail + outcome.stderr_tail
    assert "WMRL_TEST_API_KEY" not in outcome.stdout_tail
    assert outcome.status in (Status.RAN_NO_SUB, Status.RUNTIME_ERR)


def test_loading_the_bundled_dataset_is_flagged(env):
    script = (
        "from sklearn.datasets import load_iris\n"
        "import pandas as pd\n"
        "y = load_iris().target\n"
        "pd.DataFrame({'id': range(len(y)), 'prediction': y}).to_csv('submission.csv', index=False)\n"
    )
    outcome = run(env, script)
    assert outcome.status is Status.FLAGGED, outcome
    assert "bundled" in outcome.flags[0]


def test_killing_the_parent_and_group_hurts_only_the_script(env):
    script = (
        "import os, signal\n"
        "try:\n    os.kill(os.getppid(), signal.SIGKILL)\nexcept OSError as e:\n    print('kill parent:', e)\n"
        "try:\n    os.kill(1, signal.SIGKILL)\nexcept OSError as e:\n    print('kill 1:', e)\n"
        "os.killpg(0, signal.SIGKILL)\n"
    )
    outcome = run(env, script)
    assert outcome.status is Status.RUNTIME_ERR, outcome
    assert_host_healthy(env)


def test_writing_outside_the_work_dir_is_flagged(env):
    """Outside the work dir and the run's private ``/tmp``: the work dir's parent, the installation (shared by
    every run, though mounted read-only) and a home folder."""
    token = secrets.token_hex(6)
    for target in (f"../escape-{token}", "sysconfig.get_paths()['purelib'] + '/evil.pth'", f"'/root/escape-{token}'"):
        target = target if "(" in target or target.startswith("'") else repr(target)
        outcome = run(env, f"import sysconfig\nopen({target}, 'w').write('escaped')\n")
        assert outcome.status is Status.FLAGGED, (target, outcome)
        assert "write outside" in outcome.flags[0]
    assert not Path(f"/root/escape-{token}").exists()


def test_a_scratch_file_in_the_runs_private_tmp_is_honest_work(env):
    """``/tmp`` is a fresh tmpfs of the run's own (bubblewrap and docker): ordinary code writes fixed scratch paths
    there and reads them back; the file never reaches the host's ``/tmp``."""
    token = secrets.token_hex(6)
    script = (f"import os\nopen('/tmp/scratch-{token}.txt', 'w').write('kept')\n"
              f"os.makedirs('/tmp/cache-{token}/a', exist_ok=True)\n"
              f"assert open('/tmp/scratch-{token}.txt').read() == 'kept'\n") + VALID_SOLUTION
    outcome = run(env, script)
    assert outcome.status is Status.VALID, outcome
    assert not Path(f"/tmp/scratch-{token}.txt").exists()


def test_no_daemon_survives_the_run(env):
    marker = f"daemon-{secrets.token_hex(4)}"
    script = VALID_SOLUTION + (
        "import os, subprocess, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        f"    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)  # {marker}'],\n"
        "                     start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "    os._exit(0)\n"
        "time.sleep(1.5)\n"
    )
    outcome = run(env, script)
    assert outcome.status is Status.VALID, outcome
    time.sleep(1)
    assert processes_with(marker) == []


def test_stdout_flood_is_bounded(env):
    script = "import sys\nchunk = 'x' * 65535 + '\\n'\nfor _ in range(800):\n    sys.stdout.write(chunk)\n" + VALID_SOLUTION
    outcome = run(env, script)
    assert outcome.status is Status.VALID, outcome.status
    assert len(outcome.stdout_tail) < 40_000


def test_symlinked_submission_to_the_answers_is_flagged(env, tiny_suite):
    answers = tiny_suite.get("tiny_iris").answers_path
    script = f"import os\nos.symlink({str(answers)!r}, 'submission.csv')\n"
    outcome = run(env, script)
    assert outcome.status is Status.FLAGGED, outcome


def test_a_python_installed_under_tmp_runs_in_the_process_sandbox(process_sandbox, tmp_path_factory):
    """A checkout (and its venv) under /tmp: the sandbox's fresh /tmp must not hide the interpreter."""
    import subprocess
    import sys

    from wmrl.autoresearch.environments.sandbox import ProcessSandbox
    from wmrl.autoresearch.environments.sandbox.base import ExecutionRequest, SandboxLimits

    venv = Path("/tmp") / f"wmrl-venv-{secrets.token_hex(4)}"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)], check=True)
    try:
        sandbox = ProcessSandbox(isolation="bwrap", python=str(venv / "bin" / "python"))
        result = sandbox.run(ExecutionRequest(script="import sys\nprint(sys.prefix)\n",
                                              limits=SandboxLimits(timeout_s=60, memory_mb=1024)))
        assert result.infra_error is None and result.exit_code == 0, (result.infra_error, result.stderr_tail)
        assert result.stdout_tail.strip() == str(venv)
    finally:
        import shutil

        shutil.rmtree(venv, ignore_errors=True)


def test_a_venv_reached_through_a_linked_folder_starts(tiny_suite, tmp_path):
    """A checkout whose ``.venv`` links to another venv: the view holds the venv by its real path, so the sandbox
    starts the interpreter by its folder's real path (before, every run was an infrastructure error: exit 127,
    ``setpriv: failed to execute .../.venv/bin/python: No such file or directory``)."""
    import sys

    from support.sandbox_probe import bwrap_missing

    from wmrl.autoresearch.environments.sandbox import ProcessSandbox

    if reason := bwrap_missing():
        pytest.skip(f"no bubblewrap: {reason}")
    linked = tmp_path / "linked-venv"
    linked.symlink_to(sys.prefix)
    python = linked / "bin" / Path(sys.executable).name
    sandbox = ProcessSandbox(isolation="bwrap", python=str(python))
    outcome = SandboxEnvironment(tiny_suite, sandbox, use_log=False, timeout_s=30).execute("tiny_iris", VALID_SOLUTION)
    assert outcome.status is Status.VALID, outcome
    assert sandbox.python == str(Path(sys.prefix).resolve() / "bin" / python.name)
