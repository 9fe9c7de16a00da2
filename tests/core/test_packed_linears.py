"""The linear layers through oneDNN's prepacked products (wmrl.models.packed): generation samples what PyTorch's own
product samples, leaves the model as it was and follows weights that changed; a float32 training pass gets the
gradients of PyTorch's product, through frozen layers only."""

from __future__ import annotations

import pytest
import torch
from support.fakes import byte_tokenizer

from wmrl.generation.engine import SamplingParams
from wmrl.generation.hf import HFGenerationEngine
from wmrl.models import packed, tiny_llama

pytestmark = pytest.mark.skipif(not packed.available(), reason="this PyTorch build has no oneDNN linear ops")


def _policy(lora: bool):
    model, tokenizer = tiny_llama(byte_tokenizer(), seed=0)
    if lora:
        from peft import LoraConfig, get_peft_model

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
            for name, parameter in model.named_parameters():  # a trained adapter: B is no longer zero
                if "lora_B" in name:
                    parameter.data.normal_(0, 0.5)
    return model, tokenizer


def _prompts() -> list[list[int]]:
    generator = torch.Generator().manual_seed(1)
    a, b = (torch.randint(3, 200, (n,), generator=generator).tolist() for n in (40, 29))
    return [a] * 4 + [b] * 3


def _generate(model, tokenizer, packed_linears: bool, temperature: float = 1.0):
    engine = HFGenerationEngine(model, tokenizer, max_batch_size=8, eos_token_ids=list(range(0, 256, 16)),
                                packed_linears=packed_linears)
    return engine, engine.generate(_prompts(), SamplingParams(max_new_tokens=20, temperature=temperature, seed=3))


@pytest.mark.parametrize("lora", [False, True])
@pytest.mark.parametrize("temperature", [1.0, 0.0])
def test_packed_products_sample_the_tokens_and_log_probs_of_pytorchs_own(lora, temperature):
    model, tokenizer = _policy(lora)
    _, plain = _generate(model, tokenizer, False, temperature)
    engine, fast = _generate(model, tokenizer, True, temperature)
    assert engine.packed_linears
    if temperature:  # (greedy rows of one prompt are one row)
        assert len({len(g.token_ids) for g in plain}) > 1, "every row ran the same length: no row ended early"
    for before, after in zip(plain, fast, strict=True):
        assert after.token_ids == before.token_ids and after.finish_reason == before.finish_reason
        torch.testing.assert_close(torch.tensor(after.logprobs), torch.tensor(before.logprobs), atol=1e-5, rtol=0)
    # the model is as it was: no layer keeps a swapped forward, and a training pass has its gradients
    assert not [m for m in model.modules() if "forward" in vars(m)]
    model.train()
    model(input_ids=torch.tensor([_prompts()[0]])).logits.sum().backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


def test_a_weight_changed_between_generations_is_packed_again():
    """A fully trained policy's optimizer step changes the weights in place: the next generation uses the new ones."""
    model, tokenizer = _policy(lora=False)
    engine, _ = _generate(model, tokenizer, True)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    params = SamplingParams(max_new_tokens=20, temperature=1.0, seed=3)
    after = engine.generate(_prompts(), params)
    plain = HFGenerationEngine(model, tokenizer, max_batch_size=8, eos_token_ids=list(range(0, 256, 16)),
                               packed_linears=False).generate(_prompts(), params)
    assert [g.token_ids for g in after] == [g.token_ids for g in plain]


def _grads(model, ids) -> dict[str, torch.Tensor]:
    model.zero_grad(set_to_none=True)
    model(input_ids=ids).logits.log_softmax(-1).mean().backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}


def test_a_training_pass_through_packed_frozen_layers_has_pytorchs_gradients():
    """With gradients on, a LoRA policy's frozen layers run packed (their input's gradient from the packed transpose)
    and the adapter's gradients are PyTorch's to float rounding; a fully trained policy's layers are left alone."""
    model, _ = _policy(lora=True)
    a, b = _prompts()[0], _prompts()[-1]
    ids = torch.tensor([a[:29], b])
    model.train()
    plain = _grads(model, ids)
    with packed.active(model):
        frozen = [m for m in model.modules() if "forward" in vars(m)]
        fast = _grads(model, ids)
    assert frozen and all(not m.weight.requires_grad for m in frozen)
    assert not [m for m in model.modules() if "forward" in vars(m)]
    for name, grad in plain.items():
        torch.testing.assert_close(fast[name], grad, atol=1e-5, rtol=1e-4)
    full, _ = _policy(lora=False)
    with packed.active(full):
        assert not [m for m in full.modules() if "forward" in vars(m)]  # every layer trains: none swapped
