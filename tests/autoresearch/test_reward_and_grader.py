"""The reward ladder, leaderboard positions and the grader, on recorded sandbox results (no execution)."""

from __future__ import annotations

import pandas as pd
import pytest

from wmrl.algorithms.reward import ladder_reward, leaderboard_position
from wmrl.autoresearch.environments.grader import check_script, grade, validation_score
from wmrl.autoresearch.environments.sandbox.base import ExecutionResult
from wmrl.types import Outcome, Status


def test_ladder_values():
    assert [ladder_reward(s) for s in (Status.MALFORMED, Status.SYNTAX_ERR, Status.TIMEOUT, Status.FLAGGED)] == [0.0] * 4
    assert ladder_reward(Status.RUNTIME_ERR) == 0.1
    assert ladder_reward(Status.RAN_NO_SUB) == 0.2
    assert ladder_reward(Status.VALID, 0.0) == 0.5 and ladder_reward(Status.VALID, 1.0) == 1.0
    assert ladder_reward(Status.INFRA_ERROR) is None
    with pytest.raises(ValueError, match="position"):
        ladder_reward(Status.VALID, None)


def test_infra_error_is_missing_never_zero():
    with pytest.raises(ValueError, match="None exactly for infra_error"):
        Outcome(Status.INFRA_ERROR, 0.0)
    with pytest.raises(ValueError):
        Outcome(Status.RUNTIME_ERR, None)
    assert Outcome(Status.INFRA_ERROR, None).missing


def test_position_is_monotone_and_bounded():
    board = [0.3, 0.5, 0.5, 0.8, 0.95]
    xs = [i / 100 for i in range(101)]
    ps = [leaderboard_position(x, board, higher_is_better=True) for x in xs]
    assert all(0.0 <= p <= 1.0 for p in ps)
    assert all(a <= b for a, b in zip(ps, ps[1:], strict=False))
    lower = [leaderboard_position(-x, [-b for b in board], higher_is_better=False) for x in xs]
    assert lower == pytest.approx(ps)


def test_gate_and_validation_score():
    assert check_script(None).status is Status.MALFORMED
    assert check_script("   \n").status is Status.MALFORMED
    syntax = check_script("for x in range(3)\n    print(x)\n")
    assert syntax.status is Status.SYNTAX_ERR and "SyntaxError" in syntax.feedback
    assert check_script("a\x00b").status is Status.SYNTAX_ERR
    assert validation_score("VALIDATION_SCORE=nan") is None
    assert validation_score("VALIDATION_SCORE=-1.5e-2") == -0.015


def result(**kw) -> ExecutionResult:
    return ExecutionResult(**{"exit_code": 0, "wall_seconds": 1.0, **kw})


def submission(task, predictions=None) -> bytes:
    answers = pd.read_csv(task.answers_path)
    pred = predictions if predictions is not None else answers[task.spec.target[0]].astype(str)
    return pd.DataFrame({"id": answers["id"], "prediction": pred}).to_csv(index=False).encode()


def test_perfect_submission_is_valid_with_top_position(tiny_suite):
    task = tiny_suite.get("tiny_iris")
    outcome = grade(task, result(files={"submission.csv": submission(task)}, stdout_tail="VALIDATION_SCORE=0.9"))
    assert outcome.status is Status.VALID
    assert outcome.score == 1.0 and outcome.position == 1.0 and outcome.reward == 1.0
    assert outcome.validation_score == 0.9


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda df: df.iloc[:-1], "rows"),
        (lambda df: df.rename(columns={"prediction": "label"}), "columns"),
        (lambda df: df.assign(id=df["id"] + 1000), "ids"),
        (lambda df: pd.concat([df.iloc[:1], df.iloc[:-1]]), "repeats"),
        (lambda df: df.assign(prediction="not-a-species"), "never seen"),
    ],
)
def test_bad_submissions_are_ran_no_sub(tiny_suite, mutate, expected):
    task = tiny_suite.get("tiny_iris")
    answers = pd.read_csv(task.answers_path)
    df = pd.DataFrame({"id": answers["id"], "prediction": answers["species"].astype(str)})
    raw = mutate(df).to_csv(index=False).encode()
    outcome = grade(task, result(files={"submission.csv": raw}))
    assert outcome.status is Status.RAN_NO_SUB and outcome.reward == 0.2
    assert expected in outcome.feedback


def test_status_precedence(tiny_suite):
    task = tiny_suite.get("tiny_iris")
    good = {"submission.csv": submission(task)}
    assert grade(task, result(infra_error="engine died", files=good)).status is Status.INFRA_ERROR
    assert grade(task, result(tripwires=("probe",), files=good)).status is Status.FLAGGED
    assert grade(task, result(timed_out=True, exit_code=-9, files=good)).status is Status.TIMEOUT
    crashed = grade(task, result(exit_code=1, stderr_tail="Traceback...\nKeyError: 'x'", files=good))
    assert crashed.status is Status.RUNTIME_ERR and crashed.error == "KeyError"
    assert grade(task, result()).status is Status.RAN_NO_SUB
    refused = grade(task, result(file_errors={"submission.csv": "is not a regular file"}))
    assert refused.status is Status.RAN_NO_SUB and "regular file" in refused.feedback


def test_grader_crash_is_infra_not_zero(tiny_suite, monkeypatch):
    task = tiny_suite.get("tiny_iris")
    from wmrl.autoresearch.tasks import metrics

    def broken(answers, prediction):
        raise RuntimeError("metric bug")

    monkeypatch.setitem(metrics.METRICS, "accuracy", metrics.METRICS["accuracy"].__class__(
        "accuracy", broken, True, "label", "broken"))
    outcome = grade(task, result(files={"submission.csv": submission(task)}))
    assert outcome.status is Status.INFRA_ERROR and outcome.reward is None
    assert "metric bug" in outcome.error
