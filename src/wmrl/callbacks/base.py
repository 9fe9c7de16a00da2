"""`RLCallback`: a Lightning callback with the five typed RL hooks, dispatched by the RL modules.

The module calls the hooks in this fixed order each training step (a golden test asserts it)::

    on_rollout_plan -> (rollout) -> on_rollout_end -> on_calibrate -> on_rewards -> (advantages) -> on_advantages
        -> (loss)

Within a hook, callbacks run in the order of ``trainer.callbacks``; between hooks the order is the hooks' own, so
what one correction hands the next goes through the hook order, never through the order of the callbacks list: a
calibration (``on_calibrate``) always sees the environment's rewards, before any reward term is added
(``on_rewards``), and the weighting (``on_advantages``) sees what both did. Callbacks talk only through the typed
``RolloutPlan`` / ``RolloutBatch`` (editing the documented fields in place), never through trainer attributes.

A callback with state (``state_dict`` / ``load_state_dict``) keeps it in checkpoints under its ``state_key``: its
class and settings, so two instances with different settings do not overwrite each other. :func:`claim_saved_states`
lets a lone callback of a class take the state its class saved under another key (the class name alone, or other
settings: a run resumed with its settings changed).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from operator import methodcaller
from typing import TYPE_CHECKING

from lightning.pytorch import Callback

if TYPE_CHECKING:
    import lightning.pytorch as pl

    from wmrl.types import RolloutBatch, RolloutPlan

log = logging.getLogger(__name__)

RL_HOOKS = ("on_rollout_plan", "on_rollout_end", "on_calibrate", "on_rewards", "on_advantages")


class RLCallback(Callback):
    """Base class of the WMRL mechanisms. Every hook is a no-op by default."""

    def on_rollout_plan(self, trainer: pl.Trainer, pl_module: pl.LightningModule, plan: RolloutPlan) -> None:
        """Before rollouts: route groups to environments (``plan.environments``)."""

    def on_rollout_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: RolloutBatch) -> None:
        """After rollouts: the outcomes, raw rewards and their sources."""

    def on_calibrate(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: RolloutBatch) -> None:
        """Before the reward terms: may map the world-model rewards onto the real ones (``batch.wm_calibrated``, and
        the world-model rows of ``batch.rewards``), learning from the anchors' pairs; ``batch.rewards`` still holds
        the environment's rewards. A run whose callbacks override this hook has ``batch.corrections.calibrating``
        set (the module sets it before the hook)."""

    def on_rewards(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: RolloutBatch) -> None:
        """Before advantages: may rewrite ``batch.rewards`` / ``batch.graded`` in place (e.g. reward terms)."""

    def on_advantages(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: RolloutBatch) -> None:
        """After group normalisation: may rescale ``batch.advantages`` in place (e.g. denoising weights)."""


def overrides(hook: str, trainer: pl.Trainer) -> bool:
    """Whether a :class:`RLCallback` of the trainer implements ``hook`` (overrides the base class's no-op, as
    Lightning asks of its own hooks)."""
    from lightning.pytorch.utilities.model_helpers import is_overridden

    return any(isinstance(c, RLCallback) and is_overridden(hook, c, RLCallback) for c in trainer.callbacks)


def dispatch(hook: str, trainer: pl.Trainer, pl_module: pl.LightningModule, payload) -> None:
    """Call ``hook`` on every :class:`RLCallback` of the trainer, in order, each timed by the trainer's profiler
    under ``[Callback]<state_key>.<hook>``, the name Lightning gives its own callback hooks (``--trainer.profiler
    simple`` lists them beside Lightning's)."""
    if hook not in RL_HOOKS:
        raise ValueError(f"unknown RL hook {hook!r}; the hooks are {RL_HOOKS}")
    call = methodcaller(hook, trainer, pl_module, payload)
    for callback in trainer.callbacks:
        if isinstance(callback, RLCallback):
            with trainer.profiler.profile(f"[Callback]{callback.state_key}.{hook}"):
                call(callback)


def claim_saved_states(states: dict, callbacks: Sequence[Callback]) -> None:
    """Hand a lone callback of a class the state its class saved under another key, in ``states`` (a checkpoint's
    ``"callbacks"``), before Lightning restores each callback from ``states[callback.state_key]``.

    Only :class:`RLCallback` s, and only when the run holds one callback of that class and the checkpoint one
    unclaimed state of it (saved under the class name alone or under other settings): then there is no doubt whose
    state it is. Two instances of a class keep to their own keys.
    """
    by_class: dict[str, list[Callback]] = {}
    for callback in callbacks:
        if isinstance(callback, RLCallback):
            by_class.setdefault(type(callback).__qualname__, []).append(callback)
    for name, members in by_class.items():
        if len(members) != 1 or members[0].state_key in states:
            continue
        saved = [key for key in states if isinstance(key, str) and (key == name or key.startswith(name + "{"))]
        if len(saved) == 1:
            log.info("%s: restoring the state saved under %r (now %r)", name, saved[0], members[0].state_key)
            states[members[0].state_key] = states.pop(saved[0])


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
