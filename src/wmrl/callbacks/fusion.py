"""`VarianceFusion`: weigh the world-model stream by its measured agreement with reality, down to zero.

After group normalisation (``on_advantages``) it folds each anchor group's (world-model, real) rewards into an
:class:`~wmrl.algorithms.fusion.AgreementEstimate` (the pooled within-group correlation, exponentially weighted),
takes its lower confidence bound as the world model's share ``rho`` (:mod:`wmrl.algorithms.fusion`: ``rho`` is the
inverse-variance weight of a world-model row), and rescales the advantages to the minimum-variance fusion
``g = (g_E + rho g_WM) / (|E| + rho |WM|)``: anchor rows by ``s``, world-model rows by ``rho s``. A world model at
chance or ranking backwards gets ``rho = 0`` and the step is the anchors' own update; an exact one gets
``rho -> 1`` and every row weighs alike.

The world-model rewards it compares are ``wm_calibrated`` when a calibration ran (``batch.corrections.calibrating``;
with ``OnlineDebiasing(method="strict")`` the anchors' values are out of sample: the map fitted before their own
pairs), else the raw ``wm_rewards``. This is the kit's replacement for the paper's
:class:`~wmrl.callbacks.denoising.InverseVarianceDenoising`, whose weight is relative (frozen to 2 after the warm-up,
whatever the noise) and capped at 4, so it cannot silence a world model at chance.

A world model that measured its agreement before the run (:class:`~wmrl.types.KnowsItsAgreement`: the task-aware
world model's out-of-fold agreement on the tasks it was pretrained on, each left out in turn) brings it as a prior,
worth at most ``prior_dof`` degrees of freedom: pooled with the anchors' on Fisher's z scale, it lets a world model
that knows something carry weight from the first step, and fades as anchor groups come in (the same half-life). A
world model at chance measured nothing better than chance, and its prior gives it no share.

Logged: ``fusion/wm_share`` (the world-model rows' share of the update's weight), ``fusion/rho`` (the share per row),
``fusion/agreement`` (the anchors' point estimate), ``fusion/dof``, ``fusion/prior_dof`` (the prior's degrees of
freedom left).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

from wmrl.algorithms.fusion import (
    HALF_LIFE,
    PRIOR_DOF,
    AgreementEstimate,
    Z,
    certainty_weights,
    fusion_scales,
)
from wmrl.callbacks.base import RLCallback, gather_rows, rank_of
from wmrl.types import KnowsItsAgreement, declares

if TYPE_CHECKING:
    import lightning.pytorch as pl

    from wmrl.types import RolloutBatch


class VarianceFusion(RLCallback):
    """The world-model stream's share of the update by measured agreement (docs/concepts.md, the kit's corrections).

    Args:
        half_life: in anchor groups: how fast old agreement is forgotten (the world model and the policy change).
        z: the one-sided confidence of the lower bound used as the share (1.645: 95%); 0 uses the point estimate.
        per_sample_variance: also weigh each world-model row by the world model's own predicted variance of its
            reward (``Outcome.variance`` of the trajectory's best turn), relative to the step's other world-model
            rows (:func:`~wmrl.algorithms.fusion.certainty_weights`): the stream's total share stays the measured
            agreement's, the rows it predicts surely get more of it. Rows without a variance (a world model that
            gives none) weigh alike.
        prior_dof: the most degrees of freedom a world model's own measured agreement (before the run) counts as
            (16: about five anchor groups of four); 0 ignores it.
    """

    def __init__(self, half_life: float = HALF_LIFE, z: float = Z, per_sample_variance: bool = False,
                 prior_dof: float = PRIOR_DOF) -> None:
        self.estimate = AgreementEstimate(half_life=half_life, z=z)  # checks its settings
        self.per_sample_variance = per_sample_variance
        if prior_dof < 0:
            raise ValueError(f"VarianceFusion prior_dof must be >= 0 (got {prior_dof})")
        self.prior_dof = prior_dof
        self.prior_taken = False  # the world model's prior is read once, before the first anchor group

    def take_prior(self, pl_module: pl.LightningModule) -> None:
        """Pool the world model's measured agreement in (:class:`~wmrl.types.KnowsItsAgreement`), once a run."""
        self.prior_taken = True
        world_model = pl_module.environments.get("world_model")
        prior = world_model.agreement_prior() if declares(world_model, KnowsItsAgreement) else None
        if prior is not None and self.prior_dof > 0 and not math.isnan(prior[0]):
            self.estimate.add_prior(prior[0], min(prior[1], self.prior_dof))

    @property
    def share(self) -> float:
        return self.estimate.share()

    def anchor_groups(self, batch: RolloutBatch) -> list[tuple[list[float], list[float]]]:
        """Each anchor group's (world-model, real) rewards, graded rows with a world-model reward only."""
        wm = batch.wm_calibrated if batch.corrections.calibrating else batch.wm_rewards
        rows = batch.is_real & batch.graded & ~torch.isnan(wm)
        groups = []
        for group in torch.unique(batch.group_ids[rows]).tolist():
            members = rows & (batch.group_ids == group)
            groups.append((wm[members].tolist(), batch.rewards[members].tolist()))
        return groups

    def on_advantages(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: RolloutBatch) -> None:
        if not self.prior_taken:
            self.take_prior(pl_module)
        # every rank folds in every rank's groups, in rank order: the same estimate everywhere
        rank = rank_of(trainer)
        local = [(rank * 100_000 + i, d, s) for i, (ds, ss) in enumerate(self.anchor_groups(batch))
                 for d, s in zip(ds, ss, strict=True)]
        rows = gather_rows(trainer, torch.tensor(local, dtype=torch.float64).view(-1, 3))
        keys = rows[:, 0].tolist()
        starts = [0] + [i for i in range(1, len(keys)) if keys[i] != keys[i - 1]] + [len(keys)]
        for first, end in zip(starts, starts[1:], strict=False):
            if end > first:
                self.estimate.observe(rows[first:end, 1].numpy(), rows[first:end, 2].numpy())
        rho = self.estimate.share()
        counts = gather_rows(trainer, torch.tensor([[float((batch.used & batch.is_real).sum()),
                                                     float((batch.used & ~batch.is_real).sum())]])).sum(dim=0)
        real_rows, wm_rows = float(counts[0]), float(counts[1])
        real_scale, wm_scale = fusion_scales(real_rows, wm_rows, rho)
        batch.advantages[batch.is_real] *= real_scale
        batch.advantages[~batch.is_real] *= wm_scale
        if self.per_sample_variance:
            batch.advantages[~batch.is_real] *= self.row_weights(batch)
        effective = real_rows + rho * wm_rows
        pl_module.log_dict({
            "fusion/wm_share": rho * wm_rows / effective if effective > 0 else 0.0,
            "fusion/rho": rho,
            "fusion/agreement": self.estimate.agreement if self.estimate.groups else math.nan,
            "fusion/dof": self.estimate.dof,
            "fusion/prior_dof": self.estimate.prior_dof,
        }, on_step=True, batch_size=len(batch))

    def row_weights(self, batch: RolloutBatch) -> torch.Tensor:
        """The world-model rows' weights within their stream, from the world model's own variances."""
        rows = (~batch.is_real).nonzero().flatten().tolist()
        variances = []
        for i in rows:
            best = batch.trajectories[i].best if batch.used[i] else None
            variances.append(math.nan if best is None or best.variance is None else best.variance)
        return torch.as_tensor(certainty_weights(variances), dtype=batch.advantages.dtype)

    def summary(self) -> str:
        """One line for the end of a fit: the measured agreement and what it made of the world model's rows."""
        estimate = self.estimate
        prior = (f"; its prior (agreement measured before the run) {estimate.prior_agreement:+.2f}, "
                 f"{estimate.prior_dof:.1f} degrees of freedom left" if estimate.prior_dof > 0 else "")
        if not estimate.groups:
            if estimate.prior_dof > 0:
                return f"VarianceFusion: no anchor group was measured{prior}; its rows' weight {estimate.share():.2f}"
            return "VarianceFusion: no anchor group was measured; the world model's rows carried no weight"
        rho, share = estimate.agreement, estimate.share()
        line = (f"VarianceFusion: the world model's agreement with the anchors {rho:+.2f} over {estimate.groups} "
                f"anchor groups{prior}; its rows' weight at the end {share:.2f}")
        if not estimate.pooled()[0] > 0:
            return line + " (it ranks rollouts at chance or against reality: its rows carried no weight)"
        return line + (" (not yet shown to agree: no weight)" if share == 0 else "")

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.is_global_zero:
            print(self.summary(), flush=True)

    @property
    def state_key(self) -> str:
        if self.per_sample_variance:
            return self._generate_state_key(half_life=self.estimate.half_life, z=self.estimate.z,
                                            per_sample_variance=True)
        return self._generate_state_key(half_life=self.estimate.half_life, z=self.estimate.z)

    def state_dict(self) -> dict:
        return {**self.estimate.state_dict(), "prior_taken": self.prior_taken}

    def load_state_dict(self, state_dict: dict) -> None:
        self.estimate.load_state_dict(state_dict)
        self.prior_taken = bool(state_dict.get("prior_taken", True))  # a run that saved no flag had no prior
