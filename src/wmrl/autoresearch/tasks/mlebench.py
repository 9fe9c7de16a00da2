"""MLE-bench competitions read in MLE-bench's own layout, as folder tasks.

``<competitions>/<id>/`` holds ``config.yaml``, ``description.md``, ``grade.py`` and ``leaderboard.csv``; the
prepared data lie under ``<data>/<id>/prepared/public`` and ``prepared/private``. :func:`load_competition` maps
them onto a :class:`~wmrl.autoresearch.tasks.spec.TaskSpec` whose :class:`~wmrl.autoresearch.tasks.folder_source.FolderSource` says where
everything is. One file of wmrl's own is read beside ``config.yaml`` when present: ``starter.py`` (the starter
the prompt shows; without one wmrl writes a generic baseline, :mod:`wmrl.autoresearch.tasks.starter`).

MLE-bench's ``config.yaml`` has no direction key: a competition graded by its own ``grade.py`` takes its direction
from the leaderboard's order (best first, as MLE-bench's ``Grader.is_lower_better`` reads it); one graded by a
built-in metric takes the metric's. Its ``grader.name`` is free text (MLE-bench has dozens of custom ones), so with
a ``grade.py`` it is only shown and used as a hint; a name that looks like a misspelt known one is noted.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from wmrl.autoresearch.tasks import folder_checks as checks
from wmrl.autoresearch.tasks.folder_source import FolderSource
from wmrl.autoresearch.tasks.spec import TaskSpec

#: MLE-bench's grader names (``config.yaml`` ``grader.name``) that a built-in metric computes exactly
MLEBENCH_METRICS = {
    "accuracy": "accuracy", "auc-roc": "roc_auc", "roc-auc": "roc_auc", "macro-f1-score": "macro_f1",
    "root-mean-squared-error": "rmse", "rmse": "rmse", "mean-absolute-error": "mae", "mae": "mae",
    "log-loss": "log_loss", "logloss": "log_loss",
}
#: other grader names MLE-bench's competitions use (their own grade.py computes them): a name close to one of these
#: or of :data:`MLEBENCH_METRICS` but equal to none is noted as a likely misspelling
KNOWN_NAMES = (*MLEBENCH_METRICS, "multi-class-log-loss", "mean-column-wise-auc", "mean-column-wise-roc-auc",
               "quadratic-weighted-kappa", "root-mean-squared-log-error", "mean-absolute-percentage-error",
               "weighted-f1-score", "micro-f1-score", "f1-score", "r2-score", "map@3", "map@5", "jaccard",
               "dice-coefficient", "spearman-correlation", "pearson-correlation", "normalized-gini")
DEFAULT_BUDGET_S = 600.0  # MLE-bench has no per-run budget; the paper runs 600-1200 s


def load_competition(
    competition_dir: str | Path, data_dir: str | Path, split: str = "heldout", time_budget_s: float = DEFAULT_BUDGET_S
) -> TaskSpec:
    """One MLE-bench competition (``<competitions>/<id>/``) with its prepared data (``<data>/<id>/prepared/``).

    The overview is ``description.md``; the public files are ``prepared/public``; the answers are
    ``config.yaml``'s ``dataset.answers`` (relative to the data dir); the grader is the competition's own
    ``grade.py`` (``grader.grade_fn``'s function), or, without one, the built-in metric that ``grader.name``
    names; the leaderboard is ``leaderboard.csv``; position = the share of the leaderboard beaten. Every problem
    is reported at once (:class:`~wmrl.autoresearch.tasks.folder_checks.TaskFolderError`), each naming its file, key and fix.
    """
    import yaml

    root = Path(competition_dir).expanduser().resolve()
    data = Path(data_dir).expanduser().resolve()
    problems: list[str] = []
    config_path = root / "config.yaml"
    try:
        config = yaml.safe_load(config_path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise checks.TaskFolderError(
            root, [f"{config_path}: cannot be read ({exc}); an MLE-bench competition has one"]) from None
    if not isinstance(config, dict):
        raise checks.TaskFolderError(root, [f"{config_path}: must be a mapping (got {type(config).__name__})"])
    task_id = str(config.get("id", root.name))
    problems += checks.identity_problems(task_id, split, config_path,
                                         "correct `id:` (it defaults to the folder's name)", "--split")
    dataset = config.get("dataset") or {}
    grader = config.get("grader") or {}
    prepared = data / task_id / "prepared"
    public = prepared / "public"
    prepare = f"`mlebench prepare -c {task_id} --data-dir {data}`"
    if not public.is_dir() or not (prepared / "private").is_dir():
        problems.append(f"{prepared}: no prepared/public and prepared/private; prepare the competition first "
                        f"({prepare}, or write them yourself)")
    for key in ("answers", "sample_submission"):
        if key not in dataset:
            problems.append(f"{config_path}: dataset.{key} is missing; add it (a path relative to the data dir, e.g. "
                            f"{task_id}/prepared/{'private/test.csv' if key == 'answers' else 'public/sample_submission.csv'})")
    answers = data / str(dataset.get("answers", f"{task_id}/prepared/private/test.csv"))
    sample = data / str(dataset.get("sample_submission", f"{task_id}/prepared/public/sample_submission.csv"))
    description = root / "description.md"
    problems += checks.description_problems(description, "MLE-bench competitions ship their overview there")
    id_col, columns, answer_columns = checks.data_checks(
        public, sample, answers, None,
        f"missing (config.yaml dataset.sample_submission, relative to {data}); prepare the competition ({prepare}) "
        "or correct the path" if "sample_submission" in dataset else None, problems)
    function = str(grader.get("grade_fn", ":grade")).rpartition(":")[2] or "grade"
    grade = checks.existing(root / "grade.py")
    name = grader.get("name")
    notes: list[str] = []
    metric = None
    if grade is not None:
        problems += checks.grade_problems(grade, function)
        notes += _name_notes(name, config_path)
    else:
        metric = MLEBENCH_METRICS.get(str(name or "").lower())
        if metric is None:
            close = difflib.get_close_matches(str(name or "").lower(), MLEBENCH_METRICS, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(f"{config_path}: grader.name {name!r} is none of the metrics wmrl computes itself{hint} "
                            f"({', '.join(MLEBENCH_METRICS)}); correct it, or put the competition's grade.py beside "
                            "config.yaml")
    leaderboard = root / "leaderboard.csv"
    problems += checks.leaderboard_checks(checks.existing(leaderboard), f"{leaderboard}: missing; MLE-bench "
                                          "competitions ship Kaggle's final leaderboard (a `score` column, best first)")
    target, task_type = (), "custom"
    if metric is not None:
        target, task_type = checks.metric_checks(
            metric, None, None, None, columns, answer_columns, id_col, problems, config_path,
            target_fix="the answers (config.yaml dataset.answers) must hold the scored column, named as in "
                       "sample_submission.csv")
    if problems:
        raise checks.TaskFolderError(root, problems)
    from wmrl.autoresearch.tasks.metrics import METRICS

    if grade is not None:
        higher = _leaderboard_direction(leaderboard)
        target, task_type = checks.inferred_target(public, id_col, columns, str(name) if name else None)
    else:
        higher = METRICS[metric].higher_is_better
    source = FolderSource(
        kind="mlebench", root=root, public_dir=public, answers=answers, description=description,
        grade_script=grade, grade_function=function, leaderboard=leaderboard, references_dir=None,
        starter=checks.existing(root / "starter.py"), id_column=id_col, submission_columns=columns,
        higher_is_better=higher, grade_timeout_s=120.0,
        private_roots=checks.hidden_roots(root, answers, data / task_id),
        grader_name=str(name) if name else None, notes=tuple(notes),
    )
    title = str(config.get("name") or checks.overview_title(description, task_id))
    shown = metric or (f"{name} (grade.py)" if name else "grade.py")
    return checks.folder_spec(task_id, split, title, shown, task_type, target, source, float(time_budget_s), 4096,
                              False, "mle-bench")


def is_competition(path: Path) -> bool:
    """Whether ``path`` is a competition's folder in MLE-bench's layout (it holds ``config.yaml``)."""
    return (path / "config.yaml").is_file()


def _leaderboard_direction(leaderboard: Path) -> bool:
    """Whether higher is better, from the leaderboard's order (best first): MLE-bench's ``is_lower_better`` is
    ``score[0] < score[-1]``; a leaderboard whose first and last scores are equal reads as higher is better."""
    import pandas as pd

    scores = pd.read_csv(leaderboard)["score"].dropna().astype(float)
    return not bool(len(scores) and scores.iloc[0] < scores.iloc[-1])


def _name_notes(name, config_path: Path) -> list[str]:
    """A note when a ``grade.py`` competition's grader name looks like a misspelt known name (it only shows)."""
    text = str(name or "").lower()
    if not text or text in KNOWN_NAMES:
        return []
    close = difflib.get_close_matches(text, KNOWN_NAMES, n=1, cutoff=0.8)
    if not close:
        return []  # a custom metric: MLE-bench has many
    return [f"{config_path}: grader.name {name!r} is not a name MLE-bench uses (did you mean {close[0]!r}?); "
            "grade.py grades it either way, the name is shown and hints what it scores"]
