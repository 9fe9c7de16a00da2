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

    No knots is the identity map (before ``min_pairs`` anchor pairs exist). ``ends``: beyond the first and last
    knot the map is ``flat`` (the paper's) or continues with its end segments' ``slope`` (the strict map's, so that
    two rewards beyond a knot stay apart).
    """

    xs: tuple[float, ...] = ()
    ys: tuple[float, ...] = ()
    ends: str = "flat"

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
        out = np.interp(values, self.xs, self.ys)  # flat beyond the first and last knot
        if self.ends == "slope" and len(self.xs) >= 2:
            xs, ys = self.xs, self.ys
            low, high = values < xs[0], values > xs[-1]
            out[low] = ys[0] + (values[low] - xs[0]) * (ys[1] - ys[0]) / (xs[1] - xs[0])
            out[high] = ys[-1] + (values[high] - xs[-1]) * (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
        return out

    def to_dict(self) -> dict:
        return {"xs": list(self.xs), "ys": list(self.ys), "ends": self.ends}

    @classmethod
    def from_dict(cls, d: dict) -> CalibrationMap:
        return cls(tuple(float(x) for x in d["xs"]), tuple(float(y) for y in d["ys"]), d.get("ends", "flat"))


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


TIE_BREAK = 0.05  # the strict map's share of an even ramp over its knots (see fit_strict_calibration)


def quantile_pairs(wm: Sequence[float], real: Sequence[float], knots: int = BINS) -> tuple[np.ndarray, ...]:
    """Per populated quantile bin of ``wm`` (``knots`` bins of about equal count; equal rewards share a bin):
    (mean wm, mean real, count), bins in order of ``wm``.

    >>> x, y, n = quantile_pairs([0.0, 0.0, 0.0, 0.1, 0.2, 0.9], [0, 0, 0.1, 0.5, 0.6, 1.0], knots=3)
    >>> x.round(3).tolist(), y.round(3).tolist(), n.tolist()
    ([0.025, 0.55], [0.15, 0.8], [4.0, 2.0])
    """
    wm, real = np.asarray(wm, dtype=np.float64), np.asarray(real, dtype=np.float64)
    if wm.shape != real.shape or wm.ndim != 1:
        raise ValueError(f"wm and real must be 1-d of equal length (got {wm.shape} and {real.shape})")
    edges = np.unique(np.quantile(wm, np.linspace(0.0, 1.0, knots + 1)[1:-1]))
    index = np.searchsorted(edges, wm, side="right")  # equal rewards fall in one bin
    counts = np.bincount(index, minlength=len(edges) + 1)
    populated = counts > 0
    x = np.bincount(index, weights=wm)[populated] / counts[populated]
    y = np.bincount(index, weights=real)[populated] / counts[populated]
    return x, y, counts[populated].astype(np.float64)


def fit_strict_calibration(wm: Sequence[float], real: Sequence[float], knots: int = BINS,
                           tie_break: float = TIE_BREAK) -> CalibrationMap:
    """A monotone map that introduces no tie a group did not have (the kit's Online Debiasing).

    Three changes to the paper's map (:func:`fit_calibration`), each against a way it erased a ranking:

    - knots at quantiles of the anchors' ``r_wm`` (:func:`quantile_pairs`), not equal-width bins on [0, 1]: a
      distortion that packs most rewards into one tenth of the range (``r^20``) still gets a knot per tenth of the
      anchors;
    - strictly increasing: the isotonic fit of the knots' means is mixed with an even ramp over the knots,
      ``(1 - tie_break) * iso + tie_break * ramp``, so a stretch that pooling made flat keeps its order;
    - end segments that keep their slope instead of flat ends.

    The map is flat (every reward to one value) only where the anchors give no ranking to keep: when their
    isotonic fit is flat, i.e. a higher ``r_wm`` never meant a higher real reward (a world model at chance or
    ranking backwards), whose rows then carry no signal. Equal real rewards or one distinct ``r_wm`` give the
    identity, as the paper's map does.

    >>> m = fit_strict_calibration([0.0, 1e-6, 1e-4, 0.01, 0.3], [0.2, 0.3, 0.5, 0.7, 0.9], knots=5)
    >>> values = m([1e-7, 5e-6, 1e-3, 0.5])
    >>> bool(np.all(np.diff(values) > 0))  # r^20-like rewards stay apart
    True
    >>> fit_strict_calibration([0.1, 0.5, 0.9], [0.9, 0.5, 0.1]).is_flat  # ranks backwards: no signal
    True
    """
    from sklearn.isotonic import IsotonicRegression

    if len(wm) == 0:
        raise ValueError("fit_strict_calibration needs at least one (r_wm, r_real) pair")
    if not finite_pairs(wm, real).all():
        raise ValueError("fit_strict_calibration needs finite rewards (drop NaN / inf pairs first: finite_pairs)")
    if not 0 < tie_break < 1:
        raise ValueError(f"tie_break must lie in (0, 1) (got {tie_break})")
    x, y, counts = quantile_pairs(wm, real, knots)
    if len(x) < MIN_POPULATED_BINS or np.ptp(np.asarray(real, dtype=np.float64)) == 0:
        return CalibrationMap()
    iso = IsotonicRegression(increasing=True).fit(x, y, sample_weight=counts).predict(x)
    if np.ptp(iso) <= 1e-12:  # no ranking on the anchors: flat, the rows carry no signal
        return CalibrationMap(tuple(float(v) for v in x), tuple(float(v) for v in iso), "slope")
    ramp = iso[0] + np.ptp(iso) * np.arange(len(x)) / (len(x) - 1)
    ys = (1 - tie_break) * iso + tie_break * ramp
    return CalibrationMap(tuple(float(v) for v in x), tuple(float(v) for v in ys), "slope")


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
