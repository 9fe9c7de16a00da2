"""What a `GRPOModule` training step reports about its rollouts: the logged metrics and the training-curve row.

Real executions are timed across the fit (``RealSeconds``: total wall seconds and count of uncached real
executions), so ``env/seconds_saved`` prices each world-model turn at the mean real execution seen so far.
"""

from __future__ import annotations

import math

import torch

from wmrl.types import RolloutBatch, RolloutPlan, Source, Status

RealSeconds = tuple[float, int]


def rollout_metrics(batch: RolloutBatch, plan: RolloutPlan, seen: RealSeconds) -> tuple[dict[str, float], RealSeconds]:
    """The step's rollout metrics and the real executions' time with this step's added to ``seen``."""
    trajectories = batch.trajectories
    turns = [t for tr in trajectories for t in tr.turns]
    graded = batch.rewards[batch.graded]
    real = batch.rewards[batch.graded & batch.is_real]
    statuses = [tr.best.status for tr in trajectories if tr.best is not None]
    executed = [t.outcome for tr in trajectories if tr.source is Source.REAL for t in tr.turns
                if t.code is not None and not t.outcome.cached and t.outcome.wall_seconds > 0]
    total, count = seen
    total, count = total + sum(o.wall_seconds for o in executed), count + len(executed)
    simulated = sum(1 for tr in trajectories if tr.source is Source.WORLD_MODEL for t in tr.turns
                    if t.code is not None)
    wm_raw = batch.wm_rewards[~batch.is_real & batch.graded & ~torch.isnan(batch.wm_rewards)]
    metrics = {
        "reward/mean": float(graded.mean()) if len(graded) else math.nan,
        "reward/real_mean": float(real.mean()) if len(real) else math.nan,
        "reward/world_model_raw_mean": float(wm_raw.mean()) if len(wm_raw) else math.nan,
        "anchor/fraction": sum(plan.anchor_mask) / max(len(plan.anchor_mask), 1),
        "env/execution_seconds": sum(o.wall_seconds for o in executed),
        "env/seconds_saved": simulated * (total / count) if count else 0.0,
        "rollout/valid_rate": sum(s is Status.VALID for s in statuses) / max(len(trajectories), 1),
        "rollout/code_block_rate": sum(t.code is not None for t in turns) / max(len(turns), 1),
        "rollout/truncated_rate": sum(t.finish_reason == "length" for t in turns) / max(len(turns), 1),
        "rollout/response_tokens": sum(t.response_tokens for t in turns) / max(len(turns), 1),
        "rollout/missing": float((~batch.graded).sum()),
        "rollout/used_fraction": float(batch.used.float().mean()),
        "anchor/executions": float(sum(tr.source is Source.REAL for tr in trajectories for _ in tr.turns)),
    }
    return metrics, (total, count)


def training_row(metrics: dict[str, float], batch: RolloutBatch, step: int) -> dict[str, float]:
    """One row of the end-of-fit training curve (:func:`wmrl.evaluation.report.training_report`): the real rollouts'
    reward and valid rate (executed and graded, never a world model's opinion), truncation and KL."""
    real = [tr for tr in batch.trajectories if tr.source is Source.REAL and tr.best is not None]
    return {
        "step": step,
        "real_reward": metrics["reward/real_mean"],
        "real_valid_rate": sum(tr.best.status is Status.VALID for tr in real) / len(real) if real else math.nan,
        "truncated_rate": metrics["rollout/truncated_rate"],
        "kl": metrics.get("loss/kl", math.nan),
    }
