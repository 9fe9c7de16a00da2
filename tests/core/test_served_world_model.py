"""ServedWorldModelBackend: the world model as a service, against an in-process OpenAI-compatible server backed by a
real tiny model (tests/support/fake_openai_server.py); the real ``vllm serve`` is tests/vllm_real's.

What is checked: the served answers equal the in-process backend's; several servers behind one backend (a task's
prompts on one server, failover when one is down); retries on 5xx; a 4xx and a server without the options' log-probs
are configuration errors that name the fix; a server killed mid-step gives missing outcomes (``infra_error``, no
reward, never 0), a warning naming the server, and ``world_model/unanswered``, not a crash."""

from __future__ import annotations

import json
import logging
import time

import pytest
from support.fake_openai_server import FakeCompletionServer

from wmrl.autoresearch.world_models.lm import OUTCOME_CLASSES, LMWorldModel
from wmrl.generation.hf_world_model import HFWorldModelBackend
from wmrl.generation.served_world_model import ServedWorldModelBackend, ServerError
from wmrl.models import smollm2_tokenizer, tiny_llama
from wmrl.types import LanguageModelBackend, ReportsMetrics, Source, Status, StepRequest, Trajectory, Turn

SCRIPT = "import pandas as pd\ntrain = pd.read_csv('public/train.csv')\nprint(train.shape)\n"
REQUESTS = [StepRequest("tiny_iris", SCRIPT, ""), StepRequest("tiny_iris", SCRIPT + "x = 1\n", ""),
            StepRequest("tiny_diabetes", SCRIPT, "")]


@pytest.fixture(scope="module")
def tiny_policy():
    model, tokenizer = tiny_llama(smollm2_tokenizer(), seed=0)
    return model.eval(), tokenizer


@pytest.fixture
def server(tiny_policy):
    server = FakeCompletionServer(tiny_policy[0])
    yield server
    server.stop()


def served(tiny_policy, tiny_suite, urls, mode="score", **kw) -> LMWorldModel:
    backend = ServedWorldModelBackend(urls, **{"retries": 1, "backoff_s": 0.01, **kw})
    wm = LMWorldModel(suite=tiny_suite, mode=mode, backend=backend, max_new_tokens=64)
    wm.bind(*tiny_policy)
    return wm


def test_served_answers_equal_the_in_process_backend(tiny_policy, tiny_suite, server):
    wm = served(tiny_policy, tiny_suite, [server.url])
    local = LMWorldModel(suite=tiny_suite, mode="score", backend=HFWorldModelBackend())
    local.bind(*tiny_policy)
    for row, reference in zip(wm.outcome_probabilities(REQUESTS), local.outcome_probabilities(REQUESTS),
                              strict=True):
        assert len(row) == len(OUTCOME_CLASSES) and sum(row) == pytest.approx(1.0)
        assert row == pytest.approx(reference, abs=1e-5)
    body = server.seen[-1]  # token ids travel as they are, the options' log-probs after the mask
    assert body["model"] == "world-model" and all(isinstance(t, int) for t in body["prompt"])
    assert body["allowed_token_ids"] == wm.option_token_ids() and body["return_tokens_as_token_ids"] is True
    outcomes = wm.step_many(REQUESTS)
    assert all(o.source is Source.WORLD_MODEL and o.reward is not None and o.variance is not None for o in outcomes)
    assert isinstance(wm.backend, LanguageModelBackend) and isinstance(wm.backend, ReportsMetrics)
    assert wm.metrics()["server_requests"] == 2 * len(REQUESTS) and wm.metrics()["unanswered"] == 0


def test_generate_mode_asks_for_the_schema_with_a_seed_per_prompt(tiny_policy, tiny_suite, server):
    wm = served(tiny_policy, tiny_suite, [server.url], mode="generate")
    outcomes = wm.step_many(REQUESTS)
    assert wm.parse_failures == 0 and all(o.source is Source.WORLD_MODEL and o.reward is not None for o in outcomes)
    bodies = server.seen[-len(REQUESTS):]
    assert all(b["structured_outputs"]["json"]["required"] == ["reason", "predictions"] for b in bodies)
    assert len({b["seed"] for b in bodies}) == len(REQUESTS) and bodies[0]["max_tokens"] == 64


def test_a_tasks_prompts_go_to_one_server_and_fail_over_when_it_is_down(tiny_policy, tiny_suite):
    servers = [FakeCompletionServer(tiny_policy[0]) for _ in range(2)]
    try:
        wm = served(tiny_policy, tiny_suite, [s.url for s in servers])
        wm.outcome_probabilities(REQUESTS * 2)
        by_task = {}
        for index, s in enumerate(servers):
            for body in s.seen:
                by_task.setdefault(tuple(body["prompt"][:200]), set()).add(index)
        assert all(len(owners) == 1 for owners in by_task.values())  # each task's prefix on one server
        servers[0].stop()
        before = len(servers[1].seen)
        rows = wm.outcome_probabilities(REQUESTS)
        assert all(row is not None for row in rows) and len(servers[1].seen) - before == len(REQUESTS)
    finally:
        servers[1].stop()


def test_5xx_answers_are_retried(tiny_policy, tiny_suite, server):
    wm = served(tiny_policy, tiny_suite, [server.url], retries=2)
    server.fail_next = [503, 503]
    (row,) = wm.outcome_probabilities(REQUESTS[:1])
    assert row is not None and wm.metrics()["server_retries"] == 2


def test_a_4xx_answer_is_a_configuration_error_naming_the_servers_message(tiny_policy, tiny_suite, server):
    wm = served(tiny_policy, tiny_suite, [server.url], served_model="no-such-model")
    with pytest.raises(ServerError, match=r"HTTP 404.*no-such-model"):
        wm.step_many(REQUESTS[:1])


def test_a_server_without_the_options_log_probs_names_the_flag(tiny_policy, tiny_suite):
    server = FakeCompletionServer(tiny_policy[0], logprobs_after_mask=False)
    try:
        wm = served(tiny_policy, tiny_suite, [server.url])
        with pytest.raises(ServerError, match="--logprobs-mode processed_logprobs"):
            wm.step_many(REQUESTS[:1])
    finally:
        server.stop()


def test_a_server_killed_mid_step_gives_missing_outcomes_not_zeros(tiny_policy, tiny_suite, server, caplog):
    wm = served(tiny_policy, tiny_suite, [server.url], concurrency=1)
    server.kill_at = 2  # the second request's connection drops and the server goes away
    started = time.perf_counter()
    with caplog.at_level(logging.WARNING, logger="wmrl.generation.served_world_model"):
        outcomes = wm.step_many(REQUESTS)
    assert time.perf_counter() - started < 10
    assert outcomes[0].reward is not None  # answered before the kill
    for outcome in outcomes[1:]:
        assert outcome.status is Status.INFRA_ERROR and outcome.reward is None and outcome.missing
        assert outcome.source is Source.WORLD_MODEL and "unanswered" in outcome.error
    assert wm.metrics()["unanswered"] == 2 and wm.parse_failures == 0
    assert server.url in caplog.text and "missing, never 0" in caplog.text
    trajectory = Trajectory("tiny_iris", 0, (Turn("", SCRIPT, outcomes[1], 0, "stop"),), source=Source.WORLD_MODEL)
    assert trajectory.reward is None  # the rollout is left out of its group (a NaN reward), not scored 0


def test_bad_settings_name_the_key():
    with pytest.raises(ValueError, match="urls is empty"):
        ServedWorldModelBackend([])
    with pytest.raises(ValueError, match="not an http"):
        ServedWorldModelBackend(["localhost:8000"])
    with pytest.raises(ValueError, match="concurrency >= 1"):
        ServedWorldModelBackend("http://localhost:8000", concurrency=0)
    assert ServedWorldModelBackend("http://h:1/v1/").urls == ["http://h:1"]


def test_the_predictions_schema_is_json():
    from wmrl.generation.vllm_world_model import PREDICTIONS_SCHEMA

    assert json.loads(json.dumps(PREDICTIONS_SCHEMA)) == PREDICTIONS_SCHEMA
