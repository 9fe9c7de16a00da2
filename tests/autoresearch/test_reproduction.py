"""Reference reproduction across machines: a reference reproduces within its family's tolerance at the same rank,
the shipped lock covers the other CPU of issue 22, and no test demands the recording machine's exact floats."""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path

import pytest

from wmrl.autoresearch.environments.references_run import (
    EXACT_REL_TOL,
    FAMILY_REL_TOL,
    REFERENCE_FAMILY,
    Reproduction,
    family_tolerance,
    reproduction,
)
from wmrl.autoresearch.tasks.metrics import METRICS
from wmrl.autoresearch.tasks.suite import LOCK_PATH

ROOT = Path(__file__).resolve().parents[2]
LOCK = json.loads(Path(LOCK_PATH).read_text())["tasks"]

# Measured on an AMD EPYC with AVX-512 against the lock recorded here (issue 22): (task, reference, score there).
OTHER_CPU = [
    ("fair_affairs", "knn", 0.698562),
    ("grunfeld_investment", "linear_baseline", 27.3372130),
    ("diamond_price", "knn", 859.8507),
]


def _direction(task_id: str) -> bool:
    from wmrl.autoresearch.tasks.catalog import TASKS

    return METRICS[next(t for t in TASKS if t.id == task_id).metric].higher_is_better


def test_every_shipped_reference_has_a_family():
    names = {name for task in LOCK.values() for name in task["leaderboard"]}
    assert names <= set(REFERENCE_FAMILY), names - set(REFERENCE_FAMILY)
    assert set(REFERENCE_FAMILY.values()) == set(FAMILY_REL_TOL)


@pytest.mark.parametrize("name", sorted({n for t in LOCK.values() for n in t["leaderboard"]}))
def test_recorded_scores_perturbed_within_tolerance_are_tolerated_and_beyond_it_differ(name):
    """Simulates another CPU: each recorded score moved by half its family's tolerance reproduces wherever that
    keeps its rank; moved by twice the tolerance it differs."""
    tol = family_tolerance(name)
    checked = 0
    for task_id, task in LOCK.items():
        board = task["leaderboard"]
        if name not in board or board[name] == 0:
            continue
        higher = _direction(task_id)
        recorded = board[name]
        others = sorted(v for k, v in board.items() if k != name)
        gap = min((abs(v - recorded) / abs(recorded) for v in others), default=math.inf)
        verdict, why = reproduction(name, recorded, board, higher)
        assert verdict is Reproduction.EXACT, (task_id, why)
        if gap > tol:  # half a tolerance away cannot cross a neighbour
            for sign in (1, -1):
                verdict, why = reproduction(name, recorded * (1 + sign * tol / 2), board, higher)
                assert verdict is Reproduction.TOLERATED, (task_id, why)
                checked += 1
        verdict, why = reproduction(name, recorded * (1 + 2 * tol), board, higher)
        assert verdict is Reproduction.DIFFERS and why, (task_id, why)
    assert checked or name in {"trivial"}, f"{name}: no task where it could be checked"


def test_a_small_difference_that_changes_the_rank_differs():
    board = {"trivial": 0.30, "knn": 0.6990, "forest": 0.6995}
    verdict, why = reproduction("knn", 0.69955, board, higher_is_better=True)  # 7e-4 < 1e-3 but passes the forest
    assert verdict is Reproduction.DIFFERS and "rank" in why
    assert reproduction("knn", 0.69945, board, higher_is_better=True)[0] is Reproduction.TOLERATED
    lower = {"trivial": 3.0, "knn": 2.0, "forest": 1.999}  # lower is better
    assert reproduction("knn", 1.9985, lower, higher_is_better=False)[0] is Reproduction.DIFFERS


def test_no_score_or_a_non_finite_score_differs():
    board = {"trivial": 0.3, "knn": 0.7}
    assert reproduction("knn", None, board, True)[0] is Reproduction.DIFFERS
    assert reproduction("knn", math.nan, board, True)[0] is Reproduction.DIFFERS
    assert reproduction("forest", 0.7, board, True) == (Reproduction.DIFFERS, "no recorded score")


@pytest.mark.parametrize(("task_id", "name", "score"), OTHER_CPU)
def test_the_other_cpus_scores_of_issue_22_reproduce(task_id, name, score):
    """Issue 22's table (AMD EPYC, AVX-512) against this lock: within tolerance and at the recorded rank. (Its
    Holt-Winters rows came from the former, unstable setting, re-recorded since: see the next test.)"""
    verdict, why = reproduction(name, score, LOCK[task_id]["leaderboard"], _direction(task_id))
    assert verdict is Reproduction.TOLERATED, why


@pytest.mark.parametrize("task_id", ["us_employment_forecast", "sunspots_forecast", "air_passengers_forecast"])
def test_the_holt_winters_reference_is_stable_under_last_bit_noise(task_id):
    """The shipped Holt-Winters forecaster, fitted on the history with 1e-13 relative noise (the size of another
    CPU's rounding), moves its score by well under its family's tolerance. statsmodels' default start (a grid
    search from estimated values) moved us_employment by 52% and sunspots by 0.4% under the same noise."""
    import warnings

    import numpy as np
    import pandas as pd
    from statsmodels.tsa.holtwinters import ExponentialSmoothing

    from wmrl.autoresearch.tasks.references import _SEASONAL_PERIODS
    from wmrl.autoresearch.tasks.script_files import part
    from wmrl.autoresearch.tasks.suite import TaskSuite

    task = TaskSuite().get(task_id)
    spec = task.spec
    train = pd.read_csv(task.root / "public/train.csv").sort_values(spec.time_column)
    answers = pd.read_csv(task.root / "private/answers.csv").sort_values("id")
    test = pd.read_csv(task.root / "public/test.csv").sort_values(spec.time_column)
    history = train[spec.target[0]].to_numpy(dtype=float)
    namespace = {"np": np, "ExponentialSmoothing": ExponentialSmoothing, "period": _SEASONAL_PERIODS[task_id]}
    exec(part("forecasters/holt_winters")[1], namespace)  # the reference's own forecast() definition
    rng = np.random.default_rng(0)
    scores = []
    for k in range(4):
        noisy = history * (1 + (rng.standard_normal(len(history)) * 1e-13 if k else 0.0))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            prediction = namespace["forecast"](noisy, len(test))
        submission = pd.DataFrame({"id": test["id"].to_numpy(), "prediction": np.asarray(prediction)})
        aligned = answers.merge(submission, on="id")
        scores.append(METRICS[spec.metric].fn(aligned.drop(columns="prediction"), aligned["prediction"].to_numpy()))
    assert scores[0] == pytest.approx(LOCK[task_id]["leaderboard"]["holt_winters"], rel=family_tolerance("holt_winters"))
    spread = (max(scores) - min(scores)) / abs(scores[0])
    assert spread < family_tolerance("holt_winters") / 10, scores


def test_the_cli_check_reports_tolerated_differences(monkeypatch, capsys, tiny_suite):
    """``wmrl tasks check``: a tolerated difference is listed, not an error; a rank change is an error."""
    from types import SimpleNamespace

    from wmrl.autoresearch.environments import references_run
    from wmrl.cli import common
    from wmrl.cli import tasks as cli
    from wmrl.types import Outcome, Status

    task = tiny_suite.get("tiny_iris")
    board = dict(task.leaderboard)  # trivial 0.33, weak 0.7, good 0.9, best 0.97

    def fake_runs(scores):
        runs = [
            references_run.ReferenceRun(task.id, n, Outcome(Status.VALID, 0.5, score=s), board, True)
            for n, s in scores.items()
        ]
        monkeypatch.setattr(cli, "_run_references", lambda *a, **k: runs)

    monkeypatch.setattr(common, "suite", lambda args: tiny_suite)
    monkeypatch.setattr(common, "task_ids", lambda args, suite: [task.id])
    fake_runs({**board, "good": 0.9 * (1 + 5e-7)})  # 'good' is an unlisted family: convex, 1e-6
    cli.cmd_tasks_check(SimpleNamespace())
    printed = capsys.readouterr().out
    assert "3 exact, 1 within tolerance" in printed and "tolerated tiny_iris/good" in printed
    fake_runs({**board, "good": 0.98})
    with pytest.raises(cli.CliError, match=r"1 of 4 .*tiny_iris/good: changes its rank"):
        cli.cmd_tasks_check(SimpleNamespace())


# -- the guard: no test may hold only on the machine that recorded the numbers --------------------------------
# Names under which recorded numbers reach a test: the lock's leaderboards and timings, a reference's recorded
# score, a benchmark's results.
_RECORDED = {"recorded", "leaderboard", "reference_seconds"}
_TOLERANCE_KEYWORDS = {"rel_tol", "rel", "rtol"}


def _significant_digits(value: float) -> int:
    return len(repr(abs(value)).split("e")[0].replace(".", "").lstrip("0"))


def _reads_recorded(node: ast.AST) -> bool:
    """Whether an expression reads a recorded number: ``run.recorded``, ``recorded``, ``task.leaderboard[...]``,
    ``lock[id]["leaderboard"]`` (a leaderboard compared as a set of names, or a data hash, is fine)."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name | ast.Attribute) and getattr(sub, "id", getattr(sub, "attr", "")) == "recorded":
            return True
        if isinstance(sub, ast.Subscript):
            base, key = sub.value, sub.slice
            name = base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else ""
            if name in _RECORDED or (isinstance(key, ast.Constant) and key.value in _RECORDED):
                return True
    return False


def _machine_bound_assertions(path: Path) -> list[str]:
    """Asserts that hold only where the numbers were recorded: ``==`` against a float written to 8+ significant
    digits (a number copied from a run) or against a recorded value, or a relative tolerance below 1e-9 on one."""
    source = path.read_text()
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Assert):
            continue
        for sub in ast.walk(node.test):
            if isinstance(sub, ast.Compare) and any(isinstance(op, ast.Eq | ast.NotEq) for op in sub.ops):
                sides = [sub.left, *sub.comparators]
                for side in sides:
                    if (isinstance(side, ast.Constant) and isinstance(side.value, float)
                            and _significant_digits(side.value) >= 8):
                        found.append(f"{path.name}:{node.lineno}: == {side.value!r}")
                approx = any(isinstance(s, ast.Call) and "approx" in ast.unparse(s.func) for s in sides)
                if not approx and any(_reads_recorded(side) for side in sides):
                    found.append(f"{path.name}:{node.lineno}: exact comparison with a recorded value")
            if isinstance(sub, ast.Call) and any(_reads_recorded(a) for a in sub.args):
                for kw in sub.keywords:
                    value = kw.value.value if isinstance(kw.value, ast.Constant) else None
                    if kw.arg in _TOLERANCE_KEYWORDS and isinstance(value, float) and value < 1e-9:
                        found.append(f"{path.name}:{node.lineno}: {kw.arg}={value} on a recorded value")
    return found


def test_no_test_asserts_the_recording_machines_exact_floats():
    files = sorted((ROOT / "tests").rglob("test_*.py"))
    assert len(files) > 20
    found = [hit for path in files for hit in _machine_bound_assertions(path)]
    assert found == [], "assertions that hold only on the machine that recorded these numbers:\n" + "\n".join(found)


def test_the_guard_catches_what_it_is_for(tmp_path):
    bad = tmp_path / "test_bad.py"
    bad.write_text(
        "def test_a(run, lock):\n"
        "    assert run.score == 0.5280882625376141\n"
        "    assert run.outcome.score == run.recorded\n"
        "    assert lock['x']['leaderboard']['knn'] == run.score\n"
        "    assert math.isclose(run.score, run.recorded, rel_tol=1e-12)\n"
        "    assert run.score == 0.5 and set(lock) == {'a'} and f(x) == (1, 'recorded')\n"
    )
    hits = _machine_bound_assertions(bad)
    assert [h.split(":")[1] for h in hits] == ["2", "3", "4", "5"], hits


def test_the_shipped_tolerances_are_no_tighter_than_another_machine_allows():
    assert EXACT_REL_TOL == 1e-12
    assert min(FAMILY_REL_TOL.values()) >= 1e-9
