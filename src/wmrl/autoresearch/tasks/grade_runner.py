"""Run a task author's ``grade.py`` on one submission, in a process of its own (``python -m wmrl.autoresearch.tasks.grade_runner``).

The author's grader is trusted code, but it must neither hang nor crash the host that grades every rollout:
:func:`run_grader` starts this module with a time limit and reads back one JSON object, ``{"score": x}``,
``{"invalid": message}`` (the grader raised ``InvalidSubmissionError``, MLE-bench's convention, matched by
class name: the submission's fault) or ``{"error": message}`` (anything else: :class:`GraderFailed`, whose fault
the caller decides by grading the task's sample submission).

``grade.py`` is loaded as a module of a package rooted at its folder, so a competition's relative imports
(``from .classes import CLASSES``) resolve as they do inside MLE-bench. The submission and the answers are read
as MLE-bench reads them (``pandas.read_csv(..., float_precision="round_trip")``; ``.jsonl`` answers as a list
of records).
"""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
import tempfile
import traceback
import types
from dataclasses import dataclass
from pathlib import Path

from wmrl.autoresearch.contracts import TaskGrader

_PACKAGE = "_wmrl_task_grader"
INVALID = "InvalidSubmissionError"


@dataclass(frozen=True)
class GraderVerdict:
    """What the author's grader said: a score, or why the submission is invalid (exactly one is set)."""

    score: float | None = None
    invalid: str | None = None


class GraderFailed(RuntimeError):
    """The author's grader crashed, hung or printed no verdict on one submission. The grader decides who is at
    fault (:func:`wmrl.autoresearch.environments.grader.grader_self_test`): the submission when the task's own sample
    submission grades, the task (an infrastructure error, never a reward) when it does not.

    ``what`` names the failure without quoting the grader's message (which may quote the answers): the
    exception's class, ``timeout``, ``no verdict`` or ``not a number``.
    """

    def __init__(self, message: str, what: str) -> None:
        super().__init__(message)
        self.what = what


def _load(script: Path, function: str) -> TaskGrader:
    package = types.ModuleType(_PACKAGE)
    package.__path__ = [str(script.parent)]
    sys.modules[_PACKAGE] = package
    spec = importlib.util.spec_from_file_location(f"{_PACKAGE}.{script.stem}", script)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return getattr(module, function)


def _read_answers(path: Path):
    import pandas as pd

    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return pd.read_csv(path, float_precision="round_trip")


def main(argv: list[str]) -> int:
    script, function, submission, answers, out = argv
    import pandas as pd

    try:
        grade = _load(Path(script), function)
        score = grade(pd.read_csv(submission, float_precision="round_trip"), _read_answers(Path(answers)))
        verdict = {"score": float(score)}
    except Exception as exc:  # noqa: BLE001 - every failure is reported, classified by the parent
        name = type(exc).__name__
        key = "invalid" if name == INVALID else "error"
        verdict = {key: f"{name}: {exc}"[:2000], "traceback": traceback.format_exc()[-4000:]}
    Path(out).write_text(json.dumps(verdict))
    return 0


def run_grader(script: Path, function: str, submission: bytes, answers: Path, timeout_s: float) -> GraderVerdict:
    """Grade ``submission`` with the author's ``script`` in a child process; :class:`GraderFailed` on a crash,
    a hang past ``timeout_s`` or a score that is not a number. A score that is not finite is the submission's
    doing (as with the built-in metrics: predictions that overflow it), so it is an invalid submission."""
    with tempfile.TemporaryDirectory(prefix="wmrl-grade-") as tmp:
        sub, out = Path(tmp) / "submission.csv", Path(tmp) / "verdict.json"
        sub.write_bytes(submission)
        argv = [sys.executable, "-m", "wmrl.autoresearch.tasks.grade_runner", str(script), function, str(sub), str(answers), str(out)]
        try:
            done = subprocess.run(argv, cwd=tmp, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise GraderFailed(f"{script} did not finish within grade_timeout_s = {timeout_s:g} s",
                               f"no verdict within grade_timeout_s = {timeout_s:g} s") from None
        if not out.is_file():
            raise GraderFailed(f"{script} exited with code {done.returncode} and no verdict: {done.stderr[-1000:]}",
                               f"exit code {done.returncode} without a verdict")
        verdict = json.loads(out.read_text())
    if "invalid" in verdict:
        return GraderVerdict(invalid=verdict["invalid"])
    if "error" in verdict:
        raise GraderFailed(f"{script} raised {verdict['error']}\n{verdict.get('traceback', '')}",
                           verdict["error"].split(":", 1)[0])
    score = verdict["score"]
    if not isinstance(score, (int, float)):
        raise GraderFailed(f"{script} returned {score!r}, not a number", "a score that is not a number")
    if not math.isfinite(score):
        return GraderVerdict(invalid=f"the task's grader scored it {score}: predictions overflow the metric")
    return GraderVerdict(score=float(score))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
