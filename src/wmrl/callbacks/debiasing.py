"""`OnlineDebiasing`: calibrate world-model rewards against the anchors with a monotone (isotonic) map.

Each step (``on_calibrate``, before any reward term and before advantages) it pushes the step's anchor pairs ``(r_wm, r_real)`` (gathered
from every rank) into a FIFO buffer (cap 5000), refits the map when due (identity until ``min_pairs`` pairs,
then every ``refit_every`` new pairs; :mod:`wmrl.algorithms.debias`), and passes every world-model reward of the
batch through the map. Anchor groups keep their real rewards. Pairs are pushed and the map refitted *before*
the denoiser measures disagreement (``on_advantages`` comes later); the batch says a calibration ran
(``batch.corrections.calibrating``), so the denoiser compares the calibrated rewards. The pairs are the
environment's rewards: reward terms (``RewardTerms``) are added in ``on_rewards``, after every calibration,
wherever they stand in ``trainer.callbacks``.

When the anchors' rank correlation with the world model is <= 0 the world model ranks rollouts no better
than chance (or backwards): the map goes flat, world-model groups then carry no gradient, and this callback
says so loudly (a warning and ``wm_rank_corr`` in the progress bar).

Edge cases, each with a warning that says why:

- **One populated bin.** When every buffered world-model reward falls in one bin the map stays identity
  (a one-knot map would be a constant, :mod:`wmrl.algorithms.debias`); the fit is retried on every push
  until the rewards spread over two bins, so the first real map comes as soon as the data allow.
- **Equal real rewards.** When every buffered anchor has the same real reward (early in a run, e.g. three
  rollouts that all fell back to the starter), the map stays identity too and the fit is retried on every
  push: equal real rewards cannot tell a good world-model ranking from a bad one (their rank correlation is
  undefined), and fitting them would give a flat map that zeroes the world-model groups on no evidence.
- **A flat map** (every knot's output equal) always warns, whatever the rank correlation, and is applied:
  the monotone fit pooled every bin, i.e. on the anchors a higher world-model reward never meant a higher
  real one. Training on the raw rewards would follow that noise (or a backwards ranking); the flat map
  instead removes the world-model groups' gradient and leaves the anchors to train on, which is what the
  data support. ``debias/map_flat`` reports it every step.
- **Non-finite pairs** (NaN / inf from a broken grader or world model) are dropped at the door, counted
  (``dropped_nonfinite``, logged as ``debias/dropped_nonfinite``, kept in the checkpoint) and warned about;
  raising would kill the run for one bad pair, keeping them would make every later refit raise. A checkpoint
  that holds such pairs has them dropped (and counted) by ``load_state_dict`` too.

Logged: ``debias/pairs``, ``debias/refits``, ``debias/bias_reduction``, ``debias/rank_corr``,
``debias/map_flat``, ``debias/dropped_nonfinite``, ``reward/world_model_calibrated_mean``,
``fidelity/*_calibrated``. Each refit appends the map and its binned pairs to ``calibration.jsonl`` in the
run dir (``wmrl report`` plots them).
"""

from __future__ import annotations

import json
import logging
import math
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from wmrl.algorithms.debias import (
    CalibrationMap,
    bias_reduction,
    bin_index,
    bin_pairs,
    finite_pairs,
    fit_calibration,
    fit_strict_calibration,
    rank_correlation,
)
from wmrl.callbacks.base import RLCallback, gather_rows, rank_of
from wmrl.callbacks.world_model_reward import fidelity

if TYPE_CHECKING:
    import lightning.pytorch as pl

    from wmrl.types import RolloutBatch

log = logging.getLogger(__name__)

#: under the run dir (``trainer.default_root_dir``): one line per refit, the map and its pairs (``wmrl report``)
SNAPSHOT_FILE = "calibration.jsonl"
SNAPSHOT_PAIRS = 1000  # most recent raw pairs kept per snapshot (the bins summarise all of them)


class OnlineDebiasing(RLCallback):
    """The isotonic calibration of world-model rewards (docs/concepts.md, Online Debiasing).

    Args:
        min_pairs: identity map until this many anchor pairs exist (paper 200).
        refit_every: refit after this many new pairs (paper 64).
        buffer_size: FIFO cap on stored pairs (paper 5000).
        bins: the map's knots: equal-width bins on [0, 1] (``paper``, 10) or quantile bins of the anchors' world-model
            rewards (``strict``).
        method: ``paper``: the paper's map (equal-width bins, isotonic, flat ends); ``strict``: the kit's map, which
            introduces no tie a group did not have (quantile knots, strictly increasing, sloped ends:
            :func:`~wmrl.algorithms.debias.fit_strict_calibration`), and whose anchors' ``wm_calibrated`` is out of
            sample (the map fitted before their own pairs), for :class:`~wmrl.callbacks.fusion.VarianceFusion` to
            measure the world model's agreement on.
    """

    def __init__(self, min_pairs: int = 200, refit_every: int = 64, buffer_size: int = 5000, bins: int = 10,
                 method: str = "paper") -> None:
        problems = []
        if method not in ("paper", "strict"):
            problems.append(f"OnlineDebiasing method must be 'paper' or 'strict' (got {method!r})")
        if min_pairs < 1:
            problems.append(f"OnlineDebiasing min_pairs must be >= 1 (got {min_pairs})")
        if refit_every < 1:
            problems.append(f"OnlineDebiasing refit_every must be >= 1 (got {refit_every})")
        if buffer_size < min_pairs:
            problems.append(f"OnlineDebiasing buffer_size must be >= min_pairs (got {buffer_size} < {min_pairs})")
        if bins < 1:
            problems.append(f"OnlineDebiasing bins must be >= 1 (got {bins})")
        if problems:
            raise ValueError("invalid OnlineDebiasing configuration:\n  - " + "\n  - ".join(problems))
        self.min_pairs, self.refit_every, self.buffer_size, self.bins = min_pairs, refit_every, buffer_size, bins
        self.method = method
        self.pairs: deque[tuple[float, float, int]] = deque(maxlen=buffer_size)  # (r_wm, r_real, group key)
        self.calibration = CalibrationMap()
        self.since_fit = 0
        self.refits = 0
        self.steps = 0
        self.rank_corr = math.nan
        self.dropped_nonfinite = 0  # pairs with a NaN / inf reward, never buffered
        self._warned_unfittable = False  # warn once per stretch of unfittable buffers, not on every push

    @property
    def fitted(self) -> bool:
        return not self.calibration.is_identity

    def push(self, wm, real, groups) -> bool:
        """Add pairs (``groups``: a key per pair, pairs of one group share it); refit if due. True if refitted.

        Pairs with a non-finite reward are dropped and counted (``dropped_nonfinite``), never buffered.
        """
        pairs = list(zip(map(float, wm), map(float, real), map(int, groups), strict=True))
        kept = [p for p in pairs if math.isfinite(p[0]) and math.isfinite(p[1])]
        if len(kept) < len(pairs):
            self.dropped_nonfinite += len(pairs) - len(kept)
            log.warning(
                "OnlineDebiasing: dropped %d of %d anchor pairs with a non-finite reward (NaN / inf; %d dropped "
                "so far): they cannot be binned. Check the world model's and the grader's outputs.",
                len(pairs) - len(kept), len(pairs), self.dropped_nonfinite,
            )
        self.pairs.extend(kept)
        self.since_fit += len(kept)
        due = len(self.pairs) >= self.min_pairs and (not self.fitted or self.since_fit >= self.refit_every)
        return self.refit() if due else False

    def columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The buffered pairs as arrays: r_wm, r_real, group key."""
        return tuple(np.array(column) for column in zip(*self.pairs, strict=True))  # type: ignore[return-value]

    def refit(self) -> bool:
        """Fit the map on the buffer. False (and the identity map) when the pairs cannot show a ranking:
        every pair in one bin, or every real reward equal."""
        wm, real, _ = self.columns()
        fit = fit_strict_calibration if self.method == "strict" else fit_calibration
        calibration = fit(wm, real, self.bins)
        if calibration.is_identity:  # nothing to fit (algorithms.debias)
            self.calibration = calibration
            if not self._warned_unfittable:
                if np.ptp(real) == 0:
                    log.warning(
                        "OnlineDebiasing: all %d anchor pairs have the same real reward %.3f: they cannot tell a "
                        "good world-model ranking from a bad one, so the map stays identity until the real "
                        "rewards differ (a fit would be that constant and zero every world-model group's "
                        "advantages).", len(wm), real[0],
                    )
                else:
                    index = int(bin_index(wm[:1], self.bins)[0])
                    log.warning(
                        "OnlineDebiasing: all %d pairs fall in one bin [%g, %g): the map stays identity until "
                        "world-model rewards spread (a one-bin map would send every world-model reward to one "
                        "constant and zero every world-model group's advantages).",
                        len(wm), index / self.bins, (index + 1) / self.bins,
                    )
                self._warned_unfittable = True
            return False
        self._warned_unfittable = False
        self.calibration = calibration
        self.since_fit = 0
        self.refits += 1
        self.rank_corr = rank_correlation(wm, real)
        if self.calibration.is_flat:
            log.warning(
                "OnlineDebiasing: the fitted map is flat: it sends every world-model reward to %.3f, so world-model "
                "groups carry no gradient (zero advantages); rank correlation %.3f on %d anchor pairs over %d bins "
                "(isotonic pooling merged every bin)%s. The map is applied (on the anchors a higher world-model reward "
                "never meant a higher real one); only the anchors train. Check the world model (model, mode, prompt).",
                self.calibration.ys[0], self.rank_corr, len(wm), len(self.calibration.xs),
                ": it ranks rollouts no better than chance" if not self.rank_corr > 0 else "",
            )
        elif not self.rank_corr > 0:
            log.warning(
                "OnlineDebiasing: the world model's rewards have rank correlation %.3f <= 0 with real execution on "
                "%d anchor pairs: it ranks rollouts no better than chance; the calibration map is not yet flat "
                "and world-model groups carry little gradient. Check the world model (model, mode, prompt).",
                self.rank_corr, len(self.pairs),
            )
        return True

    def write_snapshot(self, path: Path, step: int) -> None:
        """Append the current map and the pairs it was fitted on to ``path`` (JSONL; read by ``wmrl report``)."""
        wm, real, _ = self.columns()
        x, y, counts = bin_pairs(wm, real, self.bins)
        recent = slice(-SNAPSHOT_PAIRS, None)
        snapshot = {
            "step": step, "refit": self.refits, "pairs": len(self.pairs), "rank_corr": self.rank_corr,
            "map": self.calibration.to_dict(),
            "bins": {"wm": x.tolist(), "real": y.tolist(), "count": counts.tolist()},
            "recent_pairs": {"wm": wm[recent].tolist(), "real": real[recent].tolist()},
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as f:
            f.write(json.dumps(snapshot) + "\n")

    def on_calibrate(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: RolloutBatch) -> None:
        anchor = batch.is_real & batch.graded & ~torch.isnan(batch.wm_rewards)
        rank = float(rank_of(trainer))
        local = torch.stack(
            [batch.wm_rewards.double(), batch.rewards.double(), batch.group_ids.double(),
             torch.full((len(batch),), rank, dtype=torch.float64)], dim=1,
        )[anchor]
        rows = gather_rows(trainer, local)  # every rank: the same pairs, in rank order
        keys = (self.steps * 1_000_000 + rows[:, 3] * 1_000 + rows[:, 2]).long().tolist()  # unique group key
        # strict: the anchors as the map saw them before their own pairs (out of sample), what the fusion measures
        before = (torch.as_tensor(self.calibration(batch.wm_rewards[anchor].numpy()), dtype=batch.rewards.dtype)
                  if self.method == "strict" else None)
        refitted = self.push(rows[:, 0].tolist(), rows[:, 1].tolist(), keys)
        # only a run that logs has a run dir to report on; without a logger (logger=False) default_root_dir
        # is the working directory, which must not collect stray files
        if refitted and trainer is not None and trainer.is_global_zero and trainer.loggers:
            self.write_snapshot(Path(trainer.default_root_dir) / SNAPSHOT_FILE, trainer.global_step)
        self.steps += 1

        with_wm = ~torch.isnan(batch.wm_rewards)
        simulated = ~batch.is_real & batch.graded & with_wm  # gated world-model rows keep their exact 0.0
        if self.fitted:
            calibrated = torch.as_tensor(self.calibration(batch.wm_rewards[with_wm].numpy()), dtype=batch.rewards.dtype)
            batch.wm_calibrated[with_wm] = calibrated
            batch.rewards[simulated] = batch.wm_calibrated[simulated]
        if self.method == "strict":
            batch.wm_calibrated[anchor] = before
        metrics = {
            "debias/pairs": float(len(self.pairs)),
            "debias/refits": float(self.refits),
            "debias/map_flat": float(self.calibration.is_flat),
            "debias/rank_corr": self.rank_corr,
            "debias/dropped_nonfinite": float(self.dropped_nonfinite),
        }
        if self.pairs:
            wm, real, groups = self.columns()
            metrics["debias/bias_reduction"] = bias_reduction(wm, real, groups, self.calibration)
        if bool(simulated.any()):
            metrics["reward/world_model_calibrated_mean"] = float(batch.rewards[simulated].mean())
        if self.fitted and bool(anchor.any()):
            for key, value in fidelity(batch.wm_calibrated[anchor], batch.rewards[anchor]).items():
                metrics[f"fidelity/{key}_calibrated"] = value
        pl_module.log_dict(metrics, on_step=True, batch_size=len(batch))
        if self.refits:
            pl_module.log("wm_rank_corr", self.rank_corr, prog_bar=True, on_step=True, batch_size=len(batch))

    @property
    def state_key(self) -> str:
        settings = {"min_pairs": self.min_pairs, "refit_every": self.refit_every, "buffer_size": self.buffer_size,
                    "bins": self.bins}
        if self.method != "paper":  # the paper's key stays what its checkpoints hold
            settings["method"] = self.method
        return self._generate_state_key(**settings)

    def state_dict(self) -> dict:
        return {
            "pairs": [list(p) for p in self.pairs],
            "calibration": self.calibration.to_dict(),
            "since_fit": self.since_fit,
            "refits": self.refits,
            "steps": self.steps,
            "rank_corr": self.rank_corr,
            "dropped_nonfinite": self.dropped_nonfinite,
        }

    def load_state_dict(self, state_dict: dict) -> None:
        pairs = [tuple(p) for p in state_dict["pairs"]]
        finite = finite_pairs([p[0] for p in pairs], [p[1] for p in pairs]).tolist() if pairs else []
        kept = [p for p, ok in zip(pairs, finite, strict=True) if ok]
        # a checkpoint's non-finite pairs would make every refit raise: dropped and counted, as at the door
        self.dropped_nonfinite = int(state_dict.get("dropped_nonfinite", 0)) + len(pairs) - len(kept)
        if len(kept) < len(pairs):
            log.warning(
                "OnlineDebiasing: the checkpoint holds %d anchor pairs with a non-finite reward; dropped them.",
                len(pairs) - len(kept),
            )
        self.pairs = deque(kept, maxlen=self.buffer_size)  # type: ignore[arg-type]
        self.calibration = CalibrationMap.from_dict(state_dict["calibration"])
        self.since_fit = int(state_dict["since_fit"])
        self.refits = int(state_dict["refits"])
        self.steps = int(state_dict["steps"])
        self.rank_corr = float(state_dict["rank_corr"])
