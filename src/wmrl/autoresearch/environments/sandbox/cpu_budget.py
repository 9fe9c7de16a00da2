"""A run's time budget, kept in CPU seconds: what the script used, not what the host let it have.

A wall-clock limit punishes a script for its neighbours: on a busy host an honest script that needs 10 s of
one CPU times out at 20 s, is scored 0, and that timeout would be served from the cache to every later run of
the same script. So where the run's CPU time is counted (its control group, :mod:`cgroups`), the budget
``limit_s`` is CPU seconds of the whole process tree, and the wall-clock deadline moves out by the time the run
was kept from a CPU it wanted (*starved*: its threads were runnable, waiting in the scheduler's queue, while it
got less than a CPU's worth), up to ``MAX_EXTENSION`` times the budget, plus a grace of ``GRACE_S`` for the
sandbox's own start-up. The budget thus counts the time the run computed or idled by its own doing (sleeping,
blocking on input); time spent waiting for a CPU held by others is excused. A run ends for one of three reasons:

``cpu``
    it used its CPU budget: its own timeout (``timeout``, 0.0, cached like any outcome);
``wall``
    it reached the wall-clock deadline without being starved: it slept, waited or blocked. Its own timeout
    (``timeout``, 0.0), but not cached: it did not use its CPU budget, and a later run may use it;
``starved``
    the host kept it from a CPU for more than ``MAX_EXTENSION`` times the budget: an infrastructure failure
    (``infra_error``, missing, never cached), as the method prescribes for timeouts caused by host contention.

Starvation is CPU that *other* work held, never what a run does to itself: a script whose sixteen children burst
together waits for its own threads, and that wait must not turn its timeout into "missing". In each interval of
``TICK_S`` the run is counted starved for the least of three figures: its threads' run-queue delay
(``/proc/<tid>/schedstat``), its shortfall from the ``cpus`` it may use (a run that got its CPU was not starved,
however its threads queued inside it), and the CPU its quota was *denied by others*: the CPU time the host's
other processes took (``/proc/stat`` over the CPUs this process may run on, minus the run's own) beyond the
``ncpu - cpus`` CPUs that leave the run its share (steal time, a hypervisor's neighbours, counts as others').
Without a control group the budget is wall-clock seconds and every timeout is ``wall``; where ``/proc/stat``
cannot be read, only the first two figures bound it (the rule before the host's share was counted).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

from wmrl.autoresearch.environments.sandbox.cgroups import CgroupFiles
from wmrl.threads import host_busy_seconds  # the load as torch's thread choice reads it

TimeoutReason = Literal["cpu", "wall", "starved"]
MAX_EXTENSION = 2.0  # the wall-clock deadline moves out by at most this many budgets of starvation
# The sandbox's own start-up (namespaces, mounts, a container's runtime) is not the script's time: without this
# grace a script that computes from its first instant would reach the wall-clock deadline a moment before its CPU
# budget, and its timeout would not count as its own.
GRACE_S = 1.0
TICK_S = 0.2


def run_delay_seconds(tid: int) -> float | None:
    """Seconds thread ``tid`` spent runnable but waiting for a CPU (``/proc/<tid>/schedstat``, second field)."""
    try:
        with open(f"/proc/{tid}/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


class CpuBudget:
    """Watches one run and says when, and why, it must be stopped.

    Args:
        limit_s: the budget (CPU seconds where ``files`` count them, else wall seconds).
        files: the run's control group, or ``None`` (wall-clock budget only).
        clock: the clock, injectable for tests (``time.monotonic``).
        delay: a thread's run delay, injectable for tests (:func:`run_delay_seconds`).
        host: the host's busy CPU seconds and CPU count, injectable for tests (:func:`host_busy_seconds`).
        cpus: the CPUs the run's quota lets it use at once.

    After a run, ``others_cpus`` is how many of the host's ``host_cpus`` CPUs its other processes kept busy on
    average while it ran (``None`` where not measured).
    """

    def __init__(
        self,
        limit_s: float,
        files: CgroupFiles | None,
        clock: Callable[[], float] = time.monotonic,
        delay: Callable[[int], float | None] = run_delay_seconds,
        host: Callable[[], tuple[float, int] | None] = host_busy_seconds,
        cpus: float = 1.0,
    ) -> None:
        self.limit_s = limit_s
        self.files = files
        self.clock, self.delay, self.host, self.cpus = clock, delay, host, cpus
        self.start = self.last = clock()
        self._host = host() if files is not None else None
        self._others = 0.0  # CPU seconds the host's other processes used while the run ran
        self.others_cpus: float | None = None
        self.host_cpus: int | None = self._host[1] if self._host is not None else None
        self.cpu_seconds: float | None = 0.0 if files is not None else None
        self.starved_seconds: float | None = 0.0 if files is not None else None
        self._delays: dict[int, float] = {}
        self._sampled = False

    def _sample(self) -> None:
        now = self.clock()
        dt, self.last = now - self.last, now
        cpu = self.files.cpu_seconds()
        if cpu is None:
            return
        self._sampled = True
        got = max(0.0, cpu - self.cpu_seconds)
        self.cpu_seconds = cpu
        waited = 0.0
        for tid in self.files.thread_ids():
            total = self.delay(tid)
            if total is not None:
                waited += max(0.0, total - self._delays.get(tid, 0.0))
                self._delays[tid] = total
        denied = float("inf")
        host = self.host() if self._host is not None else None
        if host is not None:
            (busy, n), (before, _) = host, self._host
            self._host = host
            others = max(0.0, busy - before - got)
            self._others += others
            self.others_cpus = self._others / max(now - self.start, 1e-9)
            denied = max(0.0, others - max(0.0, n - self.cpus) * dt)
        self.starved_seconds += min(waited, max(0.0, self.cpus * dt - got), denied)

    def check(self) -> TimeoutReason | None:
        """Sample the run and return why it must stop now, or ``None`` while it is within its budget."""
        elapsed = self.clock() - self.start
        if self.files is None:
            return "wall" if elapsed >= self.limit_s else None
        self._sample()
        if self.cpu_seconds >= self.limit_s:
            return "cpu"
        extension = min(self.starved_seconds, MAX_EXTENSION * self.limit_s)
        if elapsed >= self.limit_s + extension + GRACE_S:
            return "starved" if self.starved_seconds >= MAX_EXTENSION * self.limit_s else "wall"
        return None

    def wait(self, exited: Callable[[float], bool]) -> TimeoutReason | None:
        """Wait for the run (``exited(timeout)`` returns True once it has ended); the reason it was stopped, or
        ``None`` if it ended on its own."""
        while True:
            if exited(TICK_S):
                return None
            reason = self.check()
            if reason is not None:
                return reason

    def finish(self) -> None:
        """Take the final count after the run ended (its exited processes stay counted in the group). A group
        that is gone already (a container's) keeps the last sample; one never read counts as unknown."""
        if self.files is not None:
            cpu = self.files.cpu_seconds()
            if cpu is not None:
                self.cpu_seconds = cpu
            elif not self._sampled:
                self.cpu_seconds = self.starved_seconds = None
