"""`WorldModelReward`: the world model serves the non-anchor groups and side-grades every anchor trajectory.

At ``setup`` it binds the world model to the policy (a :class:`~wmrl.types.BindsToPolicy` world model: the
policy's own frozen base, LoRA disabled, as in the paper) and to the real environment (a
:class:`~wmrl.types.BindsToEnvironment` one), and registers it with the module as the ``"world_model"``
environment, which ``AnchorRouting`` routes groups to. After the rollout (``on_rollout_end``) it asks the world model about
every turn of every anchor trajectory, with the same history the policy had, and writes the trajectory-level
world-model reward (max over turns, like the real one) into ``batch.wm_rewards``: the (r_wm, r_real) pairs
that ``OnlineDebiasing`` calibrates on and ``InverseVarianceDenoising`` measures disagreement with.

A world model that learns (a :class:`~wmrl.types.LearnsFromAnchors` one: ``observe(requests, outcomes, gather)``)
then gets every anchor turn's real outcome, after the side-grading, so the pairs stay
out-of-sample; its learned state is checkpointed with this callback.

Logged: ``time/world_model`` (side-grading and learning included), ``world_model/parse_failures`` and
``world_model/unanswered`` (each step's increase: answers that did not parse, questions no backend answered), the raw
fidelity on this step's anchors (torchmetrics Spearman, Pearson, MAE), and for a learning world model
``world_model/examples`` and ``world_model/refits``.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

import torch

from wmrl.callbacks.base import RLCallback, gather_rows
from wmrl.types import (
    Basis,
    BindsToEnvironment,
    BindsToPolicy,
    Checkpointable,
    Environment,
    GradesTrajectories,
    LearnsFromAnchors,
    ReportsMetrics,
    declares,
)

if TYPE_CHECKING:
    import lightning.pytorch as pl

    from wmrl.types import RolloutBatch

PER_STEP = ("parse_failures", "unanswered")  # a world model's running counts logged as each step's increase


def fidelity(predicted: torch.Tensor, real: torch.Tensor) -> dict[str, float]:
    """Spearman, Pearson and MAE of world-model rewards against real ones (torchmetrics; NaN when undefined)."""
    from torchmetrics.functional import mean_absolute_error, pearson_corrcoef, spearman_corrcoef

    predicted, real = predicted.double().flatten(), real.double().flatten()
    out = {"mae": float(mean_absolute_error(predicted, real)) if len(real) else math.nan}
    varies = len(real) >= 2 and float(predicted.std()) > 0 and float(real.std()) > 0
    out["spearman"] = float(spearman_corrcoef(predicted, real)) if varies else math.nan
    out["pearson"] = float(pearson_corrcoef(predicted, real)) if varies else math.nan
    return out


class WorldModelReward(RLCallback):
    """Serve non-anchor groups with ``world_model`` and side-grade every anchor trajectory with it.

    Args:
        world_model: the world-model environment (any object with ``source`` and ``step_many``; ``bind(policy,
            tokenizer)`` is called when it declares :class:`~wmrl.types.BindsToPolicy`). A world model with
            ``grade_trajectories(trajectories) -> [reward | None]`` (:class:`~wmrl.types.GradesTrajectories`)
            side-grades whole trajectories instead of turns (e.g. a progress model of embodied episodes).
        side_grade: grade anchor trajectories with the world model too (needed by both corrections).
    """

    # ``Any`` for the config parser: jsonargparse matches a Protocol by method signatures, which a user's
    # unannotated world model would fail; the contract is checked below, with isinstance, and named.
    def __init__(self, world_model: Any, side_grade: bool = True) -> None:
        if not isinstance(world_model, Environment | GradesTrajectories):
            raise TypeError(
                "WorldModelReward world_model must be an environment with source and step_many, or grade "
                f"trajectories (wmrl.types.Environment / GradesTrajectories; got {type(world_model).__name__}); "
                "wmrl.testing.check_world_model says what is missing"
            )
        self.world_model = world_model
        self.side_grade = side_grade
        self._seen = {key: 0.0 for key in PER_STEP}  # running counts logged as each step's increase

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if declares(self.world_model, BindsToPolicy):
            self.world_model.bind(pl_module.policy, pl_module.tokenizer)
        real = pl_module.environments.get("real")
        if real is not None and declares(self.world_model, BindsToEnvironment):
            self.world_model.bind_environment(real)  # e.g. to read what the real environment shows the policy
        pl_module.add_environment("world_model", self.world_model)

    def on_rollout_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: RolloutBatch) -> None:
        from wmrl.types import StepRequest

        anchors = [i for i, tr in enumerate(batch.trajectories) if bool(batch.is_real[i]) and tr.turns]
        if self.side_grade and anchors and declares(self.world_model, GradesTrajectories):
            # world models that grade whole trajectories (e.g. a progress model scores an episode)
            start = time.perf_counter()
            rewards = self.world_model.grade_trajectories([batch.trajectories[i] for i in anchors])
            pl_module.add_time("world_model", time.perf_counter() - start)
            for i, reward in zip(anchors, rewards, strict=True):
                if reward is not None:
                    batch.wm_rewards[i] = reward
        elif self.side_grade and anchors:
            requests, owners = [], []
            for i in anchors:
                turns = batch.trajectories[i].turns
                for k, turn in enumerate(turns):
                    requests.append(StepRequest(batch.trajectories[i].task_id, turn.code, turn.response, turns[:k]))
                    owners.append(i)
            start = time.perf_counter()
            outcomes = self.world_model.step_many(requests)
            pl_module.add_time("world_model", time.perf_counter() - start)
            # a trajectory with a turn the world model could not answer has no prediction to pair
            unanswered = {i for i, outcome in zip(owners, outcomes, strict=True) if outcome.missing}
            best: dict[int, float] = {}
            for i, outcome in zip(owners, outcomes, strict=True):
                # gated turns are exact and an untrained learned model's prior is no prediction: neither pairs
                if i not in unanswered and outcome.basis is Basis.PREDICTED:
                    best[i] = max(best.get(i, 0.0), outcome.reward)
            for i, reward in best.items():
                batch.wm_rewards[i] = reward
        if declares(self.world_model, LearnsFromAnchors):  # learns from the anchors once they are side-graded
            self._observe(trainer, pl_module, batch, anchors)
        own = dict(self.world_model.metrics()) if declares(self.world_model, ReportsMetrics) else {}
        metrics = {}
        for key in PER_STEP:
            total = float(own.pop(key, 0.0))
            metrics[f"world_model/{key}"], self._seen[key] = total - self._seen[key], total
        metrics.update({f"world_model/{key}": float(value) for key, value in own.items()})
        pairs = batch.is_real & batch.graded & ~torch.isnan(batch.wm_rewards)
        if int(pairs.sum()) >= 1:
            for key, value in fidelity(batch.wm_rewards[pairs], batch.rewards[pairs]).items():
                metrics[f"fidelity/{key}_raw"] = value
        pl_module.log_dict(metrics, on_step=True, batch_size=len(batch))

    def _observe(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: RolloutBatch,
                 anchors: list[int]) -> None:
        """Hand every anchor turn's real outcome to the world model; every rank joins (rows are all-gathered)."""
        from wmrl.types import StepRequest

        requests, outcomes = [], []
        for i in anchors:
            turns = batch.trajectories[i].turns
            for k, turn in enumerate(turns):
                requests.append(StepRequest(batch.trajectories[i].task_id, turn.code, turn.response, turns[:k]))
                outcomes.append(turn.outcome)
        start = time.perf_counter()
        self.world_model.observe(requests, outcomes, gather=lambda rows: gather_rows(trainer, rows))
        pl_module.add_time("world_model", time.perf_counter() - start)

    @property
    def state_key(self) -> str:
        return self._generate_state_key(world_model=type(self.world_model).__qualname__, side_grade=self.side_grade)

    def state_dict(self) -> dict:
        """The world model's learned state, when it has one (a learned world model's examples and head)."""
        return {"world_model": self.world_model.state_dict()} if isinstance(self.world_model, Checkpointable) else {}

    def load_state_dict(self, state_dict: dict) -> None:
        if "world_model" in state_dict and isinstance(self.world_model, Checkpointable):
            self.world_model.load_state_dict(state_dict["world_model"])
