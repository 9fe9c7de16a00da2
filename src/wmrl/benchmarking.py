"""What the benchmarks' result pages share (``benchmarks/*.py``): the machine they ran on in one line, its speed
around an arm (a fixed matrix-product workload), and the hand-written reading of an earlier page, which a
regeneration keeps."""

from __future__ import annotations

import math
import os
import platform
import time
from pathlib import Path

import numpy as np


def cpu_probe(size: int = 768, repeats: int = 20) -> float:
    """Seconds for a fixed float32 matrix-product workload (best of 3): the machine's speed around an arm.

    A shared or virtual machine's speed drifts between hours (measured here: the same rollouts took 20% less
    generation and update time in a later session), which a ratio of two arms cannot tell from the method."""
    return best_matmul_seconds(np.random.default_rng(0).standard_normal((size, size), dtype=np.float32), repeats)


def best_seconds(work, repeats: int = 1, tries: int = 3) -> float:
    """Seconds for ``repeats`` calls of ``work()``, the best of ``tries`` tries."""
    best = math.inf
    for _ in range(tries):
        start = time.perf_counter()
        for _ in range(repeats):
            work()
        best = min(best, time.perf_counter() - start)
    return best


def best_matmul_seconds(a, repeats: int) -> float:
    """Seconds for ``repeats`` products ``a @ a`` (a NumPy array or a torch tensor), the best of 3 tries."""
    return best_seconds(lambda: a @ a, repeats)


def memory_gbps(gib: float = 1.0) -> float:
    """The machine's memory read bandwidth through torch (GB/s, best of 3 sums over a ``gib`` GiB float32 tensor,
    torch's default threads): what a memory floor of decoding, which reads every weight once a step, is measured
    against."""
    import torch

    x = torch.ones(int(gib * 2**30) // 4)
    return x.numel() * 4 / best_seconds(x.sum) / 1e9


def machine() -> str:
    """The machine a benchmark ran on, in one line (CPU model, cores, memory, GPU, Python and torch)."""
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"{os.cpu_count()} CPU cores ({cpu}), {memory:.0f} GiB RAM, {gpu}; Python {platform.python_version()}, "
            f"torch {torch.__version__}")


BY_HAND = "## Reading (by hand"  # the heading of a section a person wrote under the tables


def kept_by_hand(previous: str) -> str:
    """The hand-written reading of an earlier RESULTS.md (from its ``## Reading (by hand`` heading on), which a
    regeneration keeps: its heading carries the date it was written, so the reader can tell it from the tables."""
    at = previous.find("\n" + BY_HAND)
    return "" if at < 0 else "\n" + previous[at + 1 :].rstrip("\n") + "\n"
