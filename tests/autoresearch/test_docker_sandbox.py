"""Docker-specific behaviour of `DockerSandbox`: the container's settings hold for real, containers never
outlive a run, engine failures are infrastructure errors, and runs go to the freest engine.

The hostile-script containment suite, shared by every backend, lives elsewhere."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from wmrl.autoresearch.environments.sandbox.base import ExecutionRequest, SandboxLimits
from wmrl.autoresearch.environments.sandbox.docker import CONTAINER_LABELS, docker_available, pick_engine

FAST = SandboxLimits(timeout_s=20, memory_mb=1024)


def _run(sandbox, script: str, limits: SandboxLimits = FAST, **kwargs):
    return sandbox.run(ExecutionRequest(script=script, limits=limits, **kwargs))


def _sandbox_containers(sandbox) -> set[str]:
    label = ",".join(f"{k}={v}" for k, v in CONTAINER_LABELS.items())
    containers = sandbox.engines[0].client.containers.list(all=True, filters={"label": label})
    return {c.id for c in containers}


# -- without an engine --------------------------------------------------------------------------------------
def test_pick_engine_prefers_most_free_slots_then_the_first():
    assert pick_engine([2, 5, 1]) == 1
    assert pick_engine([3, 3, 0]) == 0
    assert pick_engine([0, 0, 1]) == 2
    assert pick_engine([0, 0]) is None
    assert pick_engine([]) is None


def test_docker_available_names_the_engine_it_cannot_reach(tmp_path):
    url = f"unix://{tmp_path}/no-such.sock"
    reason = docker_available(url)
    assert reason is not None and url in reason


def test_unreachable_engine_fails_loudly_at_construction(tmp_path):
    from wmrl.autoresearch.environments.sandbox.docker import DockerSandbox

    url = f"unix://{tmp_path}/no-such.sock"
    with pytest.raises(RuntimeError, match="no usable docker engine"):
        DockerSandbox(base_urls=[url])


def test_missing_sdk_names_the_extra(monkeypatch):
    from wmrl.autoresearch.environments.sandbox.docker import DockerSandbox

    monkeypatch.setitem(sys.modules, "docker", None)
    with pytest.raises(ImportError, match=r"pip install 'wmrl\[docker\]'"):
        DockerSandbox()


# -- with an engine -----------------------------------------------------------------------------------------


@pytest.mark.docker
def test_normal_script_returns_output_and_submission(docker_sandbox):
    script = (
        "import sklearn, sys\n"
        "open('submission.csv', 'w').write('id,prediction\\n0,1\\n')\n"
        "print('VALIDATION_SCORE=0.5'); print(sys.version, sklearn.__version__)\n"
    )
    result = _run(docker_sandbox, script)
    import sklearn

    assert result.infra_error is None and result.exit_code == 0 and not result.timed_out
    assert result.files == {"submission.csv": b"id,prediction\n0,1\n"}
    assert "VALIDATION_SCORE=0.5" in result.stdout_tail
    # The same interpreter and packages as the host: the same scores as the process backend.
    assert f"{sys.version} {sklearn.__version__}" in result.stdout_tail
    assert "WMRL-START" not in result.stderr_tail
    assert result.backend == "docker" and 0 < result.wall_seconds < FAST.timeout_s


@pytest.mark.docker
def test_containers_are_removed_after_success_timeout_and_crash(docker_sandbox):
    before = _sandbox_containers(docker_sandbox)
    ok = _run(docker_sandbox, "print('fine')")
    slow = _run(docker_sandbox, "import time\ntime.sleep(60)", SandboxLimits(timeout_s=1.5))
    crash = _run(docker_sandbox, "import ctypes\nctypes.string_at(0)")
    assert ok.exit_code == 0
    assert slow.timed_out and slow.exit_code == -9 and 1.5 <= slow.wall_seconds < 10
    assert crash.exit_code == -11 and not crash.timed_out and crash.infra_error is None
    assert _sandbox_containers(docker_sandbox) <= before


@pytest.mark.docker
def test_container_is_removed_when_the_host_is_interrupted(docker_sandbox, monkeypatch):
    from wmrl.autoresearch.environments.sandbox import docker as docker_module

    def interrupt(self):
        raise KeyboardInterrupt

    before = _sandbox_containers(docker_sandbox)
    monkeypatch.setattr(docker_module._Waiter, "start", interrupt)
    with pytest.raises(KeyboardInterrupt):
        _run(docker_sandbox, "import time\ntime.sleep(60)")
    assert _sandbox_containers(docker_sandbox) <= before
    assert all(e.busy == 0 for e in docker_sandbox.engines)


@pytest.mark.docker
def test_engine_failure_is_an_infra_error_not_an_exception(docker_sandbox, monkeypatch):
    monkeypatch.setattr(docker_sandbox, "image", "wmrl-no-such-image:missing")
    result = _run(docker_sandbox, "print(1)")
    assert result.exit_code is None and result.infra_error and "wmrl-no-such-image" in result.infra_error


@pytest.mark.docker
def test_network_is_disabled(docker_sandbox):
    script = (
        "import socket\n"
        "print(sorted(name for _, name in socket.if_nameindex()))\n"
        "socket.create_connection(('1.1.1.1', 53), timeout=3)\n"
    )
    result = _run(docker_sandbox, script)
    assert "['lo']" in result.stdout_tail
    assert result.exit_code == 1 and "Network is unreachable" in result.stderr_tail


@pytest.mark.docker
def test_runs_as_nobody_without_capabilities(docker_sandbox):
    script = (
        "import os\n"
        "print(os.getuid(), os.getgid())\n"
        "print([l for l in open('/proc/self/status') if l.startswith('CapEff')][0].split()[1])\n"
    )
    result = _run(docker_sandbox, script)
    assert result.exit_code == 0, result.stderr_tail
    assert result.stdout_tail.split() == ["65534", "65534", "0000000000000000"]


@pytest.mark.docker
def test_root_and_system_dirs_are_read_only_at_the_os_level(docker_sandbox):
    # libc's open() bypasses the tripwire's audit hook, so this checks the mount itself.
    script = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "for path in (b'/x', b'/usr/x', b'/etc/x', b'/tmp/x', b'/sandbox/x'):\n"
        "    fd = libc.open(path, os.O_WRONLY | os.O_CREAT, 0o644)\n"
        "    print(path.decode(), 'ok' if fd >= 0 else os.strerror(ctypes.get_errno()))\n"
    )
    result = _run(docker_sandbox, script)
    lines = dict(line.split(" ", 1) for line in result.stdout_tail.strip().splitlines())
    assert lines["/x"] == lines["/usr/x"] == lines["/etc/x"] == "Read-only file system"
    assert lines["/tmp/x"] == lines["/sandbox/x"] == "ok"


@pytest.mark.docker
def test_host_files_outside_the_mounts_are_absent(docker_sandbox):
    import wmrl

    host_dir = str(Path(wmrl.__file__).parent)  # the package (and its task specs) are not mounted
    result = _run(docker_sandbox, f"import os\nprint(os.path.exists({host_dir!r}), os.path.exists('/home'))")
    assert result.stdout_tail.split() == ["False", "False"]


@pytest.mark.docker
def test_memory_limit_kills_with_an_out_of_memory_hint(docker_sandbox):
    result = _run(
        docker_sandbox, "x = bytearray(1024 * 1024 * 1024)", SandboxLimits(timeout_s=30, memory_mb=256)
    )
    assert result.exit_code == -9 and not result.timed_out
    assert "out of memory" in result.note


@pytest.mark.docker
def test_the_work_dir_is_bounded_in_total_not_only_per_file(docker_sandbox):
    """A run wrote 1,456 MB into docker's work dir in files each below the per-file limit; as in the process
    sandbox, the work dir is one tmpfs of ``limits.max_disk_mb`` (as root, with a local engine)."""
    if not docker_sandbox.disk_quota:
        pytest.skip("no size-limited tmpfs per run here (needs root and mount): the work dir is bounded per file")
    assert "+quota" in docker_sandbox.description
    script = (
        "import os\n"
        "chunk = b'x' * (32 << 20)\n"
        "for i in range(24):  # 768 MB in 32 MB files, each below the per-file limit\n"
        "    with open(f'fill-{i}', 'wb') as f:\n"
        "        f.write(chunk)\n"
        "print('WROTE-ALL')\n"
    )
    limits = SandboxLimits(timeout_s=30, memory_mb=2048, max_file_mb=64, max_disk_mb=256)
    result = _run(docker_sandbox, script, limits)
    assert "WROTE-ALL" not in result.stdout_tail and "No space left" in result.stderr_tail, result
    assert result.exit_code == 1 and result.infra_error is None


@pytest.mark.docker
def test_process_limit_stops_thread_floods(docker_sandbox):
    script = (
        "import threading, time\n"
        "ts = [threading.Thread(target=time.sleep, args=(2,)) for _ in range(64)]\n"
        "[t.start() for t in ts]\n"
    )
    result = _run(docker_sandbox, script, SandboxLimits(timeout_s=20, max_processes=16))
    assert result.exit_code == 1 and "can't start new thread" in result.stderr_tail


@pytest.mark.docker
def test_output_flood_is_bounded_and_the_start_marker_survives(docker_sandbox):
    script = "import sys\nfor _ in range(64):\n    sys.stdout.write('y' * 1024 * 1024)\nprint('END')\n"
    limits = SandboxLimits(timeout_s=60, output_tail_bytes=4096)
    result = _run(docker_sandbox, script, limits)
    assert result.infra_error is None and result.exit_code == 0
    assert result.stdout_bytes == 64 * 1024 * 1024 + 4
    assert len(result.stdout_tail) < 4096 + 100 and result.stdout_tail.endswith("END\n")


# -- two engines, one stopped mid-run -------------------------------------------------------------------------
@pytest.fixture
def second_engine():
    """A second docker engine on this machine (own socket, data and exec roots), killed and cleaned up after."""
    import contextlib
    import os
    import shutil
    import signal
    import subprocess
    import tempfile
    import time

    if docker_available():
        pytest.skip(f"no docker engine: {docker_available()}")
    if shutil.which("dockerd") is None or os.geteuid() != 0:
        pytest.skip("cannot start a second docker engine (needs the dockerd binary and root)")
    root = Path(tempfile.mkdtemp(prefix="wmrl-d2-", dir="/tmp"))  # short: a unix socket path is capped at 108
    url = f"unix://{root}/docker.sock"
    log = (root / "dockerd.log").open("w")
    proc = subprocess.Popen(
        ["dockerd", "--host", url, "--data-root", str(root / "data"), "--exec-root", str(root / "exec"),
         "--pidfile", str(root / "docker.pid"), "--bridge", "none", "--iptables=false", "--ip6tables=false"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while docker_available(url) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.5)
    if docker_available(url):
        proc.kill()
        pytest.skip(f"the second docker engine did not start: {(root / 'dockerd.log').read_text()[-500:]}")
    yield url, proc
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # dockerd and the containerd it manages
    subprocess.run(["pkill", "-9", "-f", str(root)], check=False)  # shims of containers orphaned by the kill
    proc.wait(timeout=30)
    log.close()
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    for mount in sorted((m for m in mounts if m.startswith(str(root))), key=len, reverse=True):
        subprocess.run(["umount", "-l", mount], capture_output=True, check=False)  # overlays, netns, data root
    shutil.rmtree(root, ignore_errors=True)
    assert not root.exists(), f"could not clean up {root}"


@pytest.mark.slow  # starts and stops a second docker engine: the slow tier (.ci/run)
def test_an_engine_stopped_mid_run_loses_no_execution_and_counts_none_twice(second_engine):
    import os
    import signal
    import threading
    import time

    from wmrl.autoresearch.environments.sandbox.docker import DockerSandbox, _engine_name

    url, proc = second_engine
    sandbox = DockerSandbox(base_urls=[_engine_name(None), url], slots_per_engine=2)
    try:
        assert [e.url for e in sandbox.engines] == [_engine_name(None), url]
        script = "import time\nprint('start-{i}', flush=True)\ntime.sleep(6)\nprint('done-{i}')\n"
        requests = [ExecutionRequest(script=script.format(i=i), limits=FAST, label=f"run {i}") for i in range(8)]
        results: list = []
        runner = threading.Thread(target=lambda: results.extend(sandbox.run_many(requests)))
        runner.start()
        deadline = time.monotonic() + 60
        while sandbox.engines[1].busy < 2 and time.monotonic() < deadline:  # both engines busy
            time.sleep(0.2)
        assert sandbox.engines[1].busy == 2
        time.sleep(2)  # the second engine's two scripts are running
        os.killpg(proc.pid, signal.SIGKILL)  # the engine dies mid-run
        runner.join(timeout=180)
        assert not runner.is_alive()
        assert len(results) == 8
        for i, result in enumerate(results):  # every request has exactly its own, complete result
            assert result.infra_error is None and result.exit_code == 0, (i, result.infra_error)
            assert result.stdout_tail.split() == [f"start-{i}", f"done-{i}"]
        assert sandbox.engines[1].down and sandbox.engines_down == 1
        assert sandbox.requeued >= 2  # the two runs on the killed engine ran again on the first one
        assert sandbox.engines[0].busy == sandbox.engines[1].busy == 0
        after = sandbox.run(ExecutionRequest(script="print('after')", limits=FAST))
        assert after.exit_code == 0 and after.stdout_tail.strip() == "after"  # new runs skip the dead engine
    finally:
        sandbox.close()


def test_with_every_engine_down_a_run_is_missing_not_zero(second_engine):
    import os
    import signal

    from wmrl.autoresearch.environments.sandbox.docker import DockerSandbox

    url, proc = second_engine
    sandbox = DockerSandbox(base_urls=[url], slots_per_engine=1)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        result = sandbox.run(ExecutionRequest(script="print(1)", limits=FAST))
        assert result.exit_code is None and "every docker engine is down" in result.infra_error
        assert sandbox.engines_down == 1 and sandbox.requeued == 1
    finally:
        sandbox.close()
