"""The shipped AutoResearch suite: coverage, leakage rules, builds, and reproduction of leaderboards (exact on the
recording machine, within each model family's tolerance and at the same rank on another CPU)."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pytest

from wmrl.autoresearch.tasks.catalog import TASKS
from wmrl.autoresearch.tasks.metrics import METRICS
from wmrl.autoresearch.tasks.suite import TaskSuite


def test_split_sizes_and_task_types():
    splits = Counter(t.split for t in TASKS)
    assert splits["train"] >= 18 and splits["heldout"] >= 6 and splits["smoke"] >= 3
    train_types = {t.type for t in TASKS if t.split == "train"}
    heldout_types = {t.type for t in TASKS if t.split == "heldout"}
    assert {"binary", "multiclass", "regression", "count", "forecast"} <= train_types
    assert heldout_types - train_types, "held-out tasks need a task type absent from training"
    assert sum(t.heavy for t in TASKS if t.split == "train") >= 3
    for t in TASKS:
        assert t.metric in METRICS, t.id
        assert t.id.replace("_", "").isalnum() and t.id.islower(), t.id


def test_heldout_tasks_use_packages_no_training_task_uses():
    train = {t.package for t in TASKS if t.split == "train"}
    heldout = {t.package for t in TASKS if t.split == "heldout"}
    assert not train & heldout, train & heldout


def test_import_wmrl_stays_light():
    code = (
        "import sys, wmrl, wmrl.types, wmrl.autoresearch.tasks.catalog, wmrl.autoresearch.environments.sandbox\n"
        "heavy = [m for m in ('transformers', 'vllm', 'lerobot', 'torch', 'sklearn', 'pandas') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.fixture(scope="module")
def suite():
    return TaskSuite()


def test_every_task_builds_with_recorded_data_and_eight_references(suite):
    for spec in TASKS:
        task = suite.get(spec.id)
        assert suite.lock[spec.id]["data_sha256"] == {k: task.data_sha256[k] for k in suite.lock[spec.id]["data_sha256"]}
        refs = task.references()
        assert len(refs) >= 8 and {"trivial", "linear_baseline"} <= set(refs), spec.id
        assert set(task.leaderboard) == set(refs), f"{spec.id}: leaderboard and references differ"
        assert len(set(task.leaderboard.values())) >= 4, f"{spec.id}: leaderboard scores are not spread"
        assert "## Starter solution" in task.description


@pytest.mark.slow
def test_every_reference_solution_reproduces_its_recorded_score(suite, process_sandbox):
    from wmrl.autoresearch.environments.real import SandboxEnvironment
    from wmrl.autoresearch.environments.references_run import run_references

    env = SandboxEnvironment(suite, process_sandbox, use_log=False)
    runs = run_references(env, suite.build())
    assert len(runs) >= 8 * len(TASKS)
    assert all(r.outcome.status.value == "valid" for r in runs)
    bad = [(r.task_id, r.name, r.outcome.score, r.recorded, r.verdict[1]) for r in runs if not r.reproduced]
    assert bad == []
    tolerated = [(r.task_id, r.name, r.verdict[1]) for r in runs if r.verdict[0].value == "tolerated"]
    print(f"{len(runs) - len(tolerated)} exact, {len(tolerated)} tolerated: {tolerated}")


def test_import_wmrl_callbacks_needs_no_model_stack():
    """`wmrl.callbacks` subclasses Lightning's Callback. Lightning imports torchmetrics, which imports
    transformers at module level when it is installed (torchmetrics/functional/text/bert.py); wmrl's own
    callback code imports neither transformers, vllm, lerobot nor wmrl's model and rollout modules."""
    code = (
        "import sys, wmrl.callbacks\n"
        "print(sorted(m for m in sys.modules if m in ('vllm', 'lerobot') or m.startswith(('wmrl.models', "
        "'wmrl.rollout', 'wmrl.modules', 'wmrl.autoresearch', 'wmrl.vla'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_heavy_tier_starter_runs_in_the_sandbox_and_replaces_the_prompts_starter(suite, process_sandbox):
    """``starter_solution: heavy_boosting`` (the heavy execution tier of benchmarks/speedup.py): the prompt shows
    it, the prefill begins it, and it is a working solution (run here on a small task, where it is quick)."""
    from wmrl.autoresearch.environments.real import SandboxEnvironment
    from wmrl.rollout.agent import starter_head

    env = SandboxEnvironment(suite, process_sandbox, use_log=False, starter_solution="heavy_boosting")
    script = env.starter("smoke_iris")
    assert "HistGradientBoostingClassifier(max_iter=1000" in script and "early_stopping=False" in script
    prompt = env.prompt("smoke_iris")
    assert prompt.count("## Starter solution") == 1 and script.strip() in prompt
    assert "LogisticRegression" not in prompt  # the linear baseline is gone
    assert prompt.split("## Starter solution")[0] == suite.get("smoke_iris").description.split("## Starter solution")[0]
    assert starter_head(script).rstrip().endswith("])")  # up to the model line, as for the linear baseline
    outcome = env.execute("smoke_iris", script)
    assert outcome.status.value == "valid", outcome.feedback
    assert SandboxEnvironment(suite, process_sandbox, use_log=False).prompt("smoke_iris") == \
        suite.get("smoke_iris").description


def test_the_stacking_starter_pays_its_boosting_before_the_model_line_and_runs(suite, process_sandbox):
    """``starter_solution: heavy_stacking`` (the paper's regime of benchmarks/speedup.py): out-of-fold predictions of
    a 1000-round boosting run, averaged over two shuffles of 5 folds, become features of the linear baseline; the
    stacking sits in the prefilled head, so every executed script pays it whatever model the policy writes."""
    from wmrl.autoresearch.environments.real import SandboxEnvironment
    from wmrl.rollout.agent import starter_head

    env = SandboxEnvironment(suite, process_sandbox, use_log=False, starter_solution="heavy_stacking")
    for task, booster, model in (("smoke_iris", "HistGradientBoostingClassifier(max_iter=1000", "LogisticRegression("),
                                 ("smoke_diabetes", "HistGradientBoostingRegressor(max_iter=1000", "Ridge(")):
        script = env.starter(task)
        head = starter_head(script)
        assert booster in head and "cross_val_predict(" in head and "numeric += stack" in head
        assert model in script[len(head):]  # the meta-model is the linear baseline's, written after the head
        assert script.strip() in env.prompt(task)
        outcome = env.execute(task, script)
        assert outcome.status.value == "valid", outcome.feedback
    with pytest.raises(ValueError, match=r"'co2_forecast' \(forecast\) has no heavy_stacking"):
        env.starter("co2_forecast")


def test_an_unknown_or_unfit_starter_names_the_config_key(suite):
    from wmrl.autoresearch.environments.real import SandboxEnvironment

    with pytest.raises(ValueError, match=r"starter_solution: task 'smoke_iris' has no starter 'xgboost'.*knn"):
        SandboxEnvironment(suite, use_log=False, starter_solution="xgboost").starter("smoke_iris")
    with pytest.raises(ValueError, match=r"starter_solution: task 'co2_forecast' \(forecast\) has no heavy_boosting"):
        SandboxEnvironment(suite, use_log=False, starter_solution="heavy_boosting").starter("co2_forecast")
    assert "forecast(" in SandboxEnvironment(suite, use_log=False, starter_solution="trivial").starter("co2_forecast")
