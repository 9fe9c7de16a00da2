"""The multi-turn agent loop: code parsing, the observation bridge, loss masks and behaviour log-probs."""

from __future__ import annotations

from collections.abc import Sequence

from support.fakes import byte_tokenizer

from wmrl.autoresearch.agent import AgentLoop, AgentSettings, extract_code
from wmrl.generation.engine import Generation, GenerationEngine, SamplingParams
from wmrl.types import Outcome, Source, Status


class ScriptedEngine(GenerationEngine):
    """Answers every prompt with the next scripted response (a test double for the policy)."""

    def __init__(self, tokenizer, responses: list[str]) -> None:
        self.tokenizer, self.responses, self.prompts = tokenizer, list(responses), []

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Generation]:
        out = []
        for prompt in prompts:
            self.prompts.append(list(prompt))
            text = self.responses.pop(0)
            ids = tuple(self.tokenizer(text, add_special_tokens=False)["input_ids"])
            out.append(Generation(ids, tuple(-0.5 for _ in ids), text, "stop"))
        return out


class EchoEnvironment:
    source = Source.REAL

    def __init__(self, fail_on: int | None = None) -> None:
        self.turn, self.fail_on = 0, fail_on

    def step_many(self, requests):
        self.turn += 1
        if self.turn == self.fail_on:
            return [Outcome(Status.INFRA_ERROR, None, error="infra: boom") for _ in requests]
        return [
            Outcome(Status.RUNTIME_ERR, 0.1, feedback=f"FEEDBACK-{self.turn}: {r.code!r}") if r.code
            else Outcome(Status.MALFORMED, 0.0, feedback="no code")
            for r in requests
        ]


def test_extract_code_takes_the_first_complete_block():
    assert extract_code("a\n```python\nx = 1\n```\n```python\ny\n```") == "x = 1\n"
    assert extract_code("```py\nprint(2)\n```") == "print(2)\n"
    assert extract_code("no code here") is None


def test_two_turns_mask_observations_and_keep_sampled_tokens():
    tokenizer = byte_tokenizer()
    responses = ["Try.\n```python\nprint(1)\n```", "Again.\n```python\nprint(2)\n```"]
    engine = ScriptedEngine(tokenizer, responses)
    agent = AgentLoop(tokenizer, engine, AgentSettings(max_turns=2, observation_tokens=64))
    state = agent.start("t", 0, "Solve it.", EchoEnvironment())
    agent.run([state])
    trajectory = state.trajectory()
    assert [t.code for t in trajectory.turns] == ["print(1)\n", "print(2)\n"]
    assert trajectory.reward == 0.1
    generated = [tokenizer(r, add_special_tokens=False)["input_ids"] for r in responses]
    masked = [i for i, m in zip(state.token_ids, state.response_mask, strict=True) if m]
    assert masked == generated[0] + generated[1]  # exactly the sampled tokens carry the loss
    assert [lp for lp, m in zip(state.logprobs, state.response_mask, strict=True) if m] == [-0.5] * len(masked)
    assert engine.prompts[1] == state.token_ids[: len(engine.prompts[1])]  # turn 2 continues turn 1's tokens
    observation = tokenizer.decode([i for i, m in zip(state.token_ids, state.response_mask, strict=True) if not m])
    assert "FEEDBACK-1" in observation and observation.count("<|im_start|>assistant") == 2


def test_a_missing_turn_makes_the_trajectory_missing_and_stops_it():
    tokenizer = byte_tokenizer()
    engine = ScriptedEngine(tokenizer, ["```python\nx\n```"] * 3)
    agent = AgentLoop(tokenizer, engine, AgentSettings(max_turns=3))
    state = agent.start("t", 0, "Solve it.", EchoEnvironment(fail_on=1))
    agent.run([state])
    assert len(state.turns) == 1 and state.trajectory().reward is None


def test_long_feedback_keeps_head_and_tail():
    tokenizer = byte_tokenizer()
    agent = AgentLoop(tokenizer, ScriptedEngine(tokenizer, []), AgentSettings(observation_tokens=40))
    text = "HEAD" + "x" * 500 + "TAIL"
    short = agent.truncate_observation(text)
    assert short.startswith("HEAD") and short.endswith("TAIL") and "omitted" in short and len(short) < 120


def test_starter_head_prefill_opens_each_turn_without_loss():
    tokenizer = byte_tokenizer()
    starter = "import pandas as pd\ntrain = pd.read_csv('public/train.csv')\n\nmodel = 1\nprint(model)\n"
    responses = ["model = 2\nprint(model)\n```", "model = 3\n```"]
    engine = ScriptedEngine(tokenizer, responses)
    agent = AgentLoop(tokenizer, engine, AgentSettings(max_turns=2, observation_tokens=64, prefill="starter_head"))
    state = agent.start("t", 0, "Solve it.", EchoEnvironment(), starter)
    agent.run([state])
    head = "import pandas as pd\ntrain = pd.read_csv('public/train.csv')\n\n"
    assert [t.code for t in state.turns] == [head + "model = 2\nprint(model)\n", head + "model = 3\n"]
    assert state.turns[0].response.startswith("```python\n" + head)
    for prompt in engine.prompts:  # each turn's prompt ends with the prefill, which carries no loss
        assert tokenizer.decode(prompt).endswith("```python\n" + head)
    masked = [i for i, m in zip(state.token_ids, state.response_mask, strict=True) if m]
    assert tokenizer.decode(masked) == "".join(responses)


def test_prefill_without_a_starter_opens_the_block():
    from wmrl.autoresearch.agent import response_prefill, starter_head

    assert response_prefill("starter_head", None) == "```python\n"
    assert response_prefill("none", "x = 1") == ""
    forecast = "import pandas as pd\ny = pd.read_csv('public/train.csv')\nh = 3\n\n\ndef f():\n    pass\n"
    assert starter_head(forecast) == "import pandas as pd\ny = pd.read_csv('public/train.csv')\nh = 3\n\n"


class _Handshake:
    """A real environment that waits (up to ``patience`` s) for the world model to be answering meanwhile."""

    source = Source.REAL

    def __init__(self, world_model_running, patience: float) -> None:
        self.running, self.patience, self.saw_world_model = world_model_running, patience, None

    def step_many(self, requests):
        import time

        self.saw_world_model = self.running.wait(self.patience)
        time.sleep(0.2)  # the execution itself
        return [Outcome(Status.VALID, 0.5, feedback="ran") for _ in requests]


class _SlowWorldModel:
    source = Source.WORLD_MODEL

    def __init__(self, running) -> None:
        self.running = running

    def step_many(self, requests):
        import time

        self.running.set()
        time.sleep(0.3)
        return [Outcome(Status.VALID, 0.4, feedback="simulated", source=Source.WORLD_MODEL) for _ in requests]


def _mixed_round(overlap: bool, patience: float):
    import threading

    tokenizer = byte_tokenizer()
    running = threading.Event()
    real, simulated = _Handshake(running, patience), _SlowWorldModel(running)
    engine = ScriptedEngine(tokenizer, ["```python\nprint(1)\n```"] * 4)
    agent = AgentLoop(tokenizer, engine, AgentSettings(overlap=overlap))
    states = [agent.start("t", 0, "Go.", real), agent.start("t", 0, "Go.", real),
              agent.start("u", 1, "Go.", simulated), agent.start("u", 1, "Go.", simulated)]
    timings = agent.run(states)
    return real, states, timings


def test_real_executions_overlap_world_model_answers():
    real, states, timings = _mixed_round(overlap=True, patience=10.0)
    assert real.saw_world_model  # the executions were under way while the world model answered
    assert [s.turns[0].outcome.reward for s in states] == [0.5, 0.5, 0.4, 0.4]  # each answer to its own rollout
    assert timings["world_model"] >= 0.3 and timings["env"] >= 0.2
    assert 0.1 < timings["overlapped"] <= timings["env"]  # the execution's 0.2 s hid behind the world model


def test_without_overlap_environments_answer_one_after_the_other():
    real, states, timings = _mixed_round(overlap=False, patience=0.2)
    assert real.saw_world_model is False  # the real environment went first and alone
    assert [s.turns[0].outcome.reward for s in states] == [0.5, 0.5, 0.4, 0.4]
    assert timings["overlapped"] == 0.0


def test_a_first_turn_longer_than_the_policys_context_is_refused_naming_the_task_and_the_fixes():
    """Wide tables make long task cards: a prompt past the context is refused before anything is generated, never
    cut short or run past what the model was trained on."""
    import pytest

    from wmrl.autoresearch.agent import PromptTooLong
    from wmrl.generation.hf import HFGenerationEngine
    from wmrl.models import tiny_llama

    model, tokenizer = tiny_llama(byte_tokenizer(), seed=0, context=4096)
    engine = HFGenerationEngine(model, tokenizer)
    assert engine.context_length == model.config.max_position_embeddings == 4096
    agent = AgentLoop(tokenizer, engine, AgentSettings(max_new_tokens=256))
    agent.start("short_task", 0, "x" * 3000, EchoEnvironment())  # ~3,100 tokens + 256: fits
    with pytest.raises(PromptTooLong) as refused:
        agent.start("wide_task", 0, "x" * 3900, EchoEnvironment())  # ~4,000 tokens + 256 > 4,096
    message = str(refused.value)
    assert "task 'wide_task'" in message and "> the policy's context of 4,096 tokens" in message
    assert "max_new_tokens = 256" in message and "data.init_args.tasks" in message
    assert AgentLoop(tokenizer, ScriptedEngine(tokenizer, []), AgentSettings()).start(  # no context known: no check
        "t", 0, "x" * 9000, EchoEnvironment()).token_ids
