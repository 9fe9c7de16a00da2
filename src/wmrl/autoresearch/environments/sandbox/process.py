"""`ProcessSandbox`: runs a solution as a local process, isolated by bubblewrap where it is installed.

Layers, from the outside in:

* a control group per run (:mod:`~wmrl.autoresearch.environments.sandbox.cgroups`; cgroup v2 delegated, or v1 as root):
  ``limits.memory_mb`` for the run's whole process tree (anonymous memory, ``memfd`` files, shared memory and
  tmpfs pages it writes, no swap), one CPU however many processes it forks, ``limits.max_processes``; its CPU
  seconds are counted and are the time budget (:mod:`~wmrl.autoresearch.environments.sandbox.cpu_budget`). Without one (no
  delegation, not root) a warning says so once, :attr:`ProcessSandbox.bounds_each_run` is ``False`` and training
  refuses the sandbox unless ``allow_weak_bounds`` is set.
* ``prlimit``: address space, CPU seconds, processes, file size, no core dumps, open files (per process).
* a size-limited tmpfs per run (as root, where ``mount`` works): the run's work dir, ``/tmp`` and
  ``/dev/shm`` all live on one tmpfs of ``limits.max_disk_mb``, so a script cannot fill the host's disk or pin
  its RAM with many files below the per-file limit; unmounting it removes everything the run wrote. Without
  it (not root, or ``mount`` refused) ``/tmp`` and ``/dev/shm`` are sized by bwrap (``--size``), and the work
  dir is bounded per file only (a warning says so).
* ``bwrap`` (isolation ``bwrap``): new pid/net/ipc/uts namespaces and the filesystem of the mount plan
  (:mod:`~wmrl.autoresearch.environments.sandbox.mounts`): ``/etc``, the programs and libraries of ``/usr``, and the Python
  installation as its *runtime view* (:mod:`~wmrl.autoresearch.environments.sandbox.runtime_view`): code and package
  metadata only, no data file and no ``tests/`` folder of any package, so neither ``open()``, ``ctypes``/libc
  nor a ``cat`` subprocess finds a copy of a dataset there. The work dir is bound read-write at ``/sandbox``,
  ``/tmp`` is private, and the sandbox is killed with its parent. The task cache (answers) and the user's home
  are simply not there, and every folder task's private paths that the plan would show are covered.
* a seccomp filter (:mod:`~wmrl.autoresearch.environments.sandbox.seccomp`, x86_64 and aarch64, the docker backend's too):
  the kernel keyring, new namespaces, ``ptrace``, ``bpf``, ``io_uring``, mounts, kernel modules and more fail
  with ``EPERM``; socket families other than unix, IPv4, IPv6 and netlink routing fail with ``EAFNOSUPPORT``.
* an unprivileged uid per run (as root): the script runs with no capabilities as a uid leased for the run
  alone from a dedicated range (``SANDBOX_UID_BASE``; a lock file per uid, held for the run, makes the lease
  exclusive across processes too). The kernel counts ``RLIMIT_NPROC`` per uid, so each run gets its own
  ``limits.max_processes`` and a run that holds all of its slots cannot starve a concurrent one; nothing
  outside the work dir is writable.
* ``unshare`` (isolation ``unshare``, when bubblewrap is missing): new net and pid namespaces only; the
  filesystem is the host's, so the tripwire is the only guard of the answers. Weaker: a warning says so, and
  :attr:`ProcessSandbox.hides_answers` is ``False`` so that training can refuse it.
* The bootstrap's tripwire (``boot.py``) flags reads of answers and bundled datasets and writes outside the
  work dir; a new session and process group, killed on timeout; a minimal environment with one thread.

Whatever the script leaves behind (a 3000-deep tree of folders included) is removed after the run
(:func:`~wmrl.autoresearch.environments.sandbox.common.remove_tree`).
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import logging
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Literal

from wmrl.autoresearch.environments.sandbox.base import ExecutionRequest, ExecutionResult, Sandbox
from wmrl.autoresearch.environments.sandbox.cgroups import RunCgroup, cgroup_support
from wmrl.autoresearch.environments.sandbox.common import (
    BOOT_PATH,
    PRIVATE_DIRS,
    READ_ROOTS,
    TailBuffer,
    boot_argv,
    bundled_data_dirs,
    finish,
    mount_tmpfs,
    new_nonce,
    prepare_workdir,
    probe_disk_quota,
    remove_tree,
    unmount,
    write_boot_config,
)
from wmrl.autoresearch.environments.sandbox.cpu_budget import CpuBudget
from wmrl.autoresearch.environments.sandbox.mounts import Mount, MountPlan
from wmrl.autoresearch.environments.sandbox.runtime_view import runtime_view, sandbox_interpreter
from wmrl.autoresearch.environments.sandbox.seccomp import seccomp_program

log = logging.getLogger(__name__)

Isolation = Literal["auto", "bwrap", "unshare", "none"]
# ``nobody``: the uid of backends that cannot lease one per run (docker).
SANDBOX_UID = 65534
# ProcessSandbox leases uid (and gid) SANDBOX_UID_BASE + k for one run, k < SANDBOX_UID_COUNT: far above
# login users, system users and the usual subordinate-uid ranges of rootless containers (100000 + 65536 n).
SANDBOX_UID_BASE = 1_800_000_000
SANDBOX_UID_COUNT = 4096
_UID_LOCK_DIRS = ("/run/wmrl-sandbox-uids", os.path.join(tempfile.gettempdir(), "wmrl-sandbox-uids"))
_uid_cursor = itertools.count(os.getpid() * 7919)
_INNER_WORKDIR = "/sandbox"
_INNER_BOOT = "/wmrl/boot.py"
_probe_cache: dict[str, str | None] = {}


def sandbox_env(workdir: str) -> dict[str, str]:
    """The only environment a solution sees: no inherited secrets, one thread for every math library."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": workdir,
        # The leased uid has no passwd entry: getpass.getuser() (torch, joblib caches) reads these first.
        "USER": "sandbox",
        "LOGNAME": "sandbox",
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


def bwrap_mounts(mounts: list[Mount] | tuple[Mount, ...]) -> list[str]:
    """bubblewrap arguments for a part of the mount plan, in order. Parent folders that the plan does not mount
    are made world-readable (bwrap would make them 0700, and the run's uid could not pass ``/root``)."""
    args: list[str] = []
    made: set[str] = set()
    mounted: list[str] = []
    for m in mounts:
        for parent in map(str, reversed(Path(m.target).parents[:-1])):
            if parent not in made and not any(parent == t or parent.startswith(t + "/") for t in mounted):
                made.add(parent)
                args += ["--perms", "0755", "--dir", parent]
        mounted.append(m.target)
        if m.kind == "bind":
            args += ["--ro-bind", m.source, m.target]
        elif m.kind == "link":
            args += ["--symlink", m.source, m.target]
        elif m.kind == "cover":
            args += ["--perms", "0555", "--size", "4096", "--tmpfs", m.target]
        else:
            args += ["--ro-bind", "/dev/null", m.target]
    return args


@contextlib.contextmanager
def _leased_uid():
    """A uid in ``SANDBOX_UID_BASE + [0, SANDBOX_UID_COUNT)`` that no other run holds, for one run.

    The lease is an exclusive ``flock`` on a per-uid lock file: exclusive between threads and between
    processes (several sandboxes, DDP ranks on one host), and released by the kernel if the holder dies.
    """
    lock_dir = next((d for d in _UID_LOCK_DIRS if os.path.isdir(os.path.dirname(d))), _UID_LOCK_DIRS[-1])
    os.makedirs(lock_dir, mode=0o700, exist_ok=True)
    start = next(_uid_cursor)
    for k in range(SANDBOX_UID_COUNT):
        uid = SANDBOX_UID_BASE + (start + k) % SANDBOX_UID_COUNT
        fd = os.open(os.path.join(lock_dir, f"{uid}.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        try:
            yield uid
        finally:
            os.close(fd)  # releases the lock
        return
    raise RuntimeError(f"all {SANDBOX_UID_COUNT} sandbox uids are leased (lock files in {lock_dir})")


class ProcessSandbox(Sandbox):
    """Local process sandbox (the default backend).

    Args:
        isolation: ``auto`` (bubblewrap if it works, else ``unshare``), or one of ``bwrap``, ``unshare``,
            ``none``. An explicit choice that does not work here is an error.
        max_concurrency: runs at once (default: CPU cores); each run gets one thread.
        python: interpreter that runs solutions (default: this one, with the same packages).
        tmp_root: where per-run work dirs are made (default: the system temp dir). As root each run's dir is a
            tmpfs of ``limits.max_disk_mb`` mounted there, unmounted after the run.
        views_dir: where the runtime views of interpreters are cached (default
            :func:`~wmrl.autoresearch.environments.sandbox.runtime_view.default_views_dir`).
    """

    name = "process"

    def __init__(
        self,
        isolation: Isolation = "auto",
        max_concurrency: int | None = None,
        python: str | None = None,
        tmp_root: str | None = None,
        views_dir: str | None = None,
    ) -> None:
        super().__init__(max_concurrency)
        self.isolation = resolve_isolation(isolation)
        self.python = sandbox_interpreter(python or sys.executable)
        self.tmp_root = tmp_root
        self.drop_uid = self.isolation == "bwrap" and os.geteuid() == 0
        self.bundled = bundled_data_dirs()
        self.plan = MountPlan.for_view(runtime_view(self.python, views_dir), views_dir) if self.isolation == "bwrap" else None
        self.seccomp = seccomp_program() if self.isolation == "bwrap" else None
        if self.isolation == "bwrap" and self.seccomp is None:
            log.warning("ProcessSandbox: no seccomp filter for %s; keyring and namespace syscalls stay open",
                        platform.machine())
        why_not = probe_disk_quota(tmp_root)
        self.disk_quota = why_not is None
        if not self.disk_quota and self.isolation == "bwrap":
            log.warning("ProcessSandbox: no size-limited tmpfs per run (%s): /tmp and /dev/shm are bounded by "
                        "limits.max_disk_mb each, the work dir only per file (limits.max_file_mb)", why_not)
        self.cgroups, self.no_cgroup_reason = cgroup_support()
        if self.cgroups is None:
            _warn_once(
                f"ProcessSandbox: no cgroup per run here ({self.no_cgroup_reason}). A run's memory is bounded per process only "
                "(RLIMIT_AS: memfd, shared memory and several children can exceed limits.memory_mb), its CPU not "
                "at all (a busy run can starve its neighbours into timeouts), and its time budget is wall-clock. "
                "Training refuses this unless allow_weak_bounds=true; run as root, or give wmrl a delegated "
                "cgroup v2 (systemd-run --scope -p Delegate=yes ..., or WMRL_CGROUP=DIR)."
            )

    @property
    def description(self) -> str:
        return self.isolation + "".join(
            f"+{layer}" for layer, on in (("uid", self.drop_uid), ("seccomp", self.seccomp), ("quota", self.disk_quota),
                                          ("cgroup", self.cgroups is not None))
            if on
        )

    @property
    def bounds_each_run(self) -> bool:
        """Whether each run gets its own control group (memory of the whole tree, one CPU, CPU-time budget)."""
        return self.cgroups is not None

    @property
    def hides_answers(self) -> bool:
        """Whether the script cannot read the answers whatever it does (bubblewrap only). With ``unshare`` or
        ``none`` it runs on the host filesystem as the host user, and only the tripwire (which sees Python-level
        reads only) stands between it and the task cache: fine for a demo, not for training."""
        return self.isolation == "bwrap"

    # -- command construction -------------------------------------------------------------------------
    def _bwrap_prefix(
        self, workdir: Path, request: ExecutionRequest, uid: int, seccomp_fd: int | None, scratch: Path | None
    ) -> list[str]:
        cmd = ["bwrap", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        cmd += ["--die-with-parent", "--new-session"]
        # The system first; then fresh /proc, /dev and /tmp; then the Python installation's runtime view: bwrap
        # applies these in order, and a tmpfs mounted later would hide an installation that lives under /tmp (a
        # venv in a checkout under /tmp); last, the covers over task folders and caches the view would show.
        plan = self.plan
        cmd += bwrap_mounts(plan.system)
        cmd += ["--proc", "/proc", "--dev", "/dev"]
        if scratch is not None:  # on the run's size-limited tmpfs, sharing one budget with the work dir
            cmd += ["--bind", str(scratch / "shm"), "/dev/shm", "--bind", str(scratch / "tmp"), "/tmp"]
        else:  # tmpfs pages are host RAM, outside the address-space limit: each gets a size
            size = str(request.limits.max_disk_mb * 1024 * 1024)
            for d in ("/dev/shm", "/tmp"):
                cmd += ["--perms", "1777", "--size", size, "--tmpfs", d]
        cmd += bwrap_mounts(plan.python() + plan.covers(request.forbidden))
        cmd += ["--perms", "0755", "--dir", "/wmrl", "--ro-bind", str(BOOT_PATH), _INNER_BOOT]
        cmd += ["--bind", str(workdir), _INNER_WORKDIR]
        if seccomp_fd is not None:
            cmd += ["--seccomp", str(seccomp_fd)]
        cmd += ["--chdir", _INNER_WORKDIR, "--"]
        if self.drop_uid:
            cmd += ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
            cmd += ["--inh-caps=-all", "--bounding-set=-all", "--"]
        return cmd

    def _limits_prefix(self, request: ExecutionRequest) -> list[str]:
        limits = request.limits
        # RLIMIT_NPROC counts every process of the real uid. A dropped run has a uid of its own; otherwise the
        # host user's processes (concurrent runs included) share the count.
        nproc = limits.max_processes if self.drop_uid else limits.max_processes * self.max_concurrency
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

    def command(
        self,
        workdir: Path,
        request: ExecutionRequest,
        nonce: str,
        *,
        uid: int = SANDBOX_UID,
        seccomp_fd: int | None = None,
        scratch: Path | None = None,
    ) -> tuple[list[str], str]:
        """The full command line and the work dir path the script sees.

        ``uid``: the uid the script runs as (when root drops to one); ``seccomp_fd``: an inheritable fd holding
        :func:`~wmrl.autoresearch.environments.sandbox.seccomp.seccomp_program`; ``scratch``: a folder with ``tmp/`` and ``shm/`` on the run's size-limited
        tmpfs (else bwrap makes sized ones).
        """
        forbidden = tuple(request.forbidden) + self.bundled
        if self.isolation == "bwrap":
            inner = _INNER_WORKDIR
            prefix = self._bwrap_prefix(workdir, request, uid, seccomp_fd, scratch)
            boot = _INNER_BOOT
        else:
            inner = str(workdir)
            boot = str(BOOT_PATH)
            prefix = ["unshare", "--net", "--pid", "--fork", "--kill-child", "--"] if self.isolation == "unshare" else []
        private = PRIVATE_DIRS if self.isolation == "bwrap" else ()  # unshare and none share the host's /tmp
        write_boot_config(workdir, nonce, forbidden, READ_ROOTS, private)
        argv = boot_argv(self.python, boot)
        return self._limits_prefix(request) + prefix + argv, inner

    # -- running ----------------------------------------------------------------------------------------
    def run(self, request: ExecutionRequest) -> ExecutionResult:
        root = Path(tempfile.mkdtemp(prefix="wmrl-run-", dir=self.tmp_root))
        mounted = False
        try:
            if self.disk_quota:
                mount_tmpfs(root, request.limits.max_disk_mb * 1024 * 1024)
                mounted = True
            with _leased_uid() if self.drop_uid else contextlib.nullcontext(os.geteuid()) as uid:
                return self._run_in(root, request, uid, scratch=root if mounted else None)
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
            self._remove_root(root, mounted)

    @staticmethod
    def _remove_root(root: Path, mounted: bool) -> None:
        """Drop everything the run wrote; a failure here is logged, never the run's outcome."""
        try:
            if mounted:
                unmount(root)  # the tmpfs and all of its files go at once, however deep
            remove_tree(root)
        except OSError:
            log.exception("ProcessSandbox could not remove %s", root)

    def _run_in(self, root: Path, request: ExecutionRequest, uid: int, scratch: Path | None) -> ExecutionResult:
        workdir = root / "work"
        workdir.mkdir()
        prepare_workdir(workdir, request)
        if scratch is not None:
            for name in ("tmp", "shm"):
                (scratch / name).mkdir()
                os.chmod(scratch / name, 0o1777)
        if self.drop_uid:
            for path in [workdir, *workdir.rglob("*")]:
                os.lchown(path, uid, uid)
        nonce = new_nonce()
        limits = request.limits
        cgroup = None
        if self.cgroups is not None:
            # bwrap, its reaper and setpriv are in the group too: a few processes more than the script's own
            cgroup = RunCgroup(self.cgroups, limits.memory_mb * 1024 * 1024, cpus=1.0,
                               max_processes=limits.max_processes + 4)
        try:
            return self._execute(workdir, request, nonce, uid, scratch, cgroup)
        finally:
            if cgroup is not None:
                cgroup.remove()

    def _execute(self, workdir: Path, request: ExecutionRequest, nonce: str, uid: int, scratch: Path | None,
                 cgroup: RunCgroup | None) -> ExecutionResult:
        seccomp_fd = None
        if self.seccomp is not None:
            seccomp_fd = os.memfd_create("wmrl-seccomp")  # close-on-exec, but passed to bwrap by pass_fds
            os.write(seccomp_fd, self.seccomp)
            os.lseek(seccomp_fd, 0, os.SEEK_SET)
        try:
            cmd, inner = self.command(workdir, request, nonce, uid=uid, seccomp_fd=seccomp_fd, scratch=scratch)
            if cgroup is not None:
                cmd = cgroup.join_argv() + cmd
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
                pass_fds=() if seccomp_fd is None else (seccomp_fd,),
            )
        finally:
            if seccomp_fd is not None:
                os.close(seccomp_fd)
        readers = [
            threading.Thread(target=_pump, args=(proc.stdout, out), daemon=True),
            threading.Thread(target=_pump, args=(proc.stderr, err), daemon=True),
        ]
        for t in readers:
            t.start()
        budget = CpuBudget(request.limits.timeout_s, cgroup.files if cgroup is not None else None)
        reason = budget.wait(lambda timeout: _exited(proc, timeout))
        wall = time.monotonic() - start
        _kill_group(proc.pid)
        if cgroup is not None:
            cgroup.kill()
        proc.wait()
        for t in readers:
            t.join(timeout=5)
        budget.finish()
        exit_code = proc.returncode
        if self.isolation == "bwrap" and exit_code is not None and exit_code > 128:
            exit_code = -(exit_code - 128)  # bwrap reports a child killed by signal N as 128 + N
        note = ""
        if cgroup is not None and cgroup.files.oom_killed():
            note = f"killed: out of memory (limit {request.limits.memory_mb} MB for the whole run)"
        return finish(
            workdir=workdir,
            request=request,
            nonce=nonce,
            exit_code=exit_code,
            raw_exit_code=proc.returncode,
            wall_seconds=wall,
            timed_out=reason is not None,
            out=out,
            err=err,
            backend=self.name,
            isolation=self.description,
            note=note,
            timeout_reason=reason,
            cpu_seconds=budget.cpu_seconds,
            starved_seconds=budget.starved_seconds,
            others_cpus=budget.others_cpus,
            host_cpus=budget.host_cpus,
        )


def _exited(proc: subprocess.Popen, timeout: float) -> bool:
    try:
        proc.wait(timeout=timeout)
        return True
    except subprocess.TimeoutExpired:
        return False


_warned: set[str] = set()


def _warn_once(message: str) -> None:
    """Say a limitation of this host once per process, not once per sandbox."""
    if message not in _warned:
        _warned.add(message)
        log.warning(message)


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
