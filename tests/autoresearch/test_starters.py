"""A starter for every task (docs/tasks.md, "The starter"): five tabular competitions in MLE-bench's layout that
ship no starter.py get a generic baseline written from their public files; `wmrl tasks check` runs it and grades
it valid on each; `wmrl tasks show` says which starter the prompt uses; the card shows the grader's name and the
inferred type and target, never `custom`; for one small task of each type the kit grades (labels, class
probabilities, values, counts, survival, a ranking metric, log loss) the generic starter fits a model, predicts what
the metric reads and is graded valid in the process sandbox. The base policy's valid rate with these starters is
measured in tests/autoresearch/test_lifecycle_real.py (slow tier)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from support.task_fixtures import copy_example, tabular_competitions, typed_tasks

from wmrl.autoresearch.agent import starter_head
from wmrl.autoresearch.environments.real import SandboxEnvironment
from wmrl.autoresearch.tasks.starter import Prediction, generic_starter, infer_prediction
from wmrl.autoresearch.tasks.suite import TaskSuite
from wmrl.cli import commands as cli
from wmrl.types import Status


def run(cache: Path, capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["--cache-dir", str(cache), *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def registered(tmp_path_factory):
    where = tmp_path_factory.mktemp("competitions")
    competitions, data, ids = tabular_competitions(where)
    cache = where / "cache"
    assert cli.main(["--cache-dir", str(cache), "tasks", "add", str(competitions), "--mlebench-data", str(data)]) == 0
    return cache, competitions, data, ids


def test_tasks_check_runs_each_generic_starter_and_grades_it_valid(registered, capsys, process_sandbox):
    cache, _, _, ids = registered
    code, out, err = run(cache, capsys, "tasks", "check", *ids)
    assert code == 0, err
    assert "10 graded on a task's own leaderboard" in out and "0 differ" in out  # sample + generic starter, x5
    suite = TaskSuite(cache_dir=cache)
    for task_id in ids:
        task = suite.get(task_id)
        assert "generic_starter" in task.references() and task.spec.folder.starter is None
        assert starter_head(task.starter).rstrip().endswith("])")  # the prefill ends where the model begins
        assert "model = make_pipeline(preprocess," in task.starter


# Per task type the kit grades (tests/support/task_fixtures.py, typed_tasks): the card's type, the starter's estimator and
# prediction, and a score that neither a constant nor a hard label reaches (as "higher is better": a loss negated).
# A constant scores 0.54 accuracy, 0.17 macro F1, 1.10 multi-class log loss, 3.7 RMSE, 2.1 Poisson deviance, 0.5
# concordance, 0.69 log loss; hard labels 0.40 average precision.
TYPED = {
    "binary label": ("multiclass", "LogisticRegression", "model.predict(features(frame))", 0.7),
    "multiclass": ("multiclass", "LogisticRegression", "model.predict(features(frame))", 0.6),
    "class probabilities": ("multiclass", "LogisticRegression", "model.predict_proba(features(frame))", -0.8),
    "regression": ("regression", "Ridge", "model.predict(features(frame))", -2.0),
    "count": ("count", "Ridge", "np.maximum(model.predict(features(frame)), 1e-3)", -1.5),
    "survival (built-in concordance)": ("survival", "Ridge", "-model.predict(features(frame))", 0.65),
    "survival": ("survival", "Ridge", "-model.predict(features(frame))", 0.65),
    "ranking metric": ("binary", "LogisticRegression", "model.predict_proba(features(frame))[:, 1]", 0.55),
    "log loss": ("binary", "LogisticRegression", "model.predict_proba(features(frame))[:, 1]", -0.6),
}


@pytest.fixture(scope="module")
def typed(tmp_path_factory, process_sandbox):
    """The typed tasks registered with `wmrl tasks add`, and each generic starter run in the process sandbox and
    graded (all at once: the sandbox runs them concurrently)."""
    where = tmp_path_factory.mktemp("typed")
    folders, competitions, data, ids = typed_tasks(where)
    cache = where / "cache"
    assert cli.main(["--cache-dir", str(cache), "tasks", "add", str(folders)]) == 0
    assert cli.main(["--cache-dir", str(cache), "tasks", "add", str(competitions), "--mlebench-data", str(data)]) == 0
    suite = TaskSuite(cache_dir=cache)
    tasks = {task_type: suite.get(task_id) for task_type, task_id in ids.items()}
    env = SandboxEnvironment(suite, process_sandbox, use_log=False)
    outcomes = env.execute_many([(task.id, task.starter) for task in tasks.values()])
    return {task_type: (task, outcome) for (task_type, task), outcome in zip(tasks.items(), outcomes, strict=True)}


@pytest.mark.parametrize("task_type", list(TYPED))
def test_a_generic_starter_fits_a_model_for_every_task_type_and_predicts_what_its_metric_reads(typed, task_type):
    task_kind, estimator, predict, bound = TYPED[task_type]
    task, outcome = typed[task_type]
    assert task.spec.type == task_kind and task.spec.folder.starter is None
    assert f"    return {predict}\n" in task.starter
    assert f"\nmodel = make_pipeline(preprocess, {estimator}(" in task.starter and task.starter.endswith("\nfinish(model)\n")
    assert starter_head(task.starter).rstrip().endswith("])")  # the prefill ends where the model begins
    assert outcome.status is Status.VALID, (outcome.error, outcome.stderr_tail)
    assert outcome.validation_score is not None  # the starter printed its estimate
    score = outcome.score if task.higher_is_better else -outcome.score
    assert score > bound, f"{task_type}: {outcome.score}"


def test_cards_show_the_grader_type_and_target_and_which_starter_the_prompt_uses(registered, capsys):
    cache, competitions, _, _ = registered
    code, out, _ = run(cache, capsys, "tasks", "list", "--json")
    listed = {t["id"]: t for t in json.loads(out)}
    assert (listed["tumour-malignancy"]["type"], listed["tumour-malignancy"]["metric"]) == ("binary", "auc-roc (grade.py)")
    assert (listed["car-fuel-economy"]["type"], listed["car-fuel-economy"]["metric"]) == ("regression",
                                                                                       "rmse-of-mpg (grade.py)")
    assert (listed["wine-cultivar"]["type"], listed["wine-cultivar"]["metric"]) == ("multiclass", "accuracy")
    assert "custom" not in {t["type"] for t in listed.values()} | {t["metric"] for t in listed.values()}

    code, out, _ = run(cache, capsys, "tasks", "show", "affair-survey")
    assert code == 0
    assert "leaderboard: 8 entries, best 0.8, median" in out and "(higher is better; `--json` lists them)" in out
    assert "starter: generic: written by wmrl from the public files" in out
    assert f"add {competitions / 'affair-survey' / 'starter.py'} to show your own" in " ".join(out.split())
    assert "| had_affair (target) |" in out  # the target leads the data dictionary, never in "... more columns"
    assert "A generic baseline, written from the public files" in out and "write_submission(predict(test))" in out
    assert "these hold." in " ".join(out.split())  # the budget replaces the overview's

    starter = competitions / "affair-survey" / "starter.py"  # a competition's own starter, beside config.yaml
    starter.write_text("import shutil\nshutil.copy('public/sample_submission.csv', 'submission.csv')\n")
    try:
        code, out, _ = run(cache, capsys, "tasks", "show", "affair-survey")
        assert f"starter: {starter}" in out and "A working baseline" in out
    finally:
        starter.unlink()


@pytest.mark.parametrize(("columns", "train", "test", "hint", "expected"), [
    # per-class probability columns, the classes in a train column
    (("id", "a", "b", "c"), {"id": [1, 2, 3], "x": [0.1, 0.2, 0.3], "label": ["a", "b", "c"]}, {"id": [4], "x": [1.0]},
     None, ("class_probabilities", ("label",))),
    # the prediction column is not in train: the one column test.csv lacks
    (("id", "prediction"), {"id": [1, 2], "x": [1.0, 2.0], "price": [3.5, 4.25]}, {"id": [3], "x": [1.5]}, None,
     ("real", ("price",))),
    # several numeric targets
    (("id", "u", "v"), {"id": [1, 2], "x": [1, 2], "u": [0.5, 1.5], "v": [2.5, 3.5]}, {"id": [3], "x": [2]}, "mae",
     ("real", ("u", "v"))),
    # survival: one risk column, and train.csv's extra columns are a 0/1 event and a time (the name a hint only)
    (("id", "prediction"), {"id": [1, 2, 3], "x": [1.0, 2.0, 0.5], "efs": [1, 0, 1], "efs_time": [3.5, 9.0, 1.25]},
     {"id": [4], "x": [1.5]}, None, ("risk", ("efs_time", "efs"))),
    (("id", "prediction"), {"id": [1, 2, 3], "x": [1.0, 2.0, 0.5], "efs": [1, 0, 1], "efs_time": [3.5, 9.0, 1.25],
                            "race": ["a", "b", "a"]}, {"id": [4], "x": [1.5]}, "stratified-concordance-index",
     ("risk", ("efs_time", "efs"))),
    # a ranking metric reads a score: a probability for a 0/1 target (never a hard label), a value for a number
    (("id", "fraud"), {"id": [1, 2, 3], "x": [1.0, 2.0, 0.5], "fraud": [0, 1, 0]}, {"id": [4], "x": [1.5]},
     "average_precision", ("probability", ("fraud",))),
    (("id", "fraud"), {"id": [1, 2, 3], "x": [1.0, 2.0, 0.5], "fraud": [0, 1, 0]}, {"id": [4], "x": [1.5]},
     "PR-AUC", ("probability", ("fraud",))),
    (("id", "loss"), {"id": [1, 2, 3], "x": [1.0, 2.0, 0.5], "loss": [0.0, 10.5, 2.25]}, {"id": [4], "x": [1.5]},
     "normalized-gini", ("real", ("loss",))),
    # a label metric keeps labels, MAP@k too (a ranked list of labels)
    (("id", "fraud"), {"id": [1, 2, 3], "x": [1.0, 2.0, 0.5], "fraud": [0, 1, 0]}, {"id": [4], "x": [1.5]},
     "precision", ("label", ("fraud",))),
    (("id", "place"), {"id": [1, 2, 3], "x": [1.0, 2.0, 0.5], "place": ["p", "q", "r"]}, {"id": [4], "x": [1.5]},
     "map@3", ("label", ("place",))),
    # nothing to learn from: the sample is copied
    (("id", "y"), {"id": [1, 2], "x": [1, 2]}, {"id": [3], "x": [2]}, None, ("copy", ())),
])
def test_the_target_and_its_kind_come_from_the_public_files(tmp_path, columns, train, test, hint, expected):
    pd.DataFrame(train).to_csv(tmp_path / "train.csv", index=False)
    pd.DataFrame(test).to_csv(tmp_path / "test.csv", index=False)
    pd.DataFrame({c: [test["id"][0]] if c == "id" else [0.0] for c in columns}).to_csv(
        tmp_path / "sample_submission.csv", index=False)
    prediction = infer_prediction(tmp_path, "id", columns, grader_name=hint)
    assert (prediction.kind, prediction.targets) == expected
    script = generic_starter(tmp_path, "id", prediction)
    compile(script, "starter.py", "exec")
    if prediction.kind == "copy":
        assert "no column of train.csv is the target" in script and "shutil.copy" in script


def test_a_folder_without_starter_py_gets_the_generic_one_and_says_so(tmp_path):
    from wmrl.autoresearch.tasks import registry

    folder = copy_example(tmp_path, "no_starter")
    (folder / "starter.py").unlink()
    (folder / "task.yaml").write_text((folder / "task.yaml").read_text().replace("state_violent_crime", "no_starter"))
    registry.use([str(folder)])
    task = TaskSuite(cache_dir=tmp_path / "cache").get("no_starter")
    assert task.card["starter"] == "generic (generic_starter.py)"
    assert "Ridge(alpha=1.0)" in task.starter and "A generic baseline" in task.description
    assert list(task.references())[:2] == ["sample_submission", "generic_starter"]
    assert isinstance(Prediction("copy", (), ("y",), "custom", "why").reason, str)
