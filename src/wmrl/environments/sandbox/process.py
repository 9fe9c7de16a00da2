"""`ProcessSandbox`: runs a solution as a local process, isolated by bubblewrap where it is installed.

Layers, from the outside in:

* ``prlimit``: address space, CPU seconds, processes, file size, no core dumps, open files.
* ``bwrap`` (isolation ``bwrap``): new pid/net/ipc/uts namespaces, a root made of read-only binds of the
  system and the Python installation only, the work dir bound read-write at ``/sandbox``, a private ``/tmp``,
  killed with its parent. The task cache (answers) and the user's home are simply not there. As root, the
  script then runs as ``nobody`` (uid 65534) with no capabilities, so the process limit applies (the kernel
  exempts uid 0 from it) and nothing outside the work dir is writable.
* ``unshare`` (isolation ``unshare``, when bubblewrap is missing): new net and pid namespaces only; the
  filesystem is the host's, so the tripwire is the only guard of the answers. Weaker: a warning says so.
* The bootstrap's tripwire (``boot.py``) flags reads of answers and bundled datasets and writes outside the
  work dir; a new session and process group, killed on timeout; a minimal environment with one thread.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Literal

from wmrl.environments.sandbox.base import ExecutionRequest, ExecutionResult, Sandbox
from wmrl.environments.sandbox.common import (
    BOOT_PATH,
    READ_ROOTS,
    TailBuffer,
    boot_argv,
    bundled_data_dirs,
    finish,
    new_nonce,
    prepare_workdir,
)

log = logging.getLogger(__name__)

Isolation = Literal["auto", "bwrap", "unshare", "none"]
SANDBOX_UID = 65534
_SYSTEM_DIRS = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc")
_INNER_WORKDIR = "/sandbox"
_INNER_BOOT = "/wmrl/boot.py"
_probe_cache: dict[str, str | None] = {}


def sandbox_env(workdir: str) -> dict[str, str]:
    """The only environment a solution sees: no inherited secrets, one thread for every math library."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": workdir,
        "TMPDIR": f"{workdir}/.tmp",
        "MPLCONFIGDIR": f"{workdir}/.tmp",
        "LANG": "C.UTF-8",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "MPLBACKEND": "Agg",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "NUMEXPR_NUM_THREADS": "1",
        "VECLIB_MAXIMUM_THREADS": "1",
        "LOKY_MAX_CPU_COUNT": "1",
    }
    # Older OpenBLAS builds compute wrong results or crash on some processors without these.
    for key in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        if key in os.environ:
            env[key] = os.environ[key]
    return env


def _probe(isolation: str) -> str | None:
    """None if ``isolation`` works here, else why not (cached per process)."""
    if isolation in _probe_cache:
        return _probe_cache[isolation]
    if isolation == "none":
        error = None
    else:
        tool = "bwrap" if isolation == "bwrap" else "unshare"
        if shutil.which(tool) is None:
            error = f"{tool} is not installed" + (" (apt-get install bubblewrap)" if tool == "bwrap" else "")
        else:
            cmd = (
                ["bwrap", "--unshare-pid", "--unshare-net", "--ro-bind", "/", "/", "true"]
                if tool == "bwrap"
                else ["unshare", "--net", "--pid", "--fork", "--kill-child", "true"]
            )
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
            error = None if proc.returncode == 0 else f"{tool} does not work here: {proc.stderr.strip()}"
    _probe_cache[isolation] = error
    return error


def resolve_isolation(isolation: Isolation) -> str:
    """Pick the strongest isolation that works (``auto``) or check that the requested one does."""
    if isolation == "auto":
        for candidate in ("bwrap", "unshare"):
            if _probe(candidate) is None:
                if candidate != "bwrap":
                    log.warning(
                        "ProcessSandbox: bubblewrap is unavailable (%s); falling back to '%s' isolation, "
                        "which shares the host filesystem. Install it: apt-get install bubblewrap",
                        _probe("bwrap"),
                        candidate,
                    )
                return candidate
        log.warning("ProcessSandbox: no namespace isolation works here; running with rlimits only")
        return "none"
    if isolation not in ("bwrap", "unshare", "none"):
        raise ValueError(f"isolation must be one of auto, bwrap, unshare, none (got {isolation!r})")
    error = _probe(isolation)
    if error is not None:
        raise RuntimeError(f"ProcessSandbox(isolation={isolation!r}) is unavailable: {error}")
    return isolation


class ProcessSandbox(Sandbox):
    """Local process sandbox (the default backend).

    Args:
        isolation: ``auto`` (bubblewrap if it works, else ``unshare``), or one of ``bwrap``, ``unshare``,
            ``none``. An explicit choice that does not work here is an error.
        max_concurrency: runs at once (default: CPU cores); each run gets one thread.
        python: interpreter that runs solutions (default: this one, with the same packages).
        tmp_root: where per-run work dirs are made (default: the system temp dir).
    """

    name = "process"

    def __init__(
        self,
        isolation: Isolation = "auto",
        max_concurrency: int | None = None,
        python: str | None = None,
        tmp_root: str | None = None,
    ) -> None:
        super().__init__(max_concurrency)
        self.isolation = resolve_isolation(isolation)
        self.python = python or sys.executable
        self.tmp_root = tmp_root
        self.drop_uid = self.isolation == "bwrap" and os.geteuid() == 0
        self.bundled = bundled_data_dirs()

    @property
    def description(self) -> str:
        return self.isolation + ("+uid" if self.drop_uid else "")

    # -- command construction -------------------------------------------------------------------------
    def _bwrap_prefix(self, workdir: Path) -> list[str]:
        cmd = ["bwrap", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        cmd += ["--die-with-parent", "--new-session"]
        made: set[str] = set()

        def parents(path: str) -> list[str]:
            out = []
            for parent in reversed(Path(path).parents):
                p = str(parent)
                if p != "/" and p not in made and not any(p == d or p.startswith(d + "/") for d in _SYSTEM_DIRS):
                    made.add(p)
                    out += ["--perms", "0755", "--dir", p]
            return out

        for d in _SYSTEM_DIRS:
            if os.path.isdir(d):
                cmd += ["--ro-bind", d, d]
        # Fresh /tmp and /dev before the Python installation's binds: bwrap applies these in order, and a tmpfs
        # mounted later would hide an installation that lives under /tmp (a venv in a checkout under /tmp).
        cmd += ["--proc", "/proc", "--dev", "/dev"]
        cmd += ["--perms", "1777", "--tmpfs", "/dev/shm", "--perms", "1777", "--tmpfs", "/tmp"]
        python_dirs = {sys.prefix, sys.base_prefix, str(Path(self.python).resolve().parent.parent)}
        if Path(self.python).parent.parent.is_dir():
            python_dirs.add(str(Path(self.python).parent.parent))
        for d in sorted(python_dirs, key=len):
            if not any(d == s or d.startswith(s + "/") for s in _SYSTEM_DIRS):
                cmd += parents(d) + ["--ro-bind", d, d]
        cmd += ["--perms", "0755", "--dir", "/wmrl", "--ro-bind", str(BOOT_PATH), _INNER_BOOT]
        cmd += ["--bind", str(workdir), _INNER_WORKDIR]
        cmd += ["--chdir", _INNER_WORKDIR, "--"]
        if self.drop_uid:
            cmd += ["setpriv", f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups"]
            cmd += ["--inh-caps=-all", "--bounding-set=-all", "--"]
        return cmd

    def _limits_prefix(self, request: ExecutionRequest) -> list[str]:
        limits = request.limits
        # The per-uid process count is shared by concurrent runs (all run as one uid).
        nproc = limits.max_processes * self.max_concurrency
        return [
            "prlimit",
            f"--as={limits.memory_mb * 1024 * 1024}",
            f"--cpu={int(limits.timeout_s) + 5}",
            f"--nproc={nproc}",
            f"--fsize={limits.max_file_mb * 1024 * 1024}",
            "--core=0",
            "--nofile=1024",
            "--",
        ]

    def command(self, workdir: Path, request: ExecutionRequest, nonce: str) -> tuple[list[str], str]:
        """The full command line and the work dir path the script sees."""
        forbidden = tuple(request.forbidden) + self.bundled
        if self.isolation == "bwrap":
            inner = _INNER_WORKDIR
            prefix = self._bwrap_prefix(workdir)
            boot = _INNER_BOOT
        else:
            inner = str(workdir)
            boot = str(BOOT_PATH)
            prefix = ["unshare", "--net", "--pid", "--fork", "--kill-child", "--"] if self.isolation == "unshare" else []
        argv = boot_argv(self.python, boot, nonce, forbidden, READ_ROOTS)
        return self._limits_prefix(request) + prefix + argv, inner

    # -- running ----------------------------------------------------------------------------------------
    def run(self, request: ExecutionRequest) -> ExecutionResult:
        root = Path(tempfile.mkdtemp(prefix="wmrl-run-", dir=self.tmp_root))
        workdir = root / "work"
        workdir.mkdir()
        try:
            return self._run_in(workdir, request)
        except Exception as exc:  # noqa: BLE001 - a sandbox failure is an infrastructure error, never a reward
            log.exception("ProcessSandbox failed on %s", request.label)
            return ExecutionResult(
                exit_code=None,
                wall_seconds=0.0,
                infra_error=f"{type(exc).__name__}: {exc}",
                backend=self.name,
                isolation=self.description,
            )
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def _run_in(self, workdir: Path, request: ExecutionRequest) -> ExecutionResult:
        prepare_workdir(workdir, request)
        if self.drop_uid:
            for path in [workdir, *workdir.rglob("*")]:
                os.lchown(path, SANDBOX_UID, SANDBOX_UID)
        nonce = new_nonce()
        cmd, inner = self.command(workdir, request, nonce)
        out, err = TailBuffer(request.limits.output_tail_bytes), TailBuffer(request.limits.output_tail_bytes)
        # The start marker must survive an stderr flood: keep the first bytes of stderr regardless.
        start = time.monotonic()
        proc = subprocess.Popen(
            cmd,
            cwd=workdir,
            env=sandbox_env(inner),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            close_fds=True,
        )
        readers = [
            threading.Thread(target=_pump, args=(proc.stdout, out), daemon=True),
            threading.Thread(target=_pump, args=(proc.stderr, err), daemon=True),
        ]
        for t in readers:
            t.start()
        timed_out = False
        try:
            proc.wait(timeout=request.limits.timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        wall = time.monotonic() - start
        _kill_group(proc.pid)
        proc.wait()
        for t in readers:
            t.join(timeout=5)
        exit_code = proc.returncode
        if self.isolation == "bwrap" and exit_code is not None and exit_code > 128:
            exit_code = -(exit_code - 128)  # bwrap reports a child killed by signal N as 128 + N
        return finish(
            workdir=workdir,
            request=request,
            nonce=nonce,
            exit_code=exit_code,
            raw_exit_code=proc.returncode,
            wall_seconds=wall,
            timed_out=timed_out,
            out=out,
            err=err,
            backend=self.name,
            isolation=self.description,
        )


def _pump(stream, buffer: TailBuffer) -> None:
    try:
        while chunk := stream.read1(65536):
            buffer.feed(chunk)
    except (OSError, ValueError):
        pass
    finally:
        stream.close()


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
