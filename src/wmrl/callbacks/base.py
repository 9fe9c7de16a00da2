"""`RLCallback`: a Lightning callback with the four typed RL hooks, dispatched by the RL modules.

The module calls the hooks in this fixed order each training step (a golden test asserts it)::

    on_rollout_plan -> (rollout) -> on_rollout_end -> on_rewards -> (advantages) -> on_advantages -> (loss)

Within a hook, callbacks run in the order of ``trainer.callbacks``. Callbacks talk only through the typed
``RolloutPlan`` / ``RolloutBatch`` (editing the documented fields in place), never through trainer attributes.
"""

from __future__ import annotations

from operator import methodcaller
from typing import TYPE_CHECKING

from lightning.pytorch import Callback

if TYPE_CHECKING:
    import lightning.pytorch as pl

    from wmrl.types import RolloutBatch, RolloutPlan

RL_HOOKS = ("on_rollout_plan", "on_rollout_end", "on_rewards", "on_advantages")


class RLCallback(Callback):
    """Base class of the WMRL mechanisms. Every hook is a no-op by default."""

    def on_rollout_plan(self, trainer: pl.Trainer, pl_module: pl.LightningModule, plan: RolloutPlan) -> None:
        """Before rollouts: route groups to environments (``plan.environments``)."""

    def on_rollout_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: RolloutBatch) -> None:
        """After rollouts: the outcomes, raw rewards and their sources."""

    def on_rewards(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: RolloutBatch) -> None:
        """Before advantages: may rewrite ``batch.rewards`` / ``batch.graded`` in place (e.g. calibration)."""

    def on_advantages(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: RolloutBatch) -> None:
        """After group normalisation: may rescale ``batch.advantages`` in place (e.g. denoising weights)."""


def dispatch(hook: str, trainer: pl.Trainer, pl_module: pl.LightningModule, payload) -> None:
    """Call ``hook`` on every :class:`RLCallback` of the trainer, in order."""
    if hook not in RL_HOOKS:
        raise ValueError(f"unknown RL hook {hook!r}; the hooks are {RL_HOOKS}")
    call = methodcaller(hook, trainer, pl_module, payload)
    for callback in trainer.callbacks:
        if isinstance(callback, RLCallback):
            call(callback)


def rank_of(trainer: pl.Trainer | None) -> int:
    """The trainer's global rank (0 without a trainer: a callback driven by hand, as in unit tests)."""
    return 0 if trainer is None else int(trainer.global_rank)


def gather_rows(trainer: pl.Trainer, rows):
    """All ranks' rows of a ``[n, k]`` float64 tensor, concatenated in rank order (``n`` may differ by rank).

    Under one process this is the identity; under DDP/FSDP every rank gets the same result, so statistics
    built from it (calibration pairs, disagreements) are identical on every rank.
    """
    import torch

    world = trainer.world_size if trainer is not None else 1
    if world <= 1:
        return rows
    strategy = trainer.strategy
    count = torch.tensor([rows.shape[0]], device=strategy.root_device)
    counts = strategy.all_gather(count).view(-1).tolist()
    padded = rows.new_zeros((max(counts), rows.shape[1]))
    padded[: rows.shape[0]] = rows
    gathered = strategy.all_gather(padded.to(strategy.root_device)).cpu()  # [world, max, k]
    return torch.cat([gathered[r, : counts[r]] for r in range(len(counts))])
