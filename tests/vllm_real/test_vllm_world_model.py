"""VLLMWorldModelBackend against the real vLLM: the world model's scoring prompts served by vLLM (with the policy's
adapter off, as the paper's frozen base) give the transformers backend's probabilities, and ``generate`` mode's
guided JSON always parses."""

from __future__ import annotations

import json

import pytest

from wmrl.autoresearch.world_models.lm import OUTCOME_CLASSES, LMWorldModel
from wmrl.generation.engine import SamplingParams
from wmrl.generation.vllm import VLLMGenerationEngine
from wmrl.generation.vllm_world_model import VLLMWorldModelBackend
from wmrl.types import Source, StepRequest

SCORE_TOLERANCE = 2e-3
"""Largest difference allowed between an outcome probability from vLLM and from transformers (float32 both)."""

SCRIPTS = {
    "penguin_species": "import pandas as pd\nfrom sklearn.linear_model import LogisticRegression\n"
                       "train = pd.read_csv('public/train.csv')\ntest = pd.read_csv('public/test.csv')\n"
                       "X = pd.get_dummies(train.drop(columns=['species']))\nmodel = LogisticRegression(max_iter=500)\n"
                       "model.fit(X, train['species'])\n",
    "smoke_iris": "import pandas as pd\ntrain = pd.read_csv('public/train.csv')\nprint(train.shape)\n",
}


def requests() -> list[StepRequest]:
    out = []
    for task_id, script in SCRIPTS.items():
        for variant in (script, script + "raise SystemExit(1)\n"):
            out.append(StepRequest(task_id, variant, f"```python\n{variant}```"))
    return out


def test_scoring_prompts_served_by_vllm_match_transformers_with_the_adapter_off(new_policy, cpu_settings, suite):
    policy, tokenizer = new_policy(adapter_scale=0.05)  # a trained adapter the world model must not use
    engine = VLLMGenerationEngine(policy, tokenizer, cpu_settings)  # the policy's engine, as in a fit
    engine.generate([tokenizer("hi", add_special_tokens=False)["input_ids"]], SamplingParams(max_new_tokens=1))
    on_vllm = LMWorldModel(model="policy", mode="score", suite=suite, backend=VLLMWorldModelBackend(cpu_settings))
    on_vllm.bind(policy, tokenizer)
    on_hf = LMWorldModel(model="policy", mode="score", suite=suite)
    on_hf.bind(policy, tokenizer)
    batch = requests()
    served = on_vllm.outcome_probabilities(batch)
    expected = on_hf.outcome_probabilities(batch)
    for row, reference in zip(served, expected, strict=True):
        assert len(row) == len(OUTCOME_CLASSES) and sum(row) == pytest.approx(1.0, abs=1e-5)
        assert row == pytest.approx(reference, abs=SCORE_TOLERANCE)
    assert on_vllm.backend.llm is engine.llm  # one engine per process: the policy's, asked without its adapter
    outcomes = on_vllm.step_many(batch)
    assert all(o.source is Source.WORLD_MODEL and o.variance is not None for o in outcomes)


def test_generate_mode_answers_follow_the_schema(new_policy, cpu_settings, suite):
    policy, tokenizer = new_policy()
    world_model = LMWorldModel(model="policy", mode="generate", suite=suite, max_new_tokens=1024, temperature=0.7,
                               top_p=0.8, backend=VLLMWorldModelBackend(cpu_settings))
    world_model.bind(policy, tokenizer)
    batch = requests()[:2]
    outcomes = world_model.step_many(batch)
    assert world_model.parse_failures == 0 and all(o.source is Source.WORLD_MODEL for o in outcomes)
    prompts = [world_model._chat_ids(world_model.simulation_prompt(r, "Answer in JSON.")) for r in batch]
    for text in world_model.backend.generate(prompts, 1024, 0.7, 0.8, seed=1):
        answer = json.loads(text)
        assert {"reason", "predictions"} <= answer.keys() and 1 <= len(answer["predictions"]) <= 2
