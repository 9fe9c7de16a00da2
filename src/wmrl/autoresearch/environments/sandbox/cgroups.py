"""Per-run control groups: one memory, CPU and process bound for a run's whole process tree.

Process limits (``RLIMIT_AS``) bound one process at a time, and not the pages a process keeps outside its
address space: ``memfd_create`` files, ``/dev/shm`` and tmpfs pages. Three children each under the per-process
limit, or one ``memfd``, held gigabytes of host memory. A control group bounds the run as a whole, as docker
bounds a container: ``memory_mb`` for everything the tree allocates or pins (shared memory and tmpfs pages
written by the run included, without swap), one CPU for the tree however many processes it forks (and one
CPU-share among concurrent runs: eight spinning children count as one run, not eight), ``max_processes`` for
the tree, and an exact count of the CPU seconds it used.

Both kernel interfaces are supported, whichever works here (:func:`cgroup_support` probes it once):

* **cgroup v2** (the unified hierarchy): a run's group is made in a cgroup this process may manage -- the
  directory named by ``$WMRL_CGROUP``, or this process's own cgroup when it is delegated to it (the root of a
  container's cgroup namespace, or a ``systemd-run --scope -p Delegate=yes`` scope, into whose leaf
  ``wmrl-host`` this process then moves so that the controllers can be enabled for its children);
* **cgroup v1** (one hierarchy per controller, e.g. a hybrid host): a group per run below this process's own
  group in the ``memory``, ``cpu``, ``cpuacct`` and ``pids`` hierarchies (needs write access there: root).

A run's first process joins its groups before anything of the run starts (:meth:`RunCgroup.join_argv`), so
every descendant is inside; the group is emptied and removed after the run. Where neither works (no delegation,
not root), :func:`cgroup_support` says why; the process sandbox then says so once and training refuses to run
unless the user accepts the weaker bounds (``allow_weak_bounds``).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import shlex
import signal
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

V1_CONTROLLERS = ("memory", "cpu", "cpuacct", "pids")
V2_CONTROLLERS = ("memory", "cpu", "pids")
CPU_PERIOD_US = 100_000
_RUN_PREFIX = "wmrl-run-"
_names = itertools.count()
_support: dict[str, tuple[Hierarchy | None, str | None]] = {}


@dataclass(frozen=True)
class Hierarchy:
    """Where the groups of runs are made: ``version`` 1 (``parents``: controller -> folder) or 2 (``parents``:
    ``{"unified": folder}``)."""

    version: int
    parents: dict[str, str]


# -- reading /proc ---------------------------------------------------------------------------------------
def _mounts() -> list[tuple[str, str, str, str]]:
    """(root inside the hierarchy, mount point, filesystem type, super options) of every cgroup mount."""
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if tail and tail[0] in ("cgroup", "cgroup2"):
                found.append((fields[3], fields[4], tail[0], tail[2] if len(tail) > 2 else ""))
    return found


def _memberships(pid: int | str = "self") -> dict[str, str]:
    """Controller (v1; ``unified`` for v2) -> the cgroup path of process ``pid``."""
    paths = {}
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for controller in controllers.split(",") if controllers else ["unified"]:
                paths[controller] = path
    return paths


def cgroup_dirs(pid: int | str = "self") -> dict[str, str]:
    """Controller -> the folder of process ``pid``'s cgroup, for the controllers this process can see mounted
    (``unified``: its cgroup v2 folder)."""
    member = _memberships(pid)
    dirs = {}
    for root, point, fstype, options in _mounts():
        names = ["unified"] if fstype == "cgroup2" else [o for o in options.split(",") if o in V1_CONTROLLERS]
        for name in names:
            path = member.get(name)
            if path is None:
                continue
            relative = os.path.relpath(path, root) if path.startswith(root) else None
            if relative is not None:
                dirs[name] = os.path.normpath(os.path.join(point, relative))
    return dirs


# -- finding where runs' groups can be made --------------------------------------------------------------------
def _try_mkdir(parent: str) -> str | None:
    probe = os.path.join(parent, f"{_RUN_PREFIX}probe-{os.getpid()}")
    try:
        os.mkdir(probe)
        os.rmdir(probe)
    except OSError as exc:
        return f"cannot make a cgroup in {parent}: {exc.strerror}"
    return None


def _v2_parent(own: str) -> tuple[str | None, str]:
    """A v2 folder where run groups with memory, cpu and pids can be made, or why not."""
    explicit = os.environ.get("WMRL_CGROUP")
    candidate = explicit or own
    try:
        available = Path(candidate, "cgroup.controllers").read_text().split()
    except OSError as exc:
        return None, f"cgroup v2 folder {candidate} is unreadable ({exc.strerror})"
    missing = [c for c in V2_CONTROLLERS if c not in available]
    if missing:
        return None, f"cgroup v2 at {candidate} does not offer the {', '.join(missing)} controller(s) to wmrl"
    enabled = Path(candidate, "cgroup.subtree_control").read_text().split()
    need = [c for c in V2_CONTROLLERS if c not in enabled]
    if need and not explicit:
        # Our own (delegated) cgroup: processes may not live in a cgroup that gives controllers to children,
        # so this process moves into a leaf first. Only when it is alone there (a scope made for it).
        procs = Path(candidate, "cgroup.procs").read_text().split()
        if procs and procs != [str(os.getpid())]:
            return None, (f"cgroup v2 folder {candidate} holds other processes ({len(procs)}); give wmrl a "
                          "delegated cgroup of its own (systemd-run --scope -p Delegate=yes ..., or $WMRL_CGROUP)")
        try:
            host = os.path.join(candidate, "wmrl-host")
            os.makedirs(host, exist_ok=True)
            Path(host, "cgroup.procs").write_text(str(os.getpid()))
        except OSError as exc:
            return None, f"cannot move into a leaf of {candidate}: {exc.strerror}"
    if need:
        try:
            Path(candidate, "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in need))
        except OSError as exc:
            return None, f"cannot enable {', '.join(need)} in {candidate}/cgroup.subtree_control: {exc.strerror}"
    why = _try_mkdir(candidate)
    return (None, why) if why else (candidate, "")


def cgroup_support() -> tuple[Hierarchy | None, str | None]:
    """Where runs' groups can be made here, or ``(None, why not)``; probed once per process (it makes and removes
    one empty group)."""
    if "probe" in _support:
        return _support["probe"]
    reasons = []
    try:
        dirs = cgroup_dirs()
    except (OSError, ValueError) as exc:
        _support["probe"] = (None, f"cannot read this process's cgroups from /proc: {exc}")
        return _support["probe"]
    result: tuple[Hierarchy | None, str | None] | None = None
    if "unified" in dirs or os.environ.get("WMRL_CGROUP"):
        parent, why = _v2_parent(dirs.get("unified", "/sys/fs/cgroup"))
        if parent is not None:
            result = (Hierarchy(2, {"unified": parent}), None)
        else:
            reasons.append(why)
    if result is None:
        missing = [c for c in V1_CONTROLLERS if c not in dirs]
        if missing:
            reasons.append(f"no cgroup v1 hierarchy for {', '.join(missing)}")
        else:
            failures = [why for c in V1_CONTROLLERS if (why := _try_mkdir(dirs[c]))]
            if failures:
                reasons.append("; ".join(failures))
            else:
                result = (Hierarchy(1, {c: dirs[c] for c in V1_CONTROLLERS}), None)
    if result is None:
        result = (None, "; ".join(reasons) or "no cgroup filesystem is mounted")
    else:
        _remove_stale(result[0])
    _support["probe"] = result
    return result


def _remove_stale(hierarchy: Hierarchy) -> None:
    """Remove run groups left by processes that died (a SIGKILLed host): empty ones only."""
    for parent in hierarchy.parents.values():
        with contextlib.suppress(OSError), os.scandir(parent) as entries:
            for entry in entries:
                if not entry.name.startswith(_RUN_PREFIX):
                    continue
                owner = entry.name[len(_RUN_PREFIX):].split("-", 1)[0]
                if owner.isdigit() and not os.path.exists(f"/proc/{owner}"):
                    with contextlib.suppress(OSError):
                        os.rmdir(entry.path)


# -- accounting ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CgroupFiles:
    """The files that tell what a group's processes used: CPU time, the threads, OOM kills."""

    version: int
    cpu: str  # v1: cpuacct folder; v2: the group's folder
    threads: str  # the file listing the group's threads
    memory: str | None  # v1: memory folder; v2: the group's folder

    @classmethod
    def of_process(cls, pid: int) -> CgroupFiles | None:
        """The groups of a running process (a container's first process), if this host can read them."""
        try:
            dirs = cgroup_dirs(pid)
        except OSError:
            return None
        if "cpuacct" in dirs and "memory" in dirs:
            return cls(1, dirs["cpuacct"], os.path.join(dirs["cpuacct"], "tasks"), dirs["memory"])
        if "unified" in dirs and os.path.exists(os.path.join(dirs["unified"], "cpu.stat")):
            d = dirs["unified"]
            return cls(2, d, os.path.join(d, "cgroup.threads"), d)
        return None

    def cpu_seconds(self) -> float | None:
        """CPU seconds (user + system) the group's processes used so far, exited ones included."""
        try:
            if self.version == 1:
                return int(Path(self.cpu, "cpuacct.usage").read_text()) / 1e9
            for line in Path(self.cpu, "cpu.stat").read_text().splitlines():
                if line.startswith("usage_usec "):
                    return int(line.split()[1]) / 1e6
        except (OSError, ValueError):
            return None
        return None

    def thread_ids(self) -> list[int]:
        try:
            return [int(t) for t in Path(self.threads).read_text().split()]
        except (OSError, ValueError):
            return []

    def oom_killed(self) -> bool:
        """Whether the kernel killed a process of the group for exceeding the memory limit."""
        if self.memory is None:
            return False
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        with contextlib.suppress(OSError, ValueError):
            for line in Path(self.memory, name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill" and int(value) > 0:
                    return True
        return False


# -- a run's own group -------------------------------------------------------------------------------------------
class RunCgroup:
    """The groups of one run: made with its limits, joined by its first process, emptied and removed after.

    Args:
        hierarchy: from :func:`cgroup_support`.
        memory_bytes: the memory of the whole tree (anonymous, page cache, shared memory, tmpfs; no swap).
        cpus: CPUs the tree may use at once (CFS quota).
        max_processes: processes and threads of the tree at once.
    """

    def __init__(self, hierarchy: Hierarchy, memory_bytes: int, cpus: float, max_processes: int) -> None:
        self.version = hierarchy.version
        name = f"{_RUN_PREFIX}{os.getpid()}-{next(_names)}"
        self.dirs = {c: os.path.join(parent, name) for c, parent in hierarchy.parents.items()}
        made = []
        try:
            for path in self.dirs.values():
                os.mkdir(path)
                made.append(path)
            self._limit(memory_bytes, cpus, max_processes)
        except BaseException:
            for path in made:
                with contextlib.suppress(OSError):
                    os.rmdir(path)
            raise
        if self.version == 1:
            self.files = CgroupFiles(1, self.dirs["cpuacct"], os.path.join(self.dirs["cpuacct"], "tasks"),
                                     self.dirs["memory"])
        else:
            d = self.dirs["unified"]
            self.files = CgroupFiles(2, d, os.path.join(d, "cgroup.threads"), d)

    def _write(self, controller: str, name: str, value: object) -> None:
        Path(self.dirs[controller], name).write_text(str(value))

    def _limit(self, memory_bytes: int, cpus: float, max_processes: int) -> None:
        quota = int(cpus * CPU_PERIOD_US)
        if self.version == 1:
            self._write("memory", "memory.limit_in_bytes", memory_bytes)
            if os.path.exists(os.path.join(self.dirs["memory"], "memory.memsw.limit_in_bytes")):
                self._write("memory", "memory.memsw.limit_in_bytes", memory_bytes)  # no swap beyond it
            self._write("cpu", "cpu.cfs_period_us", CPU_PERIOD_US)
            self._write("cpu", "cpu.cfs_quota_us", quota)
            self._write("pids", "pids.max", max_processes)
        else:
            self._write("unified", "memory.max", memory_bytes)
            with contextlib.suppress(OSError):  # absent without swap accounting
                self._write("unified", "memory.swap.max", 0)
            self._write("unified", "cpu.max", f"{quota} {CPU_PERIOD_US}")
            self._write("unified", "pids.max", max_processes)

    def join_argv(self) -> list[str]:
        """A prefix for the run's command: the first process writes its pid into every group of the run, then
        becomes the command (``exec``). A failed join exits 97 before anything of the run starts."""
        targets = " && ".join(f"echo $$ > {shlex.quote(os.path.join(d, 'cgroup.procs'))}" for d in self.dirs.values())
        return ["/bin/sh", "-c", f'{{ {targets}; }} 2>/dev/null || exit 97; exec "$@"', "wmrl-join"]

    def kill(self) -> None:
        """SIGKILL every process of the group (those that left the session and process group too)."""
        if self.version == 2:
            with contextlib.suppress(OSError):
                self._write("unified", "cgroup.kill", 1)
                return
        procs = next(iter(self.dirs.values()))
        for _ in range(50):
            try:
                pids = [int(p) for p in Path(procs, "cgroup.procs").read_text().split()]
            except (OSError, ValueError):
                return
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)

    def remove(self) -> None:
        """Remove the run's groups (their processes killed first); one that stays busy is logged, not raised."""
        self.kill()
        for path in self.dirs.values():
            for attempt in range(100):
                try:
                    os.rmdir(path)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if attempt == 99:
                        log.warning("could not remove the run's cgroup %s (still busy)", path)
                    time.sleep(0.02)
