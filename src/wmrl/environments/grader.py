"""Grading: turn what a sandbox observed into an :class:`~wmrl.types.Outcome`, outside the sandbox.

The order of checks mirrors what a real run reveals first: the sandbox failing (infra, no reward), a
tripwire (flagged), the time limit, a crash, then the submission: present, well-formed, every test id once,
predictions of the right kind, then the hidden-answer metric and the leaderboard position. A grader crash is
an infrastructure failure (missing), never a reward of 0.
"""

from __future__ import annotations

import io
import logging
import math
import re
import traceback

from wmrl.algorithms.reward import ladder_reward, leaderboard_position
from wmrl.environments.sandbox.base import ExecutionResult
from wmrl.tasks.build import BuiltTask
from wmrl.types import Outcome, Source, Status

log = logging.getLogger(__name__)

_VALIDATION = re.compile(r"VALIDATION_SCORE\s*=\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf)")
_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*)(:\s.*)?$")
_EXCEPTION_SUFFIXES = ("Error", "Exception", "Exit", "Interrupt", "Warning", "Iteration")
_FEEDBACK_LINES = 40


def check_script(script: str | None) -> Outcome | None:
    """The deterministic gate: ``malformed`` (no code) or ``syntax_err`` without running anything.

    >>> check_script("").status.value, check_script("x = (").status.value, check_script("x = 1") is None
    ('malformed', 'syntax_err', True)
    """
    if script is None or not script.strip():
        return Outcome(Status.MALFORMED, 0.0, feedback="No code was given: nothing to run.", error="no code")
    try:
        compile(script, "solution.py", "exec")
    except (SyntaxError, ValueError) as exc:  # ValueError: source with null bytes
        feedback = "".join(traceback.format_exception_only(type(exc), exc)).rstrip()
        return Outcome(Status.SYNTAX_ERR, 0.0, feedback=feedback, error=type(exc).__name__)
    return None


def validation_score(stdout: str) -> float | None:
    """The last ``VALIDATION_SCORE=<float>`` the script printed, if any.

    >>> validation_score("fold 1\\nVALIDATION_SCORE=0.81\\nVALIDATION_SCORE = 0.83\\n")
    0.83
    """
    found = _VALIDATION.findall(stdout)
    if not found:
        return None
    value = float(found[-1])
    return value if math.isfinite(value) else None


def _last_exception(stderr: str) -> str | None:
    for line in reversed(stderr.strip().splitlines()):
        m = _EXCEPTION_LINE.match(line.strip())
        if m and not line.startswith(" ") and (m.group(2) or m.group(1).endswith(_EXCEPTION_SUFFIXES)):
            return m.group(1)
    return None


def _tail(text: str, lines: int = _FEEDBACK_LINES) -> str:
    kept = text.strip("\n").splitlines()
    return "\n".join(kept[-lines:])


def _outcome(status: Status, result: ExecutionResult, stdout: str, feedback: str, **kw) -> Outcome:
    return Outcome(
        status=status,
        reward=ladder_reward(status, kw.pop("position", None)) if status is not Status.VALID else kw.pop("reward"),
        feedback=feedback,
        wall_seconds=result.wall_seconds,
        source=Source.REAL,
        validation_score=validation_score(stdout),
        stdout_tail=stdout,
        stderr_tail=result.stderr_tail,
        **kw,
    )


def grade(task: BuiltTask, result: ExecutionResult) -> Outcome:
    """The outcome of one execution of a solution for ``task``."""
    stdout = result.stdout_tail
    secs = f"{result.wall_seconds:.1f} s"
    if result.infra_error is not None:
        return Outcome(
            Status.INFRA_ERROR,
            None,
            feedback="The execution environment failed before the script could finish; this run is not scored.",
            wall_seconds=result.wall_seconds,
            error=f"infra: {result.infra_error}"[:2000],
            stdout_tail=stdout,
            stderr_tail=result.stderr_tail,
        )
    if result.tripwires:
        return _outcome(
            Status.FLAGGED,
            result,
            stdout,
            "Execution stopped: the script accessed something it may not ("
            + "; ".join(result.tripwires)
            + "). Solutions may only read the files in public/ and write in the working directory.",
            flags=tuple(result.tripwires),
            error="tripwire",
        )
    budget = task.spec.time_budget_s
    if result.timed_out:
        return _outcome(
            Status.TIMEOUT,
            result,
            stdout,
            f"{_tail(stdout, 10)}\nTimeoutError: the script was killed after {budget:.0f} s (its time budget).".lstrip(),
            error="timeout",
        )
    if result.exit_code != 0:
        exc = _last_exception(result.stderr_tail)
        if result.exit_code is not None and result.exit_code < 0:
            exc = exc or f"killed by signal {-result.exit_code}"
            hint = " (a resource limit: memory, CPU time, file size or processes)"
        else:
            hint = ""
        feedback = _tail(result.stderr_tail) or "(no output on stderr)"
        feedback += f"\nProcess exited with code {result.exit_code}{hint} after {secs}."
        return _outcome(Status.RUNTIME_ERR, result, stdout, feedback, error=exc or f"exit code {result.exit_code}")
    try:
        return _grade_submission(task, result, stdout, secs)
    except Exception as exc:  # noqa: BLE001 - a grader bug must not become a reward
        log.exception("grader crashed on task %s", task.id)
        return Outcome(
            Status.INFRA_ERROR,
            None,
            feedback="The grader failed; this run is not scored.",
            wall_seconds=result.wall_seconds,
            error=f"infra: grader crashed: {type(exc).__name__}: {exc}"[:2000],
            stdout_tail=stdout,
            stderr_tail=result.stderr_tail,
        )


def _no_sub(result: ExecutionResult, stdout: str, secs: str, why: str) -> Outcome:
    feedback = f"{_tail(stdout, 20)}\nThe script finished in {secs} but {why}".lstrip()
    return _outcome(Status.RAN_NO_SUB, result, stdout, feedback, error=why)


def _grade_submission(task: BuiltTask, result: ExecutionResult, stdout: str, secs: str) -> Outcome:
    import pandas as pd

    from wmrl.tasks.metrics import METRICS, validate_prediction

    if "submission.csv" in result.file_errors:
        return _no_sub(result, stdout, secs, f"submission.csv {result.file_errors['submission.csv']}.")
    raw = result.files.get("submission.csv")
    if raw is None:
        return _no_sub(result, stdout, secs, "wrote no submission.csv in the working directory.")
    try:
        sub = pd.read_csv(io.BytesIO(raw))
    except Exception as exc:  # noqa: BLE001 - any parse failure is the script's
        return _no_sub(result, stdout, secs, f"submission.csv could not be read as CSV ({type(exc).__name__}: {exc}).")
    if list(sub.columns) != ["id", "prediction"]:
        return _no_sub(
            result, stdout, secs, f"submission.csv has columns {list(sub.columns)}; expected ['id', 'prediction']."
        )
    answers = pd.read_csv(task.answers_path)
    expected = answers["id"]
    if len(sub) != len(expected):
        return _no_sub(result, stdout, secs, f"submission.csv has {len(sub)} rows; test.csv has {len(expected)}.")
    if sub["id"].duplicated().any():
        return _no_sub(result, stdout, secs, "submission.csv repeats some ids.")
    if not pd.api.types.is_integer_dtype(sub["id"]) or set(sub["id"]) != set(expected):
        return _no_sub(result, stdout, secs, "submission.csv ids do not match the ids in test.csv.")
    metric = METRICS[task.spec.metric]
    aligned = sub.set_index("id").loc[expected, "prediction"].reset_index(drop=True)
    prediction, problem = validate_prediction(metric, aligned, set(task.labels) if task.labels else None)
    if problem is not None:
        return _no_sub(result, stdout, secs, f"its predictions are invalid: {problem}")
    score = float(metric.fn(answers, prediction))
    if not math.isfinite(score):
        raise ValueError(f"metric {metric.name} returned {score}")
    if not task.leaderboard:
        raise ValueError(f"task {task.id} has no recorded leaderboard (wmrl tasks build {task.id} --record)")
    position = leaderboard_position(score, list(task.leaderboard.values()), metric.higher_is_better)
    feedback = (
        f"{_tail(stdout, 20)}\nThe script finished in {secs}. submission.csv: {len(sub)} rows, "
        "format valid; it was submitted for grading."
    ).lstrip()
    return _outcome(
        Status.VALID, result, stdout, feedback, reward=ladder_reward(Status.VALID, position), score=score, position=position
    )
