"""The ``score`` starter view (wmrl.autoresearch.tasks.model_choice): the prompt hides the starter's model line and shows its
measured validation score; the prefill ends with a ``finish(model)`` helper; any estimator of the menu runs."""

from __future__ import annotations

import pytest

from wmrl.autoresearch.agent import response_prefill
from wmrl.autoresearch.environments.real import SandboxEnvironment


def test_the_score_view_shows_the_score_to_beat_not_the_model_line_and_its_starter_runs(tiny_suite, process_sandbox):
    env = SandboxEnvironment(tiny_suite, process_sandbox, use_log=False, starter_view="score")
    script = env.starter("tiny_iris")
    assert script.rstrip().endswith("model = make_pipeline(preprocess, LogisticRegression(max_iter=2000))\nfinish(model)")
    assert "def finish(model):" in script and "RandomForestClassifier" in script  # the helper and the menu
    outcome = env.execute("tiny_iris", script)
    assert outcome.status.value == "valid", outcome.feedback
    prompt = env.prompt("tiny_iris")
    assert f"VALIDATION_SCORE={outcome.validation_score:.4f}" in prompt and "(higher is better)" in prompt
    assert prompt.split("## Starter solution")[0] == tiny_suite.get("tiny_iris").description.split("## Starter solution")[0]
    menu, head = prompt.split("```python\n")[1:3]
    assert menu.splitlines()[:2] == ["model = make_pipeline(preprocess, LogisticRegression(max_iter=2000))",
                                     "model = make_pipeline(preprocess, RandomForestClassifier(random_state=0))"]
    assert "finish(model)" not in menu.split("```")[0] and "model = " not in head.split("def finish")[0]  # the script stops before it
    # the turn begins with the shown script and the model line up to the estimator: the policy names the estimator
    prefill = response_prefill("starter_estimator", script)
    assert prefill == "```python\n" + head.split("```")[0].rstrip() + "\n\n\nmodel = make_pipeline(preprocess,"
    written = prefill.split("\n", 1)[1] + " RandomForestClassifier(random_state=0))\nfinish(model)\n"
    other = env.execute("tiny_iris", written)
    assert other.status.value == "valid", other.feedback


def test_the_score_view_of_a_regression_task_says_lower_is_better_where_its_metric_does(tiny_suite, process_sandbox):
    env = SandboxEnvironment(tiny_suite, process_sandbox, use_log=False, starter_view="score")
    script = env.starter("tiny_diabetes")
    assert "RandomForestRegressor" in script and "RandomForestClassifier" not in script
    direction = "higher" if tiny_suite.get("tiny_diabetes").higher_is_better else "lower"
    assert f"({direction} is better)" in env.prompt("tiny_diabetes")
    assert env.execute("tiny_diabetes", script).status.value == "valid"


def test_a_starter_without_a_model_line_or_an_unknown_view_names_the_key(tiny_suite, process_sandbox):
    with pytest.raises(ValueError, match=r"starter_view: 'lines' is not one of script, score"):
        SandboxEnvironment(tiny_suite, process_sandbox, use_log=False, starter_view="lines")
    env = SandboxEnvironment(tiny_suite, process_sandbox, use_log=False, starter_view="score", starter_solution="trivial")
    with pytest.raises(ValueError, match=r"starter_view: score: task 'tiny_iris': .*no top-level `model = \.\.\.`"):
        env.starter("tiny_iris")


def test_the_estimator_prefill_ends_where_the_estimator_is_named():
    """``prefill: starter_estimator``: the turn begins with the starter up to ``make_pipeline(preprocess, `` so the
    policy's first sampled tokens are the estimator's name; other model lines fall back to the starter's head."""
    import doctest

    from wmrl.algorithms import stats
    from wmrl.autoresearch import agent
    from wmrl.autoresearch.tasks import model_choice

    for module in (agent, model_choice, stats):
        assert doctest.testmod(module).failed == 0, module.__name__
    script = "import x\n\nmodel = make_pipeline(preprocess, Ridge(alpha=1.0))\nfinish(model)\n"
    assert response_prefill("starter_estimator", script) == "```python\nimport x\n\nmodel = make_pipeline(preprocess,"
    assert response_prefill("starter_head", script) == "```python\nimport x\n\n"
    assert agent.AgentSettings(prefill="starter_estimator").prefill == "starter_estimator"
    with pytest.raises(ValueError, match="prefill must be one of none, fence, starter_head, starter_estimator"):
        agent.AgentSettings(prefill="estimator")


def test_the_offered_lines_start_with_the_starters_own_and_name_each_estimator_once(tiny_suite, process_sandbox):
    """The menu a ``score`` prompt offers (and ``benchmarks/model_choice.py`` runs): the starter's own line first,
    each other estimator of the task's kind once, all of them imported by the choice starter."""
    from wmrl.autoresearch.tasks.model_choice import CANDIDATES, candidate_lines

    env = SandboxEnvironment(tiny_suite, process_sandbox, use_log=False, starter_view="score")
    for task, kind in (("tiny_iris", "classifier"), ("tiny_diabetes", "regressor")):
        script = env.starter(task)
        lines = candidate_lines(script)
        own = next(line for line in script.splitlines() if line.startswith("model ="))
        names = [line.partition("preprocess, ")[2].split("(")[0] for line in lines]
        assert lines[0] == own and len(names) == len(set(names)) == len(CANDIDATES[kind])
        assert all(name in script.split("def finish")[0] for name in names)  # imported before the helper
