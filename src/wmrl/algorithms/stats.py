"""Intervals for held-out scores: 95% percentile bootstraps that resample samples within each task.

A held-out evaluation draws ``K`` samples per task; a task's score is the mean of its samples' best positions
(0 for no valid submission), the run's score the mean over tasks. Tasks are fixed (they are the benchmark), so
the bootstrap resamples *samples within tasks*. Two evaluations of one run (the starting policy and the trained
one) sample with the same seeds: sample ``i`` of a task before and after share their randomness, and the gain's
interval resamples those pairs together (:func:`paired_gain`), which is what makes a small change measurable.

A missing sample (``None``: its execution failed for infrastructure reasons, :mod:`wmrl.evaluation.records`) is
left out, never read as 0: from the samples of its task, and in paired comparisons with its pair.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

RESAMPLES = 2000

Samples = Mapping[str, Sequence[float | None]]


def _values(values: Sequence[float | None]) -> np.ndarray:
    """``values`` as floats, a missing one (``None``) as nan."""
    return np.asarray([np.nan if v is None else v for v in values], dtype=float)


def _stacked(samples: Samples, tasks: list[str]) -> list[np.ndarray]:
    """Each task's measured samples (missing ones left out; a task with none left out)."""
    groups = [_values(samples[t]) for t in tasks]
    return [g[~np.isnan(g)] for g in groups if (~np.isnan(g)).any()]


def _paired(before: Sequence[float | None], after: Sequence[float | None], what: str) -> tuple[np.ndarray, np.ndarray]:
    """The pairs of ``before`` and ``after`` with both sides measured."""
    b, a = _values(before), _values(after)
    if b.shape != a.shape:
        raise ValueError(f"{what}: {len(b)} samples before and {len(a)} after; a paired comparison needs the same")
    keep = ~(np.isnan(b) | np.isnan(a))
    return b[keep], a[keep]


NOTHING = (float("nan"), float("nan"), float("nan"))  # an interval of nothing measured


def bootstrap_mean(samples: Samples, resamples: int = RESAMPLES, seed: int = 0) -> tuple[float, float, float]:
    """Mean over all samples and its 95% percentile interval, resampling samples within each task.

    >>> mean, low, high = bootstrap_mean({"a": [0.2, 0.4], "b": [0.6, 0.8]})
    >>> round(mean, 3), low <= mean <= high
    (0.5, True)
    >>> round(bootstrap_mean({"a": [0.2, None, 0.4]})[0], 3)  # a missing sample is left out, not a 0
    0.3
    """
    rng = np.random.default_rng(seed)
    groups = _stacked(samples, list(samples))
    if not groups:
        return NOTHING
    means = np.zeros(resamples)
    for g in groups:
        means += rng.choice(g, size=(resamples, len(g)), replace=True).sum(axis=1)
    means /= sum(len(g) for g in groups)
    mean = float(np.concatenate(groups).mean())
    return mean, float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def bootstrap_difference(a: Samples, b: Samples, resamples: int = RESAMPLES, seed: int = 0) -> tuple[float, float, float]:
    """Mean of ``a`` minus mean of ``b`` with a 95% interval, the two resampled independently, task by task
    (two runs: different arms, nothing paired).

    >>> point, low, high = bootstrap_difference({"a": [0.9, 0.8]}, {"a": [0.1, 0.2]})
    >>> round(point, 3), low > 0
    (0.7, True)
    """
    if sorted(a) != sorted(b):
        raise ValueError(f"the evaluations cover different tasks: {sorted(a)} vs {sorted(b)}")
    draws = []
    for samples, offset in ((a, 1), (b, 2)):
        rng = np.random.default_rng(seed + offset)
        groups = _stacked(samples, sorted(samples))
        if not groups:
            return NOTHING
        total = sum(rng.choice(g, size=(resamples, len(g)), replace=True).sum(axis=1) for g in groups)
        draws.append(total / sum(len(g) for g in groups))
    diff = draws[0] - draws[1]
    point = bootstrap_mean(a)[0] - bootstrap_mean(b)[0]
    return point, float(np.percentile(diff, 2.5)), float(np.percentile(diff, 97.5))


def paired_gain(before: Samples, after: Samples, resamples: int = RESAMPLES, seed: int = 0) -> tuple[float, float, float]:
    """Mean of ``after - before`` over paired samples (same task, same index, same seed) with a 95% interval
    that resamples the pairs within each task.

    >>> gain, low, high = paired_gain({"a": [0.2, 0.4, 0.0], "b": [0.5, 0.5]}, {"a": [0.6, 0.4, 0.5], "b": [0.9, 0.7]})
    >>> round(gain, 3), low > 0
    (0.3, True)
    >>> paired_gain({"a": [0.3, 0.5]}, {"a": [0.3, 0.5]})  # nothing moved: an interval of zero width
    (0.0, 0.0, 0.0)
    >>> paired_gain({"a": [0.3, 0.5]}, {"a": [None, 0.9]})  # the pair with a missing side is dropped
    (0.4, 0.4, 0.4)
    """
    if sorted(before) != sorted(after):
        raise ValueError(f"the evaluations cover different tasks: {sorted(before)} vs {sorted(after)}")
    deltas = {}
    for t in sorted(before):
        b, a = _paired(before[t], after[t], f"task {t}")
        deltas[t] = a - b
    return bootstrap_mean(deltas, resamples, seed)


def paired_best_of_k(before: Sequence[float], after: Sequence[float], resamples: int = RESAMPLES,
                     seed: int = 0) -> tuple[float, float, float]:
    """One task's best-of-k after minus before (the best position among its K samples) with a 95% interval that
    resamples the K seed-paired samples together: a rise carried by one lucky sample is as fragile as it looks
    (resamples that miss it fall back), one that several samples reach holds.

    >>> paired_best_of_k([0.4, 0.4, 0.4, 0.0], [0.8, 0.8, 0.9, 0.8])[0]
    0.5
    >>> round(paired_best_of_k([0.4, 0.4, 0.4, 0.0], [0.8, 0.8, 0.9, 0.8])[1], 2)  # every resample rises
    0.4
    >>> paired_best_of_k([0.4, 0.4, 0.4, 0.4], [0.4, 0.4, 0.4, 0.9])[1]  # one sample's rise: the interval holds 0
    0.0
    """
    if len(before) != len(after) or not len(before):
        raise ValueError(f"{len(before)} samples before and {len(after)} after; a paired best-of-k needs the same K > 0")
    b, a = _paired(before, after, "best-of-k")
    if not len(b):
        return NOTHING
    rng = np.random.default_rng(seed)
    index = rng.integers(0, len(b), size=(resamples, len(b)))
    diffs = a[index].max(axis=1) - b[index].max(axis=1)
    return float(a.max() - b.max()), float(np.percentile(diffs, 2.5)), float(np.percentile(diffs, 97.5))


def seed_interval(values: Sequence[float]) -> tuple[float, float, float]:
    """Mean of per-seed values (e.g. each seed's paired difference) with a 95% Student-t interval over seeds.

    The bootstraps above resample samples within tasks (or seeds): they measure the evaluation's noise for the runs
    at hand. Training itself is random too; with a few seeds this interval is the one that says whether another
    seed could flip a sign. ``nan`` bounds for fewer than two seeds.

    >>> mean, low, high = seed_interval([0.10, 0.12, 0.08])
    >>> round(mean, 3), round(low, 3), round(high, 3)
    (0.1, 0.05, 0.15)
    >>> seed_interval([0.3])[1] != seed_interval([0.3])[1]  # nan: one seed says nothing about the next
    True
    """
    values = np.asarray(values, dtype=float)
    mean = float(values.mean())
    if len(values) < 2:
        return mean, float("nan"), float("nan")
    from scipy.stats import t

    half = float(t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values)))
    return mean, mean - half, mean + half


def describe_gain(gain: float, low: float, high: float, unchanged: bool) -> str:
    """What a paired gain says, in words a newcomer can act on.

    >>> describe_gain(0.12, 0.04, 0.20, False)
    'improved: +0.120, 95% interval [+0.040, +0.200] (above 0)'
    >>> describe_gain(0.0, 0.0, 0.0, True)[:40]
    'no change: every sample scored exactly a'
    """
    interval = f"{gain:+.3f}, 95% interval [{low:+.3f}, {high:+.3f}]"
    if unchanged:
        return (f"no change: every sample scored exactly as before ({interval}); the policy's samples did not "
                "move (with valid samples to learn from: raise the learning rate or the steps)")
    if low > 0:
        return f"improved: {interval} (above 0)"
    if high < 0:
        return f"got worse: {interval} (below 0)"
    return f"within noise: {interval} includes 0, so this run shows no measurable change"


def interval(point_low_high: tuple[float, float, float]) -> dict[str, float]:
    """A ``(point, low, high)`` from the functions above as the dict the benchmarks' JSON records.

    >>> interval((0.1, 0.0, 0.2))
    {'point': 0.1, 'low': 0.0, 'high': 0.2}
    """
    point, low, high = point_low_high
    return {"point": point, "low": low, "high": high}


def interval_text(i: dict | None, signed: bool = True) -> str:
    """``+0.120 [+0.040, +0.200]`` (``-`` for none; ``signed=False`` for a level, not a change).

    >>> interval_text({"point": 0.12, "low": 0.04, "high": 0.2}), interval_text(None)
    ('+0.120 [+0.040, +0.200]', '-')
    """
    if i is None:
        return "-"
    f = "+.3f" if signed else ".3f"
    return f"{i['point']:{f}} [{i['low']:{f}}, {i['high']:{f}}]"
