"""`BanditDataModule`: the seeded initial states of :class:`~wmrl.vla.bandit.TargetBandit` (no demonstrations).

The same split as :class:`~wmrl.datamodules.lerobot.LeRobotVLADataModule`: ``train_states`` seeds from ``first_seed``
serve the GRPO groups, the next ``heldout_states`` seeds are only ever evaluated; each training step is one batch
of ``groups_per_step`` task ids in a seeded order that a resumed run continues. The bandit's policy starts as given
(no SFT stage), so there are no demonstrations.
"""

from __future__ import annotations

import lightning.pytorch as pl
import torch

from wmrl.datamodules.lerobot import _Steps
from wmrl.vla.episode import Episode, task_id


class BanditDataModule(pl.LightningDataModule):
    """Training and held-out contexts of the target bandit.

    Args:
        train_states: contexts trained on.
        heldout_states: contexts evaluated on, never trained on.
        first_seed: the seed of the first context; the split is consecutive seeds from it.
        group_size: rollouts per context (linked to ``model.init_args.group_size``).
        groups_per_step: contexts per training step.
        steps_per_epoch: training steps per epoch (held-out reward is measured after each epoch).
        seed: seeds the order of training contexts.
    """

    def __init__(self, train_states: int = 64, heldout_states: int = 400, first_seed: int = 0, group_size: int = 8,
                 groups_per_step: int = 8, steps_per_epoch: int = 50, seed: int = 0) -> None:
        super().__init__()
        key = "data.init_args."
        checks = [
            (train_states >= 1, f"{key}train_states must be >= 1 (got {train_states})"),
            (heldout_states >= 1, f"{key}heldout_states must be >= 1 (got {heldout_states})"),
            (1 <= groups_per_step <= train_states,
             f"{key}groups_per_step must be in [1, train_states={train_states}] (got {groups_per_step})"),
            (group_size >= 2, f"{key}group_size must be >= 2 for group-relative advantages (got {group_size})"),
            (steps_per_epoch >= 1, f"{key}steps_per_epoch must be >= 1 (got {steps_per_epoch})"),
        ]
        problems = [message for ok, message in checks if not ok]
        if problems:
            raise ValueError("invalid BanditDataModule configuration:\n  - " + "\n  - ".join(problems))
        self.group_size, self.groups_per_step, self.steps_per_epoch, self.seed = group_size, groups_per_step, steps_per_epoch, seed
        self.train_seeds = list(range(first_seed, first_seed + train_states))
        self.heldout_seeds = list(range(first_seed + train_states, first_seed + train_states + heldout_states))
        self._steps = _Steps([task_id(s) for s in self.train_seeds], groups_per_step, steps_per_epoch, seed)

    @property
    def train_tasks(self) -> list[str]:
        return [task_id(s) for s in self.train_seeds]

    @property
    def heldout_task_ids(self) -> list[str]:
        return [task_id(s) for s in self.heldout_seeds]

    eval_task_ids = heldout_task_ids

    def check_simulator(self, simulator) -> None:
        """Nothing to match: the contexts are the simulator's own, and there are no demonstrations."""

    def demonstrations(self) -> list[Episode]:
        """None: the bandit's policy starts as given, with no SFT stage."""
        return []

    def state_dict(self) -> dict:
        return {"steps_done": int(self.trainer.global_step) if self.trainer is not None else self._steps.start}

    def load_state_dict(self, state_dict: dict) -> None:
        self._steps.start = int(state_dict["steps_done"])

    def train_dataloader(self):
        return torch.utils.data.DataLoader(self._steps, batch_size=None)

    def val_dataloader(self):
        return torch.utils.data.DataLoader([self.heldout_task_ids], batch_size=None)
