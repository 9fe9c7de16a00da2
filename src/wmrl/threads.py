"""How many CPU threads torch gets: what this process may really use, not how many cores the machine has.

torch's default is one thread per core the machine has. On a shared CPU (other jobs, the sandboxes a run starts
beside its generation) that oversubscribes the cores, and OpenMP's threads then wait for each other: decoding
measured 0.2 steps/s with the default threads beside other work and 1.7 steps/s with one thread (8.5x). The
choice (:func:`choose_threads`) reads:

* the CPUs the process may run on (its affinity),
* its cgroup's CPU quota (``cpu.max``), when one is set,
* the CPU other processes held during a short sample (``/proc/stat``'s busy time minus this process's own),

and takes what is left, at least one. ``WMRL_THREADS`` (or OpenMP's own ``OMP_NUM_THREADS``) sets it instead.
``wmrl fit``/``validate``/``test`` print the choice and why.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

ENV_KEYS = ("WMRL_THREADS", "OMP_NUM_THREADS")


@dataclass(frozen=True)
class ThreadChoice:
    threads: int
    why: str

    def line(self) -> str:
        return f"torch threads: {self.threads} ({self.why}; set WMRL_THREADS to choose)"


def cgroup_cpus(root: Path = Path("/sys/fs/cgroup"), proc_cgroup: Path = Path("/proc/self/cgroup")) -> float | None:
    """The CPUs this process's cgroup (v2) quota allows (``cpu.max``: quota/period), ``None`` if unlimited or
    unreadable."""
    try:
        path = next(line.split("::", 1)[1].strip() for line in proc_cgroup.read_text().splitlines()
                    if line.startswith("0::"))
        quota, period = (root / path.lstrip("/") / "cpu.max").read_text().split()
    except (OSError, StopIteration, ValueError):
        return None
    return None if quota == "max" else int(quota) / int(period)


def host_busy_seconds() -> tuple[float, int] | None:
    """CPU seconds the CPUs this process may run on have been busy since boot (everything but idle and I/O wait,
    steal included) and how many CPUs that is, from ``/proc/stat``; ``None`` where it cannot be read."""
    try:
        allowed = os.sched_getaffinity(0)
        hz = os.sysconf("SC_CLK_TCK")
        busy, n = 0, 0
        with open("/proc/stat") as f:
            for line in f:
                name, _, rest = line.partition(" ")
                if not name.startswith("cpu") or not name[3:].isdigit() or int(name[3:]) not in allowed:
                    continue
                ticks = [int(v) for v in rest.split()[:8]]  # user nice system idle iowait irq softirq steal
                busy += sum(ticks) - ticks[3] - ticks[4]
                n += 1
    except (OSError, ValueError, IndexError):
        return None
    return (busy / hz, n) if n else None


def others_busy(sample_s: float = 0.3) -> float | None:
    """CPUs other processes kept busy (on this process's CPUs) over ``sample_s`` seconds, ``None`` if unreadable."""
    first, own, start = host_busy_seconds(), time.process_time(), time.monotonic()
    time.sleep(sample_s)
    second = host_busy_seconds()
    if first is None or second is None:
        return None
    held = (second[0] - first[0]) - (time.process_time() - own)
    return max(0.0, held / (time.monotonic() - start))


def choose_threads(environ: dict | None = None, affinity: int | None = None, quota: float | None = None,
                   others: float | None = None, sample: bool = True) -> ThreadChoice:
    """The number of threads for torch, and why. ``affinity``/``quota``/``others`` are read when not given."""
    environ = os.environ if environ is None else environ
    for key in ENV_KEYS:
        if environ.get(key):
            try:
                value = int(environ[key])
            except ValueError as exc:
                raise ValueError(f"{key}={environ[key]!r} is not a whole number of threads: set e.g. {key}=1") from exc
            if value < 1:
                raise ValueError(f"{key}={value}: at least 1 thread")
            return ThreadChoice(value, f"{key}={value}")
    affinity = len(os.sched_getaffinity(0)) if affinity is None else affinity
    quota = cgroup_cpus() if quota is None else quota
    usable = min(affinity, quota) if quota else affinity
    if others is None and sample:
        others = others_busy()
    left = usable - (others or 0.0)
    threads = max(1, min(affinity, math.floor(left + 0.5)))
    why = [f"{affinity} CPUs this process may run on"]
    if quota:
        why.append(f"a cgroup quota of {quota:g} CPUs")
    if others is not None:
        why.append(f"{others:.1f} held by other processes")
    return ThreadChoice(threads, ", ".join(why))


def apply_threads(choice: ThreadChoice | None = None) -> ThreadChoice:
    """Set torch's intra-op threads to ``choice`` (default: :func:`choose_threads`) and return it."""
    import torch

    choice = choose_threads() if choice is None else choice
    torch.set_num_threads(choice.threads)
    return choice
