"""Grading: turn what a sandbox observed into an :class:`~wmrl.types.Outcome`, outside the sandbox.

The order of checks mirrors what a real run reveals first: the sandbox failing (infra, no reward), a
tripwire (flagged), the time limit, a crash, then the submission: present, well-formed, every test id once,
predictions of the right kind, then the hidden-answer metric and the leaderboard position. An exception from
the task's grader (its metric or its author's ``grade.py``) on a submission that passed the shape checks is the
submission's fault (``ran_no_sub``), as in MLE-bench; it is an infrastructure failure (missing, never 0) only when
the grader also fails on the task's own sample submission (:func:`grader_self_test`) or the host fails (files,
processes, memory). So whatever a submission holds must end in a grade:
its shape is checked in linear time before pandas parses it (no stall of the host), a metric it overflows is
an invalid submission, and every message it can fill is capped (:func:`cap`) before it reaches the execution
log and the agent's next prompt.
"""

from __future__ import annotations

import csv
import hashlib
import io
import logging
import math
import re
import traceback

from wmrl.algorithms.reward import ladder_reward, leaderboard_position
from wmrl.autoresearch.environments.quoting import quoted
from wmrl.autoresearch.environments.sandbox.base import ExecutionResult
from wmrl.autoresearch.tasks.build import BuiltTask
from wmrl.autoresearch.tasks.grade_runner import GraderFailed
from wmrl.types import Outcome, Source, Status

log = logging.getLogger(__name__)

_VALIDATION = re.compile(r"VALIDATION_SCORE\s*=\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf)")
_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*)(:\s.*)?$")
_EXCEPTION_SUFFIXES = ("Error", "Exception", "Exit", "Interrupt", "Warning", "Iteration")
_FEEDBACK_LINES = 40
# Everything the script controls is bounded before it reaches the execution log and the agent's next prompt.
MAX_FEEDBACK_CHARS = 4000
MAX_ERROR_CHARS = 2000
_MAX_PROBLEM_CHARS = 500
_SUBMISSION_COLUMNS = ["id", "prediction"]
# The header ``id,prediction`` is 13 bytes and a row a few dozen; pandas' parsing time grows with the square of
# the column count, so a submission's shape is checked with the csv module before pandas ever sees it.
_MAX_HEADER_BYTES = 1024
_MAX_BYTES_PER_ROW = 1024


def cap(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, keeping its head and its tail (where a traceback's
    exception line is) around a note of how much was left out.

    >>> cap("short", 100)
    'short'
    >>> capped = cap("a" * 500 + "b" * 500, 100)
    >>> len(capped) <= 100, capped[:3], capped[-3:]
    (True, 'aaa', 'bbb')
    """
    if len(text) <= limit:
        return text
    marker = f"\n[... {len(text)} characters, cut to {limit} ...]\n"
    keep = limit - len(marker)
    if keep < 2:
        return text[:limit]
    head = keep // 2
    return text[:head] + marker + text[len(text) - (keep - head):]


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


def _note(result: ExecutionResult) -> str:
    """What the sandbox itself says about the run (an out-of-memory kill), outside the script's output."""
    return f"\nThe sandbox: {result.note}" if result.note else ""


def _outcome(status: Status, result: ExecutionResult, stdout: str, feedback: str, **kw) -> Outcome:
    if kw.get("error") is not None:
        kw["error"] = cap(kw["error"], MAX_ERROR_CHARS)
    if "flags" in kw:
        kw["flags"] = tuple(cap(flag, _MAX_PROBLEM_CHARS) for flag in kw["flags"])
    return Outcome(
        status=status,
        reward=ladder_reward(status, kw.pop("position", None)) if status is not Status.VALID else kw.pop("reward"),
        feedback=cap(feedback, MAX_FEEDBACK_CHARS),
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
        return _missing(result, "The execution environment failed before the script could finish; this run is not "
                                "scored.", f"infra: {result.infra_error}")
    if result.tripwires:
        return _outcome(
            Status.FLAGGED,
            result,
            stdout,
            "Execution stopped: the script accessed something it may not ("
            + "; ".join(cap(t, _MAX_PROBLEM_CHARS) for t in result.tripwires)
            + "). Solutions may only read the files in public/ and write in the working directory.",
            flags=tuple(result.tripwires),
            error="tripwire",
        )
    if result.timed_out:
        return _timeout(task, result, stdout)
    if result.exit_code != 0:
        exc = _last_exception(result.stderr_tail)
        if result.exit_code is not None and result.exit_code < 0:
            exc = exc or f"killed by signal {-result.exit_code}"
            hint = " (a resource limit: memory, CPU time, file size or processes)"
        else:
            hint = ""
        feedback = quoted(result.stderr_tail, "error output", _FEEDBACK_LINES) or "The script wrote nothing to stderr.\n"
        feedback += f"Process exited with code {result.exit_code}{hint} after {secs}.{_note(result)}"
        return _outcome(Status.RUNTIME_ERR, result, stdout, feedback, error=exc or f"exit code {result.exit_code}")
    try:
        return _grade_submission(task, result, stdout, secs)
    except (OSError, MemoryError) as exc:  # the host, not the submission: files, processes, memory
        return _grader_broken(task, result, f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # noqa: BLE001 - the grader raised on this submission
        broken = grader_self_test(task)
        if broken is not None:
            return _grader_broken(task, result, f"{type(exc).__name__}: {exc} (and on the task's own sample "
                                                f"submission: {broken})")
        # The grader grades the task's sample submission but raised on this one, which passed the shape checks:
        # the submission's fault (as in MLE-bench). A missing reward here would let a policy dodge any bad grade.
        # The grader's message is not quoted: it may quote the hidden answers.
        log.info("task %s: the grader failed on a submission that passed the shape checks: %s", task.id, exc)
        what = exc.what if isinstance(exc, GraderFailed) else type(exc).__name__
        return _no_sub(result, stdout, secs, f"the task's grader could not score it ({what}); check the "
                                             "predictions against public/sample_submission.csv.")


def _missing(result: ExecutionResult, feedback: str, error: str) -> Outcome:
    """An infrastructure failure: recorded, never scored (reward ``None``)."""
    return Outcome(
        Status.INFRA_ERROR,
        None,
        feedback=feedback,
        wall_seconds=result.wall_seconds,
        error=cap(error, MAX_ERROR_CHARS),
        stdout_tail=result.stdout_tail,
        stderr_tail=result.stderr_tail,
    )


def _grader_broken(task: BuiltTask, result: ExecutionResult, why: str) -> Outcome:
    log.error("the grader of task %s failed: %s", task.id, why)
    return _missing(result, "The grader failed; this run is not scored.", f"infra: grader crashed: {why}")


_self_tests: dict[tuple, str | None] = {}


def _grader_identity(task: BuiltTask) -> tuple:
    """What a self-test result holds for: the task's data, its author's grader as it is now, and the built-in
    metric's function (a metric replaced in this process, as tests do, is another grader)."""
    from wmrl.autoresearch.tasks.metrics import METRICS

    folder = task.spec.folder
    script = folder.grade_script if folder is not None else None
    code = script.read_bytes() if script is not None and script.is_file() else b""
    metric = METRICS.get(task.spec.metric)
    fn = metric.fn if metric is not None else None
    return task.id, task.data_hash, hashlib.sha256(code).hexdigest(), fn


def grader_self_test(task: BuiltTask) -> str | None:
    """Grade the task's own ``public/sample_submission.csv``: ``None`` when the grader gives it a grade, else why
    it fails (the grader, its answers or its leaderboard is broken: an infrastructure failure for every run).

    Run on first use in each process (memoised per task data and grader code) and by ``wmrl tasks check``. It
    decides who is at fault when the grader raises on a submission that passed the shape checks: the submission
    (``ran_no_sub``) when the sample grades, the task (``infra_error``, missing) when it does not.
    """
    key = _grader_identity(task)
    if key not in _self_tests:
        sample = task.public_dir / "sample_submission.csv"
        try:
            if not sample.is_file():
                raise FileNotFoundError(f"{sample} is missing")
            probe = ExecutionResult(exit_code=0, wall_seconds=0.0, files={"submission.csv": sample.read_bytes()})
            _grade_submission(task, probe, "", "0.0 s")
            _self_tests[key] = None
        except Exception as exc:  # noqa: BLE001 - every failure is the answer
            _self_tests[key] = cap(f"{type(exc).__name__}: {exc}", _MAX_PROBLEM_CHARS)
    return _self_tests[key]


def _host_load(result: ExecutionResult) -> str:
    if result.others_cpus is None or result.host_cpus is None:
        return ""
    return f" (they kept {result.others_cpus:.1f} of the host's {result.host_cpus} CPUs busy on average)"


def _timeout(task: BuiltTask, result: ExecutionResult, stdout: str) -> Outcome:
    """A run stopped at its time budget: its own timeout (0.0), or, when the host kept it from a CPU for longer
    than the budget allows (``starved``), an infrastructure failure that is never scored."""
    limit = result.time_limit_s if result.time_limit_s is not None else task.spec.time_budget_s
    used = "" if result.cpu_seconds is None else f" ({result.cpu_seconds:.1f} s of CPU in {result.wall_seconds:.1f} s)"
    if result.timeout_reason == "starved":
        return _missing(result, "The machine was too busy to give the script its time budget; this run is not "
                                "scored.", f"infra: starved: the run got{used} while waiting "
                                           f"{result.starved_seconds or 0:.1f} s for a CPU held by other processes"
                                           f"{_host_load(result)}")
    kind = "of CPU time " if result.timeout_reason == "cpu" else ""
    return _outcome(
        Status.TIMEOUT,
        result,
        stdout,
        f"{quoted(stdout, 'output', 10)}TimeoutError: the script was killed after {limit:g} s {kind}(its time budget)"
        f"{used}.",
        error="timeout",
    )


def _no_sub(result: ExecutionResult, stdout: str, secs: str, why: str) -> Outcome:
    why = cap(why, _MAX_PROBLEM_CHARS)  # a parser's message can quote the whole offending line
    feedback = f"{quoted(stdout, 'output', 20)}The script finished in {secs} but {why}"
    return _outcome(Status.RAN_NO_SUB, result, stdout, feedback, error=why)


def _shown(columns: list, limit: int = 5) -> str:
    """A column list as the agent sees it: the first ``limit`` names and how many there are in all."""
    if len(columns) <= limit:
        return repr(columns)
    return f"{len(columns)} columns, starting {columns[:limit]!r}"


def submission_shape_problem(raw: bytes, n_rows: int, columns: list[str] = _SUBMISSION_COLUMNS) -> str | None:
    r"""Why ``raw`` cannot be a ``submission.csv`` of ``n_rows`` rows, found in linear time before pandas reads it.

    pandas spends minutes on a header-only file of 50,000 columns, and tens of seconds on one row of 50,000
    fields, on the host that grades every rollout. So the shape is checked first, cheapest check first: a
    header line of at most 1 KB that is exactly ``columns`` (``id,prediction``; a folder task's are those of its
    ``sample_submission.csv``), at most 1 KB per column of a test row on average, not wildly more lines than
    test rows, and every row as many fields as columns (read with the csv module, which is linear).
    ``None`` when pandas may parse it.

    >>> submission_shape_problem(b"id,prediction\n0,1\n\n", 1) is None
    True
    >>> submission_shape_problem(b",".join(b"c%d" % i for i in range(50)) + b"\n", 1)
    "submission.csv has columns 50 columns, starting ['c0', 'c1', 'c2', 'c3', 'c4']; expected ['id', 'prediction']."
    >>> submission_shape_problem(b"id,prediction\n0,1,2\n", 1)
    'submission.csv line 2 has 3 fields; expected 2 (id,prediction).'
    """
    columns = list(columns)
    expected = ",".join(columns)
    max_header = max(_MAX_HEADER_BYTES, len(expected) + 2)
    end = raw.find(b"\n", 0, max_header + 1)
    if end == -1 and len(raw) > max_header:
        start = raw[:40].decode("utf-8", "replace")
        return (f"submission.csv's first line is longer than {max_header} bytes (it starts {start!r}); "
                f"expected the header {expected}.")
    try:
        line = raw[: len(raw) if end == -1 else end].decode("utf-8-sig").rstrip("\r")
        header = next(csv.reader([line]), [])
    except (UnicodeDecodeError, csv.Error) as exc:
        return f"submission.csv's header line could not be read ({type(exc).__name__}: {exc})."
    if header != columns:
        return f"submission.csv has columns {_shown(header)}; expected {_shown(columns)}."
    per_row = _MAX_BYTES_PER_ROW * max(1, len(columns) - 1)  # 1 KB per prediction column
    if len(raw) > (n_rows + 1) * per_row:
        return f"submission.csv is {len(raw)} bytes: over {per_row // 1024} KB per row for the {n_rows} rows of test.csv."
    lines = raw.count(b"\n")
    if lines > 2 * n_rows + 100:
        return f"submission.csv has {lines} lines; test.csv has {n_rows} rows (one line each, after the header)."
    try:
        rows = csv.reader(io.StringIO(raw.decode("utf-8-sig"), newline=""))
        next(rows)
        for row in rows:
            if row and len(row) != len(columns):
                return (f"submission.csv line {rows.line_num} has {len(row)} fields; "
                        f"expected {len(columns)} ({expected if len(columns) <= 5 else _shown(columns)}).")
    except (UnicodeDecodeError, csv.Error) as exc:
        return f"submission.csv could not be read as CSV ({type(exc).__name__}: {exc})."
    return None


def _grade_submission(task: BuiltTask, result: ExecutionResult, stdout: str, secs: str) -> Outcome:
    import pandas as pd

    if "submission.csv" in result.file_errors:
        return _no_sub(result, stdout, secs, f"submission.csv {result.file_errors['submission.csv']}.")
    raw = result.files.get("submission.csv")
    if raw is None:
        return _no_sub(result, stdout, secs, "wrote no submission.csv in the working directory.")
    if task.spec.folder is not None:
        return _grade_folder_submission(task, result, stdout, secs, raw)
    answers = pd.read_csv(task.answers_path)
    expected = answers["id"]
    problem = submission_shape_problem(raw, len(expected))
    if problem is not None:
        return _no_sub(result, stdout, secs, problem)
    try:
        sub = pd.read_csv(io.BytesIO(raw))
    except Exception as exc:  # noqa: BLE001 - any parse failure is the script's
        return _no_sub(result, stdout, secs, f"submission.csv could not be read as CSV ({type(exc).__name__}: {exc}).")
    if list(sub.columns) != _SUBMISSION_COLUMNS:
        return _no_sub(
            result, stdout, secs, f"submission.csv has columns {_shown(list(sub.columns))}; expected {_SUBMISSION_COLUMNS}."
        )
    if len(sub) != len(expected):
        return _no_sub(result, stdout, secs, f"submission.csv has {len(sub)} rows; test.csv has {len(expected)}.")
    if sub["id"].duplicated().any():
        return _no_sub(result, stdout, secs, "submission.csv repeats some ids.")
    if not pd.api.types.is_integer_dtype(sub["id"]) or set(sub["id"]) != set(expected):
        return _no_sub(result, stdout, secs, "submission.csv ids do not match the ids in test.csv.")
    aligned = sub.set_index("id").loc[expected, "prediction"].reset_index(drop=True)
    return _metric_grade(task, result, stdout, secs, answers, aligned)


def _metric_grade(task: BuiltTask, result: ExecutionResult, stdout: str, secs: str, answers, aligned) -> Outcome:
    """The built-in metric of ``task`` on the predictions ``aligned`` row for row with ``answers`` (``id`` and the
    target columns): invalid predictions and a non-finite score are the submission's, then the position."""
    import numpy as np

    from wmrl.autoresearch.tasks.metrics import METRICS, validate_prediction

    metric = METRICS[task.spec.metric]
    prediction, problem = validate_prediction(metric, aligned, set(task.labels) if task.labels else None)
    if problem is not None:
        return _no_sub(result, stdout, secs, f"its predictions are invalid: {problem}")
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        score = float(metric.fn(answers, prediction))
    if not math.isfinite(score):
        # Finite but huge predictions (1e200 on rmse) overflow the metric. That is the submission's doing, so it
        # is graded (ran, no valid submission), never an infrastructure error: a missing reward would let a
        # policy dodge every bad grade by writing huge numbers.
        return _no_sub(
            result, stdout, secs,
            f"the metric ({metric.name}) is not finite ({score}): predictions overflow; "
            "keep predictions on the scale of the target.",
        )
    return _valid(task, result, stdout, secs, score, len(aligned))


def _valid(task: BuiltTask, result: ExecutionResult, stdout: str, secs: str, score: float, rows: int) -> Outcome:
    if not task.leaderboard:
        raise ValueError(f"task {task.id} has no recorded leaderboard (wmrl tasks build {task.id} --record)")
    position = leaderboard_position(score, list(task.leaderboard.values()), task.higher_is_better)
    feedback = (
        f"{quoted(stdout, 'output', 20)}The script finished in {secs}. submission.csv: {rows} rows, "
        "format valid; it was submitted for grading."
    )
    return _outcome(
        Status.VALID, result, stdout, feedback, reward=ladder_reward(Status.VALID, position), score=score, position=position
    )


def _grade_folder_submission(task: BuiltTask, result: ExecutionResult, stdout: str, secs: str, raw: bytes) -> Outcome:
    """A folder task's submission: the columns and ids of its ``sample_submission.csv``, numbers where the sample
    has numbers; then its built-in metric, or its author's ``grade.py`` in a process of its own. A crash or a
    hang of that grader is the submission's (``ran_no_sub``) when the grader grades the task's own sample
    submission, an infrastructure error only when it fails on that sample too; its ``InvalidSubmissionError`` is an
    invalid submission."""
    import numpy as np
    import pandas as pd

    from wmrl.autoresearch.tasks.grade_runner import run_grader

    source = task.spec.folder
    columns = list(source.submission_columns)
    sample = pd.read_csv(source.public_dir / "sample_submission.csv", dtype={source.id_column: str})
    problem = submission_shape_problem(raw, len(sample), columns)
    if problem is not None:
        return _no_sub(result, stdout, secs, problem)
    try:
        sub = pd.read_csv(io.BytesIO(raw), dtype={source.id_column: str}, float_precision="round_trip")
    except Exception as exc:  # noqa: BLE001 - any parse failure is the script's
        return _no_sub(result, stdout, secs, f"submission.csv could not be read as CSV ({type(exc).__name__}: {exc}).")
    ids = source.id_column
    if list(sub.columns) != columns:
        return _no_sub(result, stdout, secs, f"submission.csv has columns {_shown(list(sub.columns))}; expected "
                                             f"{_shown(columns)} (those of public/sample_submission.csv).")
    if len(sub) != len(sample):
        return _no_sub(result, stdout, secs, f"submission.csv has {len(sub)} rows; sample_submission.csv has {len(sample)}.")
    if sub[ids].duplicated().any():
        return _no_sub(result, stdout, secs, f"submission.csv repeats some {ids!r} values.")
    if set(sub[ids]) != set(sample[ids]):
        return _no_sub(result, stdout, secs, f"submission.csv's {ids!r} values differ from sample_submission.csv's.")
    for column in columns:
        if column != ids and pd.api.types.is_numeric_dtype(sample[column]):
            values = pd.to_numeric(sub[column], errors="coerce")
            if not np.isfinite(values.to_numpy(dtype=float)).all():
                return _no_sub(result, stdout, secs, f"submission.csv's {column!r} must be finite numbers, as in "
                                                     "sample_submission.csv.")
    if source.grade_script is not None:
        verdict = run_grader(source.grade_script, source.grade_function, raw, source.answers, source.grade_timeout_s)
        if verdict.invalid is not None:
            return _no_sub(result, stdout, secs, f"the task's grader found it invalid: {verdict.invalid}")
        return _valid(task, result, stdout, secs, verdict.score, len(sub))
    answers = pd.read_csv(source.answers, dtype={ids: str})
    answers = answers[[ids, *task.spec.target]].rename(columns={ids: "id"})
    aligned = sub.set_index(ids).loc[answers["id"], columns[1]].reset_index(drop=True)
    return _metric_grade(task, result, stdout, secs, answers.reset_index(drop=True), aligned)
