"""Inverse-Variance Denoising, the pure part: how much more an anchor group's advantages should weigh.

Per anchor group whose real rewards vary (Var > 1e-9), the world model's disagreement with reality is

    s2 = mean(((d - mean d) - (s - mean s))^2) / Var(s),   d = calibrated r_wm, s = r_real,

the share of the group's real signal the (calibrated) world model gets wrong. An EWMA of s2 (half-life 64
observations) tracks it; after 32 warm-up observations the scale ``c`` is frozen so that the weight equals the
target 2.0 at that moment, ``c = (target - 1) / EWMA``; afterwards ``w = clip(1 + c * EWMA, 1, 4)``. Before
``c`` is frozen ``w = 1``.

``c`` freezes only once the EWMA has reached a floor, :data:`MIN_DISAGREEMENT` (1e-3). ``s2`` is a variance
ratio (normalised by Var(s)), so 1e-3 means the world model's group-relative error variance is 0.1% of the
real rewards' variance: below it the world model and the sandbox agree and ``w`` stays 1. Freezing on any
positive EWMA would let a warm-up of perfect agreement followed by one rounding-level disagreement (EWMA
~1e-11) set ``c`` ~ 1e11, and the next ordinary observation would jump ``w`` to the cap. The warm-up still
counts every observation; ``c`` freezes on the first observation at or after it whose EWMA reaches the floor,
and the weight is the target at that moment, as above.

The weight multiplies anchor-group advantages after group normalisation: the practical form of the
minimum-variance fusion ``g = (g_E / V_E + g_WM / V_WM) / (|G_E| / V_E + |G_WM| / V_WM)`` (see
:func:`fused_variance`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

HALF_LIFE = 64
WARMUP = 32
TARGET = 2.0
MIN_WEIGHT, MAX_WEIGHT = 1.0, 4.0
MIN_REAL_VARIANCE = 1e-9
MIN_DISAGREEMENT = 1e-3  # EWMA of s2 below which c does not freeze (see the module docstring)


def group_disagreement(calibrated_wm, real) -> float | None:
    """``s2`` of one anchor group, or ``None`` when its real rewards do not vary (nothing to compare).

    >>> group_disagreement([0.1, 0.2, 0.9], [0.1, 0.2, 0.9])
    0.0
    >>> group_disagreement([0.5, 0.5], [0.5, 0.5]) is None
    True
    """
    d = np.asarray(calibrated_wm, dtype=np.float64)
    s = np.asarray(real, dtype=np.float64)
    variance = float(s.var())
    if len(s) < 2 or variance <= MIN_REAL_VARIANCE:
        return None
    return float(np.mean(((d - d.mean()) - (s - s.mean())) ** 2) / variance)


@dataclass
class InverseVarianceWeight:
    """The EWMA of ``s2``, the frozen scale ``c`` and the weight (a small state machine; see module doc)."""

    half_life: float = HALF_LIFE
    warmup: int = WARMUP
    target: float = TARGET
    min_weight: float = MIN_WEIGHT
    max_weight: float = MAX_WEIGHT
    min_disagreement: float = MIN_DISAGREEMENT
    observations: int = 0
    ewma: float = math.nan
    c: float | None = None

    @property
    def decay(self) -> float:
        return 0.5 ** (1.0 / self.half_life)

    def observe(self, s2: float) -> None:
        """Fold one group's disagreement into the EWMA; freeze ``c`` once warmed up and the EWMA is meaningful.

        >>> state = InverseVarianceWeight(warmup=2)
        >>> for s2 in (0.0, 0.0, 1e-9):
        ...     state.observe(s2)
        >>> state.c is None, state.weight  # warmed up, but the world model agrees: below the floor
        (True, 1.0)
        >>> state.observe(1.0)
        >>> round(state.weight, 6)  # c froze now: the weight is the target at that moment
        2.0
        """
        if not math.isfinite(s2) or s2 < 0:
            raise ValueError(f"disagreement must be finite and >= 0 (got {s2})")
        self.ewma = s2 if self.observations == 0 else self.decay * self.ewma + (1 - self.decay) * s2
        self.observations += 1
        if self.c is None and self.observations >= self.warmup and self.ewma >= self.min_disagreement:
            self.c = (self.target - 1.0) / self.ewma

    @property
    def weight(self) -> float:
        if self.c is None:
            return 1.0
        return float(min(max(1.0 + self.c * self.ewma, self.min_weight), self.max_weight))

    def state_dict(self) -> dict:
        return {"observations": self.observations, "ewma": self.ewma, "c": self.c}

    def load_state_dict(self, state: dict) -> None:
        self.observations = int(state["observations"])
        self.ewma = float(state["ewma"])
        self.c = None if state["c"] is None else float(state["c"])


def fused_variance(var_real: float, n_real: int, var_wm: float, n_wm: int) -> float:
    """Variance of the minimum-variance fusion of ``n_real`` real and ``n_wm`` world-model gradient estimates.

    ``1 / (n_real / V_E + n_wm / V_WM)``: always below either stream alone.

    >>> fused_variance(1.0, 1, 4.0, 8) < min(1.0 / 1, 4.0 / 8)
    True
    """
    return 1.0 / (n_real / var_real + n_wm / var_wm)
