"""Task folders: bring your own task, or an MLE-bench-layout competition, without touching wmrl's source.

A task folder (``docs/tasks.md`` has a complete example)::

    my_task/
      task.yaml              the card: split, metric (or the direction of grade.py), budget
      description.md         the overview the agent reads (markdown)
      public/                what a solution sees: sample_submission.csv and any data files (train.csv, ...)
      private/answers.csv    the hidden answers: never copied into a sandbox
      grade.py               optional: grade(submission, answers) -> float, when no built-in metric fits
      leaderboard.csv        optional: a ``score`` column (else references/, recorded by ``wmrl tasks build``)
      references/*.py        optional: reference solutions (``wmrl tasks build ID --record`` scores them)
      starter.py             optional: the starter solution shown in the prompt (the foothold of small policies)

An MLE-bench competition is read in MLE-bench's own layout (``<competitions>/<id>/config.yaml``,
``description.md``, ``grade.py``, ``leaderboard.csv``; prepared data under ``<data>/<id>/prepared/public`` and
``prepared/private``): see :func:`wmrl.autoresearch.tasks.mlebench.load_competition`.

Validation reports every problem of a folder at once (:class:`TaskFolderError`), each naming the file and the
fix. What is loaded is a :class:`~wmrl.autoresearch.tasks.spec.TaskSpec` whose ``folder`` says where everything lies
(:class:`~wmrl.autoresearch.tasks.folder_source.FolderSource`); :mod:`wmrl.autoresearch.tasks.registry` finds folders and :mod:`wmrl.autoresearch.tasks.suite` builds them.

**Trust model.** The task author's ``grade.py`` is trusted code: it runs on the host, outside the sandbox,
but in its own process with a time limit (``grade_timeout_s``); if it crashes or hangs the execution is an
infrastructure error (missing, never a reward of 0). The submission is hostile: its shape is checked against
``sample_submission.csv`` before any grader reads it, and an ``InvalidSubmissionError`` raised by the grader
(MLE-bench's convention, matched by class name) grades it as an invalid submission. Only ``public/`` is
copied into a sandbox; the whole task folder (and a competition's data dir) is forbidden to the solution.
"""

from __future__ import annotations

import ast
import csv
import difflib
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wmrl.autoresearch.tasks.build import BUILD_VERSION, BuiltTask, StaleTaskCache, atomic_dir
from wmrl.autoresearch.tasks.card import (
    CLASSIFICATION,
    column_kinds,
    data_dictionary,
    prediction_text,
    target_summary,
)
from wmrl.autoresearch.tasks.folder_source import TASK_FILE, FolderSource
from wmrl.autoresearch.tasks.spec import TaskSpec
from wmrl.autoresearch.tasks.starter import generic_starter

ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
SPLITS = ("train", "heldout", "smoke")
OVERVIEW_CHARS = 3000  # the description's share of every rollout's prompt (MLE-bench descriptions run to 10 KB)
PUBLIC_FILES_SHOWN = 12
GRADE_METRIC = "grade.py"  # the metric a task shows when its own grade.py scores it
DEFAULTS: dict[str, Any] = {
    "id": None, "title": None, "split": "train", "metric": None, "higher_is_better": None, "target": None,
    "id_column": None, "answers": "private/answers.csv", "time_budget_s": 60.0, "memory_mb": 4096,
    "grade_timeout_s": 120.0, "heavy": False,
}
GENERIC_STARTER = "generic_starter.py"  # in the task's cache dir: the starter written when the folder has none
GENERIC_REFERENCE = "generic_starter"  # its name among the references (`wmrl tasks check` runs it)
# (type, prediction kind) a built-in metric implies for the card
_TYPES = {"label": "multiclass", "probability": "binary", "real": "regression", "positive": "count",
          "risk": "survival"}


class TaskFolderError(ValueError):
    """A task folder (or competition) that cannot be used; ``problems`` lists every reason, each with its fix."""

    def __init__(self, where: str | Path, problems: list[str]) -> None:
        self.where, self.problems = str(where), list(problems)
        super().__init__(f"{where}: {len(problems)} problem(s):\n  - " + "\n  - ".join(problems))


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


# -- reading and validating ------------------------------------------------------------------------------
def _read_csv_head(path: Path, problems: list[str], what: str) -> list[list[str]] | None:
    """All rows of a CSV (header first) with the csv module, or ``None`` and a problem."""
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            rows = [row for row in csv.reader(f) if row]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        problems.append(f"{path}: {what} cannot be read as CSV ({type(exc).__name__}: {exc}); write it as UTF-8 CSV")
        return None
    if len(rows) < 2:
        problems.append(f"{path}: {what} needs a header and at least one row (it has {len(rows)} line(s))")
        return None
    return rows


def leaderboard_problems(path: Path) -> list[str]:
    rows = _read_csv_head(path, problems := [], "the leaderboard")
    if rows is None:
        return problems
    if "score" not in rows[0]:
        return [f"{path}: no `score` column (columns: {rows[0][:6]}); one row per entry, e.g. MLE-bench's "
                "scoreNullable,teamId,...,score"]
    column = rows[0].index("score")
    try:
        [float(row[column]) for row in rows[1:] if len(row) > column and row[column] != ""]
    except ValueError as exc:
        return [f"{path}: `score` must be numeric ({exc})"]
    return []


def _script_problems(path: Path) -> list[str]:
    try:
        compile(path.read_text(), str(path), "exec")
    except (SyntaxError, ValueError, UnicodeDecodeError) as exc:
        return [f"{path}: does not compile ({type(exc).__name__}: {exc}); fix the script or remove it"]
    return []


def grade_problems(path: Path, function: str) -> list[str]:
    try:
        tree = ast.parse(path.read_text(), str(path))
    except (SyntaxError, ValueError, UnicodeDecodeError) as exc:
        return [f"{path}: does not compile ({type(exc).__name__}: {exc})"]
    names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    if function not in names:
        return [f"{path}: defines no function `{function}(submission, answers) -> float` "
                f"(top-level functions: {sorted(names) or 'none'})"]
    return []


def submission_checks(
    sample: Path, answers: Path, id_column: str | None, problems: list[str]
) -> tuple[str, tuple[str, ...], list[str]] | None:
    """The sample's id column and columns, and the answers' columns; checks the ids of both files agree."""
    sample_rows = _read_csv_head(sample, problems, "sample_submission.csv")
    answer_rows = _read_csv_head(answers, problems, "the answers file") if answers.is_file() else None
    if not answers.is_file():
        problems.append(f"{answers}: the hidden answers are missing; put them there (never under public/)")
    if sample_rows is None or answer_rows is None:
        return None
    columns = tuple(sample_rows[0])
    id_col = id_column or columns[0]
    if id_col not in columns:
        problems.append(f"{sample}: has no id column {id_col!r} (columns {list(columns)}); fix task.yaml id_column")
        return None
    if id_col not in answer_rows[0]:
        problems.append(f"{answers}: has no id column {id_col!r} (columns {answer_rows[0][:8]}); "
                        "the answers need the ids of sample_submission.csv")
        return None
    i, j = columns.index(id_col), answer_rows[0].index(id_col)
    sample_ids = [row[i] for row in sample_rows[1:] if len(row) > i]
    answer_ids = {row[j] for row in answer_rows[1:] if len(row) > j}
    if len(set(sample_ids)) != len(sample_ids):
        problems.append(f"{sample}: repeats ids in {id_col!r}; one row per test row")
    if set(sample_ids) != answer_ids:
        missing, extra = len(set(sample_ids) - answer_ids), len(answer_ids - set(sample_ids))
        problems.append(f"{answers}: its {id_col!r} values differ from sample_submission.csv's ({missing} ids "
                        f"without an answer, {extra} answers without a row); both must list the same test rows")
    return id_col, columns, list(answer_rows[0])


def public_leaks(public_dir: Path, answers: Path) -> list[str]:
    """A public file identical to the answers, or the answers under public/: the answers would be readable."""
    if not answers.is_file() or not public_dir.is_dir():
        return []
    if public_dir.resolve() in answers.resolve().parents:
        return [f"{answers}: the answers lie under public/, which every sandbox receives; move them to private/"]
    digest = _sha256(answers)
    same = [p for p in public_dir.rglob("*") if p.is_file() and p.stat().st_size == answers.stat().st_size
            and _sha256(p) == digest]
    return [f"{p}: is a copy of the hidden answers; remove it from public/" for p in same]


def metric_checks(
    metric: str | None, grade: Path | None, higher_is_better: Any, target: Any, columns: tuple[str, ...] | None,
    answer_columns: list[str] | None, id_col: str | None, problems: list[str], where: Path,
    target_fix: str = "set task.yaml target to the scored column(s)",
) -> tuple[tuple[str, ...], str]:
    """The target columns and the card's type; every problem of the metric / grader choice (``target_fix`` says
    how a wrong target is fixed where the task is declared)."""
    from wmrl.autoresearch.tasks.metrics import METRICS

    if metric is not None and grade is not None:
        problems.append(f"{where}: names metric {metric!r} and has {grade.name}; keep one (a built-in metric, or "
                        "your grade.py with higher_is_better)")
        return (), "custom"
    if grade is not None:
        if not isinstance(higher_is_better, bool):
            problems.append(f"{where}: higher_is_better must be true or false with {grade.name} (got "
                            f"{higher_is_better!r}): the grader's scores say nothing of their direction")
        return (), "custom"
    if metric is None:
        problems.append(f"{where}: no metric and no grade.py; set `metric:` to one of {', '.join(METRICS)} or add "
                        "grade.py with grade(submission, answers) -> float")
        return (), "custom"
    if metric not in METRICS:
        close = difflib.get_close_matches(str(metric), METRICS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        problems.append(f"{where}: metric {metric!r} is not built in{hint}; choose one of {', '.join(METRICS)} or "
                        "write grade.py")
        return (), "custom"
    kind = METRICS[metric].prediction
    if higher_is_better is not None and higher_is_better != METRICS[metric].higher_is_better:
        problems.append(f"{where}: higher_is_better {higher_is_better} contradicts metric {metric} "
                        f"({'higher' if METRICS[metric].higher_is_better else 'lower'} is better); drop the key")
    if columns is None or answer_columns is None:
        return (), _TYPES[kind]
    if len(columns) != 2:
        problems.append(f"sample_submission.csv has columns {list(columns)}; a built-in metric reads two: the id "
                        "and one prediction column (write grade.py for other formats)")
        return (), _TYPES[kind]
    if target is None:
        targets = tuple(c for c in answer_columns if c != id_col)
        if kind != "risk" and columns[1] in answer_columns:
            targets = (columns[1],)  # MLE-bench style: the answers name the target like the submission
    else:
        targets = (target,) if isinstance(target, str) else tuple(target)
    needed = 2 if kind == "risk" else 1
    unknown = [t for t in targets if t not in answer_columns]
    if unknown:
        problems.append(f"target {unknown} not among the answers' columns {answer_columns[:8]}; {target_fix}")
    elif len(targets) != needed:
        what = "time and event" if kind == "risk" else "one column"
        problems.append(f"metric {metric} scores {what}; the answers give {list(targets)} besides the id: "
                        f"{target_fix}" + (" ([time, event])" if kind == "risk" else ""))
    return targets, _TYPES[kind]


def load_folder(path: str | Path) -> TaskSpec:
    """The task in folder ``path`` (wmrl's layout); every problem at once in a :class:`TaskFolderError`."""
    import yaml

    root = Path(path).expanduser().resolve()
    if not root.is_dir():
        raise TaskFolderError(root, [f"{root}: not a directory; give the folder holding {TASK_FILE}"])
    problems: list[str] = []
    card: dict[str, Any] = {}
    task_file = root / TASK_FILE
    if not task_file.is_file():
        problems.append(f"{task_file}: missing; write the card (at least `metric:` or a grade.py, see docs/tasks.md)")
    else:
        try:
            loaded = yaml.safe_load(task_file.read_text()) or {}
        except yaml.YAMLError as exc:
            loaded = {}
            problems.append(f"{task_file}: not valid YAML ({exc})")
        if not isinstance(loaded, dict):
            problems.append(f"{task_file}: must be a mapping of keys (got {type(loaded).__name__})")
            loaded = {}
        for key in loaded:
            if key not in DEFAULTS:
                close = difflib.get_close_matches(str(key), DEFAULTS, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                problems.append(f"{task_file}: unknown key {key!r}{hint}; the keys are {', '.join(DEFAULTS)}")
        card = loaded
    c = {**DEFAULTS, **{k: v for k, v in card.items() if k in DEFAULTS}}
    task_id = c["id"] if c["id"] is not None else root.name
    if not isinstance(task_id, str) or not ID_PATTERN.match(task_id):
        problems.append(f"{task_file}: id {task_id!r} must be lowercase letters, digits, '_' or '-' (at most 64), "
                        "starting with a letter or digit; set `id:` (it defaults to the folder's name)")
    if c["split"] not in SPLITS:
        problems.append(f"{task_file}: split {c['split']!r} must be one of {', '.join(SPLITS)}")
    for key, low in (("time_budget_s", 0), ("memory_mb", 63), ("grade_timeout_s", 0)):
        if not isinstance(c[key], (int, float)) or isinstance(c[key], bool) or c[key] <= low:
            problems.append(f"{task_file}: {key} must be a number > {low} (got {c[key]!r})")
    if not isinstance(c["heavy"], bool):
        problems.append(f"{task_file}: heavy must be true or false (got {c['heavy']!r})")
    description = root / "description.md"
    if not description.is_file() or not description.read_text().strip():
        problems.append(f"{description}: missing or empty; describe the task (what is predicted, and why)")
    public = root / "public"
    sample = public / "sample_submission.csv"
    if not public.is_dir():
        problems.append(f"{public}: missing; put the files a solution may read there, with sample_submission.csv")
    elif not sample.is_file():
        problems.append(f"{sample}: missing; write the exact submission format (the ids and a placeholder)")
    answers = root / str(c["answers"])
    checked = submission_checks(sample, answers, c["id_column"], problems) if sample.is_file() else None
    if not sample.is_file() and not answers.is_file():
        problems.append(f"{answers}: the hidden answers are missing; put them there (never under public/)")
    problems += public_leaks(public, answers)
    grade = root / "grade.py"
    grade = grade if grade.is_file() else None
    if grade is not None:
        problems += grade_problems(grade, "grade")
    id_col, columns, answer_columns = checked if checked is not None else (None, None, None)
    target, task_type = metric_checks(c["metric"], grade, c["higher_is_better"], c["target"], columns,
                                       answer_columns, id_col, problems, task_file)
    leaderboard = root / "leaderboard.csv"
    leaderboard = leaderboard if leaderboard.is_file() else None
    references = root / "references"
    references = references if references.is_dir() and any(references.glob("*.py")) else None
    starter = root / "starter.py"
    starter = starter if starter.is_file() else None
    if leaderboard is not None:
        problems += leaderboard_problems(leaderboard)
    elif references is None:
        problems.append(f"{root}: no leaderboard.csv and no references/*.py; a reward is a leaderboard position: add "
                        "leaderboard.csv (a `score` column) or reference solutions and run `wmrl tasks build ID "
                        "--record`")
    for script in [*([starter] if starter else []), *(sorted(references.glob("*.py")) if references else [])]:
        problems += _script_problems(script)
    if problems:
        raise TaskFolderError(root, problems)
    from wmrl.autoresearch.tasks.metrics import METRICS

    higher = c["higher_is_better"] if grade is not None else METRICS[c["metric"]].higher_is_better
    if grade is not None and c["target"] is None:  # what grade.py scores, as the public files say
        target, task_type = inferred_target(public, id_col, columns, None)
    source = FolderSource(
        kind="folder", root=root, public_dir=public, answers=answers, description=description,
        grade_script=grade, grade_function="grade", leaderboard=leaderboard, references_dir=references,
        starter=starter, id_column=id_col, submission_columns=columns, higher_is_better=bool(higher),
        grade_timeout_s=float(c["grade_timeout_s"]), private_roots=hidden_roots(root, answers),
    )
    return folder_spec(task_id, c["split"], c["title"] or overview_title(description, task_id), c["metric"] or GRADE_METRIC,
                 task_type, target, source, float(c["time_budget_s"]), int(c["memory_mb"]), bool(c["heavy"]), "folder")


def inferred_target(
    public: Path, id_column: str, columns: tuple[str, ...], grader_name: str | None
) -> tuple[tuple[str, ...], str]:
    """The target column(s) and type of a task that its own ``grade.py`` scores, as its public files say (the
    card, the prompt's data dictionary and the generic starter use them); ``((), "custom")`` when they do not."""
    from wmrl.autoresearch.tasks.starter import infer_prediction

    try:
        prediction = infer_prediction(public, id_column, columns, grader_name=grader_name)
    except (OSError, ValueError, KeyError):  # an unreadable train.csv: the task still grades, the card stays plain
        return (), "custom"
    return prediction.targets, prediction.task_type


def folder_spec(task_id, split, title, metric, task_type, target, source, budget, memory, heavy, package) -> TaskSpec:
    return TaskSpec(
        id=task_id, split=split, package=package, loader=str(source.root), version="", type=task_type,
        target=tuple(target), metric=metric, title=title, goal="", load=_no_loader, time_budget_s=budget,
        memory_mb=memory, heavy=heavy, folder=source,
    )


def hidden_roots(root: Path, answers: Path, *more: Path) -> tuple[Path, ...]:
    """The folder, the answers' folder when it lies elsewhere (``answers: ../hidden/answers.csv``), and ``more``."""
    roots = [root, *more]
    if not any(r == answers.parent or r in answers.parents for r in roots):
        roots.append(answers.parent)
    return tuple(roots)


def _no_loader():
    raise TypeError("a folder task's data are its files, not a loader (wmrl.autoresearch.tasks.folder)")


def overview_title(description: Path, fallback: str) -> str:
    if description.is_file():
        for line in description.read_text().splitlines():
            if line.startswith("# "):
                return line[2:].strip()
    return fallback


def is_task_folder(path: Path) -> bool:
    return (path / TASK_FILE).is_file()


def is_competition(path: Path) -> bool:
    return (path / "config.yaml").is_file()


# -- building the card and the prompt --------------------------------------------------------------------
def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


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
    data = {f"public/{p.relative_to(source.public_dir).as_posix()}": _sha256(p)
            for p in sorted(source.public_dir.rglob("*")) if p.is_file()}
    data["private/answers"] = _sha256(source.answers)
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
    kind and target, else what the public files and the grader's name say."""
    from wmrl.autoresearch.tasks.metrics import METRICS
    from wmrl.autoresearch.tasks.starter import infer_prediction

    source = spec.folder
    kind = METRICS[spec.metric].prediction if source.grade_script is None else None
    return infer_prediction(source.public_dir, source.id_column, source.submission_columns, kind, spec.target,
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
