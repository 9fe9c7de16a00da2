"""benchmarks/anchor_value.py: what anchors can add to a task-aware world model, measured offline. Its parts on
arrays whose answer is known (a world model exact, at chance, or off by a family's bias), and its refusals."""

from __future__ import annotations

import doctest
import importlib.util
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from wmrl.autoresearch.world_models.task_aware import FAMILY_NAMES, FEATURES

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("anchor_value", ROOT / "benchmarks" / "anchor_value.py")
anchor_value = importlib.util.module_from_spec(spec)
sys.modules["anchor_value"] = anchor_value
spec.loader.exec_module(anchor_value)


def settings(**overrides) -> SimpleNamespace:
    base = {"runs": 3, "anchor_tasks": 2, "per_task": 4, "shrink": 1.0, "steps": 300, "groups": 4, "group_size": 4,
            "seed": 0}
    return SimpleNamespace(**{**base, **overrides})


def menu(tasks: int = 8, lines: int = 6, seed: int = 0):
    """Every task's menu: ``lines`` scripts alternating two families, each with its own real reward."""
    rng = np.random.default_rng(seed)
    rows, real, names = [], [], []
    for t in range(tasks):
        for k in range(lines):
            row = np.zeros(len(FEATURES))
            row[FEATURES.index(f"family_{FAMILY_NAMES[k % 2]}")] = 1.0
            row[FEATURES.index("landmark_z")] = rng.normal()
            rows.append(row)
            real.append(rng.uniform(0.5, 1.0))
            names.append(f"task{t}")
    return np.array(rows), np.array(real), np.array(names)


def test_its_doctests_pass():
    assert doctest.testmod(anchor_value).failed == 0


def test_placement_of_an_exact_world_model_changes_nothing_and_the_oracle_beats_chance_when_it_is_noise():
    _, real, tasks = menu()
    exact = anchor_value.placement(real, real.copy(), tasks, settings())["cosine_to_all_real"]
    assert all(value == pytest.approx(1.0) for value in exact.values())
    noise = np.random.default_rng(1).uniform(0.5, 1.0, size=len(real))
    at_chance = anchor_value.placement(real, noise, tasks, settings())["cosine_to_all_real"]
    # one group in four real: about a quarter of the step's agreement; the oracle puts it where it is most wrong
    assert at_chance["none_pure_world_model"] < 0.15
    assert at_chance["random"] > at_chance["none_pure_world_model"] + 0.1
    assert at_chance["oracle_most_wrong"] > at_chance["random"] + 0.05


def test_a_family_bias_the_anchors_reveal_is_corrected_on_tasks_they_did_not_touch():
    """The world model underrates one family by 0.3 everywhere: the family residual, learned on two tasks, re-ranks
    the other tasks' scripts; an unbiased world model is left as it was."""
    x, real, tasks = menu()
    families = anchor_value.family_of(x)
    biased = real - 0.3 * (families == families[0])
    model = SimpleNamespace(examples=np.column_stack([x, real]).tolist())  # pretraining examples: the menu itself
    result = anchor_value.transfer(model, x, real, biased, tasks, settings())
    gain = result["difference_to_pretrained"]["family_residual"]
    assert gain["point"] > 0.2 and gain["low"] > 0
    assert result["within_task_spearman"]["family_residual"] > result["within_task_spearman"]["pretrained"]
    unbiased = anchor_value.transfer(model, x, real, real.copy(), tasks, settings())
    assert unbiased["difference_to_pretrained"]["family_residual"]["point"] == pytest.approx(0.0)
    assert unbiased["within_task_spearman"]["pretrained"] == pytest.approx(1.0)


def test_it_refuses_logs_of_the_pretraining_split_and_too_few_tasks(tmp_path):
    from wmrl.types import Outcome, Status

    def log(task: str) -> Path:
        path = tmp_path / f"{task}.jsonl"
        outcome = Outcome(Status.VALID, 0.9, score=1.0, position=0.8, wall_seconds=1.0).to_dict()
        path.write_text(json.dumps({"task": task, "code": "print(1)\n", "outcome": outcome}) + "\n")
        return path

    with pytest.raises(SystemExit, match=r"pretrained on \(\['email_spam'\]\): not unseen"):
        anchor_value.main([str(log("email_spam")), "--out", str(tmp_path / "out.json")])
    with pytest.raises(SystemExit, match="1 tasks in the logs; --anchor-tasks 6 leaves none untouched"):
        anchor_value.main([str(log("wine_cultivar")), "--out", str(tmp_path / "out.json")])
