"""A grade cannot be dodged through the grader (issue 30, item 5).

A submission with empty labels passes the shape checks of a task with string labels; a typical MLE-bench
``grade.py`` then raises a plain exception. Before, that made the outcome ``infra_error`` (reward missing), so a
policy could turn any bad grade into "missing". Now an exception from the task's grader on a shape-checked
submission is the submission's fault (``ran_no_sub``, 0.2) whenever the grader grades the task's own sample
submission; only a grader that fails on the sample too (or the host failing) is infrastructure.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from wmrl.algorithms.reward import ladder_reward
from wmrl.autoresearch.environments.grader import grade
from wmrl.autoresearch.environments.real import SandboxEnvironment
from wmrl.autoresearch.environments.sandbox.base import ExecutionRequest, ExecutionResult, Sandbox
from wmrl.autoresearch.tasks import registry
from wmrl.autoresearch.tasks.suite import TaskSuite
from wmrl.types import Status

# MLE-bench style: a dict lookup of each label, which raises a plain exception on a label it does not know.
LOOKUP_GRADER = '''
LABELS = {"setosa": 0, "versicolor": 1, "virginica": 2}


def grade(submission, answers):
    merged = submission.merge(answers, on="id", suffixes=("", "_true"))
    predicted = [LABELS[label] for label in merged["species"]]
    truth = [LABELS[label] for label in merged["species_true"]]
    return sum(p == t for p, t in zip(predicted, truth)) / len(truth)
'''


def iris_folder(where: Path, grader: str = LOOKUP_GRADER) -> Path:
    """A folder task with string labels and its author's grade.py (accuracy through a label lookup)."""
    from sklearn.datasets import load_iris

    frame = load_iris(as_frame=True).frame
    frame.columns = ["sepal_length", "sepal_width", "petal_length", "petal_width", "species"]
    frame["species"] = frame["species"].map({0: "setosa", 1: "versicolor", 2: "virginica"})
    frame.insert(0, "id", range(len(frame)))
    train, test = frame.iloc[::2], frame.iloc[1::2]
    folder = where / "iris_labels"
    (folder / "public").mkdir(parents=True)
    (folder / "private").mkdir()
    train.to_csv(folder / "public" / "train.csv", index=False)
    test.drop(columns="species").to_csv(folder / "public" / "test.csv", index=False)
    test[["id"]].assign(species="setosa").to_csv(folder / "public" / "sample_submission.csv", index=False)
    test[["id", "species"]].to_csv(folder / "private" / "answers.csv", index=False)
    (folder / "grade.py").write_text(textwrap.dedent(grader))
    (folder / "task.yaml").write_text("id: iris_labels\nsplit: train\nhigher_is_better: true\ntarget: species\n"
                                      "time_budget_s: 60\nmemory_mb: 2048\n")
    (folder / "description.md").write_text("Predict the iris species (setosa, versicolor, virginica).\n")
    (folder / "leaderboard.csv").write_text("score\n0.33\n0.7\n0.9\n0.97\n")
    return folder


class _Submits(Sandbox):
    """A sandbox whose script "wrote" the given submission (the grader is what is under test)."""

    name = "submits"

    def __init__(self, submission: bytes) -> None:
        super().__init__(1)
        self.submission = submission

    def run(self, request: ExecutionRequest) -> ExecutionResult:
        return ExecutionResult(exit_code=0, wall_seconds=0.1, files={"submission.csv": self.submission})


@pytest.fixture
def suite(tmp_path):
    return TaskSuite(cache_dir=tmp_path / "cache")


def _submission(folder: Path, label: str) -> bytes:
    sample = (folder / "public" / "sample_submission.csv").read_text()
    return sample.replace(",setosa", f",{label}").encode()


def _outcome(suite, folder, submission: bytes):
    registry.use([str(folder)])
    env = SandboxEnvironment(suite, _Submits(submission), use_log=False)
    return env.execute("iris_labels", "print('submitted')\n")


def test_empty_labels_that_break_the_authors_grader_are_an_invalid_submission(tmp_path, suite):
    folder = iris_folder(tmp_path)
    outcome = _outcome(suite, folder, _submission(folder, ""))  # every label empty: passes the shape checks
    assert outcome.status is Status.RAN_NO_SUB, outcome
    assert outcome.reward == ladder_reward(Status.RAN_NO_SUB, None) == 0.2
    assert "the task's grader could not score it (KeyError)" in outcome.feedback
    unknown = _outcome(suite, folder, _submission(folder, "tulip"))
    assert unknown.status is Status.RAN_NO_SUB and unknown.reward == 0.2, unknown
    valid = _outcome(suite, folder, _submission(folder, "versicolor"))
    assert valid.status is Status.VALID and 0.0 < valid.score < 1.0, valid


def test_the_graders_message_is_not_shown_to_the_agent(tmp_path, suite):
    """The author's exception may quote the answers; the agent sees only its class."""
    grader = LOOKUP_GRADER.replace("    predicted = [LABELS[label]", "    if merged['species'].isna().any():\n"
                                   "        raise ValueError(f'expected {list(merged.species_true)}')\n"
                                   "    predicted = [LABELS[label]")
    folder = iris_folder(tmp_path, grader)
    outcome = _outcome(suite, folder, _submission(folder, ""))
    assert outcome.status is Status.RAN_NO_SUB, outcome
    assert "ValueError" in outcome.feedback and "virginica" not in outcome.feedback + (outcome.error or "")


def test_a_grader_that_fails_on_the_sample_too_is_infrastructure(tmp_path, suite):
    folder = iris_folder(tmp_path, LOOKUP_GRADER.replace('"setosa": 0, ', ""))  # its own sample's label unknown
    outcome = _outcome(suite, folder, _submission(folder, "versicolor"))
    assert outcome.status is Status.INFRA_ERROR and outcome.reward is None, outcome
    assert "sample submission" in outcome.error, outcome.error


def test_the_self_test_follows_the_graders_code(tmp_path, suite):
    from wmrl.autoresearch.environments.grader import grader_self_test

    folder = iris_folder(tmp_path)
    registry.use([str(folder)])
    task = suite.get("iris_labels")
    assert grader_self_test(task) is None
    (folder / "grade.py").write_text("def grade(submission, answers):\n    raise RuntimeError('broken')\n")
    assert "RuntimeError" in grader_self_test(task)


def test_a_built_in_metric_that_raises_on_a_submission_is_the_submissions_fault(tiny_suite, monkeypatch):
    """The same rule for the built-in metrics: a metric that raises on predictions that passed validation."""
    from wmrl.autoresearch.tasks import metrics

    task = tiny_suite.get("tiny_diabetes")
    real = metrics.METRICS["rmse"]

    def picky(answers, prediction):
        if (prediction == 12345).any():
            raise FloatingPointError("the metric cannot take 12345")
        return real.fn(answers, prediction)

    monkeypatch.setitem(metrics.METRICS, "rmse", type(real)(**{**real.__dict__, "fn": picky}))
    sample = (task.public_dir / "sample_submission.csv").read_text().splitlines()
    odd = "\n".join([sample[0], *(f"{line.split(',')[0]},12345" for line in sample[1:])]) + "\n"
    outcome = grade(task, ExecutionResult(exit_code=0, wall_seconds=0.1, files={"submission.csv": odd.encode()}))
    assert outcome.status is Status.RAN_NO_SUB and outcome.reward == 0.2, outcome
    assert "FloatingPointError" in outcome.feedback


def test_tasks_check_reports_a_grader_that_fails_on_its_sample(tmp_path, capsys, process_sandbox):
    from wmrl.cli import commands as cli

    folder = iris_folder(tmp_path, LOOKUP_GRADER.replace('"setosa": 0, ', ""))
    cache = tmp_path / "cache"
    assert cli.main(["--cache-dir", str(cache), "tasks", "add", str(folder)]) == 0
    code = cli.main(["--cache-dir", str(cache), "tasks", "check", "iris_labels"])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and "iris_labels" in err and "sample submission" in err, err
