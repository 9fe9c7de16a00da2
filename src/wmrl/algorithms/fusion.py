"""Fusion by measured agreement, the pure part: the world-model stream's share of the update, down to zero.

GRPO standardises rewards within a group, so what a world-model group contributes is its within-group ranking.
Write a world-model row's advantage as ``A_wm = rho * A + e``: ``rho`` the within-group correlation of the world
model's (calibrated) rewards with the real ones, ``e`` an error of variance ``1 - rho^2`` independent of the true
advantage ``A``. Its policy-gradient term then carries ``rho`` of a real row's signal at about a real row's noise.
Weighing world-model rows by ``w`` against anchor rows by 1, the update's signal-to-noise ratio

    (n_E + w rho n_W)^2 / (n_E + w^2 n_W)

is largest at ``w = rho``: the inverse-variance weight of a world-model row made unbiased (``A_wm / rho``, variance
``1 / rho^2``, weight ``rho^2``) applied to ``A_wm``. The fused gradient is the design's minimum-variance form

    g = (g_E + rho g_WM) / (|E| + rho |WM|),

so a world model at chance (``rho = 0``) leaves exactly the anchors' update (real GRPO at the anchors' executions)
and an exact one (``rho = 1``) weighs every row alike.

A world model can bring evidence from before the run (:meth:`AgreementEstimate.add_prior`: the agreement it showed
on tasks it was not fitted on, with the degrees of freedom it counts as): it is pooled with the anchors' on Fisher's
z scale, weighted by degrees of freedom, and fades with every anchor group like an old one.

``rho`` is measured on the anchors, out of sample (their world-model rewards calibrated by the map fitted *before*
their own pairs, :class:`~wmrl.callbacks.debiasing.OnlineDebiasing` with ``method="strict"``): the pooled
within-group correlation of exponentially weighted sums (half-life in anchor groups: the world model and the policy
change). The share used is its lower confidence bound (Fisher's z, one-sided, :data:`Z`), floored at 0: a world model
has to show agreement before it is trusted, and a chance or backwards one stays at 0.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> exact, distorted, chance = AgreementEstimate(), AgreementEstimate(), AgreementEstimate()
>>> for _ in range(8):  # eight anchor groups of eight
...     real = rng.random(8)
...     exact.observe(real, real)
...     distorted.observe(real ** 6, real)  # uncalibrated: Pearson reads the distortion as disagreement
...     chance.observe(rng.random(8), real)
>>> round(exact.share(), 2), round(distorted.share(), 2), chance.share()
(1.0, 0.71, 0.0)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

HALF_LIFE = 32.0  # anchor groups
Z = 1.645  # one-sided 95%: the share is the lower bound of the agreement
MIN_DOF = 4.0  # within-group degrees of freedom before any share
PRIOR_DOF = 16.0  # the most a world model's agreement measured before the run counts as (about five groups of four)


@dataclass
class AgreementEstimate:
    """Exponentially weighted within-group sums of world-model (``d``) and real (``s``) rewards of anchor groups.

    Attributes:
        half_life: in anchor groups.
        z: the confidence of the lower bound :meth:`share` returns.
        sxy, sxx, syy: decayed sums of the group-centred cross products and squares.
        dof: decayed within-group degrees of freedom (a group of ``n`` rows adds ``n - 1``).
        groups: anchor groups observed (not decayed).
        prior_agreement, prior_dof: evidence from before the run (:meth:`add_prior`); its degrees of freedom decay
            with every anchor group as the sums do.
    """

    half_life: float = HALF_LIFE
    z: float = Z
    sxy: float = 0.0
    sxx: float = 0.0
    syy: float = 0.0
    dof: float = 0.0
    groups: int = 0
    prior_agreement: float = 0.0
    prior_dof: float = 0.0

    def __post_init__(self) -> None:
        if not self.half_life > 0:
            raise ValueError(f"half_life must be > 0 (got {self.half_life})")
        if not self.z >= 0:
            raise ValueError(f"z must be >= 0 (got {self.z})")

    def observe(self, wm, real) -> None:
        """Fold one anchor group's pairs in (a group of one row says nothing about a ranking)."""
        d, s = np.asarray(wm, dtype=np.float64), np.asarray(real, dtype=np.float64)
        if d.shape != s.shape or d.ndim != 1:
            raise ValueError(f"wm and real must be 1-d of equal length (got {d.shape} and {s.shape})")
        if len(d) < 2 or not (np.isfinite(d).all() and np.isfinite(s).all()):
            return
        decay = 0.5 ** (1.0 / self.half_life)
        d, s = d - d.mean(), s - s.mean()
        self.sxy = decay * self.sxy + float(d @ s)
        self.sxx = decay * self.sxx + float(d @ d)
        self.syy = decay * self.syy + float(s @ s)
        self.dof = decay * self.dof + len(d) - 1
        self.prior_dof *= decay
        self.groups += 1

    def add_prior(self, agreement: float, dof: float) -> None:
        """Evidence from before the run: a within-group correlation ``agreement`` worth ``dof`` degrees of freedom
        (e.g. a world model's out-of-fold agreement on tasks it was not fitted on).

        >>> estimate = AgreementEstimate()
        >>> estimate.add_prior(0.7, 16)
        >>> round(estimate.share(), 3)  # the lower bound of 0.7 over 16 degrees of freedom
        0.403
        """
        if not -1.0 <= agreement <= 1.0 or dof < 0:
            raise ValueError(f"a prior needs an agreement in [-1, 1] and dof >= 0 (got {agreement}, {dof})")
        self.prior_agreement, self.prior_dof = float(agreement), float(dof)

    @property
    def agreement(self) -> float:
        """The pooled within-group correlation (NaN until both streams varied)."""
        if not (self.sxx > 1e-12 and self.syy > 1e-12):
            return math.nan
        return max(-1.0, min(1.0, self.sxy / math.sqrt(self.sxx * self.syy)))

    def pooled(self) -> tuple[float, float]:
        """The anchors' agreement pooled with the prior's: ``(correlation, dof)``, Fisher's z weighted by degrees
        of freedom (the anchors' alone without a prior; ``(nan, 0)`` with neither)."""
        parts = [(self.agreement, self.dof), (self.prior_agreement, self.prior_dof)]
        parts = [(math.atanh(max(-1 + 1e-9, min(rho, 1 - 1e-9))), dof) for rho, dof in parts
                 if dof > 0 and not math.isnan(rho)]
        dof = sum(w for _, w in parts)
        if not dof > 0:
            return math.nan, 0.0
        return math.tanh(sum(z * w for z, w in parts) / dof), dof

    def share(self) -> float:
        """The world-model rows' weight: the lower confidence bound of the pooled agreement, floored at 0 (0 until
        :data:`MIN_DOF`)."""
        rho, dof = self.pooled()
        if not rho > 0 or dof < MIN_DOF:
            return 0.0
        fisher = math.atanh(min(rho, 1 - 1e-9)) - self.z / math.sqrt(max(dof - 2.0, 1.0))
        return max(0.0, math.tanh(fisher))

    def state_dict(self) -> dict:
        return {"sxy": self.sxy, "sxx": self.sxx, "syy": self.syy, "dof": self.dof, "groups": self.groups,
                "prior_agreement": self.prior_agreement, "prior_dof": self.prior_dof}

    def load_state_dict(self, state: dict) -> None:
        self.sxy, self.sxx, self.syy = float(state["sxy"]), float(state["sxx"]), float(state["syy"])
        self.dof, self.groups = float(state["dof"]), int(state["groups"])
        self.prior_agreement = float(state.get("prior_agreement", 0.0))  # a state saved without a prior has none
        self.prior_dof = float(state.get("prior_dof", 0.0))


def certainty_weights(variances) -> np.ndarray:
    """Each world-model row's weight relative to its stream, from the world model's own predicted variance:
    ``1 / (v + tau)`` normalised to mean 1 over the rows that report a variance (``tau`` their median, so that one
    near-zero variance cannot take the step; a weight is then at most 4), and 1 for a row without one (NaN).
    The stream's total weight, ``share x rows``, is left as the measured agreement set it: the world model's own
    uncertainty only moves weight between its rows, towards the predictions it is surer of.

    >>> certainty_weights([0.01, 0.01, 0.09, float("nan")]).round(3).tolist()
    [1.364, 1.364, 0.273, 1.0]
    >>> certainty_weights([0.04, 0.04]).tolist()  # equal variances: every row alike
    [1.0, 1.0]
    """
    v = np.asarray(variances, dtype=np.float64)
    weights = np.ones_like(v)
    known = np.isfinite(v) & (v >= 0)
    if known.sum() < 2:
        return weights
    tau = max(float(np.median(v[known])), 1e-12)
    inverse = 1.0 / (v[known] + tau)
    weights[known] = inverse / inverse.mean()
    return weights


def fusion_scales(real_rows: int, wm_rows: int, share: float) -> tuple[float, float]:
    """The factors for anchor and world-model advantages: ``g = (g_E + share g_WM) / (|E| + share |WM|)`` where the
    loss averages over all ``real_rows + wm_rows`` rows.

    >>> fusion_scales(8, 56, 0.0)  # at chance: the anchors' update alone, at its own scale
    (8.0, 0.0)
    >>> fusion_scales(8, 56, 1.0)  # exact: every row alike
    (1.0, 1.0)
    """
    if not 0 <= share <= 1:
        raise ValueError(f"share must lie in [0, 1] (got {share})")
    effective = real_rows + share * wm_rows
    if effective <= 0:
        return 1.0, 0.0
    scale = (real_rows + wm_rows) / effective
    return scale, share * scale
