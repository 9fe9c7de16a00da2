"""`TaskAwareWorldModel`: the task card (statistics and landmarks from public data only), the code's features,
a regressor over both that learns task x code interactions, exact recall of executed scripts, and its files."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from wmrl.autoresearch.tasks.spec import TaskSpec
from wmrl.autoresearch.world_models.lm import MAX_VARIANCE
from wmrl.autoresearch.world_models.task_aware import (
    FEATURES,
    LANDMARKS,
    TaskAwareWorldModel,
    code_features,
    estimator_classes,
    task_card,
    undefined_names,
)
from wmrl.types import Basis, Outcome, Source, Status, StepRequest


def script(suite, task_id: str, estimator: str, comment: str = "") -> str:
    """The task's starter with its model line's estimator replaced (``comment`` appended to that line)."""
    lines = suite.get(task_id).starter.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("model ="))
    lines[at] = f"model = make_pipeline(preprocess, {estimator}){comment}"
    return "\n".join(lines) + "\n"


def valid(reward: float) -> Outcome:
    return Outcome(Status.VALID, reward, score=0.5, position=2 * reward - 1)


def learn_families(model, suite, iris: tuple[float, float], diabetes: tuple[float, float]) -> None:
    """``model`` learns each task's forest and linear model at the given rewards (forest, linear), 10 rows a cell (the
    regressor's leaves hold 8 or more), each with other settings."""
    rows = []
    for k in range(10):
        rows += [("tiny_iris", f"RandomForestClassifier(n_estimators={50 + k})", iris[0]),
                 ("tiny_iris", f"LogisticRegression(C={1 + k})", iris[1]),
                 ("tiny_diabetes", f"RandomForestRegressor(n_estimators={50 + k})", diabetes[0]),
                 ("tiny_diabetes", f"Ridge(alpha={1 + k})", diabetes[1])]
    model.learn([t for t, _, _ in rows], [script(suite, t, e) for t, e, _ in rows], [valid(r) for _, _, r in rows])


def test_the_code_features_name_the_family_an_unknown_class_a_kind_mismatch_and_an_undefined_name():
    assert estimator_classes("model = make_pipeline(preprocess, RandomForestClassifier(random_state=0))") == \
        ["RandomForestClassifier"]
    invented = "from sklearn.svm import SVC\nmodel = SupinetreesClassifier(random_state=0)\n"
    assert undefined_names(invented) == {"SupinetreesClassifier"}
    features = code_features("model = SupinetreesClassifier()\n", invented, "binary")
    assert features["family_unknown"] == 1.0 and features["undefined_name"] == 1.0
    defined = "from sklearn.ensemble import RandomForestRegressor\n\ndef f(x):\n    return x\n\nm = RandomForestRegressor()\n"
    assert undefined_names(defined) == set()
    features = code_features("m = RandomForestRegressor()\n", defined, "multiclass")
    assert features["family_random_forest"] == 1.0 and features["kind_mismatch"] == 1.0
    assert code_features("m = RandomForestRegressor()\n", defined, "regression")["kind_mismatch"] == 0.0


def test_the_card_reads_public_train_csv_only_and_scores_each_family_in_the_tasks_metric(tiny_suite, tmp_path):
    """Landmarks from a folder holding nothing but ``public/train.csv``: the answers are never needed. A
    regression metric where lower is better is negated (higher is better for every landmark)."""
    for task_id, families in (("tiny_iris", set(LANDMARKS) - {"glm"}), ("tiny_diabetes", set(LANDMARKS))):
        task = tiny_suite.get(task_id)
        (tmp_path / task_id / "public").mkdir(parents=True)
        shutil.copy(task.root / "public" / "train.csv", tmp_path / task_id / "public" / "train.csv")
        card = task_card(SimpleNamespace(spec=task.spec, root=tmp_path / task_id))
        assert set(card["landmarks"]) == families, task_id
        values = [v for v in card["landmarks"].values() if v is not None]
        assert len(values) == len(families)
        if task_id == "tiny_iris":
            assert all(0.5 < v <= 1.0 for v in values) and card["classes"] == 3.0
        else:
            assert all(v < -20 for v in values) and card["classes"] == 0.0  # minus an RMSE of ~50-80


def test_a_family_that_cannot_answer_the_metric_fails_its_landmark(tmp_path):
    """ROC AUC needs probabilities: the menu's ``SVC()`` has none, so the landmark fails, as the script would."""
    from sklearn.datasets import load_breast_cancer

    frame = load_breast_cancer(as_frame=True).frame.rename(columns={"target": "malignant"}).iloc[:300]
    frame.insert(0, "id", range(len(frame)))
    (tmp_path / "public").mkdir()
    frame.to_csv(tmp_path / "public" / "train.csv", index=False)
    spec = TaskSpec(id="tiny_cancer", split="smoke", package="scikit-learn", loader="", version="", type="binary",
                    target=("malignant",), metric="roc_auc", title="", goal="", load=lambda: frame)
    card = task_card(SimpleNamespace(spec=spec, root=tmp_path))
    assert card["landmarks"]["svm"] is None and card["probability_metric"] == 1.0
    assert card["landmarks"]["linear"] > 0.9


def test_it_learns_which_family_wins_on_which_task_and_answers_the_prior_before(tiny_suite):
    """On iris forests win, on diabetes the linear model does: a task x code interaction the regressor must
    represent (a task-blind model can only rank one family first on both)."""
    model = TaskAwareWorldModel(suite=tiny_suite, min_examples=16, refit_every=4, cache_cards=False)
    request = StepRequest("tiny_iris", script(tiny_suite, "tiny_iris", "RandomForestClassifier(random_state=0)"), "")
    prior = model.step_many([request])[0]
    assert prior.basis is Basis.PRIOR and prior.variance == MAX_VARIANCE
    learn_families(model, tiny_suite, iris=(0.9, 0.6), diabetes=(0.6, 0.9))
    assert model.regressor is not None and len(model.examples) == 40
    model.recall = False  # the regressor's own answers, not the recalled rows
    asked = [("tiny_iris", "RandomForestClassifier(n_estimators=500)"), ("tiny_iris", "LogisticRegression(C=50)"),
             ("tiny_diabetes", "RandomForestRegressor(n_estimators=500)"), ("tiny_diabetes", "Ridge(alpha=50)")]
    answers = model.step_many([StepRequest(t, script(tiny_suite, t, e), "") for t, e in asked])
    forest_iris, linear_iris, forest_diabetes, linear_diabetes = (o.reward for o in answers)
    assert forest_iris > linear_iris + 0.1 and linear_diabetes > forest_diabetes + 0.1
    assert all(o.source is Source.WORLD_MODEL and 0 < o.variance <= MAX_VARIANCE for o in answers)


def test_a_script_an_anchor_ran_on_the_task_is_recalled_exactly_even_with_other_comments(tiny_suite):
    model = TaskAwareWorldModel(suite=tiny_suite, min_examples=2, cache_cards=False)
    line = "KNeighborsClassifier(n_neighbors=7)"
    ran = script(tiny_suite, "tiny_iris", line)
    model.observe([StepRequest("tiny_iris", ran, "")], [valid(0.77)])
    model.observe([StepRequest("tiny_iris", script(tiny_suite, "tiny_iris", "SVC()"), "")], [valid(0.61)])
    same = script(tiny_suite, "tiny_iris", line, comment="  # the best one, surely")
    other = script(tiny_suite, "tiny_iris", "KNeighborsClassifier(n_neighbors=9)")
    recalled, predicted = model.step_many([StepRequest("tiny_iris", same, ""), StepRequest("tiny_iris", other, "")])
    assert recalled.reward == pytest.approx(0.77) and recalled.variance == pytest.approx(1e-4)
    assert "an anchor executed this script" in recalled.feedback and model.recalled == 1
    assert "predicted from the task card" in predicted.feedback
    # a missing outcome (infrastructure) and a world-model outcome are never learned
    model.observe([StepRequest("tiny_iris", other, "")], [Outcome(Status.INFRA_ERROR, None)])
    model.observe([StepRequest("tiny_iris", other, "")], [Outcome(Status.VALID, 0.9, source=Source.WORLD_MODEL)])
    assert len(model.examples) == 2


def test_gathered_rows_carry_each_examples_recall_key_and_task(tiny_suite):
    """Ranks exchange examples as float64 rows: the recall key and the task survive the trip exactly."""
    model = TaskAwareWorldModel(suite=tiny_suite, min_examples=2, cache_cards=False)
    code = script(tiny_suite, "tiny_diabetes", "Ridge(alpha=3.0)")
    model.observe([StepRequest("tiny_diabetes", code, "")], [valid(0.8)], gather=lambda rows: torch.cat([rows, rows]))
    assert len(model.examples) == 2 and model.keys == [model.key("tiny_diabetes", code)] * 2
    assert len(set(model.tasks)) == 1 and len(model.examples[0]) == len(FEATURES) + 1


def test_the_pretrained_file_and_the_checkpoint_state_reproduce_the_answers(tiny_suite, tmp_path):
    model = TaskAwareWorldModel(suite=tiny_suite, min_examples=4, cache_cards=False)
    rows = [("tiny_iris", f"DecisionTreeClassifier(max_depth={d})", 0.55 + 0.04 * d) for d in range(1, 6)]
    rows += [("tiny_diabetes", f"KNeighborsRegressor(n_neighbors={k})", 0.5 + 0.05 * k) for k in range(1, 6)]
    model.learn([t for t, _, _ in rows], [script(tiny_suite, t, e) for t, e, _ in rows], [valid(r) for *_, r in rows])
    asked = [StepRequest("tiny_iris", script(tiny_suite, "tiny_iris", "DecisionTreeClassifier(max_depth=9)"), "")]
    expected = model.step_many(asked)[0].reward
    path = model.save(tmp_path / "wm.pt", meta={"executions": 10})
    loaded = TaskAwareWorldModel(pretrained=str(path), suite=tiny_suite, min_examples=4, cache_cards=False)
    assert loaded.step_many(asked)[0].reward == pytest.approx(expected)
    assert loaded.pretrained_meta == {"executions": 10}
    resumed = TaskAwareWorldModel(suite=tiny_suite, min_examples=4, cache_cards=False)
    resumed.load_state_dict(model.state_dict())
    assert resumed.step_many(asked)[0].reward == pytest.approx(expected) and resumed.refits == model.refits
    with pytest.raises(FileNotFoundError, match=r"world_model.init_args.pretrained.*pretrain_world_model.py"):
        TaskAwareWorldModel(pretrained=str(tmp_path / "nope.pt"), suite=tiny_suite).step_many(asked)
    state = torch.load(path, weights_only=True)
    torch.save({**state, "features": state["features"][:-1]}, tmp_path / "old.pt")
    with pytest.raises(ValueError, match="rebuild it"):
        TaskAwareWorldModel(pretrained=str(tmp_path / "old.pt"), suite=tiny_suite).step_many(asked)


def test_out_of_fold_predictions_are_made_on_tasks_left_out_and_give_the_error_and_the_agreement():
    from wmrl.autoresearch.world_models.task_aware import out_of_fold_predictions, within_task_agreement

    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 3))
    y = 0.5 + 0.1 * x[:, 0]
    groups = [f"t{k % 6}" for k in range(60)]
    shuffled = rng.permutation(y)
    learnable, noise = out_of_fold_predictions(x, y, groups), out_of_fold_predictions(x, shuffled, groups)
    assert np.mean((learnable - y) ** 2) < np.mean((noise - shuffled) ** 2) and np.mean((learnable - y) ** 2) < np.var(y)
    assert np.allclose(out_of_fold_predictions(x, y, ["one"] * 60), np.mean(y))  # one task: nothing left out
    agreement, dof = within_task_agreement(learnable, y, groups)
    assert agreement > 0.8 and dof == 60 - 6  # six tasks of ten: nine degrees of freedom each
    assert abs(within_task_agreement(noise, shuffled, groups)[0]) < 0.4


def test_a_pretrained_model_says_how_well_it_ranked_tasks_it_was_not_fitted_on():
    from wmrl.types import KnowsItsAgreement

    artefact = Path(__file__).resolve().parents[2] / "benchmarks" / "artefacts" / "task_aware_world_model.pt"
    model = TaskAwareWorldModel(pretrained=str(artefact))
    agreement, dof = model.agreement_prior()
    assert isinstance(model, KnowsItsAgreement) and 0 < agreement < 1 and dof == pytest.approx(138 - 16)
    assert TaskAwareWorldModel().agreement_prior() is None  # nothing pretrained, nothing measured


def test_a_cached_card_is_read_not_recomputed_and_its_cost_still_reported(tiny_suite):
    first = TaskAwareWorldModel(suite=tiny_suite, cache_cards=True)
    card = first.card("tiny_iris")
    assert first.card_seconds > 0 and first.card_seconds_cached == 0
    second = TaskAwareWorldModel(suite=tiny_suite, cache_cards=True)
    assert second.card("tiny_iris") == card
    assert second.card_seconds == 0 and second.card_seconds_cached == pytest.approx(card["seconds"])
    assert second.metrics()["card_seconds_cached"] == pytest.approx(card["seconds"])


def test_it_says_how_far_apart_its_rewards_lie_for_the_lines_a_task_offers(tiny_suite):
    """``KnowsItsSeparation``: nothing before the regressor is fitted; once it learned that iris's families differ and
    diabetes's do not, it separates iris's menu more; a line an anchor ran counts at its real reward."""
    from wmrl.autoresearch.tasks.model_choice import candidate_lines

    model = TaskAwareWorldModel(suite=tiny_suite, min_examples=16, refit_every=4, cache_cards=False)
    assert model.separation("tiny_iris") is None
    learn_families(model, tiny_suite, iris=(0.9, 0.55), diabetes=(0.7, 0.7))
    iris, diabetes = model.separation("tiny_iris"), model.separation("tiny_diabetes")
    assert iris > diabetes + 0.05
    offered = candidate_lines(tiny_suite.get("tiny_diabetes").starter)[1].partition("preprocess, ")[2][:-1]
    crash = Outcome(Status.RUNTIME_ERR, 0.1, error="MemoryError")
    model.learn(["tiny_diabetes"], [script(tiny_suite, "tiny_diabetes", offered)], [crash])
    assert model.separation("tiny_diabetes") > diabetes + 0.1


def test_it_meets_the_world_model_contract_with_its_capabilities(tiny_suite):
    """``wmrl.testing.check_world_model``: the gate answers 0.0 without a model call, every turn gets an outcome;
    and it declares what WorldModelReward uses: learning from anchors, checkpoints, metrics, the shown starter."""
    from wmrl.callbacks import WorldModelReward
    from wmrl.testing import check_world_model

    model = TaskAwareWorldModel(suite=tiny_suite, cache_cards=False)
    report = check_world_model(model, task_id="tiny_iris")
    assert report.problems == []
    assert {"LearnsFromAnchors", "Checkpointable", "ReportsMetrics", "ComparesWithStarter",
            "KnowsItsSeparation"} <= set(report.capabilities)
    assert WorldModelReward(model).world_model is model


def test_a_copy_learns_on_its_own(tiny_suite):
    model = TaskAwareWorldModel(suite=tiny_suite, min_examples=2, refit_every=1, cache_cards=False)
    first = script(tiny_suite, "tiny_iris", "SVC()")
    model.observe([StepRequest("tiny_iris", first, "")], [valid(0.6)])
    copy = model.copy()
    second = script(tiny_suite, "tiny_iris", "KNeighborsClassifier(n_neighbors=3)")
    copy.observe([StepRequest("tiny_iris", second, "")], [valid(0.9)])
    assert len(copy.examples) == 2 and len(model.examples) == 1
    assert copy.step_many([StepRequest("tiny_iris", second, "")])[0].reward == pytest.approx(0.9)  # recalled
    assert "an anchor executed" not in model.step_many([StepRequest("tiny_iris", second, "")])[0].feedback
    assert model.recalled == 0 and copy.recalled == 1
