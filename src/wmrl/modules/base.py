"""`RLModule`: the one RL training step every domain shares (language agents, robot policies).

    plan -> on_rollout_plan -> plan check -> rollout -> on_rollout_end -> missing check -> on_calibrate
         -> on_rewards -> group advantages -> on_advantages -> update (or the empty step) -> metrics

A subclass implements the domain: :meth:`rollout` (play a plan in its environments), :meth:`update` (one
optimizer step on the batch), :meth:`rollout_metrics`, and optionally :meth:`after_step` (progress-bar values,
a training curve). The skeleton owns what must not differ between them: the hook order, the plan check (a
group routed to an environment the module lacks is refused, naming it), the empty step (nothing to train on: the
optimizer still steps without gradients, so ``global_step`` counts rollout steps), the timing
(``time/*``, reset before the plan hook so a routing callback's :meth:`add_time` counts), the rollout seed with
its rank term (every DDP rank plays different noise; :func:`rollout_seed`), the missing-reward check (a
step where every rollout is missing says so; two in a row stop training), and the record of its held-out
evaluations (:class:`~wmrl.evaluation.heldout.HeldOutLog`: ``heldout.jsonl``, the end-of-fit report), which a
checkpoint carries (a resumed fit pairs its final evaluation with the start of the run it continues).

**Asynchronous rollouts** (``max_staleness: 1`` in the module's settings; 0, the default, is the synchronous step
above, unchanged): once a step's advantages are set, the next step's plan is made (``on_rollout_plan``) and its
rollout starts in a background thread, so generation and execution of step t+1 overlap the update of step t. The
engine must hold weights of its own (``GenerationEngine.holds_own_weights``: vLLM's process), and is synced with the
policy when that rollout has ended, so step t+1's rollouts come from the weights before update t: one step stale.
The loss's ratio to the behaviour log-probs is the importance-sampling correction (clipped, ``loss/clip_fraction``;
``offpolicy/ratio_mean`` logged). Every hook still runs in the training thread, in the synchronous order for each
batch (a world model learns from step t's anchors before step t+1's rollouts ask it), and the next step's tasks
come from the data module (:class:`~wmrl.types.PlansSteps`). A checkpoint carries the rollout in flight (waited
for), so a resumed fit continues exactly; held-out evaluation waits for it too.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import warnings
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities import rank_zero_info

from wmrl.algorithms.grpo import group_advantages
from wmrl.callbacks.base import claim_saved_states, dispatch, overrides
from wmrl.evaluation.heldout import EVAL_FILE, HeldOutLog, Report
from wmrl.evaluation.report import held_out_report
from wmrl.rollout.batch import batch_from_state, batch_state
from wmrl.types import PlansSteps, RolloutBatch, RolloutPlan

log = logging.getLogger(__name__)

__all__ = ["EVAL_FILE", "RLModule", "rollout_seed"]

# Lightning warns at every checkpoint of a manually optimised module that the state saved is the one after the
# optimizer step. That is the state wmrl means to save (a resumed run continues from it, exactly), so the
# 15-line warning per checkpoint says nothing here.
warnings.filterwarnings("ignore", message="Using ModelCheckpoint with manual optimization")

RANK_STRIDE = 100_003  # a prime: rank r's seeds never meet rank r+1's within 100k steps
#: the checkpoint key of the module's held-out evaluations (:meth:`HeldOutLog.state_dict`)
HELDOUT_KEY = "wmrl_heldout"
#: the checkpoint key of the rollout in flight under ``max_staleness: 1`` (the next step's batch, as plain data)
PENDING_KEY = "wmrl_pending_rollout"


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
        self._pending: Future | None = None  # the next step's rollout (max_staleness 1): step, plan, batch, times, counts
        self._background: ThreadPoolExecutor | None = None
        self._counts: dict[str, float] = {}  # this step's add_count values
        self._step_metrics: dict[str, float] = {}  # this step's deferred engine sync (asynchronous rollouts)
        self._sinks: dict[int, tuple[dict, dict]] = {}  # per background thread: where its times and counts go

    # -- what a domain implements ----------------------------------------------------------------------
    def rollout(self, plan: RolloutPlan, seed: int) -> RolloutBatch:
        raise NotImplementedError

    def update(self, batch: RolloutBatch) -> dict[str, float]:
        raise NotImplementedError

    def rollout_metrics(self, batch: RolloutBatch, plan: RolloutPlan) -> dict[str, float]:
        """The step's rollout metrics, including ``time/<part>`` for every :meth:`add_time` part."""
        return {**{f"time/{k}": v for k, v in self._timings.items()}, **self._counts}

    def after_step(self, metrics: dict[str, float], batch: RolloutBatch, step: int) -> None:
        """After the metrics are logged (``step`` counts from 1): progress-bar values, training curves."""

    # -- the step rules both domains share -------------------------------------------------------------
    def check_plan(self, plan: RolloutPlan) -> None:
        """Refuse a plan that routes a group to an environment the module does not have (after the plan hook)."""
        for group, name in enumerate(plan.environments):
            if name not in self.environments:
                raise KeyError(f"the rollout plan routes group {group} to {name!r}, but the module has only "
                               f"{sorted(self.environments)}; add the callback that provides it (WorldModelReward)")

    def _plan(self, task_ids: Sequence[str]) -> RolloutPlan:
        """A step's plan: every group real until the plan hook routes it (``on_rollout_plan``), then checked."""
        plan = RolloutPlan(list(task_ids), self.hparams.group_size, ["real"] * len(task_ids))
        dispatch("on_rollout_plan", self.trainer, self, plan)
        self.check_plan(plan)
        return plan

    def empty_step(self) -> dict[str, float]:
        """A step with nothing to train on (every group flat or missing): the optimizer still steps, a no-op
        without gradients, so that ``global_step`` counts rollout steps, which the rollout seed, the data position,
        the next asynchronous rollout and an exact resume all rely on. A domain's :meth:`update` returns this
        (with its own zero losses) when it has no rows to train on."""
        optimizer = self.optimizers()
        optimizer.zero_grad(set_to_none=True)
        optimizer.step()
        return {"train/skipped_step": 1.0}

    def sync_engine(self) -> dict[str, float]:
        """Make the rollout engine sample from the policy's current weights (its metrics logged with the step). The
        domain's :meth:`update` syncs after its optimizer step unless :attr:`rollout_in_flight`; then this runs
        when that rollout has ended. Nothing to do for a domain whose rollouts use the policy itself."""
        return {}

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
        if self._pending is not None:  # the rollout in flight, so that a resumed fit continues exactly
            step, plan, batch, timings, counts = self._pending.result()
            checkpoint[PENDING_KEY] = {"step": step, "plan": dataclasses.asdict(plan), "batch": batch_state(batch),
                                       "timings": dict(timings), "counts": dict(counts)}

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        self._checkpoint_step = int(checkpoint.get("global_step", 0))
        if self.resuming_fit() and PENDING_KEY in checkpoint:
            pending = checkpoint[PENDING_KEY]
            self._pending = Future()
            self._pending.set_result((int(pending["step"]), RolloutPlan(**pending["plan"]),
                                      batch_from_state(pending["batch"]), dict(pending["timings"]),
                                      dict(pending["counts"])))
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
        """Count ``seconds`` into this step's ``time/<key>`` (callbacks report their own work this way); from a
        background rollout, into that rollout's times (logged with the step that trains on it)."""
        sink = self._sinks.get(threading.get_ident(), (self._timings, self._counts))[0]
        sink[key] = sink.get(key, 0.0) + seconds

    def add_count(self, key: str, value: float) -> None:
        """Count ``value`` into this step's metric ``key`` (e.g. ``tokens/generate``), like :meth:`add_time`."""
        sink = self._sinks.get(threading.get_ident(), (self._timings, self._counts))[1]
        sink[key] = sink.get(key, 0.0) + value

    # -- asynchronous rollouts -------------------------------------------------------------------------
    @property
    def max_staleness(self) -> int:
        """Steps a rollout's weights may lag the update that trains on it (0: synchronous; 1: the next step's
        rollout overlaps this step's update)."""
        return int(self.hparams.get("max_staleness", 0))

    @property
    def rollout_in_flight(self) -> bool:
        """Whether the next step's rollout is being played (its engine must not change weights until it ends)."""
        return self._pending is not None

    def _start_next_rollout(self) -> None:
        """Plan the next step (``on_rollout_plan``, here in the training thread) and play it in the background."""
        step = self.global_step + 1
        data = self.trainer.datamodule
        if not isinstance(data, PlansSteps):
            raise TypeError(f"model.init_args.max_staleness {self.max_staleness} needs a data module that says the "
                            f"tasks of a step ahead (tasks_of_step, wmrl.types.PlansSteps); "
                            f"{type(data).__name__} does not: set max_staleness 0")
        plan = self._plan(data.tasks_of_step(step))
        seed = rollout_seed(self.hparams.seed, step, self.global_rank)
        if self._background is None:
            self._background = ThreadPoolExecutor(max_workers=1, thread_name_prefix="wmrl-rollout")
        self._pending = self._background.submit(self._play_in_background, step, plan, seed)

    def _play_in_background(self, step: int, plan: RolloutPlan, seed: int) -> tuple:
        timings: dict[str, float] = {}
        counts: dict[str, float] = {}
        self._sinks[threading.get_ident()] = (timings, counts)
        try:
            return step, plan, self.rollout(plan, seed=seed), timings, counts
        finally:
            self._sinks.pop(threading.get_ident(), None)

    def _take_pending(self, task_ids: list[str]) -> tuple[RolloutPlan, RolloutBatch]:
        """The rollout played for this step in the background (waited for: ``time/rollout_wait``), then the engine
        synced with the weights it may now take."""
        start = time.perf_counter()
        step, plan, batch, timings, counts = self._pending.result()
        self._pending = None
        self.add_time("rollout_wait", time.perf_counter() - start)
        for key, seconds in timings.items():
            self.add_time(key, seconds)
        for key, value in counts.items():
            self.add_count(key, value)
        if step != self.global_step or list(plan.task_ids) != list(task_ids):
            raise RuntimeError(f"the rollout played ahead was for step {step} with tasks {plan.task_ids}, but step "
                               f"{self.global_step} has tasks {list(task_ids)}: the data module's tasks_of_step "
                               "must give what its train loader yields")
        self._step_metrics.update(self.sync_engine())
        return plan, batch

    def finish_pending(self) -> None:
        """Wait for a rollout in flight and keep it for the step it was played for (held-out evaluation and
        checkpoints use the engine and the state it would otherwise share)."""
        if self._pending is not None:
            self._pending.result()

    def on_validation_start(self) -> None:
        self.finish_pending()

    def on_train_end(self) -> None:
        self.finish_pending()
        self._pending = None
        if self._background is not None:
            self._background.shutdown(wait=True)
            self._background = None

    def training_step(self, task_ids: list[str], batch_idx: int) -> None:
        hp = self.hparams
        step_start, step_number = time.perf_counter(), self.global_step + 1  # the update advances global_step
        self._timings, self._counts = {}, {}  # before the plan hook: a routing callback's add_time counts here
        self._step_metrics = {}
        if self._pending is None:
            plan = self._plan(task_ids)
            batch = self.rollout(plan, seed=rollout_seed(hp.seed, self.global_step, self.global_rank))
        else:
            plan, batch = self._take_pending(list(task_ids))
        dispatch("on_rollout_end", self.trainer, self, batch)
        self.check_missing(batch)
        batch.corrections.calibrating = overrides("on_calibrate", self.trainer)
        dispatch("on_calibrate", self.trainer, self, batch)
        dispatch("on_rewards", self.trainer, self, batch)
        advantages, used = group_advantages(torch.nan_to_num(batch.rewards), batch.group_ids, batch.graded)
        batch.advantages.copy_(advantages.to(batch.advantages.dtype))
        batch.used.copy_(used)
        dispatch("on_advantages", self.trainer, self, batch)
        if self.max_staleness > 0 and (self.trainer.max_steps < 0 or step_number < self.trainer.max_steps):
            self._start_next_rollout()  # step t+1's rollout overlaps this update
        start = time.perf_counter()
        metrics = self.update(batch)
        metrics["time/update"] = time.perf_counter() - start
        metrics.update(self._step_metrics)  # the deferred engine sync's (asynchronous rollouts)
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
