"""How a catalogue entry is written: :func:`task` fills in the source's pinned version and the time budget."""

from __future__ import annotations

from wmrl.autoresearch.tasks.sources import VERSIONS
from wmrl.autoresearch.tasks.spec import TaskSpec

LIGHT_S, HEAVY_S = 60.0, 240.0  # a task's time budget: heavy tasks are the largest tables


def task(task_id: str, split: str, package: str, loader: str, **fields) -> TaskSpec:
    """One task's card (``fields``: :class:`~wmrl.autoresearch.tasks.spec.TaskSpec`'s other fields)."""
    fields.setdefault("time_budget_s", HEAVY_S if fields.get("heavy") else LIGHT_S)
    return TaskSpec(id=task_id, split=split, package=package, loader=loader, version=VERSIONS[package], **fields)
