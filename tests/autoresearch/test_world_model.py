"""`LMWorldModel`: the gate, the two prediction modes, robust parsing, on a tiny in-process model."""

from __future__ import annotations

import pytest

from wmrl.autoresearch.world_models.lm import (
    FALLBACK_REWARD,
    FALLBACK_VARIANCE,
    OUTCOME_CLASSES,
    LMWorldModel,
    numbered,
    parse_predictions,
)
from wmrl.models import smollm2_tokenizer, tiny_llama
from wmrl.types import Basis, Source, Status, StepRequest

SCRIPT = "import pandas as pd\ntrain = pd.read_csv('public/train.csv')\nprint(len(train))\n"


@pytest.fixture(scope="module")
def tiny_policy():
    model, tokenizer = tiny_llama(smollm2_tokenizer(), seed=0)
    return model, tokenizer


def world_model(tiny_policy, tiny_suite, **kw) -> LMWorldModel:
    wm = LMWorldModel(suite=tiny_suite, **kw)
    wm.bind(*tiny_policy)
    return wm


def test_the_gate_answers_without_a_model_call(tiny_suite):
    wm = LMWorldModel(suite=tiny_suite)  # no model bound: any model call would raise
    outcomes = wm.step_many([StepRequest("tiny_iris", None, "no code"), StepRequest("tiny_iris", "x = (", "```")])
    assert [o.status for o in outcomes] == [Status.MALFORMED, Status.SYNTAX_ERR]
    assert [o.reward for o in outcomes] == [0.0, 0.0]
    assert all(o.source is Source.WORLD_MODEL and o.basis is Basis.EXACT for o in outcomes) and wm.calls == 0
    with pytest.raises(RuntimeError, match="no policy bound"):
        wm.step_many([StepRequest("tiny_iris", SCRIPT, "")])


def test_score_mode_reads_a_distribution_over_outcomes(tiny_policy, tiny_suite):
    wm = world_model(tiny_policy, tiny_suite, mode="score")
    requests = [StepRequest("tiny_iris", SCRIPT, ""), StepRequest("tiny_diabetes", SCRIPT + "x = 1\n", "")]
    prompt = wm.simulation_prompt(requests[0], "Q?")
    assert "## Starter solution" in tiny_suite.get("tiny_iris").description
    assert "## Starter solution" not in prompt and "## Data" in prompt and "2: train = pd.read_csv" in prompt
    probabilities = wm.outcome_probabilities(requests)
    assert len(probabilities) == 2
    for p in probabilities:
        assert len(p) == len(OUTCOME_CLASSES) and sum(p) == pytest.approx(1.0, abs=1e-5)
    outcomes = wm.step_many(requests)
    rewards = [c.reward for c in OUTCOME_CLASSES]
    for p, outcome in zip(probabilities, outcomes, strict=True):
        expected = sum(a * b for a, b in zip(p, rewards, strict=True))
        assert outcome.reward == pytest.approx(expected, abs=1e-5)
        assert outcome.variance == pytest.approx(sum(a * (b - expected) ** 2 for a, b in zip(p, rewards, strict=True)), abs=1e-5)
        assert outcome.source is Source.WORLD_MODEL and "Simulated execution" in outcome.feedback
    # batching does not change the answer (left padding with position ids)
    alone = wm.outcome_probabilities(requests[1:])
    assert alone[0] == pytest.approx(probabilities[1], abs=1e-4)


def test_scripts_of_one_task_share_the_prompt_prefix_and_score_as_alone(tiny_policy, tiny_suite):
    wm = world_model(tiny_policy, tiny_suite, mode="score")
    scripts = [SCRIPT, SCRIPT + "x = 1\n", "import numpy as np\nprint(np.zeros(3).sum())\n"]
    requests = [StepRequest("tiny_iris", s, "") for s in scripts] + [StepRequest("tiny_diabetes", SCRIPT, "")]
    together = wm.outcome_probabilities(requests)  # tiny_iris: one batch on a shared prefix
    assert together[0] != pytest.approx(together[1], abs=1e-6)  # the code matters
    for request, p in zip(requests, together, strict=True):
        assert wm.outcome_probabilities([request])[0] == pytest.approx(p, abs=1e-4)


def test_generate_mode_never_crashes_on_garbage_and_counts_parse_failures(tiny_policy, tiny_suite):
    wm = world_model(tiny_policy, tiny_suite, mode="generate", max_new_tokens=12)
    outcomes = wm.step_many([StepRequest("tiny_iris", SCRIPT, "")] * 3)
    assert len(outcomes) == 3
    for o in outcomes:  # a random tiny model writes no JSON: every answer falls back, counted
        assert o.reward == pytest.approx(FALLBACK_REWARD) and o.variance == FALLBACK_VARIANCE
    assert wm.parse_failures == 3


def test_generate_mode_answers_are_parsed_into_the_ladder():
    wm = LMWorldModel()
    text = ('Reasoning first. {"reason": "column typo", "predictions": [{"status": "runtime_err", '
            '"error_type": "KeyError", "error_line": 3, "quality_bucket": null, "env_feedback": '
            '"Traceback ...\\nKeyError: \'specis\'", "confidence": 0.7}, {"status": "valid", '
            '"quality_bucket": "mid", "env_feedback": "submission.csv written", "confidence": 0.3},]}')
    outcome = wm.outcome_from_text(text)
    assert outcome.status is Status.RUNTIME_ERR and outcome.reward == 0.1 and outcome.error == "KeyError"
    assert "KeyError: 'specis'" in outcome.feedback and "submission.csv written" in outcome.feedback  # top-2
    assert outcome.variance == pytest.approx(0.7 * 0.3 * (0.725 - 0.1) ** 2)
    valid = wm.outcome_from_text('{"status": "valid", "quality_bucket": "high"}')
    assert valid.status is Status.VALID and valid.reward == pytest.approx(0.875) and valid.position == 0.75
    bare = wm.outcome_from_text('blah "status": "ran_no_sub" blah')
    assert bare.status is Status.RAN_NO_SUB and bare.reward == 0.2
    assert wm.outcome_from_text('{"status": "exploded"}').variance == FALLBACK_VARIANCE
    assert wm.parse_failures == 1


def test_parse_predictions_keeps_at_most_two():
    text = '{"predictions": [{"status": "valid"}, {"status": "runtime_err"}, {"status": "ran_no_sub"}]}'
    assert [p.status for p in parse_predictions(text)] == [Status.VALID, Status.RUNTIME_ERR]


def test_numbered_code_is_capped():
    assert numbered("a\nb\nc\n", 100) == "1: a\n2: b\n3: c"
    assert numbered("x" * 50, 10).endswith("[... code truncated ...]")


def test_the_backend_is_a_typed_plug_in(tiny_policy, tiny_suite):
    """The language model runs where ``backend`` says (a class_path); the default is transformers in-process, and
    an object that is no :class:`wmrl.types.LanguageModelBackend` is refused with what it lacks."""
    from wmrl.generation.hf_world_model import HFWorldModelBackend
    from wmrl.types import LanguageModelBackend

    default = LMWorldModel(suite=tiny_suite)
    assert isinstance(default.backend, HFWorldModelBackend) and isinstance(default.backend, LanguageModelBackend)
    with pytest.raises(TypeError, match="LanguageModelBackend .load, bind, option_probabilities"):
        LMWorldModel(backend=object())
    requests = [StepRequest("tiny_iris", SCRIPT, ""), StepRequest("tiny_iris", SCRIPT + "y = 2\n", "")]
    one = world_model(tiny_policy, tiny_suite, backend=HFWorldModelBackend(batch_size=1))
    two = world_model(tiny_policy, tiny_suite, backend=HFWorldModelBackend(batch_size=2))
    assert one.tokenizer is tiny_policy[1]  # bound: the policy's own tokenizer
    for a, b in zip(one.outcome_probabilities(requests), two.outcome_probabilities(requests), strict=True):
        assert a == pytest.approx(b, abs=1e-4)  # batching is the backend's business, not the answer's


def test_bad_mode_is_reported():
    with pytest.raises(ValueError, match="mode must be 'score' or 'generate'"):
        LMWorldModel(mode="guess")
