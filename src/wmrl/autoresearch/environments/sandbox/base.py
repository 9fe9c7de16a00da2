"""The `Sandbox` interface: run one untrusted solution script in isolation and collect its outputs.

A sandbox never grades: it returns what happened (exit code, time, bounded output tails, the files the
script left) and the grader decides the outcome outside the sandbox, against answers that never enter it.
"""

from __future__ import annotations

import abc
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of one run.

    Attributes:
        timeout_s: wall-clock limit; the whole process tree is killed past it.
        memory_mb: address-space (process) or memory (docker) limit.
        max_processes: processes/threads the run may hold at once (fork bombs stop here).
        max_file_mb: largest file the run may write.
        max_disk_mb: total size of everything the run may write (its work dir, ``/tmp`` and ``/dev/shm``
            together where the backend can enforce one budget; see each backend). These are memory-backed
            (tmpfs) in the sandbox, so without this bound a script could pin host RAM below ``memory_mb``.
        output_tail_bytes: how much of stdout/stderr is kept (head and tail); the rest is counted, not kept.
        max_collect_mb: largest output file (``submission.csv``) that is collected.
    """

    timeout_s: float = 60.0
    memory_mb: int = 4096
    max_processes: int = 64
    max_file_mb: int = 256
    max_disk_mb: int = 512
    output_tail_bytes: int = 16_384
    max_collect_mb: int = 64

    def __post_init__(self) -> None:
        for name in ("timeout_s", "memory_mb", "max_processes", "max_file_mb", "max_disk_mb", "output_tail_bytes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"SandboxLimits.{name} must be > 0 (got {getattr(self, name)})")


@dataclass(frozen=True)
class ExecutionRequest:
    """One script to run.

    Attributes:
        script: the solution's source; written as ``solution.py`` in a fresh work dir.
        public_dir: a directory whose files are copied to ``public/`` in the work dir (the task's public data).
        files: extra files placed in the work dir (e.g. the task card ``task.md``).
        limits: resource limits.
        collect: names of files to bring back from the work dir after the run (regular files only).
        forbidden: host paths whose reading trips the wire (task caches holding answers, bundled datasets).
        label: shown in logs and progress bars.
    """

    script: str
    public_dir: Path | None = None
    files: Mapping[str, bytes] = field(default_factory=dict)
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    collect: tuple[str, ...] = ("submission.csv",)
    forbidden: tuple[str, ...] = ()
    label: str = ""


@dataclass(frozen=True)
class ExecutionResult:
    """What a sandbox observed.

    Attributes:
        exit_code: the script's exit status (negative: killed by that signal); ``None`` if it never ran.
        wall_seconds: wall-clock from start to exit (or kill).
        timed_out: stopped for exceeding its time budget (``limits.timeout_s``; see ``timeout_reason``).
        stdout_tail / stderr_tail: head + tail of each stream (sandbox markers removed): the script's words only.
        note: what the sandbox itself says about the run (``killed: out of memory ...``), kept apart from the
            streams so that a script cannot write it.
        stdout_bytes / stderr_bytes: total bytes written to each stream.
        files: collected files by name; a name is absent if the file was missing or refused.
        file_errors: why a collected file was refused (a symlink, not a regular file, too large).
        tripwires: why the run was flagged (reading answers or bundled datasets, writing outside the work dir).
        infra_error: the sandbox itself failed (could not start, engine died); the script's fate is unknown.
        backend: which sandbox ran it (``process``, ``docker``).
        isolation: what isolation the backend applied (e.g. ``bwrap+uid``), for the execution log.
        time_limit_s: the time budget that applied (``limits.timeout_s``).
        cpu_seconds: CPU seconds the run's whole process tree used; ``None`` where the backend cannot count them.
        starved_seconds: seconds the run waited for a CPU that other processes held
            (:mod:`~wmrl.autoresearch.environments.sandbox.cpu_budget`); ``None`` where not measured.
        others_cpus / host_cpus: how many of the host's CPUs (those the sandbox may use) other processes kept busy
            on average while the run ran, and how many there are; ``None`` where not measured.
        timeout_reason: why a timed-out run was stopped: ``cpu`` (it used its CPU budget), ``wall`` (the
            wall-clock deadline, without starvation: it slept or blocked; also every timeout where CPU time is not
            counted) or ``starved`` (the host kept it from a CPU: an infrastructure failure).
    """

    exit_code: int | None
    wall_seconds: float
    timed_out: bool = False
    stdout_tail: str = ""
    stderr_tail: str = ""
    note: str = ""
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    files: Mapping[str, bytes] = field(default_factory=dict)
    file_errors: Mapping[str, str] = field(default_factory=dict)
    tripwires: tuple[str, ...] = ()
    infra_error: str | None = None
    backend: str = ""
    isolation: str = ""
    time_limit_s: float | None = None
    cpu_seconds: float | None = None
    starved_seconds: float | None = None
    others_cpus: float | None = None
    host_cpus: int | None = None
    timeout_reason: str | None = None

    @property
    def own_timeout(self) -> bool:
        """Whether a timeout can be served from the cache: only when the script used its CPU budget itself."""
        return self.timed_out and self.timeout_reason == "cpu"


class Sandbox(abc.ABC):
    """Runs untrusted scripts. Subclasses implement :meth:`run`; :meth:`run_many` bounds concurrency."""

    name: str = "sandbox"
    #: why a run gets no control group of its own here (the error shown when ``bounds_each_run`` is False)
    no_cgroup_reason: str | None = "no cgroup"

    def __init__(self, max_concurrency: int | None = None) -> None:
        import os

        self.max_concurrency = max_concurrency or max(1, os.cpu_count() or 1)
        if self.max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1 (got {self.max_concurrency})")
        self._running = 0
        self._running_lock = threading.Lock()

    @property
    def description(self) -> str:
        """The isolation this backend applies (e.g. ``bwrap+uid``), in errors and in the execution cache's key
        (an outcome seen under one isolation is not another's); ``""``: nothing beyond its ``name``."""
        return ""

    @property
    def hides_answers(self) -> bool:
        """Whether no script can reach the task cache (answers, execution log) whatever it does. True for a
        backend whose runs see only their work dir; ``ProcessSandbox`` without bubblewrap says False."""
        return True

    @property
    def bounds_each_run(self) -> bool:
        """Whether each run's whole process tree has its own memory and CPU bound (a control group). True for
        docker; ``ProcessSandbox`` says False where the host gives it no cgroup (then memory is bounded per
        process only, CPU not at all, and a busy neighbour can starve a run)."""
        return True

    def in_flight(self) -> int:
        """Runs of :meth:`run_many` executing right now (in this process): the slots taken when a step is planned.

        ``AnchorRouting(capacity=..., in_flight=sandbox.in_flight)`` caps a step's anchors by the slots still
        free, as the paper's routing does where executions overlap or a pool is shared.
        """
        return self._running

    def _run_counted(self, request: ExecutionRequest) -> ExecutionResult:
        with self._running_lock:
            self._running += 1
        try:
            return self.run(request)
        finally:
            with self._running_lock:
                self._running -= 1

    @abc.abstractmethod
    def run(self, request: ExecutionRequest) -> ExecutionResult:
        """Run one script to completion (or its limits) and return what happened. Never raises for
        anything the script does; sandbox failures come back as ``infra_error``."""

    def run_many(
        self,
        requests: Sequence[ExecutionRequest],
        on_done: Callable[[int, ExecutionResult], None] | None = None,
    ) -> list[ExecutionResult]:
        """Run scripts concurrently, at most ``max_concurrency`` at once, results in request order.

        One run's failure never takes the batch down: an exception escaping :meth:`run` (a backend bug, a
        ``RecursionError`` while cleaning up after a hostile script) becomes that request's ``infra_error``,
        so it is counted and retried, never rewarded, and the other runs keep their results.
        """
        results: list[ExecutionResult | None] = [None] * len(requests)
        with ThreadPoolExecutor(max_workers=self.max_concurrency) as pool:
            futures = {pool.submit(self._run_counted, req): i for i, req in enumerate(requests)}
            for fut in as_completed(futures):
                i = futures[fut]
                try:
                    results[i] = fut.result()
                except Exception as exc:  # noqa: BLE001 - an infrastructure failure, recorded as such
                    log.error("%s.run raised on %s", type(self).__name__, requests[i].label, exc_info=exc)
                    results[i] = ExecutionResult(
                        exit_code=None,
                        wall_seconds=0.0,
                        infra_error=f"{type(exc).__name__}: {exc}",
                        backend=self.name,
                    )
                if on_done is not None:
                    on_done(i, results[i])
        return results  # type: ignore[return-value]

    def close(self) -> None:
        """Release resources (engines, pools). Idempotent."""

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
