"""`InverseVarianceDenoising`: weigh the clean anchor stream against the noisy world-model stream.

After group normalisation (``on_advantages``) it measures, per anchor group whose real rewards vary, how much
the calibrated world model disagrees with reality (``s2``, :mod:`wmrl.algorithms.denoise`), folds it into an
EWMA (half-life 64 observations), freezes the scale ``c`` after 32 warm-up observations so the weight is 2.0
at that moment, and multiplies the advantages of every anchor row by ``w = clip(1 + c * EWMA, 1, 4)``.
Before calibration ``w = 1``. ``c`` freezes only once the EWMA reaches ``min_disagreement`` (1e-3): while
the world model agrees with the sandbox there is nothing to weigh against, and freezing on a rounding-level
EWMA would send the weight to the cap on the next ordinary observation.

"Calibrated" means through ``OnlineDebiasing``'s map when that callback is in the run (it says so on the batch,
``batch.corrections.calibrating``): then observations start only once its map is fitted (``batch.wm_calibrated``
is filled). Without it (the denoising-only ablation) the raw world-model rewards are used from the first anchor
group on.

Logged: ``denoise/weight``, ``denoise/disagreement`` (the EWMA), ``denoise/observations``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

from wmrl.algorithms.denoise import (
    HALF_LIFE,
    MAX_WEIGHT,
    MIN_DISAGREEMENT,
    MIN_WEIGHT,
    TARGET,
    WARMUP,
    InverseVarianceWeight,
    group_disagreement,
)
from wmrl.callbacks.base import RLCallback, gather_rows

if TYPE_CHECKING:
    import lightning.pytorch as pl

    from wmrl.types import RolloutBatch


class InverseVarianceDenoising(RLCallback):
    """The anchor-advantage weight (docs/concepts.md, Inverse-Variance Denoising).

    Args:
        half_life: EWMA half-life in observations (paper 64).
        warmup: observations before ``c`` is frozen (paper 32).
        target: the weight at the moment ``c`` is frozen (paper 2.0).
        min_weight: the lower end of the weight's clip range (paper 1).
        max_weight: the upper end of the weight's clip range (paper 4).
        min_disagreement: ``c`` freezes only once the EWMA of ``s2`` reaches this floor (> 0); until then
            ``w = 1``. ``s2`` is normalised by Var(r_real), so the default 1e-3 means the world model's
            group-relative error variance is 0.1% of the real rewards' variance: below it the world model and
            the sandbox agree (the paper does not state a floor; see :mod:`wmrl.algorithms.denoise`).
    """

    def __init__(
        self,
        half_life: float = HALF_LIFE,
        warmup: int = WARMUP,
        target: float = TARGET,
        min_weight: float = MIN_WEIGHT,
        max_weight: float = MAX_WEIGHT,
        min_disagreement: float = MIN_DISAGREEMENT,
    ) -> None:
        problems = []
        if half_life <= 0:
            problems.append(f"InverseVarianceDenoising half_life must be > 0 (got {half_life})")
        if warmup < 1:
            problems.append(f"InverseVarianceDenoising warmup must be >= 1 (got {warmup})")
        if not min_weight <= target <= max_weight:
            problems.append(
                f"InverseVarianceDenoising target must lie in [min_weight, max_weight] (got {target} not in "
                f"[{min_weight}, {max_weight}])"
            )
        if min_weight < 1:
            problems.append(f"InverseVarianceDenoising min_weight must be >= 1 (got {min_weight})")
        if not (math.isfinite(min_disagreement) and min_disagreement > 0):
            problems.append(
                f"InverseVarianceDenoising min_disagreement must be finite and > 0 (got {min_disagreement}); "
                "it keeps c from freezing on a numerically-zero disagreement"
            )
        if problems:
            raise ValueError("invalid InverseVarianceDenoising configuration:\n  - " + "\n  - ".join(problems))
        self.state = InverseVarianceWeight(half_life, warmup, target, min_weight, max_weight, min_disagreement)

    @property
    def weight(self) -> float:
        return self.state.weight

    def disagreements(self, batch: RolloutBatch) -> list[float]:
        """``s2`` of each anchor group of ``batch`` that can be measured (in group order)."""
        wm = batch.wm_calibrated if batch.corrections.calibrating else batch.wm_rewards
        rows = batch.is_real & batch.graded & ~torch.isnan(wm)
        values = []
        for group in torch.unique(batch.group_ids[rows]).tolist():
            members = rows & (batch.group_ids == group)
            s2 = group_disagreement(wm[members].tolist(), batch.rewards[members].tolist())
            if s2 is not None:
                values.append(s2)
        return values

    def on_advantages(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: RolloutBatch) -> None:
        local = torch.tensor(self.disagreements(batch), dtype=torch.float64).view(-1, 1)
        for s2 in gather_rows(trainer, local).flatten().tolist():  # every rank: the same observations
            self.state.observe(s2)
        w = self.state.weight
        if w != 1.0:
            batch.advantages[batch.is_real] *= w
        pl_module.log_dict(
            {
                "denoise/weight": w,
                "denoise/disagreement": self.state.ewma if self.state.observations else math.nan,
                "denoise/observations": float(self.state.observations),
            },
            on_step=True,
            batch_size=len(batch),
        )

    @property
    def state_key(self) -> str:
        s = self.state
        return self._generate_state_key(half_life=s.half_life, warmup=s.warmup, target=s.target, min_weight=s.min_weight,
                                        max_weight=s.max_weight, min_disagreement=s.min_disagreement)

    def state_dict(self) -> dict:
        return self.state.state_dict()

    def load_state_dict(self, state_dict: dict) -> None:
        self.state.load_state_dict(state_dict)  # an older checkpoint's ``needs_calibration`` is read from the batch now
