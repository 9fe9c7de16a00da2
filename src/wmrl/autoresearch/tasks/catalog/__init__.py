"""The offline AutoResearch task catalogue: every built-in task's card.

Four splits, whose data never overlap: ``train`` (RL and world-model calibration), ``heldout`` (evaluation only),
``world_model`` (executed only to pretrain world models: never trained on by RL, never evaluated) and ``smoke``
(tiny tasks for tests, drawn from training sources). Each task draws on a source of its split
(:mod:`wmrl.autoresearch.tasks.sources`); ``tests/autoresearch/test_catalog.py`` also compares every two tasks of different
splits by their tables. No held-out dataset (or a near copy) is ever seen in training or world-model
pretraining, and survival appears in held-out tasks only. Heavy tasks are the largest tables, where a typical
tree ensemble costs seconds to tens of seconds of one core: execution cost is what the world model saves.
"""

from __future__ import annotations

from wmrl.autoresearch.tasks.catalog import heldout, smoke, train, world_model
from wmrl.autoresearch.tasks.spec import TaskSpec

#: every built-in task, split by split (one module each: :mod:`.smoke`, :mod:`.train`, :mod:`.world_model`,
#: :mod:`.heldout`; :func:`.entry.task` writes an entry)
TASKS: tuple[TaskSpec, ...] = smoke.TASKS + train.TASKS + world_model.TASKS + heldout.TASKS
