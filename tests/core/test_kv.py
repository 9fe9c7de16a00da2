"""Prefix sharing in the update and the preallocated generation cache compute what the plain paths compute."""

from __future__ import annotations

import pytest
import torch
from support.fakes import byte_tokenizer

from wmrl.models import tiny_llama
from wmrl.models.kv import (
    MIN_SHARED_PREFIX,
    cache_kwarg,
    causal_lm_logits,
    common_prefix_length,
    last_token_logits,
    preallocate,
    prompt_micro_batches,
    returned_cache,
)


def _lora_model(seed: int = 0):
    from peft import LoraConfig, get_peft_model

    model, _ = tiny_llama(byte_tokenizer(), seed=seed)
    model = get_peft_model(model, LoraConfig(task_type="CAUSAL_LM", r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    with torch.no_grad():  # LoRA B starts at zero: move it so the adapter matters
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.5, generator=torch.Generator().manual_seed(1))
    return model


def _group(prefix_len: int = 80, answers=(17, 30, 9, 24), vocab: int = 200, seed: int = 0):
    """A right-padded group: one shared prompt, answers of different lengths (like a GRPO group)."""
    g = torch.Generator().manual_seed(seed)
    prefix = torch.randint(3, vocab, (prefix_len,), generator=g)
    width = prefix_len + max(answers)
    ids = torch.zeros((len(answers), width), dtype=torch.long)
    attention = torch.zeros_like(ids)
    for row, n in enumerate(answers):
        ids[row, : prefix_len + n] = torch.cat([prefix, torch.randint(3, vocab, (n,), generator=g)])
        attention[row, : prefix_len + n] = 1
    return ids, attention


def test_common_prefix_stops_at_the_first_difference_or_padding():
    ids, attention = _group(prefix_len=50)
    assert common_prefix_length(ids, attention) == 50 + int((ids[:, 50] == ids[0, 50]).all())
    same = torch.tensor([[4, 5, 6], [4, 5, 6]])
    assert common_prefix_length(same, torch.ones_like(same)) == 3
    assert common_prefix_length(same, torch.tensor([[1, 1, 1], [1, 1, 0]])) == 2  # padding is not shared


def test_shared_prefix_gives_the_same_logits_and_gradients():
    model = _lora_model()
    ids, attention = _group()
    keep = ids.shape[1] - 80 + 1  # from the last prompt position, as the update asks

    def run(share: bool):
        model.zero_grad(set_to_none=True)
        logits = causal_lm_logits(model, ids, attention, keep, share_prefix=share)
        loss = (logits.log_softmax(-1)[..., 7] * attention[:, -keep:]).sum()
        loss.backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}
        return logits.detach(), grads

    plain_logits, plain_grads = run(False)
    shared_logits, shared_grads = run(True)
    assert shared_logits.shape == plain_logits.shape == (4, keep, model.config.vocab_size)
    valid = attention[:, -keep:].bool()
    torch.testing.assert_close(shared_logits[valid], plain_logits[valid], rtol=1e-4, atol=1e-4)
    assert set(shared_grads) == set(plain_grads) and plain_grads
    for name, grad in plain_grads.items():  # the adapter's gradient includes the prompt's share, once per row
        torch.testing.assert_close(shared_grads[name], grad, rtol=1e-3, atol=1e-5, msg=name)
        assert grad.abs().sum() > 0


def test_short_or_single_prefixes_take_the_plain_path(monkeypatch):
    model = _lora_model()
    calls = []
    original = model.forward
    monkeypatch.setattr(model, "forward", lambda *a, **k: calls.append(k.get("use_cache")) or original(*a, **k))
    ids, attention = _group(prefix_len=MIN_SHARED_PREFIX - 1)
    causal_lm_logits(model, ids, attention, 10)
    assert calls == [None]  # one plain forward
    calls.clear()
    ids, attention = _group(prefix_len=MIN_SHARED_PREFIX + 8)
    causal_lm_logits(model, ids, attention, 10)
    assert calls == [True, True]  # prefix once, then the rows on its cache


@pytest.mark.parametrize("capacity", [6, 40])  # 6: decoding grows past the planned capacity
def test_preallocated_cache_decodes_like_the_dynamic_cache(capacity):
    model = _lora_model().eval()
    ids, _ = _group(prefix_len=20, answers=(0, 0, 0))
    steps = torch.randint(3, 200, (3, 12), generator=torch.Generator().manual_seed(3))
    key = cache_kwarg(model)

    def decode(prealloc: bool):
        with torch.no_grad():
            out = model(input_ids=ids, use_cache=True)
            cache = returned_cache(out)
            if prealloc:
                cache = preallocate(cache, ids.shape[1] + capacity)
            logits, rows = [], torch.arange(3)
            for t in range(steps.shape[1]):
                if t == 5:  # a row finishes: drop it from the cache, as the engine does
                    rows = torch.tensor([0, 2])
                    cache.reorder_cache(torch.tensor([0, 2]))
                out = model(input_ids=steps[rows, t : t + 1], use_cache=True, **{key: cache})
                cache = returned_cache(out)
                logits.append(out.logits[:, -1])
            return logits

    for got, want in zip(decode(True), decode(False), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_last_token_logits_on_a_shared_prefix_match_left_padded_rows():
    model = _lora_model().eval()
    g = torch.Generator().manual_seed(4)
    prefix = torch.randint(3, 200, (MIN_SHARED_PREFIX + 20,), generator=g).tolist()
    prompts = [prefix + torch.randint(3, 200, (n,), generator=g).tolist() for n in (5, 17, 1)]
    with torch.no_grad():
        shared = last_token_logits(model, prompts, pad_token_id=0)
        plain = last_token_logits(model, prompts, pad_token_id=0, share_prefix=False)
        alone = torch.cat([last_token_logits(model, [p], pad_token_id=0) for p in prompts])
    torch.testing.assert_close(shared, alone, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(plain, alone, rtol=1e-4, atol=1e-4)
    assert not torch.allclose(alone[0], alone[1])


def test_micro_batches_keep_rows_of_one_prompt_together():
    # rows 0, 2, 5: prompt A; rows 1, 3: prompt B (the same answer token as A's rows: only the prompt counts);
    # row 4: prompt C alone; row 6: A's prompt as a prefix of a longer prompt, so a prompt of its own
    prompts = [[1, 2, 3], [4, 5, 6], [1, 2, 3], [4, 5, 6], [7, 8, 9], [1, 2, 3], [1, 2, 3, 3]]
    ids = torch.zeros((7, 6), dtype=torch.long)
    answer = torch.zeros((7, 6), dtype=torch.bool)
    for row, prompt in enumerate(prompts):
        ids[row, : len(prompt) + 1] = torch.tensor([*prompt, 50])
        answer[row, len(prompt)] = True
    assert prompt_micro_batches(ids, answer, range(7), size=4) == [[0, 2, 5], [1, 3], [4, 6]]
    assert prompt_micro_batches(ids, answer, range(7), size=2) == [[0, 2], [1, 3], [5, 4], [6]]
    assert prompt_micro_batches(ids, answer, [1, 3, 4], size=8) == [[1, 3], [4]]  # only the rows asked for
    with pytest.raises(ValueError, match="size must be >= 1"):
        prompt_micro_batches(ids, answer, range(7), size=0)


def test_a_row_without_answer_tokens_is_its_own_prompt():
    ids = torch.tensor([[1, 2, 3], [1, 2, 3], [1, 2, 4]])
    answer = torch.tensor([[0, 0, 1], [0, 0, 0], [0, 0, 1]], dtype=torch.bool)
    assert prompt_micro_batches(ids, answer, range(3), size=4) == [[0, 2], [1]]
