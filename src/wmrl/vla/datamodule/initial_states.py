"""`InitialStatesDataModule`: seeded initial states split into training and held-out ones, the VLA data modules' base.

Initial states are seeds: ``train_states`` seeds from ``first_seed`` serve the GRPO groups, the next
``heldout_states`` seeds are held out (paper: states 0-15 train, 16-49 held out) and only ever evaluated. Each
training step is one batch of ``groups_per_step`` task ids (``pusht-seed-<seed>``) in a seeded order that a resumed
run continues (:class:`SeededSteps`). :class:`~wmrl.vla.datamodule.lerobot.LeRobotVLADataModule` adds the PushT
demonstrations; :class:`~wmrl.vla.datamodule.bandit_contexts.BanditDataModule` the target bandit's (none).
"""

from __future__ import annotations

import random

import lightning.pytorch as pl
import torch

from wmrl.vla.episode import task_id


class SeededSteps(torch.utils.data.IterableDataset):
    """Batch ``k`` of the run (``k = 0, 1, ...``) is draw ``k % steps`` of epoch ``k // steps``'s seeded order,
    so a resumed run (``start`` = the steps already taken) continues the uninterrupted run's sequence."""

    def __init__(self, task_ids: list[str], groups: int, steps: int, seed: int) -> None:
        self.task_ids, self.groups, self.steps, self.seed = task_ids, groups, steps, seed
        self.start = 0

    def __iter__(self):
        epoch, skip = divmod(self.start, self.steps)
        rng = random.Random(self.seed * 1_000_003 + epoch)
        self.start = (epoch + 1) * self.steps
        for index in range(self.steps):
            draw = rng.sample(self.task_ids, self.groups)
            if index >= skip:
                yield draw

    def __len__(self) -> int:
        return self.steps


def split_problems(train_states: int, heldout_states: int, group_size: int, groups_per_step: int,
                   steps_per_epoch: int) -> list[str]:
    """What is wrong with a split's settings, each naming its ``data.init_args`` key (empty when nothing is).

    >>> split_problems(16, 34, 1, 2, 4)
    ['data.init_args.group_size must be >= 2 for group-relative advantages (got 1)']
    """
    key = "data.init_args."
    checks = [
        (train_states >= 1, f"{key}train_states must be >= 1 (got {train_states})"),
        (heldout_states >= 1, f"{key}heldout_states must be >= 1 (got {heldout_states})"),
        (1 <= groups_per_step <= train_states,
         f"{key}groups_per_step must be in [1, train_states={train_states}] (got {groups_per_step})"),
        (group_size >= 2, f"{key}group_size must be >= 2 for group-relative advantages (got {group_size})"),
        (steps_per_epoch >= 1, f"{key}steps_per_epoch must be >= 1 (got {steps_per_epoch})"),
    ]
    return [message for ok, message in checks if not ok]


class InitialStatesDataModule(pl.LightningDataModule):
    """The split and the training steps (see the module docstring); a subclass checks its settings with
    :func:`split_problems` (and its own) before calling this constructor."""

    def __init__(self, train_states: int, heldout_states: int, first_seed: int, group_size: int, groups_per_step: int,
                 steps_per_epoch: int, seed: int) -> None:
        super().__init__()
        self.group_size, self.groups_per_step, self.steps_per_epoch, self.seed = group_size, groups_per_step, steps_per_epoch, seed
        self.train_seeds = list(range(first_seed, first_seed + train_states))
        self.heldout_seeds = list(range(first_seed + train_states, first_seed + train_states + heldout_states))
        self._steps = SeededSteps([task_id(s) for s in self.train_seeds], groups_per_step, steps_per_epoch, seed)

    # names the CLI tests and the module read
    @property
    def train_tasks(self) -> list[str]:
        return [task_id(s) for s in self.train_seeds]

    @property
    def heldout_task_ids(self) -> list[str]:
        return [task_id(s) for s in self.heldout_seeds]

    @property
    def eval_task_ids(self) -> list[str]:
        return self.heldout_task_ids

    def state_dict(self) -> dict:
        """The training steps taken (one batch each), so a resumed run continues the same initial-state order."""
        return {"steps_done": int(self.trainer.global_step) if self.trainer is not None else self._steps.start}

    def load_state_dict(self, state_dict: dict) -> None:
        self._steps.start = int(state_dict["steps_done"])

    def train_dataloader(self):
        return torch.utils.data.DataLoader(self._steps, batch_size=None)

    def val_dataloader(self):
        return torch.utils.data.DataLoader([self.heldout_task_ids], batch_size=None)

    def test_dataloader(self):
        """``wmrl test``: the held-out initial states, as validation."""
        return self.val_dataloader()
