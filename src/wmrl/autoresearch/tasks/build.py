"""Materialise a task into the cache dir: deterministic split, public/private files, card and prompt.

Layout of ``<cache>/tasks/<id>/``::

    public/train.csv  public/test.csv  public/sample_submission.csv   -> copied into the sandbox
    private/answers.csv                                                -> never enters a sandbox
    task.json  description.md  manifest.json (sha256 of every file above)

Every load re-hashes the files against ``manifest.json`` and the manifest against the hashes recorded in the
suite lock (``suite.lock.json``, shipped with wmrl): a corrupted cache is rebuilt, never used, and data that
no longer match the recorded build (a changed package version) are an error, not a silent change of task.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from wmrl.autoresearch.tasks.card import (
    CLASSIFICATION,
    column_kinds,
    data_dictionary,
    prediction_text,
    target_summary,
)
from wmrl.autoresearch.tasks.spec import TaskSpec

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

DATA_FILES = ("public/train.csv", "public/test.csv", "public/sample_submission.csv", "private/answers.csv")
CARD_FILES = ("task.json", "description.md")
# Bump when the files a build writes change (card fields, prompt text): older caches are then rebuilt.
BUILD_VERSION = 6


class TaskCacheError(RuntimeError):
    """A task's cached files do not match what was recorded."""


class StaleTaskCache(TaskCacheError):
    """A task cache written by another wmrl build version: rebuilt quietly."""


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@dataclass(frozen=True)
class BuiltTask:
    """A task whose files exist and were verified.

    Attributes:
        spec: the task's specification.
        root: ``<cache>/tasks/<id>``.
        data_sha256: sha256 per data file (``manifest.json``); ``data_hash`` condenses them.
        columns: feature column -> ``numeric`` | ``categorical`` (as the public train file has them).
        labels: the class labels seen in train (classification), as strings; else ``None``.
        leaderboard: reference solution name -> recorded score (empty if none is recorded yet).
    """

    spec: TaskSpec
    root: Path
    data_sha256: dict[str, str]
    columns: dict[str, str]
    labels: tuple[str, ...] | None
    leaderboard: dict[str, float] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def public_dir(self) -> Path:
        return self.root / "public"

    @property
    def answers_path(self) -> Path:
        return self.root / "private" / "answers.csv"

    @property
    def card(self) -> dict:
        return json.loads((self.root / "task.json").read_text())

    @property
    def description(self) -> str:
        """The task prompt (goal, data dictionary, submission format, metric, budget, starter solution)."""
        return (self.root / "description.md").read_text()

    @property
    def private_paths(self) -> tuple[Path, ...]:
        """Host paths besides the cache dir a solution may never read (a built-in task has none: its answers
        live in the cache dir, which is always forbidden)."""
        return ()

    @property
    def higher_is_better(self) -> bool:
        """The direction of the task's score."""
        from wmrl.autoresearch.tasks.metrics import METRICS

        return METRICS[self.spec.metric].higher_is_better

    @property
    def data_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.data_sha256, sort_keys=True).encode()).hexdigest()[:16]

    def references(self) -> dict[str, str]:
        """The task's reference solutions (name -> script)."""
        from wmrl.autoresearch.tasks.references import reference_solutions

        return reference_solutions(self.spec, self.columns)

    @property
    def starter(self) -> str:
        """The starter solution shown in the prompt: the linear baseline."""
        return self.references()["linear_baseline"]

    def starter_solution(self, name: str) -> str:
        """A starter by name: a reference solution (``linear_baseline`` is the prompt's), ``heavy_boosting``
        (the heavy execution tier's, :func:`wmrl.autoresearch.tasks.references.heavy_starter`) or ``heavy_stacking`` (the
        paper's regime, :func:`wmrl.autoresearch.tasks.references.stacking_starter`)."""
        from wmrl.autoresearch.tasks.references import (
            HEAVY_STARTER,
            STACKING_STARTER,
            heavy_starter,
            stacking_starter,
        )

        if name == HEAVY_STARTER:
            return heavy_starter(self.spec, self.columns)
        if name == STACKING_STARTER:
            return stacking_starter(self.spec, self.columns)
        references = self.references()
        if name not in references:
            raise KeyError(f"task {self.id!r} has no starter {name!r}; choose {HEAVY_STARTER}, {STACKING_STARTER} or one of its "
                           f"reference solutions: {', '.join(sorted(references))}")
        return references[name]


STARTER_HEADING = "## Starter solution"  # the prompt section that shows the starter solution


# -- splitting -----------------------------------------------------------------------------------------
def split_frame(spec: TaskSpec, df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Deterministic train/test split with an ``id`` column (train ids first, then test ids)."""
    from sklearn.model_selection import train_test_split

    df = df.reset_index(drop=True)
    if spec.type == "forecast":
        if spec.time_column is None or spec.horizon <= 0:
            raise ValueError(f"task {spec.id}: forecast tasks need time_column and horizon > 0")
        df = df.sort_values(spec.time_column, kind="mergesort").reset_index(drop=True)
        train, test = df.iloc[: -spec.horizon], df.iloc[-spec.horizon :]
    else:
        stratify = df[spec.target[0]] if spec.type in CLASSIFICATION else None
        train, test = train_test_split(
            df, test_size=spec.test_fraction, random_state=spec.seed, shuffle=True, stratify=stratify
        )
    train = train.reset_index(drop=True)
    test = test.reset_index(drop=True)
    train.insert(0, "id", range(len(train)))
    test.insert(0, "id", range(len(train), len(train) + len(test)))
    return train, test


def _trivial_prediction(spec: TaskSpec, train: pd.DataFrame):
    from wmrl.autoresearch.tasks.metrics import METRICS

    kind = METRICS[spec.metric].prediction
    y = train[spec.target[0]]
    if kind == "label":
        return str(y.astype(str).mode().iloc[0])
    if kind == "probability":
        return float(y.mean())
    if kind == "risk":
        return 0.0
    return float(y.mean())


# -- the prompt (its shared pieces are in wmrl.autoresearch.tasks.card) ---------------------------------------------
def describe(
    spec: TaskSpec, train: pd.DataFrame, test: pd.DataFrame, starter: str, labels: list[str] | None = None
) -> str:
    """The task prompt an agent reads (``description.md``)."""
    from wmrl.autoresearch.tasks.metrics import METRICS

    metric = METRICS[spec.metric]
    better = "higher" if metric.higher_is_better else "lower"
    prediction = prediction_text(spec, metric.prediction, labels)
    return f"""# {spec.title}

{spec.goal}

## Data
Files in `public/`: `train.csv` ({len(train)} rows, features and target), `test.csv` ({len(test)} rows, \
features only), `sample_submission.csv` (the exact output format).

{data_dictionary(train, spec)}

{target_summary(train, spec)}

## Submission
Write `submission.csv` in the current directory with columns `id,prediction`, one row per row of
`public/test.csv` (same ids). `prediction`: {prediction}

## Metric
`{metric.name}` on the hidden test answers ({better} is better): {metric.description}. You may print your own validation estimate as
a line `VALIDATION_SCORE=<float>`; it is not your score.

## Budget
One CPU thread, {spec.memory_mb} MB of memory, {spec.time_budget_s:.0f} s of wall-clock. No network. Only the
files in `public/` are available.

## Starter solution
A working baseline (it writes a valid submission). Improve on it.

```python
{starter.strip()}
```
"""


@contextlib.contextmanager
def atomic_dir(root: Path, prefix: str) -> Iterator[Path]:
    """A temp dir beside ``root`` to write a task into; it replaces ``root`` only when the block succeeds, so a
    half-written task never appears (and a failed write leaves nothing behind)."""
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{prefix}-", dir=root.parent))
    try:
        yield tmp
        if root.exists():
            shutil.rmtree(root)
        os.replace(tmp, root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


# -- building and verifying ----------------------------------------------------------------------------
def _manifest(root: Path) -> dict[str, str]:
    return {name: sha256_file(root / name) for name in (*DATA_FILES, *CARD_FILES)}


def verify(root: Path) -> dict[str, str]:
    """Hash the task's files against ``manifest.json``; raise :class:`TaskCacheError` naming a mismatch."""
    manifest_path = root / "manifest.json"
    for name in (*DATA_FILES, *CARD_FILES, "manifest.json"):
        if not (root / name).is_file():
            raise TaskCacheError(f"{root / name} is missing")
    try:
        manifest = json.loads(manifest_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TaskCacheError(f"{manifest_path} is not valid JSON ({exc})") from exc
    if manifest.get("build_version") != BUILD_VERSION:
        raise StaleTaskCache(f"it was built by another wmrl version (build {manifest.get('build_version')})")
    actual = _manifest(root)
    for name in (*DATA_FILES, *CARD_FILES):
        if manifest.get(name) != actual[name]:
            raise TaskCacheError(f"{root / name} does not match its manifest (sha256 {actual[name][:12]}...)")
    return actual


def materialise(spec: TaskSpec, root: Path) -> dict[str, str]:
    """Build the task's files into ``root`` (atomically: a half-written task never appears)."""
    from wmrl.autoresearch.tasks.metrics import _labels as label_texts
    from wmrl.autoresearch.tasks.references import reference_solutions

    df = spec.load()
    missing = [t for t in spec.target if t not in df.columns]
    if missing:
        raise ValueError(f"task {spec.id}: loader returned no target column(s) {missing}")
    train, test = split_frame(spec, df)
    features = [c for c in train.columns if c not in spec.target]
    answers = test[["id", *spec.target]]
    test = test[features]
    columns = column_kinds(train, ("id", *spec.target))
    starter = reference_solutions(spec, columns)["linear_baseline"]
    sample = test[["id"]].assign(prediction=_trivial_prediction(spec, train))

    with atomic_dir(root, spec.id) as tmp:
        (tmp / "public").mkdir()
        (tmp / "private").mkdir()
        train.to_csv(tmp / "public/train.csv", index=False)
        test.to_csv(tmp / "public/test.csv", index=False)
        sample.to_csv(tmp / "public/sample_submission.csv", index=False)
        answers.to_csv(tmp / "private/answers.csv", index=False)
        os.chmod(tmp / "private", 0o700)
        labels = sorted(set(label_texts(train[spec.target[0]]))) if spec.type in CLASSIFICATION else None
        card = {
            "id": spec.id,
            "split": spec.split,
            "source": {"package": spec.package, "loader": spec.loader, "version": spec.version},
            "type": spec.type,
            "target": list(spec.target),
            "metric": spec.metric,
            "time_budget_s": spec.time_budget_s,
            "memory_mb": spec.memory_mb,
            "seed": spec.seed,
            "heavy": spec.heavy,
            "rows": {"train": len(train), "test": len(test)},
            "columns": columns,
            "labels": labels,
        }
        (tmp / "task.json").write_text(json.dumps(card, indent=2) + "\n")
        (tmp / "description.md").write_text(describe(spec, train, test, starter, labels))
        manifest = _manifest(tmp)
        payload = {**manifest, "build_version": BUILD_VERSION}
        (tmp / "manifest.json").write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    return manifest
