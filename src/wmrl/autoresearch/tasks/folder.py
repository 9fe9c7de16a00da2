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

Validation reports every problem of a folder at once (:class:`~wmrl.autoresearch.tasks.folder_checks.TaskFolderError`), each
naming the file and the fix; the checks a folder and a competition share are in :mod:`wmrl.autoresearch.tasks.folder_checks`.
What is loaded is a :class:`~wmrl.autoresearch.tasks.spec.TaskSpec` whose ``folder`` says where everything lies
(:class:`~wmrl.autoresearch.tasks.folder_source.FolderSource`); :mod:`wmrl.autoresearch.tasks.registry` finds folders and
:mod:`wmrl.autoresearch.tasks.suite` builds them (:mod:`wmrl.autoresearch.tasks.folder_task`).

**Trust model.** The task author's ``grade.py`` is trusted code: it runs on the host, outside the sandbox,
but in its own process with a time limit (``grade_timeout_s``). If it raises, crashes or hangs on a submission,
it is run on the task's own ``sample_submission.csv``: when it grades that, the failure is the submission's
(``ran_no_sub``, a reward on the ladder); only a grader that fails on its own sample is an infrastructure error
(missing, never a reward of 0; docs/security.md, "Grader exceptions"). The submission is hostile: its shape is checked against
``sample_submission.csv`` before any grader reads it, and an ``InvalidSubmissionError`` raised by the grader
(MLE-bench's convention, matched by class name) grades it as an invalid submission. Only ``public/`` is
copied into a sandbox; the whole task folder (and a competition's data dir) is forbidden to the solution.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from wmrl.autoresearch.tasks.folder_checks import (
    TaskFolderError,
    data_checks,
    description_problems,
    existing,
    folder_spec,
    grade_problems,
    hidden_roots,
    identity_problems,
    inferred_target,
    leaderboard_checks,
    metric_checks,
    overview_title,
    script_problems,
)
from wmrl.autoresearch.tasks.folder_source import TASK_FILE, FolderSource
from wmrl.autoresearch.tasks.spec import TaskSpec

GRADE_METRIC = "grade.py"  # the metric a task shows when its own grade.py scores it
DEFAULTS: dict[str, Any] = {
    "id": None, "title": None, "split": "train", "metric": None, "higher_is_better": None, "target": None,
    "id_column": None, "answers": "private/answers.csv", "time_budget_s": 60.0, "memory_mb": 4096,
    "grade_timeout_s": 120.0, "heavy": False,
}


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
    problems += identity_problems(task_id, c["split"], task_file, "set `id:` (it defaults to the folder's name)",
                                  str(task_file))
    for key, low in (("time_budget_s", 0), ("memory_mb", 63), ("grade_timeout_s", 0)):
        if not isinstance(c[key], (int, float)) or isinstance(c[key], bool) or c[key] <= low:
            problems.append(f"{task_file}: {key} must be a number > {low} (got {c[key]!r})")
    if not isinstance(c["heavy"], bool):
        problems.append(f"{task_file}: heavy must be true or false (got {c['heavy']!r})")
    description = root / "description.md"
    problems += description_problems(description, "describe the task (what is predicted, and why)")
    public = root / "public"
    sample = public / "sample_submission.csv"
    if not public.is_dir():
        problems.append(f"{public}: missing; put the files a solution may read there, with sample_submission.csv")
    answers = root / str(c["answers"])
    id_col, columns, answer_columns = data_checks(
        public, sample, answers, c["id_column"],
        "missing; write the exact submission format (the ids and a placeholder)" if public.is_dir() else None,
        problems)
    grade = existing(root / "grade.py")
    if grade is not None:
        problems += grade_problems(grade, "grade")
    target, task_type = metric_checks(c["metric"], grade, c["higher_is_better"], c["target"], columns,
                                       answer_columns, id_col, problems, task_file)
    leaderboard = existing(root / "leaderboard.csv")
    references = root / "references"
    references = references if references.is_dir() and any(references.glob("*.py")) else None
    starter = existing(root / "starter.py")
    problems += leaderboard_checks(leaderboard, None if references is not None else (
        f"{root}: no leaderboard.csv and no references/*.py; a reward is a leaderboard position: add "
        "leaderboard.csv (a `score` column) or reference solutions and run `wmrl tasks build ID --record`"))
    for script in [*([starter] if starter else []), *(sorted(references.glob("*.py")) if references else [])]:
        problems += script_problems(script)
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
    return folder_spec(task_id, c["split"], c["title"] or overview_title(description, task_id),
                       c["metric"] or GRADE_METRIC, task_type, target, source, float(c["time_budget_s"]),
                       int(c["memory_mb"]), bool(c["heavy"]), "folder")


def is_task_folder(path: Path) -> bool:
    return (path / TASK_FILE).is_file()
