"""`wmrl exec` with the default isolation against one hostile solution of every class of the security review
(issue 16): each is contained (flagged, penalised or bounded), nothing survives it, the next honest run is
unaffected, and an honest run beside a hostile one is never cached as failed.

The finer per-backend tests are in test_hardening_process.py, test_hardening_grader.py and test_containment.py;
this file is the user's path: the CLI, its default sandbox, the execution log and its cache switched on."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

import pytest

from wmrl.cli import commands as cli
from wmrl.cli import common
from wmrl.types import Status

HONEST = """
import pandas as pd
sub = pd.read_csv("public/sample_submission.csv")
sub.to_csv("submission.csv", index=False)
"""


def _iris_csv() -> str:
    import sklearn

    return str(Path(sklearn.__file__).parent / "datasets" / "data" / "iris.csv")


def hostile_scripts(cache_dir: Path) -> dict[str, tuple[str, str, set[str]]]:
    """class -> (task, script, statuses that count as contained). Every script ends by printing ``LEAKED=<n>``
    with what it managed to read or keep, where that applies."""
    answers = str(cache_dir / "tasks" / "tiny_iris" / "private" / "answers.csv")
    log = str(cache_dir / "executions.jsonl")
    return {
        "1 bundled data through libc": ("tiny_iris", f"""
import ctypes, os
libc = ctypes.CDLL(None)
fd = libc.open({_iris_csv()!r}.encode(), os.O_RDONLY)
buf = ctypes.create_string_buffer(4096)
n = libc.read(fd, buf, 4096) if fd >= 0 else 0
print(f"LEAKED={{max(n, 0)}}")
""", {"ran_no_sub"}),
        "1 bundled data through a subprocess": ("tiny_iris", f"""
import os, subprocess
folder, name = os.path.split({_iris_csv()!r})
out = subprocess.run(["cat", name], cwd=folder, capture_output=True).stdout
print(f"LEAKED={{len(out)}}")
""", {"ran_no_sub", "runtime_err"}),
        "2 overflowing predictions": ("tiny_diabetes", """
import pandas as pd
sub = pd.read_csv("public/sample_submission.csv")
sub["prediction"] = 1e200
sub.to_csv("submission.csv", index=False)
""", {"ran_no_sub"}),
        "3 a 50,000-column header": ("tiny_iris", """
open("submission.csv", "w").write(",".join(f"c{i}" for i in range(50_000)) + "\\n")
""", {"ran_no_sub"}),
        "4 a 3000-deep tree": ("tiny_iris", HONEST + """
import os
for _ in range(3000):
    os.mkdir("d")
    os.chdir("d")
""", {"valid"}),
        "5 holding every process slot": ("tiny_iris", """
import threading, time
threading.stack_size(256 * 1024)
held = []
try:
    while True:
        t = threading.Thread(target=time.sleep, args=(6,), daemon=True)
        t.start()
        held.append(t)
except RuntimeError:
    pass
print(f"LEAKED=0 held {len(held)}")
time.sleep(6)
""", {"ran_no_sub", "runtime_err", "timeout"}),
        "6 filling /dev/shm": ("tiny_iris", """
import os
block = b"x" * (1 << 20)
written = 0
try:
    for i in range(2048):
        with open(f"/dev/shm/f{i}", "wb") as f:
            f.write(block)
        written += 1
except OSError as exc:
    print("stopped:", exc)
print(f"LEAKED=0 wrote {written} MiB")
""", {"ran_no_sub", "runtime_err"}),
        "7 the kernel keyring": ("tiny_iris", """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
key = libc.syscall(248, b"user", b"wmrl-probe", b"secret", 6, -4)  # add_key into the user keyring
found = libc.syscall(250, 0, 0, 0)  # keyctl(GET_KEYRING_ID)
print(f"LEAKED={1 if key > 0 else 0}")
""", {"ran_no_sub"}),
        "8 the answers and the execution log": ("tiny_iris", f"""
import ctypes, os
libc = ctypes.CDLL(None)
fd = libc.open({answers!r}.encode(), os.O_RDONLY)
forged = libc.open({log!r}.encode(), os.O_WRONLY | os.O_APPEND)
print(f"LEAKED={{int(fd >= 0) + int(forged >= 0)}}")
""", {"ran_no_sub"}),
        "9 terminal escapes": ("tiny_iris", r"""
print("\x1b]52;c;SGVsbG8=\x07\x1b[2J[bold]x[/] [/oops]")
""", {"ran_no_sub"}),
    }


@pytest.fixture
def exec_cli(tiny_suite, monkeypatch, capsys, process_sandbox):
    """``wmrl exec`` on the tiny suite with its default sandbox (``--isolation auto``), log and cache on."""
    monkeypatch.setattr(common, "suite", lambda args: tiny_suite)

    def run(task: str, script: str, *flags: str) -> tuple[dict | str, str]:
        path = Path(os.environ.get("PYTEST_TMP", "/tmp")) / f"wmrl-hostile-{secrets.token_hex(4)}.py"
        path.write_text(script + f"\n# {secrets.token_hex(4)}\n")
        try:
            code = cli.main(["exec", task, str(path), *flags])
        finally:
            path.unlink()
        captured = capsys.readouterr()
        assert code == 0, captured.err
        return (json.loads(captured.out) if "--json" in flags else captured.out), captured.err

    return run


@pytest.mark.parametrize("name", list(hostile_scripts(Path("/cache"))))
def test_every_hostile_class_is_contained_and_the_next_honest_run_is_unaffected(exec_cli, tiny_suite, name):
    task, script, contained = hostile_scripts(tiny_suite.cache_dir)[name]
    log_before = (tiny_suite.cache_dir / "executions.jsonl").read_text() if (
        tiny_suite.cache_dir / "executions.jsonl").exists() else ""
    outcome, _ = exec_cli(task, script, "--json")
    assert outcome["status"] in contained, (name, outcome["status"], outcome["feedback"][-500:])
    assert outcome["status"] != Status.INFRA_ERROR.value
    assert "LEAKED=" not in outcome["stdout_tail"] or "LEAKED=0" in outcome["stdout_tail"], outcome["stdout_tail"]
    assert len(outcome["feedback"]) <= 4100 and len(outcome["error"] or "") <= 2100
    log = (tiny_suite.cache_dir / "executions.jsonl").read_text()
    assert log.startswith(log_before) and log.count("\n") == log_before.count("\n") + 1  # one record, ours
    if "wrote" in outcome["stdout_tail"]:  # 6: stopped by the run's disk budget (512 MiB), far below 2 GiB
        assert int(outcome["stdout_tail"].split("wrote ")[1].split()[0]) <= 512, outcome["stdout_tail"]
    honest, _ = exec_cli("tiny_iris", HONEST, "--json")
    assert honest["status"] == "valid", honest["feedback"]


def test_escapes_never_reach_the_terminal(exec_cli, tiny_suite):
    task, script, _ = hostile_scripts(tiny_suite.cache_dir)["9 terminal escapes"]
    out, err = exec_cli(task, script)
    assert "\x1b" not in out and "\x07" not in out and "\x1b" not in err
    assert "[bold]x[/]" in out  # shown as text, not read as markup


def test_an_honest_run_beside_a_hog_is_graded_and_cached_as_valid(tiny_suite, process_sandbox, tmp_path):
    """The process-slot hog and the honest script run at once (2 slots); the honest outcome, and what the
    cache serves for it afterwards, is ``valid``."""
    from wmrl.autoresearch.environments.real import SandboxEnvironment
    from wmrl.autoresearch.environments.sandbox import ProcessSandbox

    _, hog, _ = hostile_scripts(tiny_suite.cache_dir)["5 holding every process slot"]
    honest = "import time\ntime.sleep(2)  # the hog holds its slots by now\n" + HONEST + (
        "import threading\nts = [threading.Thread(target=sum, args=([1],)) for _ in range(8)]\n"
        "[t.start() for t in ts]\n[t.join() for t in ts]\n"
    )
    env = SandboxEnvironment(tiny_suite, ProcessSandbox(max_concurrency=2), log_path=tmp_path / "log.jsonl",
                             timeout_s=10)
    hog_outcome, honest_outcome = env.execute_many([("tiny_iris", hog), ("tiny_iris", honest)])
    assert "held" in hog_outcome.stdout_tail and hog_outcome.status is not Status.INFRA_ERROR, hog_outcome
    assert honest_outcome.status is Status.VALID, honest_outcome.feedback
    again = env.execute("tiny_iris", honest)
    assert again.cached and again.status is Status.VALID


def test_a_3000_deep_tree_is_graded_and_removed_by_the_docker_backend(tiny_suite, docker_sandbox, tmp_path):
    """Item 4 on the docker backend: the host-side work dir, deep tree and all, is removed after the run."""
    import subprocess

    from wmrl.autoresearch.environments.real import SandboxEnvironment
    from wmrl.autoresearch.environments.sandbox.docker import DockerSandbox

    _, script, _ = hostile_scripts(tiny_suite.cache_dir)["4 a 3000-deep tree"]
    sandbox = DockerSandbox(max_concurrency=1, tmp_root=str(tmp_path))
    try:
        outcome = SandboxEnvironment(tiny_suite, sandbox, use_log=False, timeout_s=20).execute("tiny_iris", script)
        left = list(tmp_path.iterdir())
    finally:
        sandbox.close()
        subprocess.run(["rm", "-rf", "--", *map(str, tmp_path.iterdir())], check=False)
    assert outcome.status is Status.VALID, outcome.feedback
    assert left == []
