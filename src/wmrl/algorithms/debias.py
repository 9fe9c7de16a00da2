"""Online Debiasing, the pure part: a monotone map from world-model rewards to real rewards.

The map is fitted on anchor pairs ``(r_wm, r_real)`` (docs/concepts.md, Online Debiasing): 10 equal-width bins on
[0, 1]; per populated bin the mean ``r_wm``, the mean ``r_real`` and the count; an isotonic (monotone
non-decreasing) fit of the bin means weighted by the counts (``sklearn.isotonic.IsotonicRegression``, pool
adjacent violators); applied by linear interpolation between the bin knots with flat extrapolation.

Why monotone and not affine: GRPO standardises rewards within a group, which cancels any affine map. A
monotone piecewise-linear map survives standardisation and never reorders the rollouts of a group.

Fewer than :data:`MIN_POPULATED_BINS` populated bins give the identity map, not a one-knot map: one knot is
a constant (flat extrapolation both ways) that would send every world-model reward to one value and zero
every world-model group's advantages, although all one bin can tell is an offset, which group
standardisation cancels anyway. Likewise anchors whose real rewards are all equal give the identity map:
the fit would be that constant, yet equal real rewards say nothing about whether the world model ranks
rollouts well or badly (their rank correlation is undefined), only where the offset lies. A flat map is
kept for what it is evidence of: bins whose real means *decrease* (isotonic pooling). Only pairs with
finite rewards can be binned (:func:`finite_pairs`).

>>> m = fit_calibration([0.05, 0.15, 0.95], [0.0, 0.1, 0.9])
>>> [round(float(v), 3) for v in m([0.0, 0.1, 0.5, 1.0])]
[0.0, 0.05, 0.45, 0.9]
>>> fit_calibration([0.31, 0.35, 0.38], [0.0, 0.5, 1.0]).is_identity  # one bin: nothing to fit
True
>>> fit_calibration([0.19, 0.24], [0.1, 0.1]).is_identity  # equal real rewards: no ranking to read
True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

BINS = 10
MIN_POPULATED_BINS = 2  # a map needs two knots to have a slope; see the module docstring


@dataclass(frozen=True)
class CalibrationMap:
    """A monotone piecewise-linear map given by its knots (``xs`` increasing, ``ys`` non-decreasing).

    No knots is the identity map (before ``min_pairs`` anchor pairs exist).
    """

    xs: tuple[float, ...] = ()
    ys: tuple[float, ...] = ()

    @property
    def is_identity(self) -> bool:
        return not self.xs

    @property
    def is_flat(self) -> bool:
        """The map sends every reward to one value: world-model rewards then carry no ranking signal."""
        return bool(self.xs) and max(self.ys) - min(self.ys) <= 1e-9

    def __call__(self, values) -> np.ndarray:
        values = np.asarray(values, dtype=np.float64)
        if self.is_identity:
            return values.copy()
        return np.interp(values, self.xs, self.ys)  # flat beyond the first and last knot

    def to_dict(self) -> dict:
        return {"xs": list(self.xs), "ys": list(self.ys)}

    @classmethod
    def from_dict(cls, d: dict) -> CalibrationMap:
        return cls(tuple(float(x) for x in d["xs"]), tuple(float(y) for y in d["ys"]))


def bin_index(wm, bins: int = BINS) -> np.ndarray:
    """The equal-width bin on [0, 1] of each world-model reward (clipped into [0, 1]; 1.0 is in the last bin).

    >>> bin_index([0.0, 0.35, 0.999, 1.0, 1.7]).tolist()
    [0, 3, 9, 9, 9]
    """
    wm = np.clip(np.asarray(wm, dtype=np.float64), 0.0, 1.0)
    return np.minimum((wm * bins).astype(np.int64), bins - 1)


def finite_pairs(wm, real) -> np.ndarray:
    """``[n]`` mask of the pairs whose two rewards are both finite (NaN / inf cannot be binned or fitted).

    >>> finite_pairs([0.1, float("nan"), 0.5], [0.0, 0.2, float("inf")]).tolist()
    [True, False, False]
    """
    wm, real = np.asarray(wm, dtype=np.float64), np.asarray(real, dtype=np.float64)
    if wm.shape != real.shape:
        raise ValueError(f"wm and real must have equal shapes (got {wm.shape} and {real.shape})")
    return np.isfinite(wm) & np.isfinite(real)


def bin_pairs(wm: Sequence[float], real: Sequence[float], bins: int = BINS) -> tuple[np.ndarray, ...]:
    """Per populated equal-width bin of ``wm`` on [0, 1]: (mean wm, mean real, count), bins in order."""
    wm = np.clip(np.asarray(wm, dtype=np.float64), 0.0, 1.0)
    real = np.asarray(real, dtype=np.float64)
    if wm.shape != real.shape or wm.ndim != 1:
        raise ValueError(f"wm and real must be 1-d of equal length (got {wm.shape} and {real.shape})")
    index = bin_index(wm, bins)
    counts = np.bincount(index, minlength=bins)
    populated = counts > 0
    x = np.bincount(index, weights=wm, minlength=bins)[populated] / counts[populated]
    y = np.bincount(index, weights=real, minlength=bins)[populated] / counts[populated]
    return x, y, counts[populated].astype(np.float64)


def fit_calibration(wm: Sequence[float], real: Sequence[float], bins: int = BINS) -> CalibrationMap:
    """Fit the monotone map on pairs (see the module docstring). Needs at least one pair, all finite.

    Fewer than :data:`MIN_POPULATED_BINS` populated bins, or real rewards that are all equal, give the
    identity map (see the module docstring).
    The fit may still be flat (:attr:`CalibrationMap.is_flat`) when isotonic pooling merges every bin: the
    world model then ranks bins backwards or not at all, and its rewards carry no ranking signal.
    """
    from sklearn.isotonic import IsotonicRegression

    if len(wm) == 0:
        raise ValueError("fit_calibration needs at least one (r_wm, r_real) pair")
    if not finite_pairs(wm, real).all():
        raise ValueError("fit_calibration needs finite rewards (drop NaN / inf pairs first: finite_pairs)")
    x, y, counts = bin_pairs(wm, real, bins)
    if len(x) < MIN_POPULATED_BINS or np.ptp(np.asarray(real, dtype=np.float64)) == 0:
        return CalibrationMap()
    fitted = IsotonicRegression(increasing=True, out_of_bounds="clip").fit(x, y, sample_weight=counts)
    ys = fitted.predict(x)
    return CalibrationMap(tuple(float(v) for v in x), tuple(float(v) for v in ys))


def centred_residual(wm, real, groups) -> float:
    """Mean squared within-group-centred residual ``((d - mean d) - (s - mean s))^2`` over all pairs.

    Group-centring removes what GRPO's standardisation removes anyway (a per-group offset).
    """
    wm, real, groups = (np.asarray(a) for a in (wm, real, groups))
    if len(wm) == 0:
        return float("nan")
    residual = wm.astype(np.float64) - real.astype(np.float64)
    _, inverse = np.unique(groups, return_inverse=True)
    means = np.bincount(inverse, weights=residual) / np.bincount(inverse)
    return float(np.mean((residual - means[inverse]) ** 2))


def bias_reduction(wm, real, groups, calibration: CalibrationMap) -> float:
    """``1 - after / before`` of the centred residual of the anchors (the paper logs e.g. 0.61)."""
    before = centred_residual(wm, real, groups)
    after = centred_residual(calibration(wm), real, groups)
    if not before > 1e-12:
        return 0.0
    return 1.0 - after / before


def rank_correlation(wm, real) -> float:
    """Spearman rank correlation of world-model and real rewards (``nan`` if either is constant)."""
    wm, real = np.asarray(wm, dtype=np.float64), np.asarray(real, dtype=np.float64)
    if len(wm) < 2 or np.ptp(wm) == 0 or np.ptp(real) == 0:
        return float("nan")
    from scipy.stats import rankdata

    a, b = rankdata(wm), rankdata(real)
    return float(np.corrcoef(a, b)[0, 1])
