"""A built folder task (:class:`FolderTask`): the card, prompt and manifest wmrl writes into the cache for a task
folder or an MLE-bench competition, whose data, answers and grader stay where they lie.

Loading and validating is the formats' work (:mod:`wmrl.autoresearch.tasks.folder`, :mod:`wmrl.autoresearch.tasks.mlebench`); building and
verifying the cache entry is this module's, the same for both (:mod:`wmrl.autoresearch.tasks.suite` calls it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from wmrl.autoresearch.tasks.build import BUILD_VERSION, BuiltTask, StaleTaskCache, atomic_dir, sha256_file
from wmrl.autoresearch.tasks.card import (
    CLASSIFICATION,
    column_kinds,
    data_dictionary,
    prediction_text,
    target_summary,
)
from wmrl.autoresearch.tasks.folder_source import FolderSource
from wmrl.autoresearch.tasks.spec import TaskSpec
from wmrl.autoresearch.tasks.starter import generic_starter

OVERVIEW_CHARS = 3000  # the description's share of every rollout's prompt (MLE-bench descriptions run to 10 KB)
PUBLIC_FILES_SHOWN = 12
GENERIC_STARTER = "generic_starter.py"  # in the task's cache dir: the starter written when the folder has none
GENERIC_REFERENCE = "generic_starter"  # its name among the references (`wmrl tasks check` runs it)


@dataclass(frozen=True)
class FolderTask(BuiltTask):
    """A built folder task: its card and prompt in the cache, its data, answers and grader where they lie.

    ``leaderboard`` is the folder's ``leaderboard.csv`` when it has one, else the scores its references were
    recorded with (``wmrl tasks build ID --record``, kept in the cache dir's registry, never in wmrl's package).
    """

    @property
    def source(self) -> FolderSource:
        return self.spec.folder

    @property
    def public_dir(self) -> Path:
        return self.source.public_dir

    @property
    def answers_path(self) -> Path:
        return self.source.answers

    @property
    def private_paths(self) -> tuple[Path, ...]:
        """The folder (answers, grader, leaderboard), a competition's data dir, an answers dir elsewhere: its
        public files reach a solution only as the copy in its work dir."""
        return self.source.private_roots

    @property
    def higher_is_better(self) -> bool:
        return self.source.higher_is_better

    def references(self) -> dict[str, str]:
        """The folder's reference solutions (:meth:`FolderSource.references`); without a ``starter.py``, the
        generic starter as ``generic_starter`` (so ``wmrl tasks check`` runs it)."""
        found = self.source.references()
        if self.source.starter is None:
            sample = found.pop("sample_submission")
            found = {"sample_submission": sample, GENERIC_REFERENCE: self.starter, **found}
        return found

    @property
    def starter(self) -> str:
        """The folder's (or competition's) ``starter.py``; without one, the generic baseline written from its
        public files when the task was built (:mod:`wmrl.autoresearch.tasks.starter`)."""
        if self.source.starter is not None:
            return self.source.starter.read_text()
        return (self.root / GENERIC_STARTER).read_text()

    @property
    def starter_origin(self) -> str:
        """Which starter the prompt shows, in words (``wmrl tasks show`` prints it)."""
        if self.source.starter is not None:
            return str(self.source.starter)
        return (f"generic: written by wmrl from the public files ({self.root / GENERIC_STARTER}); add "
                f"{self.source.root / 'starter.py'} to show your own")

    def starter_solution(self, name: str) -> str:
        """``linear_baseline`` (the default name) and ``starter`` are the prompt's starter (the folder's
        ``starter.py``, else the generic one); other names are its references."""
        if name in ("linear_baseline", "starter"):
            return self.starter
        references = self.references()
        if name not in references:
            raise KeyError(f"task {self.id!r} has no starter {name!r}; its folder gives: "
                           f"{', '.join(sorted(references)) or 'none (add starter.py)'}")
        return references[name]


def _overview(source: FolderSource) -> str:
    text = source.description.read_text().strip()
    lines = text.splitlines()
    if lines and lines[0].startswith("# "):
        text = "\n".join(lines[1:]).strip()  # the title heads the prompt already
    if len(text) > OVERVIEW_CHARS:
        cut = text[:OVERVIEW_CHARS].rsplit("\n", 1)[0]
        text = f"{cut}\n\n[... the overview is cut here: {len(text)} characters in all ...]"
    return text


def _public_listing(source: FolderSource) -> str:
    files = sorted(p for p in source.public_dir.rglob("*") if p.is_file())
    shown = []
    for p in files[:PUBLIC_FILES_SHOWN]:
        name = p.relative_to(source.public_dir).as_posix()
        if p.suffix == ".csv":
            with p.open("rb") as f:
                rows = max(0, sum(1 for _ in f) - 1)
            shown.append(f"`{name}` ({rows} rows)")
        else:
            shown.append(f"`{name}` ({p.stat().st_size} bytes)")
    more = f", and {len(files) - PUBLIC_FILES_SHOWN} more files" if len(files) > PUBLIC_FILES_SHOWN else ""
    return ", ".join(shown) + more


def describe_folder(spec: TaskSpec, train, starter: str, labels: list[str] | None, generic: bool) -> str:
    """The prompt of a folder task: its overview, public files, data dictionary, submission, metric, budget and
    starter (its own ``starter.py``, or the generic one: ``generic``)."""
    from wmrl.autoresearch.tasks.metrics import METRICS

    source = spec.folder
    better = "higher" if source.higher_is_better else "lower"
    columns = ", ".join(f"`{c}`" for c in source.submission_columns)
    with source.public_dir.joinpath("sample_submission.csv").open("rb") as f:
        rows = max(0, sum(1 for _ in f) - 1)
    if source.grade_script is None:
        metric = METRICS[spec.metric]
        prediction = prediction_text(spec, metric.prediction, labels)
        submission_what = f" `{source.submission_columns[1]}`: {prediction}"
        metric_text = f"`{metric.name}` on the hidden test answers ({better} is better): {metric.description}."
    else:
        named = f" (`{source.grader_name}`)" if source.grader_name else ""
        submission_what = (f" The target in `train.csv`: {', '.join(f'`{t}`' for t in spec.target)}."
                           if spec.target else "")
        metric_text = f"the task's own grader{named} scores it against the hidden test answers ({better} is better)."
    dictionary = ""
    if train is not None:
        dictionary = f"\n{data_dictionary(train, spec)}\n"
        if spec.target and all(t in train.columns for t in spec.target):
            dictionary += f"\n{target_summary(train, spec)}\n"
    what = ("A generic baseline, written from the public files (it writes a valid submission). Improve on it: a "
            "better model, features, validation." if generic else
            "A working baseline (it writes a valid submission). Improve on it.")
    starter_text = f"{what}\n\n```python\n{starter.strip()}\n```\n"
    return f"""# {spec.title}

{_overview(source)}

## Data
Files in `public/`: {_public_listing(source)}.
{dictionary}
## Submission
Write `submission.csv` in the current directory with the columns of `public/sample_submission.csv` ({columns}),
one row per row of it ({rows} rows, the same `{source.id_column}` values).{submission_what}

## Metric
{metric_text}
You may print your own validation estimate as a line `VALIDATION_SCORE=<float>`; it is not your score.

## Budget
One CPU thread, {spec.memory_mb} MB of memory, {spec.time_budget_s:.0f} s of wall-clock. No network. Only the
files in `public/` are available. These are the limits of this environment: where the overview above states
others (hours, GPUs, internet access), these hold.

## Starter solution
{starter_text}"""


def materialise_folder(spec: TaskSpec, root: Path) -> dict[str, str]:
    """Write a folder task's card, prompt and manifest into ``root`` (the data stay where they are)."""
    import pandas as pd

    from wmrl.autoresearch.tasks.metrics import _labels as label_texts

    source = spec.folder
    data = {f"public/{p.relative_to(source.public_dir).as_posix()}": sha256_file(p)
            for p in sorted(source.public_dir.rglob("*")) if p.is_file()}
    data["private/answers"] = sha256_file(source.answers)
    train_path = source.public_dir / "train.csv"
    train = pd.read_csv(train_path, nrows=200_000) if train_path.is_file() else None
    exclude = (source.id_column, *spec.target)
    columns = column_kinds(train, exclude) if train is not None else {}
    labels = None
    if spec.type in CLASSIFICATION and spec.target:
        values = train[spec.target[0]] if train is not None and spec.target[0] in train.columns else None
        if values is None:
            values = pd.read_csv(source.answers)[spec.target[0]]
        labels = sorted(set(label_texts(values.dropna())))
    generic = source.starter is None
    starter = source.starter.read_text() if not generic else generic_starter(
        source.public_dir, source.id_column, folder_prediction(spec))
    card = {
        "id": spec.id, "split": spec.split, "source": {"kind": source.kind, "root": str(source.root)},
        "type": spec.type, "target": list(spec.target), "metric": spec.metric,
        "higher_is_better": source.higher_is_better, "time_budget_s": spec.time_budget_s,
        "memory_mb": spec.memory_mb, "heavy": spec.heavy, "id_column": source.id_column,
        "submission_columns": list(source.submission_columns), "columns": columns, "labels": labels,
        "grader": str(source.grade_script) if source.grade_script is not None else f"built-in {spec.metric}",
        "starter": f"generic ({GENERIC_STARTER})" if generic else str(source.starter),
    }
    with atomic_dir(root, spec.id) as tmp:
        (tmp / "task.json").write_text(json.dumps(card, indent=2) + "\n")
        (tmp / "description.md").write_text(describe_folder(spec, train, starter, labels, generic))
        if generic:
            (tmp / GENERIC_STARTER).write_text(starter)
        manifest = {"build_version": BUILD_VERSION, "data_sha256": data, "fingerprint": source.fingerprint()}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return data


def folder_prediction(spec: TaskSpec):
    """What a folder task's submission predicts (:func:`wmrl.autoresearch.tasks.starter.infer_prediction`): a built-in metric's
    kind and target, else what the public files and the grader's name say (a ``grade.py`` task's target is itself
    inferred from them, so it is inferred again with its kind: per-class columns, a survival pair)."""
    from wmrl.autoresearch.tasks.metrics import METRICS
    from wmrl.autoresearch.tasks.starter import infer_prediction

    source = spec.folder
    builtin = source.grade_script is None
    return infer_prediction(source.public_dir, source.id_column, source.submission_columns,
                            METRICS[spec.metric].prediction if builtin else None, spec.target if builtin else (),
                            source.grader_name)


def verify_folder(spec: TaskSpec, root: Path) -> dict[str, str]:
    """The recorded data hashes of a built folder task; :class:`StaleTaskCache` when any source file changed."""
    try:
        manifest = json.loads((root / "manifest.json").read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise StaleTaskCache(f"no readable manifest ({exc})") from None
    if not (root / "task.json").is_file() or not (root / "description.md").is_file():
        raise StaleTaskCache("its card is incomplete")
    if spec.folder.starter is None and not (root / GENERIC_STARTER).is_file():
        raise StaleTaskCache(f"its {GENERIC_STARTER} is missing")
    if manifest.get("build_version") != BUILD_VERSION:
        raise StaleTaskCache(f"it was built by another wmrl version (build {manifest.get('build_version')})")
    if manifest.get("fingerprint") != spec.folder.fingerprint():
        raise StaleTaskCache(f"files under {spec.folder.root} changed since it was built")
    return dict(manifest["data_sha256"])
