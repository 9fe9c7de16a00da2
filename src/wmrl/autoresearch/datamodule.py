"""`AutoResearchDataModule`: which tasks each training step plays, and the held-out evaluation.

A training "batch" is the list of task ids of one step (``groups_per_step`` groups; each group is
``group_size`` rollouts of one task, played by the module). Step ``s`` draws its tasks with the seed
``seed + s``, whatever happened before, so a resumed run plays exactly the tasks an uninterrupted run would.
Validation and test are held-out evaluation with real execution: one item per task, ``eval_samples`` rollouts.
"""

from __future__ import annotations

import random

import lightning.pytorch as pl
from torch.utils.data import DataLoader, Dataset, IterableDataset

from wmrl.autoresearch.tasks.suite import TaskSuite


class _Steps(IterableDataset):
    """The steps ``start .. stop - 1`` of an epoch that began at step ``first``. Its length is the whole epoch's:
    a fit resumed inside an epoch counts the steps it ran before (Lightning's restored progress), so the epoch,
    and the held-out evaluation at its end, end where an uninterrupted fit's do."""

    def __init__(self, tasks: list[str], groups: int, seed: int, first: int, start: int, stop: int) -> None:
        self.tasks, self.groups, self.seed, self.first, self.start, self.stop = tasks, groups, seed, first, start, stop

    def __iter__(self):
        for step in range(self.start, self.stop):
            yield tasks_for_step(self.tasks, self.groups, self.seed, step)

    def __len__(self) -> int:
        return self.stop - self.first


class _Eval(Dataset):
    def __init__(self, tasks: list[str], samples: int) -> None:
        self.tasks, self.samples = tasks, samples

    def __len__(self) -> int:
        return len(self.tasks)

    def __getitem__(self, i: int) -> tuple[str, int]:
        return self.tasks[i], self.samples


def tasks_for_step(tasks: list[str], groups: int, seed: int, step: int) -> list[str]:
    """The tasks of training step ``step``: distinct tasks while there are enough, seeded by step.

    >>> tasks_for_step(["a", "b", "c"], 2, 0, 5) == tasks_for_step(["a", "b", "c"], 2, 0, 5)
    True
    """
    rng = random.Random(seed * 1_000_003 + step)
    if groups <= len(tasks):
        return rng.sample(tasks, groups)
    return [rng.choice(tasks) for _ in range(groups)]


class AutoResearchDataModule(pl.LightningDataModule):
    """Tasks of the offline AutoResearch suite.

    Args:
        split: training split (``train``; ``smoke`` for quick checks).
        tasks: explicit training task ids (overrides ``split``).
        group_size: rollouts per task per step (linked to ``model.init_args.group_size``).
        groups_per_step: tasks per step (paper: 8).
        steps_per_epoch: training steps per epoch (an epoch ends with held-out evaluation).
        eval_split: the split of the held-out tasks for validation/test (``heldout``).
        eval_tasks: explicit held-out task ids (overrides ``eval_split``).
        eval_samples: rollouts per held-out task (K).
        seed: seeds the task draw of every step.
        cache_dir: task cache (default ``$WMRL_CACHE`` or ``~/.cache/wmrl``).
        task_dirs: your own tasks, for this run: task folders, folders of them, or MLE-bench sources
            (``{mlebench: COMPETITIONS_DIR, data: DATA_DIR, split: heldout}``); see docs/tasks.md. Their ids
            may then appear in ``tasks`` and ``eval_tasks`` (``wmrl tasks add`` registers them for every run).
    """

    def __init__(
        self,
        split: str = "train",
        tasks: list[str] | None = None,
        group_size: int = 4,
        groups_per_step: int = 2,
        steps_per_epoch: int = 4,
        eval_split: str = "heldout",
        eval_tasks: list[str] | None = None,
        eval_samples: int = 2,
        seed: int = 0,
        cache_dir: str | None = None,
        task_dirs: list[str | dict[str, str | float]] | None = None,
    ) -> None:
        super().__init__()
        problems = []
        if group_size < 2:
            problems.append(f"data.group_size must be >= 2 for group-relative advantages (got {group_size})")
        if groups_per_step < 1:
            problems.append(f"data.groups_per_step must be >= 1 (got {groups_per_step})")
        if steps_per_epoch < 1:
            problems.append(f"data.steps_per_epoch must be >= 1 (got {steps_per_epoch})")
        if eval_samples < 1:
            problems.append(f"data.eval_samples must be >= 1 (got {eval_samples})")
        if task_dirs:
            from wmrl.autoresearch.tasks.folder_checks import TaskFolderError
            from wmrl.autoresearch.tasks.registry import load_source, use

            for i, source in enumerate(task_dirs):
                try:
                    load_source(source)
                except (TaskFolderError, ValueError, OSError) as exc:
                    problems.append(f"data.task_dirs[{i}]: {exc}")
            if not problems:
                use(task_dirs)  # every task suite of this run (the environment's, the world model's) sees them
        suite = TaskSuite(cache_dir=cache_dir)
        try:
            train = tasks or [s.id for s in suite.specs(split)]
            evals = eval_tasks or [s.id for s in suite.specs(eval_split)]
            for task_id in [*(tasks or []), *(eval_tasks or [])]:
                suite.spec(task_id)
        except (KeyError, ValueError) as exc:
            problems.append(f"data: {exc}")
            train, evals = [], []
        if not problems and not train:
            problems.append(f"data.split {split!r} has no tasks; choose train, heldout, smoke or world_model, or list data.tasks")
        if not problems and not evals:
            problems.append(f"data.eval_split {eval_split!r} has no tasks; list data.eval_tasks")
        if problems:
            raise ValueError("invalid AutoResearchDataModule configuration:\n  - " + "\n  - ".join(problems))
        self.suite = suite
        self.train_tasks, self.eval_task_ids = list(train), list(evals)
        self.group_size, self.groups_per_step, self.steps_per_epoch = group_size, groups_per_step, steps_per_epoch
        self.eval_samples, self.seed = eval_samples, seed

    def tasks_of_step(self, step: int) -> list[str]:
        """The tasks training step ``step`` (counted from 0) plays: what the train loader yields for it."""
        return tasks_for_step(self.train_tasks, self.groups_per_step, self.seed, step)

    def prepare_data(self) -> None:
        """Build every task used (first use materialises data into the cache)."""
        self.suite.build([*dict.fromkeys(self.train_tasks + self.eval_task_ids)])

    def train_dataloader(self) -> DataLoader:
        trainer = self.trainer
        start = trainer.global_step if trainer is not None else 0
        first = start // self.steps_per_epoch * self.steps_per_epoch
        dataset = _Steps(self.train_tasks, self.groups_per_step, self.seed, first, start, first + self.steps_per_epoch)
        return DataLoader(dataset, batch_size=None, num_workers=0)

    def val_dataloader(self) -> DataLoader:
        # one batch holds every held-out task of a rank: the module samples them in one batched rollout
        tasks = _Eval(self.eval_task_ids, self.eval_samples)
        return DataLoader(tasks, batch_size=len(tasks), collate_fn=list, num_workers=0)

    def test_dataloader(self) -> DataLoader:
        return self.val_dataloader()
