"""`DockerSandbox`: runs a solution in a throw-away container on one or several docker engines.

The container holds nothing but what the run needs. Its image is empty (built locally, no registry: see
:func:`image_tarball`); the filesystem of the mount plan (:mod:`~wmrl.autoresearch.environments.sandbox.mounts`), the same as
:class:`~wmrl.autoresearch.environments.sandbox.process.ProcessSandbox` shows, is bind-mounted read-only at the host's paths:
``/etc``, the programs and libraries of ``/usr``, and the Python installation as its runtime view (code and package
metadata, no data files, no ``tests/`` folders: :mod:`~wmrl.autoresearch.environments.sandbox.runtime_view`), so the container
runs the very interpreter and packages the host has (same scores as the process sandbox). The work dir is bound
read-write at ``/sandbox`` and the bootstrap read-only at ``/wmrl/boot.py``. The task cache (answers) and the
user's home are simply not there, and every folder task's private paths that the plan would show are covered.

Layers, from the outside in:

* the engine: no network, read-only root, uid/gid 65534, no capabilities, ``no-new-privileges``, wmrl's own
  seccomp policy (:func:`~wmrl.autoresearch.environments.sandbox.seccomp.docker_profile`, the process sandbox's, in place of
  the engine's default profile), a memory limit without swap (the container's cgroup: shared memory, ``memfd``
  and tmpfs pages count), a pids limit (fork bombs stop there), one CPU, private ``/tmp`` and ``/dev/shm``;
  with a local engine the container's cgroup is read for its CPU seconds, which are then its time budget
  (:mod:`~wmrl.autoresearch.environments.sandbox.cpu_budget`);
* ulimits like ``ProcessSandbox``'s ``prlimit``: file size, CPU seconds, no core dumps, open files;
* as root with a local engine, the work dir on a tmpfs of ``limits.max_disk_mb`` mounted for the run (as the
  process sandbox's): what a script writes there counts against one total;
* the bootstrap's tripwire (``boot.py``) and a minimal environment with one thread per math library.

Output is streamed from the engine (``attach``) into bounded head+tail buffers and the engine keeps no log
(``log_config`` ``none``), so a script printing gigabytes fills neither the host's memory nor its disk. The
container is removed after every run, whatever happened (timeout, crash, engine error, ``KeyboardInterrupt``).

Remote engines (``base_urls``) bind-mount from *their* host: they need the Python installation at the same
paths, and ``tmp_root`` and the runtime views (``views_dir``) on a filesystem both machines share (e.g. identical
images plus NFS). Their containers' CPU time is not readable here: their time budget is wall-clock.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import platform
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wmrl.autoresearch.environments.sandbox.base import ExecutionRequest, ExecutionResult, Sandbox
from wmrl.autoresearch.environments.sandbox.cgroups import CgroupFiles
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
from wmrl.autoresearch.environments.sandbox.process import SANDBOX_UID, sandbox_env
from wmrl.autoresearch.environments.sandbox.runtime_view import runtime_view, sandbox_interpreter
from wmrl.autoresearch.environments.sandbox.seccomp import docker_profile

log = logging.getLogger(__name__)

DEFAULT_IMAGE = "wmrl-sandbox:local"
CONTAINER_LABELS = {"wmrl": "sandbox"}
_IMAGE_DIRS = ("usr", "etc", "tmp", "proc", "sys", "dev", "sandbox", "wmrl")
_INNER_WORKDIR = "/sandbox"
_INNER_BOOT = "/wmrl/boot.py"
_MISSING_SDK = "DockerSandbox needs the docker SDK: pip install 'wmrl[docker]'"
_CONTROL_TIMEOUT_S = 60


def _import_docker():
    try:
        import docker
    except ImportError as exc:
        raise ImportError(_MISSING_SDK) from exc
    return docker


def _engine_name(base_url: str | None) -> str:
    return base_url or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def _connect(base_url: str | None, timeout: float | None, pool: int = 10):
    """A client for ``base_url`` (``None``: the environment's DOCKER_HOST / TLS settings, else the socket)."""
    docker = _import_docker()
    if base_url is None:
        return docker.from_env(timeout=timeout, max_pool_size=pool)
    return docker.DockerClient(base_url=base_url, timeout=timeout, max_pool_size=pool)


def docker_available(base_url: str | None = None) -> str | None:
    """``None`` if a docker engine answers at ``base_url`` (default: DOCKER_HOST or the local socket), else why not."""
    try:
        client = _connect(base_url, timeout=10)
    except ImportError as exc:
        return str(exc)
    except Exception as exc:  # noqa: BLE001 - any failure to reach the engine is the answer
        return f"no docker engine at {_engine_name(base_url)}: {exc}"
    try:
        client.ping()
    except Exception as exc:  # noqa: BLE001
        return f"no docker engine at {_engine_name(base_url)}: {exc}"
    finally:
        client.close()
    return None


def pick_engine(free_slots: Sequence[int]) -> int | None:
    """Index of the engine with the most free slots (the first one on ties); ``None`` when all are full.

    >>> pick_engine([1, 3, 3])
    1
    >>> pick_engine([0, 0]) is None
    True
    """
    best = max(range(len(free_slots)), key=lambda i: (free_slots[i], -i), default=None)
    return best if best is not None and free_slots[best] > 0 else None


def image_tarball(links: Sequence[Mount] = ()) -> bytes:
    """The sandbox image's whole filesystem: empty mount points, and the symbolic links of the mount plan
    (``/bin -> usr/bin`` on merged-usr systems) so that the dynamic loader and ``/bin/sh`` resolve."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name in _IMAGE_DIRS:
            info = tarfile.TarInfo(name)
            # The engine gives a tmpfs the mode of the image directory it covers.
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if name == "tmp" else 0o755
            tar.addfile(info)
        for link in sorted(links, key=lambda m: m.target):
            parents = Path(link.target.lstrip("/")).parents
            for parent in reversed(parents[:-1]):
                if str(parent) not in _IMAGE_DIRS and str(parent) not in tar.getnames():
                    info = tarfile.TarInfo(str(parent))
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
            info = tarfile.TarInfo(link.target.lstrip("/"))
            info.type, info.linkname = tarfile.SYMTYPE, link.source
            tar.addfile(info)
    return buf.getvalue()


def ensure_image(client, image: str, links: Sequence[Mount] = ()) -> None:
    """Build ``image`` on the engine from :func:`image_tarball` unless it is there from the same recipe
    (a label holds the tarball's hash, so a changed recipe or host layout rebuilds it)."""
    docker = _import_docker()
    tarball = image_tarball(links)
    recipe = hashlib.sha256(tarball).hexdigest()[:16]
    try:
        if (client.images.get(image).labels or {}).get("wmrl.recipe") == recipe:
            return
    except docker.errors.ImageNotFound:
        pass
    repository, _, tag = image.rpartition(":") if ":" in image.rsplit("/", 1)[-1] else (image, "", "latest")
    client.api.import_image_from_data(
        tarball, repository=repository, tag=tag, changes=[f"LABEL wmrl.recipe={recipe}"]
    )
    if (client.images.get(image).labels or {}).get("wmrl.recipe") != recipe:
        raise RuntimeError(f"building the sandbox image {image} did not take effect")


@dataclass
class _Engine:
    """One docker engine and its run slots. ``client`` makes short control calls (bounded timeout);
    ``stream`` carries the calls that last as long as a run (attach, wait) and has no timeout."""

    url: str
    client: Any
    stream: Any
    slots: int
    busy: int = 0
    down: bool = False  # stopped answering during a run: no new runs go there


class DockerSandbox(Sandbox):
    """Docker sandbox: each run in a fresh container, spread over one or several engines.

    Args:
        base_urls: engine URLs to spread runs over (``unix://...``, ``tcp://host:2376``); default: the
            environment's engine (DOCKER_HOST, else the local socket). Remote engines need the Python
            installation and ``tmp_root`` at the same paths on their host (see the module docstring).
        image: the sandbox image; built on each engine at construction if missing (no registry needed).
        slots_per_engine: runs at once on each engine (default: the engine's CPU count); each run gets one CPU.
        max_concurrency: runs at once in :meth:`run_many` (default: the slots of all engines together).
        python: interpreter that runs solutions (default: this one, with the same packages).
        tmp_root: where per-run work dirs are made on the host (default: the system temp dir).
        views_dir: where the runtime views of interpreters are cached (default
            :func:`~wmrl.autoresearch.environments.sandbox.runtime_view.default_views_dir`).

    When a run fails with an infrastructure error and its engine no longer answers a ping, the engine is
    marked down (no new runs go there) and the run is re-queued from scratch on another engine, so an engine
    that stops mid-run loses no execution and counts none twice: every request still gets exactly one result.
    ``requeued`` counts re-queued runs, ``engines_down`` the engines marked down; with every engine down a run
    returns an infrastructure error (missing, never a reward).

    Raises:
        ImportError: the docker SDK is not installed.
        RuntimeError: an engine does not answer or the image cannot be built on it.
    """

    name = "docker"

    def __init__(
        self,
        base_urls: list[str] | None = None,
        image: str = DEFAULT_IMAGE,
        slots_per_engine: int | None = None,
        max_concurrency: int | None = None,
        python: str | None = None,
        tmp_root: str | None = None,
        views_dir: str | None = None,
    ) -> None:
        _import_docker()
        if slots_per_engine is not None and slots_per_engine < 1:
            raise ValueError(f"slots_per_engine must be >= 1 (got {slots_per_engine})")
        if base_urls is not None and not base_urls:
            raise ValueError("base_urls must name at least one engine (or be None for the local one)")
        self.image = image
        self.python = sandbox_interpreter(python or sys.executable)
        self.tmp_root = tmp_root
        self.bundled = bundled_data_dirs()
        self.plan = MountPlan.for_view(runtime_view(self.python, views_dir), views_dir)
        # The work dir of a run on a local engine is a tmpfs of limits.max_disk_mb, as the process sandbox's: its
        # files count against one total (ulimit fsize bounds each file only).
        why_not = probe_disk_quota(tmp_root)
        self.disk_quota = why_not is None
        if not self.disk_quota:
            log.warning("DockerSandbox: no size-limited work dir per run (%s): its files are bounded per file only "
                        "(limits.max_file_mb)", why_not)
        # wmrl's own syscall policy, the process sandbox's, in place of the engine's default profile
        self.seccomp = docker_profile()
        if self.seccomp is None:
            log.warning("DockerSandbox: no seccomp policy of wmrl's for %s; the engine's default profile applies",
                        platform.machine())
        self._slots_changed = threading.Condition()
        self.engines: list[_Engine] = []
        self.requeued = 0
        try:
            for url in base_urls or [None]:
                self.engines.append(self._open_engine(url, slots_per_engine))
        except BaseException:
            self.close()
            raise
        super().__init__(max_concurrency or sum(e.slots for e in self.engines))

    def _open_engine(self, url: str | None, slots: int | None) -> _Engine:
        name = _engine_name(url)
        client = None
        try:
            client = _connect(url, timeout=_CONTROL_TIMEOUT_S)
            client.ping()
            slots = slots or max(1, int(client.info().get("NCPU") or 1))
            ensure_image(client, self.image, [m for m in self.plan.system if m.kind == "link"])
            stream = _connect(url, timeout=None, pool=2 * slots + 4)
        except ImportError:
            raise
        except Exception as exc:
            if client is not None:
                client.close()
            raise RuntimeError(
                f"DockerSandbox: no usable docker engine at {name}: {exc}. "
                "Start one (dockerd) or pass base_urls=[...] naming running engines."
            ) from exc
        return _Engine(url=name, client=client, stream=stream, slots=slots)

    @property
    def description(self) -> str:
        return "docker+uid" + ("+seccomp" if self.seccomp else "") + ("+quota" if self.disk_quota else "")

    def close(self) -> None:
        for engine in self.engines:
            for client in (engine.client, engine.stream):
                try:
                    client.close()
                except Exception:  # noqa: BLE001 - closing is best effort
                    log.debug("DockerSandbox: closing the client of %s failed", engine.url, exc_info=True)
        self.engines = []

    # -- engine slots -----------------------------------------------------------------------------------
    @property
    def engines_down(self) -> int:
        return sum(e.down for e in self.engines)

    def _acquire(self) -> _Engine | None:
        """A slot on the freest engine that is up (waits for one); ``None`` once every engine is down."""
        with self._slots_changed:
            while True:
                if all(e.down for e in self.engines):
                    return None
                index = pick_engine([0 if e.down else e.slots - e.busy for e in self.engines])
                if index is not None:
                    engine = self.engines[index]
                    engine.busy += 1
                    return engine
                self._slots_changed.wait()

    def _release(self, engine: _Engine) -> None:
        with self._slots_changed:
            engine.busy -= 1
            self._slots_changed.notify_all()

    def _mark_down_if_silent(self, engine: _Engine) -> bool:
        """After a failed run: ping the engine; if it does not answer, mark it down. True if down."""
        try:
            engine.client.ping()
            return False
        except Exception:  # noqa: BLE001 - any failure to answer is the answer
            with self._slots_changed:
                if not engine.down:
                    engine.down = True
                    log.error("DockerSandbox: engine %s stopped answering; marked down, its runs re-queued",
                              engine.url)
                self._slots_changed.notify_all()
            return True

    # -- container construction -------------------------------------------------------------------------
    def _mounts(self, workdir: Path, request: ExecutionRequest) -> list:
        """The mount plan as docker mounts (the engine mounts parents before children and makes missing
        mount points root-owned 0755, so the chain stays readable for uid 65534 even where the host's is not)."""
        from docker.types import Mount as DockerMount

        mounts = []
        plan = self.plan
        for m in [*plan.system, *plan.python(), *plan.covers(request.forbidden)]:
            if m.kind == "bind":
                mounts.append(DockerMount(m.target, m.source, type="bind", read_only=True))
            elif m.kind == "cover":
                mounts.append(DockerMount(m.target, None, type="tmpfs", read_only=True, tmpfs_size=4096))
            elif m.kind == "null":
                mounts.append(DockerMount(m.target, "/dev/null", type="bind", read_only=True))
            # links are part of the image (image_tarball)
        mounts.append(DockerMount(_INNER_BOOT, str(BOOT_PATH), type="bind", read_only=True))
        mounts.append(DockerMount(_INNER_WORKDIR, str(workdir), type="bind", read_only=False))
        return mounts

    def container_config(self, workdir: Path, request: ExecutionRequest, nonce: str) -> dict[str, Any]:
        """Keyword arguments of ``containers.create`` for one run."""
        from docker.types import LogConfig, Ulimit

        limits = request.limits
        forbidden = tuple(request.forbidden) + self.bundled
        write_boot_config(workdir, nonce, forbidden, READ_ROOTS, PRIVATE_DIRS)
        argv = boot_argv(self.python, _INNER_BOOT)
        memory = f"{limits.memory_mb}m"
        tmpfs_opts = f"rw,nosuid,nodev,size={limits.memory_mb}m,mode=1777"
        file_bytes = limits.max_file_mb * 1024 * 1024
        cpu_s = int(limits.timeout_s) + 5
        return dict(
            image=self.image,
            # A shell as pid 1 waits for the script (and reaps orphans): the script is an ordinary process,
            # so signals it sends itself act as on the host (pid 1 ignores those it has no handler for).
            command=["/bin/sh", "-c", '"$@"; exit $?', "sh", *argv],
            name=f"wmrl-{nonce}",
            labels=dict(CONTAINER_LABELS),
            working_dir=_INNER_WORKDIR,
            environment=sandbox_env(_INNER_WORKDIR),
            user=f"{SANDBOX_UID}:{SANDBOX_UID}",
            mounts=self._mounts(workdir, request),
            tmpfs={"/tmp": tmpfs_opts, "/dev/shm": tmpfs_opts},
            read_only=True,
            network_mode="none",
            cap_drop=["ALL"],
            security_opt=["no-new-privileges", *([f"seccomp={self.seccomp}"] if self.seccomp else [])],
            mem_limit=memory,
            memswap_limit=memory,
            pids_limit=limits.max_processes + 1,  # + the waiting shell
            nano_cpus=1_000_000_000,
            ulimits=[
                Ulimit(name="fsize", soft=file_bytes, hard=file_bytes),
                Ulimit(name="cpu", soft=cpu_s, hard=cpu_s),
                Ulimit(name="core", soft=0, hard=0),
                Ulimit(name="nofile", soft=1024, hard=1024),
            ],
            # Output is streamed into bounded buffers; the engine keeps no copy on disk.
            log_config=LogConfig(type="none"),
            stdin_open=False,
            tty=False,
        )

    # -- running ----------------------------------------------------------------------------------------
    def run(self, request: ExecutionRequest) -> ExecutionResult:
        failures: list[str] = []
        while True:
            engine = self._acquire() if self.engines else None
            if engine is None:
                why = "DockerSandbox is closed" if not self.engines else "every docker engine is down"
                return self._infra_error("; ".join([why, *failures]))
            root = Path(tempfile.mkdtemp(prefix="wmrl-docker-", dir=self.tmp_root))
            mounted = False
            try:
                if self.disk_quota and engine.url.startswith("unix://"):  # a remote engine binds from its own host
                    mount_tmpfs(root, request.limits.max_disk_mb * 1024 * 1024)
                    mounted = True
            except OSError as exc:
                self._release(engine)
                _remove_workdir(root)
                return self._infra_error(f"the run's size-limited work dir could not be mounted: {exc}")
            workdir = root / "work"
            workdir.mkdir()
            try:
                return self._run_in(engine, workdir, request)
            except Exception as exc:  # noqa: BLE001 - a sandbox failure is an infrastructure error, never a reward
                failures.append(f"{type(exc).__name__} on engine {engine.url}: {exc}")
                if not self._mark_down_if_silent(engine):
                    log.exception("DockerSandbox failed on %s (engine %s)", request.label, engine.url)
                    return self._infra_error(failures[-1])
                with self._slots_changed:
                    self.requeued += 1  # the engine died under this run: run it again from scratch elsewhere
            finally:
                self._release(engine)
                if mounted:
                    unmount(root)  # the tmpfs and every file on it go at once
                _remove_workdir(root)

    def _infra_error(self, why: str) -> ExecutionResult:
        return ExecutionResult(
            exit_code=None, wall_seconds=0.0, infra_error=why, backend=self.name, isolation=self.description
        )

    def _run_in(self, engine: _Engine, workdir: Path, request: ExecutionRequest) -> ExecutionResult:
        prepare_workdir(workdir, request)
        _hand_to_sandbox_user(workdir)
        nonce = new_nonce()
        config = self.container_config(workdir, request, nonce)
        out, err = TailBuffer(request.limits.output_tail_bytes), TailBuffer(request.limits.output_tail_bytes)
        stream = None
        try:
            container = engine.client.containers.create(**config).id
            stream = engine.stream.api.attach(container, stdout=True, stderr=True, stream=True, demux=True)
            reader = threading.Thread(target=_drain, args=(stream, out, err), daemon=True)
            reader.start()
            exited = _Waiter(engine.stream.api, container)
            start = time.monotonic()
            engine.client.api.start(container)
            exited.start()
            budget = CpuBudget(request.limits.timeout_s, self._cgroup_of(engine, container))
            reason = budget.wait(exited.done.wait)
            timed_out = reason is not None
            if timed_out:
                _kill(engine.client.api, container)
                exited.done.wait(_CONTROL_TIMEOUT_S)
            wall = (exited.at or time.monotonic()) - start
            reader.join(timeout=5)
            budget.finish()
            state = _final_state(engine.client.api, container, timed_out)
        finally:
            if stream is not None:
                stream.close()
            _remove(engine.client.api, config["name"])
        exit_code = state["ExitCode"]
        if exit_code > 128:
            exit_code = -(exit_code - 128)  # the shell reports a script killed by signal N as 128 + N
        if timed_out:
            exit_code = -9
        note = ""
        if state.get("OOMKilled"):
            note = f"killed: out of memory (limit {request.limits.memory_mb} MB)"
        return finish(
            workdir=workdir,
            request=request,
            nonce=nonce,
            exit_code=exit_code,
            raw_exit_code=state["ExitCode"],
            wall_seconds=wall,
            timed_out=timed_out,
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

    @staticmethod
    def _cgroup_of(engine: _Engine, container: str) -> CgroupFiles | None:
        """The container's control group, read on this host (a local engine): its CPU seconds make the time
        budget CPU time, as in the process sandbox. A remote engine's are not readable here: wall-clock budget."""
        if not engine.url.startswith("unix://"):
            return None
        try:
            pid = engine.client.api.inspect_container(container)["State"]["Pid"]
        except Exception:  # noqa: BLE001 - no accounting is a weaker budget, not a failed run
            return None
        return CgroupFiles.of_process(pid) if pid else None


def _final_state(api, container: str, timed_out: bool, wait_s: float = 3.0) -> dict:
    """The container's state once it exited. A container the kernel's OOM killer ended exits with SIGKILL before the
    engine has always recorded ``OOMKilled`` (on a loaded host, with cgroup v1, the OOM event comes after the exit
    event): a SIGKILL that was not the time budget's is inspected again, for up to ``wait_s``, until it says."""
    state = api.inspect_container(container)["State"]
    deadline = time.monotonic() + wait_s
    while not timed_out and state["ExitCode"] == 128 + 9 and not state.get("OOMKilled") and time.monotonic() < deadline:
        time.sleep(0.1)
        state = api.inspect_container(container)["State"]
    return state


class _Waiter(threading.Thread):
    """Blocks on the engine's ``wait`` for a container and records when it returned."""

    def __init__(self, api, container: str) -> None:
        super().__init__(daemon=True)
        self.api, self.container = api, container
        self.done = threading.Event()
        self.at: float | None = None

    def run(self) -> None:
        try:
            self.api.wait(self.container)
            self.at = time.monotonic()
        except Exception:  # noqa: BLE001 - the caller sees the state through inspect
            log.debug("DockerSandbox: wait on %s failed", self.container, exc_info=True)
        finally:
            self.done.set()


def _hand_to_sandbox_user(workdir: Path) -> None:
    """The container runs as uid 65534: give it the work dir (as root), else open it to everyone."""
    for path in [workdir, *workdir.rglob("*")]:
        if os.geteuid() == 0:
            os.lchown(path, SANDBOX_UID, SANDBOX_UID)
        elif not path.is_symlink():
            path.chmod(0o777 if path.is_dir() else 0o666)


def _remove_workdir(root: Path) -> None:
    """Remove a run's host work dir, however deep a tree the script left there (``shutil.rmtree`` recurses
    once per level and fails past ~1000); a failure is logged, never mistaken for the run's outcome."""
    try:
        remove_tree(root)
    except OSError:
        log.exception("DockerSandbox could not remove %s", root)


def _drain(stream, out: TailBuffer, err: TailBuffer) -> None:
    try:
        for stdout_chunk, stderr_chunk in stream:
            if stdout_chunk:
                out.feed(stdout_chunk)
            if stderr_chunk:
                err.feed(stderr_chunk)
    except Exception:  # noqa: BLE001 - the stream ends when the container is removed
        log.debug("DockerSandbox: output stream ended with an error", exc_info=True)


def _kill(api, container: str) -> None:
    try:
        api.kill(container)
    except Exception:  # noqa: BLE001 - it may have exited in the meantime
        log.debug("DockerSandbox: kill of %s failed", container, exc_info=True)


def _remove(api, name: str) -> None:
    """Remove the container by name (so that one created just before an interrupt goes too)."""
    docker = _import_docker()
    try:
        api.remove_container(name, force=True, v=True)
    except docker.errors.NotFound:
        pass
    except Exception:  # noqa: BLE001 - never mask the run's own outcome; say loudly that one leaked
        log.error("DockerSandbox: could not remove container %s; remove it by hand", name, exc_info=True)
