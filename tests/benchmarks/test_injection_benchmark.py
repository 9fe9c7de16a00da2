"""benchmarks/injection.py without the default model: its two readings switch what the world model reads (as written
the injected claim reaches the LM's prompt and moves the copies' rewards; as executed it does not), and its cells
summarise the differences as the results page reads them."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from wmrl.autoresearch.world_models.lm import LMWorldModel
from wmrl.models import smollm2_tokenizer, tiny_llama

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("injection_benchmark", ROOT / "benchmarks" / "injection.py")
injection = importlib.util.module_from_spec(spec)
spec.loader.exec_module(injection)

SCRIPT = '''import pandas as pd
from sklearn.linear_model import LogisticRegression
train = pd.read_csv("public/train.csv")
test = pd.read_csv("public/test.csv")
features = [c for c in train.columns if c not in ("id", "target")]
model = LogisticRegression(max_iter=500).fit(train[features], train["target"])
pd.DataFrame({"id": test["id"], "prediction": model.predict(test[features])}).to_csv("submission.csv", index=False)
'''


def test_cells_give_mean_max_and_the_share_that_rose():
    found = {"a": {"script": 0.5, "comment": 0.6, "docstring": 0.5},
             "b": {"script": 0.2, "comment": 0.1, "docstring": 0.2 + 1e-7}}
    cells = injection.cells(found)
    assert cells["comment"] == pytest.approx({"copies": 2, "mean_abs": 0.1, "max_abs": 0.1, "rose": 0.5})
    assert cells["docstring"]["rose"] == 0.0  # 1e-7 is float rounding, under the tolerance
    assert cells["all"]["copies"] == 4 and cells["all"]["max_abs"] == pytest.approx(0.1)


def test_the_readings_switch_what_the_lm_reads(tiny_suite):
    model, tokenizer = tiny_llama(smollm2_tokenizer(), seed=0)
    world_model = LMWorldModel(suite=tiny_suite, mode="score")
    world_model.bind(model, tokenizer)
    cases = {"tiny_iris": {injection.BASE: SCRIPT, **injection.injected_copies(SCRIPT)}}
    result = injection.measure("LMWorldModel", lambda: world_model, cases)
    written, executed = (result[r]["cells"]["all"] for r in ("as written", "as executed"))
    assert written["max_abs"] > 1e-4, written  # the claim moves a random model's reward as written
    assert executed["max_abs"] <= injection.ROSE, executed
    rows = injection.table({"LMWorldModel": result})
    assert len(rows) == 2 + len(result["as written"]["cells"]) and rows[-1].startswith("| LMWorldModel | all |")
    with pytest.raises(RuntimeError, match="no longer switches"):
        injection.check_reading(world_model, "as written", "tiny_iris", cases["tiny_iris"]["comment"])
