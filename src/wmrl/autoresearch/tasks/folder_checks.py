"""The checks a task folder (:mod:`wmrl.autoresearch.tasks.folder`) and an MLE-bench competition (:mod:`wmrl.autoresearch.tasks.mlebench`)
share, each written once: every check appends problems that name the file (or key) and the fix, so that a loader
reports them all at once in one :class:`TaskFolderError`; and the helpers both loaders assemble a
:class:`~wmrl.autoresearch.tasks.spec.TaskSpec` with.
"""

from __future__ import annotations

import ast
import csv
import difflib
import re
from pathlib import Path
from typing import Any

from wmrl.autoresearch.tasks.build import sha256_file
from wmrl.autoresearch.tasks.spec import SPLITS, TaskSpec

ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
# (type, prediction kind) a built-in metric implies for the card
_TYPES = {"label": "multiclass", "probability": "binary", "real": "regression", "positive": "count",
          "risk": "survival"}


class TaskFolderError(ValueError):
    """A task folder (or competition) that cannot be used; ``problems`` lists every reason, each with its fix."""

    def __init__(self, where: str | Path, problems: list[str]) -> None:
        self.where, self.problems = str(where), list(problems)
        super().__init__(f"{where}: {len(problems)} problem(s):\n  - " + "\n  - ".join(problems))


def identity_problems(task_id: Any, split: str, where: Path, id_fix: str, split_where: str) -> list[str]:
    """The task's id (set in ``where``, corrected as ``id_fix`` says) and its split (set in ``split_where``)."""
    problems = []
    if not isinstance(task_id, str) or not ID_PATTERN.match(task_id):
        problems.append(f"{where}: id {task_id!r} must be lowercase letters, digits, '_' or '-' (at most 64), "
                        f"starting with a letter or digit; {id_fix}")
    if split not in SPLITS:
        problems.append(f"{split_where}: split {split!r} must be one of {', '.join(SPLITS)}")
    return problems


def existing(path: Path) -> Path | None:
    """``path`` when the file is there (an optional part of a task: grade.py, leaderboard.csv, starter.py)."""
    return path if path.is_file() else None


def description_problems(description: Path, fix: str) -> list[str]:
    """The overview the agent reads: it must be there and say something."""
    if not description.is_file() or not description.read_text().strip():
        return [f"{description}: missing or empty; {fix}"]
    return []


def data_checks(
    public: Path, sample: Path, answers: Path, id_column: str | None, sample_missing: str | None, problems: list[str]
) -> tuple[str | None, tuple[str, ...] | None, list[str] | None]:
    """The sample submission and the answers (:func:`submission_checks`), and no answers readable from
    ``public/`` (:func:`public_leaks`): the id column, the submission's and the answers' columns (``None`` when
    they could not be read). ``sample_missing`` is the fix for a missing sample (``None``: reported elsewhere)."""
    checked = submission_checks(sample, answers, id_column, problems) if sample.is_file() else None
    if not sample.is_file():
        if sample_missing is not None:
            problems.append(f"{sample}: {sample_missing}")
        if not answers.is_file():
            problems.append(f"{answers}: the hidden answers are missing; put them there (never under public/)")
    problems += public_leaks(public, answers)
    return checked if checked is not None else (None, None, None)


def leaderboard_checks(leaderboard: Path | None, missing: str | None) -> list[str]:
    """A leaderboard file's problems; without one, ``missing`` (the problem and its fix; ``None``: it may lack one)."""
    if leaderboard is not None:
        return leaderboard_problems(leaderboard)
    return [missing] if missing is not None else []


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


def script_problems(path: Path) -> list[str]:
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
    digest = sha256_file(answers)
    same = [p for p in public_dir.rglob("*") if p.is_file() and p.stat().st_size == answers.stat().st_size
            and sha256_file(p) == digest]
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
    raise TypeError("a folder task's data are its files, not a loader (wmrl.autoresearch.tasks.folder_task)")


def overview_title(description: Path, fallback: str) -> str:
    if description.is_file():
        for line in description.read_text().splitlines():
            if line.startswith("# "):
                return line[2:].strip()
    return fallback
