"""Decoding with each distinct prompt's KV cache read once per step gives what the repeated cache gives."""

from __future__ import annotations

import pytest
import torch

from wmrl.generation.engine import SamplingParams
from wmrl.generation.hf import HFGenerationEngine
from wmrl.models import shared_decode
from wmrl.models.kv import returned_cache
from wmrl.models.resolve import smollm2_tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return smollm2_tokenizer()


def _gqa_llama(tokenizer, lora: bool):
    """A tiny Llama with grouped-query attention (4 query heads over 2 key/value heads), LoRA-wrapped if asked."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = LlamaForCausalLM(config)
        if lora:
            from peft import LoraConfig, get_peft_model

            model = get_peft_model(model, LoraConfig(task_type="CAUSAL_LM", r=4, lora_alpha=8,
                                                     target_modules=["q_proj", "v_proj"]))
            for name, parameter in model.named_parameters():  # a trained adapter: B is no longer zero
                if "lora_B" in name:
                    parameter.data.normal_(0, 0.5)
    return model.eval()


def _prompts(lengths: list[int], seed: int = 1) -> list[list[int]]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(100, 5000, (n,), generator=generator).tolist() for n in lengths]


@pytest.mark.parametrize("lora", [False, True])
def test_a_decode_step_gives_the_logits_of_the_plain_forward(tokenizer, lora):
    """Three left-padded prompts continued by 3, 1 and 2 rows (unequal), four steps: every step's logits equal the
    model's own forward over the whole sequence, to float rounding."""
    model = _gqa_llama(tokenizer, lora)
    prompts = _prompts([40, 33, 21])
    width = max(map(len, prompts))
    ids = torch.full((3, width), tokenizer.pad_token_id)
    mask = torch.zeros((3, width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        ids[row, width - len(prompt):] = torch.tensor(prompt)
        mask[row, width - len(prompt):] = 1
    row_prompt = [0, 1, 0, 2, 2, 0]
    with torch.no_grad():
        prefill = model(input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0),
                        use_cache=True, logits_to_keep=1)
        decoder = shared_decode.SharedPrefixDecoder(model, returned_cache(prefill), mask, row_prompt, capacity=8)
        answers = [list(prompts[p]) for p in row_prompt]
        generator = torch.Generator().manual_seed(2)
        for _ in range(4):
            tokens = torch.randint(100, 5000, (len(row_prompt),), generator=generator)
            positions = torch.tensor([len(answer) for answer in answers])
            logits = decoder.step(tokens, positions)
            for answer, token in zip(answers, tokens.tolist(), strict=True):
                answer.append(token)
            for row, answer in enumerate(answers):
                plain = model(input_ids=torch.tensor([answer])).logits[0, -1]
                torch.testing.assert_close(logits[row], plain, atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize(("temperature", "top_p"), [(1.0, 1.0), (0.7, 0.9), (0.0, 1.0)])
def test_the_engine_samples_the_tokens_and_log_probs_of_the_repeated_cache(tokenizer, temperature, top_p):
    """Seeded groups of unequal sizes in two micro-batches, rows ending at different steps (a tenth of the vocabulary
    ends a row): the same tokens, finish reasons and log-probs (to float rounding) with either decode."""
    model = _gqa_llama(tokenizer, lora=True)
    a, b, c = _prompts([50, 37, 44])
    prompts = [a] * 4 + [b] * 3 + [c, c]
    params = SamplingParams(max_new_tokens=24, temperature=temperature, top_p=top_p, seed=5)
    eos = list(range(0, len(tokenizer), 10))
    runs = [HFGenerationEngine(model, tokenizer, max_batch_size=5, eos_token_ids=eos,
                               shared_prefix_decode=shared).generate(prompts, params) for shared in (False, True)]
    repeated, shared = runs
    assert len({len(g.token_ids) for g in repeated}) > 1, "every row ran the same length: no row ended early"
    for before, after in zip(repeated, shared, strict=True):
        assert after.token_ids == before.token_ids
        assert after.finish_reason == before.finish_reason
        torch.testing.assert_close(torch.tensor(after.logprobs), torch.tensor(before.logprobs), atol=1e-5, rtol=0)


def test_only_llama_architecture_models_decode_with_shared_prompts(tokenizer):
    """The engine picks the shared decode for a Llama and the model's own forward for another architecture."""
    from transformers import GPT2Config, GPT2LMHeadModel

    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_embd=32, n_layer=1, n_head=2))
    assert HFGenerationEngine(_gqa_llama(tokenizer, lora=True), tokenizer).shared_prefix_decode
    assert not HFGenerationEngine(gpt2, tokenizer).shared_prefix_decode
    generations = HFGenerationEngine(gpt2, tokenizer).generate(
        [[5, 6, 7]] * 2, SamplingParams(max_new_tokens=3, temperature=1.0, seed=0))
    assert [len(g.token_ids) for g in generations] == [3, 3]
