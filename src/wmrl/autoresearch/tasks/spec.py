"""The specification of one AutoResearch task (what `task.json` records)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import pandas as pd

    from wmrl.autoresearch.tasks.folder_source import FolderSource

Split = Literal["train", "heldout", "smoke", "world_model"]
#: every split, in the order listings show them
SPLITS: tuple[Split, ...] = ("train", "heldout", "smoke", "world_model")
TaskType = Literal["binary", "multiclass", "regression", "count", "forecast", "survival", "ordinal", "custom"]
PredictionKind = Literal["label", "probability", "real", "positive", "risk"]


@dataclass(frozen=True)
class TaskSpec:
    """One task: of the offline suite, or a user's task folder / MLE-bench competition (``folder`` set).

    Attributes:
        id: unique, lowercase, ``[a-z0-9_]``.
        split: ``train`` (RL and world-model calibration), ``heldout`` (evaluation only), ``smoke``, or
            ``world_model`` (executed only to pretrain world models: never trained on by RL, never evaluated).
        package / loader / version: where the data come from (``version`` is the pinned package version).
        type: task type; ``survival`` (and ``ordinal`` if present) appear in held-out tasks only.
        target: target column(s) in ``answers.csv`` (survival: ``("time", "event")``).
        metric: key of :data:`wmrl.autoresearch.tasks.metrics.METRICS`; its direction and prediction kind live there.
        title / goal: prompt text: a title and one paragraph saying what is predicted and why.
        load: returns the full table (features + target columns), deterministic, no network.
        time_budget_s / memory_mb: the sandbox limits a solution runs under.
        seed: seeds the train/test split.
        test_fraction: share of rows held out as the hidden test set (ignored for ``forecast``).
        time_column: for ``forecast``: the column that orders rows; the last ``horizon`` rows are the test set.
        horizon: for ``forecast``: number of future rows to predict.
        heavy: typical solutions take 5-30 s on one core (execution cost matters).
        folder: for a task folder or competition, where its files lie (:mod:`wmrl.autoresearch.tasks.folder`); its data are
            files, not a loader, and ``type`` is ``custom`` when its own ``grade.py`` scores it.
    """

    id: str
    split: Split
    package: str
    loader: str
    version: str
    type: TaskType
    target: tuple[str, ...]
    metric: str
    title: str
    goal: str
    load: Callable[[], pd.DataFrame] = field(repr=False, compare=False)
    time_budget_s: float = 60.0
    memory_mb: int = 4096
    seed: int = 0
    test_fraction: float = 0.25
    time_column: str | None = None
    horizon: int = 0
    heavy: bool = False
    folder: FolderSource | None = field(default=None, compare=False)
