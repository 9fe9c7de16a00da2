"""`RewardTerms`: additive reward terms (a format bonus, a length penalty) on top of the environment's reward.

    - class_path: wmrl.callbacks.RewardTerms
      init_args: {fns: [my_rewards.closes_code_block, my_rewards.short_answer], weights: [0.1, 0.05]}

Each term is a function of the trajectory, ``fn(trajectory) -> float | None``, importable by its dotted path
(``package.module.function``; the working directory is on the path under ``wmrl fit``). On every graded
trajectory, real or world-model, ``reward <- reward + sum_k w_k fn_k(trajectory)``. A missing reward (an
infrastructure failure) stays missing, and a term that returns ``None`` or a non-finite value adds nothing and
is counted (``reward_terms/<name>_missing``). The mean of each term is logged (``reward_terms/<name>``).

It runs in ``on_rewards``, which comes after every calibration (``on_calibrate``), wherever the two stand in
``trainer.callbacks``: the calibration pairs are the environment's rewards, never the shaped ones. The terms are
added to the calibrated world-model rewards of the anchor rows too, so ``InverseVarianceDenoising`` compares like
with like.
"""

from __future__ import annotations

import importlib
import math
import types
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import torch

from wmrl.callbacks.base import RLCallback

if TYPE_CHECKING:
    import lightning.pytorch as pl

    from wmrl.types import RolloutBatch, Trajectory

RewardFn = Callable[["Trajectory"], "float | None"]


def load_fn(path: str) -> RewardFn:
    """The function at ``package.module.function`` (a clear error naming the key otherwise)."""
    module_name, _, attribute = path.rpartition(".")
    if not module_name:
        raise ValueError(f"RewardTerms fns: {path!r} is not a dotted path (package.module.function)")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"RewardTerms fns: cannot import {module_name!r} for {path!r} ({exc}); the module must be "
                         "importable (installed, or a file in the working directory)") from exc
    fn = vars(module).get(attribute)
    if not callable(fn):
        raise ValueError(f"RewardTerms fns: {module_name!r} has no function {attribute!r}")
    return fn


class RewardTerms(RLCallback):
    """Add ``sum_k weights[k] * fns[k](trajectory)`` to every graded reward (see the module docstring).

    Args:
        fns: dotted paths of the term functions (or the functions themselves, from Python).
        weights: one per term (default 1.0 each).
    """

    def __init__(self, fns: Sequence[str | RewardFn], weights: Sequence[float] | None = None) -> None:
        if not fns:
            raise ValueError("RewardTerms fns must name at least one function (package.module.function)")
        weights = [1.0] * len(fns) if weights is None else list(weights)
        if len(weights) != len(fns):
            raise ValueError(f"RewardTerms weights: {len(weights)} weights for {len(fns)} fns (one each)")
        if not all(math.isfinite(w) for w in weights):
            raise ValueError(f"RewardTerms weights must be finite (got {weights})")
        self.fns = [load_fn(f) if isinstance(f, str) else f for f in fns]
        self.names = [f.rsplit(".", 1)[-1] if isinstance(f, str) else
                      (f.__name__ if isinstance(f, types.FunctionType) else f"term{i}") for i, f in enumerate(fns)]
        self.weights = weights

    def on_rewards(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: RolloutBatch) -> None:
        totals = torch.zeros_like(batch.rewards)
        metrics = {}
        for fn, name, weight in zip(self.fns, self.names, self.weights, strict=True):
            values, missing = [], 0
            for i, trajectory in enumerate(batch.trajectories):
                if not bool(batch.graded[i]):
                    continue
                value = fn(trajectory)
                if value is None or not math.isfinite(float(value)):
                    missing += 1
                    continue
                totals[i] += weight * float(value)
                values.append(float(value))
            metrics[f"reward_terms/{name}"] = sum(values) / len(values) if values else math.nan
            metrics[f"reward_terms/{name}_missing"] = float(missing)
        graded = batch.graded.bool()
        batch.rewards[graded] += totals[graded]
        calibrated = graded & torch.isfinite(batch.wm_calibrated)
        batch.wm_calibrated[calibrated] += totals[calibrated]
        pl_module.log_dict(metrics, on_step=True, batch_size=len(batch.trajectories))
