"""`RLModule`: the one RL training step both domains share (LLM agents and VLA policies).

    plan -> on_rollout_plan -> rollout -> on_rollout_end -> missing check -> on_rewards
         -> group advantages -> on_advantages -> update -> metrics

A subclass implements the domain: :meth:`rollout` (play a plan in its environments), :meth:`update` (one
optimizer step on the batch), :meth:`rollout_metrics`, and optionally :meth:`after_step` (progress-bar values,
a training curve). The skeleton owns what must not differ between them: the hook order, the timing
(``time/*``, reset before the plan hook so a routing callback's :meth:`add_time` counts), the rollout seed with
its rank term (every DDP rank plays different noise; :func:`rollout_seed`), the missing-reward check (a
step where every rollout is missing says so; two in a row stop training), and the record of its held-out
evaluations (:class:`~wmrl.evaluation.heldout.HeldOutLog`: ``heldout.jsonl``, the end-of-fit report), which a
checkpoint carries (a resumed fit pairs its final evaluation with the start of the run it continues).
"""

from __future__ import annotations

import dataclasses
import logging
import time
import warnings
from collections.abc import Sequence
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities import rank_zero_info

from wmrl.algorithms.grpo import group_advantages
from wmrl.callbacks.base import claim_saved_states, dispatch
from wmrl.evaluation.heldout import EVAL_FILE, HeldOutLog, Report
from wmrl.evaluation.report import held_out_report
from wmrl.types import RolloutBatch, RolloutPlan

log = logging.getLogger(__name__)

__all__ = ["EVAL_FILE", "RLModule", "rollout_seed"]

# Lightning warns at every checkpoint of a manually optimised module that the state saved is the one after the
# optimizer step. That is the state wmrl means to save (a resumed run continues from it, exactly), so the
# 15-line warning per checkpoint says nothing here.
warnings.filterwarnings("ignore", message="Using ModelCheckpoint with manual optimization")

RANK_STRIDE = 100_003  # a prime: rank r's seeds never meet rank r+1's within 100k steps
#: the checkpoint key of the module's held-out evaluations (:meth:`HeldOutLog.state_dict`)
HELDOUT_KEY = "wmrl_heldout"


def rollout_seed(seed: int, step: int, rank: int) -> int:
    """The seed of a training step's rollouts: different every step and on every rank, the same on resume.

    >>> rollout_seed(0, 5, 0), rollout_seed(0, 5, 1)
    (5, 100008)
    """
    return seed + step + RANK_STRIDE * rank


class RLModule(pl.LightningModule):
    """The shared training step (see the module docstring). Subclasses set ``self.environments`` (``"real"``
    first) and ``self.hparams.group_size`` / ``seed`` before training.

    Args:
        report: the end-of-fit text of the held-out evaluations (the LLM module's paired report by default).
    """

    def __init__(self, report: Report = held_out_report) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.heldout = HeldOutLog(report)
        self.environments: dict[str, Any] = {}
        self._timings: dict[str, float] = {}
        self._all_missing_steps = 0  # consecutive steps where every rollout was missing
        self._checkpoint_step = 0  # the step of a checkpoint loaded for evaluation (trained_steps)

    # -- what a domain implements ----------------------------------------------------------------------
    def rollout(self, plan: RolloutPlan, seed: int) -> RolloutBatch:
        raise NotImplementedError

    def update(self, batch: RolloutBatch) -> dict[str, float]:
        raise NotImplementedError

    def rollout_metrics(self, batch: RolloutBatch, plan: RolloutPlan) -> dict[str, float]:
        """The step's rollout metrics, including ``time/<part>`` for every :meth:`add_time` part."""
        return {f"time/{k}": v for k, v in self._timings.items()}

    def after_step(self, metrics: dict[str, float], batch: RolloutBatch, step: int) -> None:
        """After the metrics are logged (``step`` counts from 1): progress-bar values, training curves."""

    def fit_reports(self) -> list[str]:
        """What the end of a fit prints, in order (empty texts are skipped): the held-out report by default."""
        return [self.heldout.report()]

    # -- what every domain shares ----------------------------------------------------------------------
    @property
    def eval_history(self) -> list[tuple[str, Any]]:
        """``(when, summary)`` per held-out evaluation (what the progress callback prints as they come)."""
        return self.heldout.history

    def on_fit_end(self) -> None:
        if not self.trainer.is_global_zero:
            return
        for text in self.fit_reports():
            if text:
                print(text)

    def save_settings(self, settings: dict[str, Any], ignore: Sequence[str] = ()) -> None:
        """Save the constructor's arguments as hyperparameters that a checkpoint holds and LightningCLI reads back.

        Built by LightningCLI (``wmrl fit|validate|test``), the module saves the config it was built from with its
        ``_class_path``: Lightning's own form, which ``--ckpt_path`` re-parses (the checkpoint's model settings
        then replace the config's) and ``load_from_checkpoint`` rebuilds from. Built in Python, it saves
        ``settings`` as plain values (dataclasses as mappings: loggers refuse frozen dataclasses, and checkpoints
        load with ``weights_only``). ``ignore`` names the arguments that are the run's infrastructure, not the
        model's (the environment, the generation engine, an in-process policy): a resumed or evaluated run takes
        them from its own config.
        """
        self.save_hyperparameters(ignore=list(ignore))
        if "_class_path" not in self.hparams:  # not built by LightningCLI
            self.save_hyperparameters({k: dataclasses.asdict(v) if dataclasses.is_dataclass(v) else v
                                       for k, v in settings.items()})

    @property
    def trained_steps(self) -> int:
        """The optimizer steps behind the current weights, for labelling evaluations: the trainer's step while
        fitting; under ``wmrl validate|test --ckpt_path`` the checkpoint's (Lightning restores its step count
        only for a fit)."""
        return self.global_step or self._checkpoint_step

    @property
    def no_step_left(self) -> bool:
        """Whether this fit resumed from a checkpoint at (or past) ``trainer.max_steps``: Lightning then runs no
        training loop at all (no ``on_train_start``, no validation), so the module's ``on_fit_start`` is the one
        place to evaluate the final policy."""
        max_steps = self.trainer.max_steps
        return max_steps is not None and 0 < max_steps <= self._checkpoint_step

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint[HELDOUT_KEY] = self.heldout.state_dict()

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        self._checkpoint_step = int(checkpoint.get("global_step", 0))
        if self.resuming_fit() and HELDOUT_KEY in checkpoint:  # validate|test keep only their own evaluation
            self.heldout.load_state_dict(checkpoint[HELDOUT_KEY])
            if self.heldout.history:
                rank_zero_info("held-out evaluations of the run this fit continues (from its checkpoint): "
                               + ", ".join(label for label, _ in self.heldout.history))
        try:
            callbacks = self.trainer.callbacks
        except RuntimeError:  # ``load_from_checkpoint``: no trainer, no callbacks to restore
            return
        claim_saved_states(checkpoint.get("callbacks") or {}, callbacks)  # before Lightning restores them

    def resuming_fit(self) -> bool:
        """Whether the checkpoint being loaded continues a fit (``wmrl fit --ckpt_path``), not ``validate|test``
        or ``load_from_checkpoint``: only a resumed fit takes the run's history (evaluations, training curve)."""
        try:
            return self.trainer.state.fn == TrainerFn.FITTING
        except RuntimeError:  # not attached to a trainer
            return False

    def add_environment(self, name: str, environment: Any) -> None:
        """Register an environment that rollout plans may route groups to (e.g. ``"world_model"``)."""
        if name == "real":
            raise ValueError("the real environment is a constructor argument of the module")
        self.environments[name] = environment

    def add_time(self, key: str, seconds: float) -> None:
        """Count ``seconds`` into this step's ``time/<key>`` (callbacks report their own work this way)."""
        self._timings[key] = self._timings.get(key, 0.0) + seconds

    def training_step(self, task_ids: list[str], batch_idx: int) -> None:
        hp = self.hparams
        step_start, step_number = time.perf_counter(), self.global_step + 1  # the update advances global_step
        self._timings = {}  # before the plan hook: a routing callback's add_time counts into this step
        plan = RolloutPlan(list(task_ids), hp.group_size, ["real"] * len(task_ids))
        dispatch("on_rollout_plan", self.trainer, self, plan)
        batch = self.rollout(plan, seed=rollout_seed(hp.seed, self.global_step, self.global_rank))
        dispatch("on_rollout_end", self.trainer, self, batch)
        self.check_missing(batch)
        dispatch("on_rewards", self.trainer, self, batch)
        advantages, used = group_advantages(torch.nan_to_num(batch.rewards), batch.group_ids, batch.graded)
        batch.advantages.copy_(advantages.to(batch.advantages.dtype))
        batch.used.copy_(used)
        dispatch("on_advantages", self.trainer, self, batch)
        start = time.perf_counter()
        metrics = self.update(batch)
        metrics["time/update"] = time.perf_counter() - start
        metrics.update(self.rollout_metrics(batch, plan))  # with this step's time/* parts
        metrics["time/step"] = time.perf_counter() - step_start
        self.log_dict(metrics, on_step=True, batch_size=len(batch))
        self.after_step(metrics, batch, step_number)

    def check_missing(self, batch: RolloutBatch) -> None:
        """Missing rewards (infrastructure errors) are excluded, never 0; a step where *every* rollout is missing
        says so loudly with the first error, and a second such step in a row (on every rank: all ranks decide
        together) stops training, since a broken environment otherwise trains on nothing, silently."""
        local = len(batch) > 0 and not bool(batch.graded.any())
        if local:
            errors = [t.outcome.error for tr in batch.trajectories for t in tr.turns if t.outcome.missing]
            log.error("every rollout of this training step is missing (infrastructure errors, not scored): %s. "
                      "Check the environment, e.g. `wmrl exec <task> <script>` or `wmrl tasks check`.",
                      next((e for e in errors if e), "no error message"))
        if not self.trainer.strategy.reduce_boolean_decision(local, all=True):
            self._all_missing_steps = 0
            return
        self._all_missing_steps += 1
        if self._all_missing_steps >= 2:
            raise RuntimeError(
                "two training steps in a row where every rollout is missing (infrastructure errors; the first "
                "error is in the log above): training stopped. Check the environment, e.g. `wmrl exec <task> "
                "<script>` or `wmrl tasks check`."
            )
