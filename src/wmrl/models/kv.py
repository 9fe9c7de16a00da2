"""KV-cache plumbing shared by generation and the GRPO update: prefix sharing and a preallocated cache.

On CPU a task prompt (~1,000 tokens) costs far more than a group's answers (~250 tokens each), and every
rollout of a GRPO group starts with the same prompt. Running the common prefix once and repeating its KV cache
per row computes the same logits as running every row in full (up to float rounding), and the repeat is an
``index_select``, so gradients from every row flow back through the shared prefix: the update of a group of 4
touches ~2,000 tokens instead of ~5,000. Generation (``HFGenerationEngine``) shares the prefill the same way.

Importing this module is cheap; transformers loads only when :func:`preallocate` runs.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Sequence
from typing import Any

import torch

#: below this many shared tokens a plain batched forward is as fast (one extra forward call per micro-batch)
MIN_SHARED_PREFIX = 32


def cache_kwarg(model: Any) -> str:
    """transformers >= 5.2x names the KV cache argument ``cache``; older releases (vLLM's pin) ``past_key_values``."""
    from wmrl.models.resolve import is_peft_model

    base = model.get_base_model() if is_peft_model(model) else model
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"


def returned_cache(output: Any) -> Any:
    """The KV cache a forward pass with ``use_cache=True`` returned (named ``cache`` or ``past_key_values``)."""
    cache = getattr(output, "cache", None)
    return cache if cache is not None else output.past_key_values


def common_prefix_length(ids: torch.Tensor, attention_mask: torch.Tensor) -> int:
    """Leading positions where every row holds the same real (unpadded) token; rows are right-padded.

    >>> common_prefix_length(torch.tensor([[5, 6, 7, 8], [5, 6, 9, 0]]), torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]]))
    2
    """
    same = (ids == ids[:1]).all(0) & attention_mask.bool().all(0)
    differs = (~same).nonzero()
    return int(differs[0]) if len(differs) else ids.shape[1]


def prompt_micro_batches(
    input_ids: torch.Tensor, response_mask: torch.Tensor, rows: Sequence[int], size: int
) -> list[list[int]]:
    """Split ``rows`` into micro-batches of at most ``size`` rows, rows with the same prompt together.

    :func:`causal_lm_logits` shares only the prefix common to *every* row of a micro-batch, so a micro-batch that
    mixes two groups' prompts runs both prompts in full for every row. Grouping rows by prompt (the tokens before
    their first response token: a GRPO group, or several groups of one task) lets each micro-batch run its prompt
    once. Measured on 2 cores (SmolLM2-135M, LoRA, ~1,600-token prompts, 150-token answers, policy forward and
    backward plus the reference forward): 4 rows of two groups took 100-110 s, the same 4 rows as two one-group
    micro-batches 41-44 s. Rows left alone by their prompt are packed together as before. The GRPO loss is
    normalised over the whole batch, so how rows are split into micro-batches does not change the gradient.

    >>> ids = torch.tensor([[1, 2, 9], [3, 4, 9], [1, 2, 8], [3, 4, 8], [5, 6, 7]])
    >>> answer = torch.tensor([[0, 0, 1]] * 5, dtype=torch.bool)
    >>> prompt_micro_batches(ids, answer, rows=[0, 1, 2, 3, 4], size=4)
    [[0, 2], [1, 3], [4]]
    """
    if size < 1:
        raise ValueError(f"size must be >= 1 (got {size})")
    by_prompt: dict[tuple[int, ...], list[int]] = {}
    for row in rows:
        answer = response_mask[row].nonzero()
        end = int(answer[0]) if len(answer) else int(response_mask.shape[1])
        by_prompt.setdefault(tuple(input_ids[row, :end].tolist()), []).append(row)
    batches: list[list[int]] = []
    alone: list[int] = []
    for members in by_prompt.values():
        for start in range(0, len(members), size):
            chunk = members[start : start + size]
            if len(chunk) > 1:
                batches.append(chunk)
            else:
                alone.extend(chunk)
    batches.extend(alone[start : start + size] for start in range(0, len(alone), size))
    return batches


def shared_prefix(ids: torch.Tensor, attention_mask: torch.Tensor, logits_to_keep: int, share_prefix: bool = True) -> int:
    """How many leading tokens :func:`causal_lm_logits` runs once for all rows (0: every row runs in full): the
    prefix common to every row that no kept logit needs, when it is at least :data:`MIN_SHARED_PREFIX` long."""
    rows, length = ids.shape
    shared = min(common_prefix_length(ids, attention_mask), length - logits_to_keep) if share_prefix else 0
    return 0 if rows == 1 or shared < MIN_SHARED_PREFIX else shared


def positions_run(ids: torch.Tensor, attention_mask: torch.Tensor, logits_to_keep: int, share_prefix: bool = True) -> int:
    """How many token positions :func:`causal_lm_logits` computes for these rows (padding included): the shared
    prefix once plus every row's rest, or every row in full.

    >>> ids = torch.tensor([[1] * 40 + [5, 6], [1] * 40 + [7, 8]])
    >>> positions_run(ids, torch.ones_like(ids), logits_to_keep=2), positions_run(ids, torch.ones_like(ids), 2, False)
    (44, 84)
    """
    rows, length = ids.shape
    shared = shared_prefix(ids, attention_mask, logits_to_keep, share_prefix)
    return shared + rows * (length - shared)


def causal_lm_logits(
    model: Any,
    ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
    share_prefix: bool = True,
) -> torch.Tensor:
    """Logits ``[B, logits_to_keep, V]`` of the last ``logits_to_keep`` positions of right-padded rows.

    With ``share_prefix`` (and at least :data:`MIN_SHARED_PREFIX` leading tokens common to every row that no
    kept logit needs), the common prefix runs once as a batch of one and its KV cache is repeated per row;
    otherwise one plain batched forward. Both give the same logits and gradients up to float rounding
    (``tests/core/test_kv.py``).
    """
    rows, length = ids.shape
    shared = shared_prefix(ids, attention_mask, logits_to_keep, share_prefix)
    if not shared:
        return model(input_ids=ids, attention_mask=attention_mask, logits_to_keep=logits_to_keep).logits
    head = model(input_ids=ids[:1, :shared], use_cache=True, logits_to_keep=1)
    cache = returned_cache(head)
    cache.reorder_cache(torch.zeros(rows, dtype=torch.long, device=ids.device))
    positions = torch.arange(shared, length, device=ids.device).expand(rows, -1)
    return model(
        input_ids=ids[:, shared:],
        attention_mask=attention_mask,
        position_ids=positions,
        use_cache=True,
        logits_to_keep=logits_to_keep,
        **{cache_kwarg(model): cache},
    ).logits


def last_token_logits(
    model: Any, prompts: list[list[int]], pad_token_id: int, share_prefix: bool = True
) -> torch.Tensor:
    """Next-token logits ``[B, V]`` after each prompt (token lists of any lengths), in one batched pass.

    Prompts are left-padded so every row's last token is the last column, with position ids counted from each
    row's first real token. With ``share_prefix`` and at least :data:`MIN_SHARED_PREFIX` leading tokens common
    to all prompts (a world model scoring several scripts of one task), the common prefix runs once and the rest
    of each prompt is left-padded after it: ``[prefix][pad ...][rest]``, the pads masked out of attention.
    """
    device = next(model.parameters()).device
    shared = 0
    if share_prefix and len(prompts) > 1:  # leave at least one token per row after the prefix
        shared = min(len(os.path.commonprefix([list(p) for p in prompts])), min(map(len, prompts)) - 1)
    if shared < MIN_SHARED_PREFIX:
        shared = 0
    rests = [p[shared:] for p in prompts]
    width = max(map(len, rests))
    ids = torch.full((len(prompts), width), pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), shared + width), dtype=torch.long)
    mask[:, :shared] = 1
    for row, rest in enumerate(rests):
        ids[row, width - len(rest) :] = torch.tensor(rest)
        mask[row, shared + width - len(rest) :] = 1
    positions = ((mask.cumsum(1) - 1).clamp(min=0))[:, shared:]
    kwargs: dict[str, Any] = {}
    if shared:
        head = model(input_ids=torch.tensor([prompts[0][:shared]], device=device), use_cache=True, logits_to_keep=1)
        cache = returned_cache(head)
        cache.reorder_cache(torch.zeros(len(prompts), dtype=torch.long, device=device))
        kwargs = {"use_cache": True, cache_kwarg(model): cache}
    out = model(
        input_ids=ids.to(device),
        attention_mask=mask.to(device),
        position_ids=positions.to(device),
        logits_to_keep=1,
        **kwargs,
    )
    return out.logits[:, -1, :]


def preallocate(cache: Any, capacity: int) -> Any:
    """Move every layer of a ``DynamicCache`` into buffers with room for ``capacity`` positions.

    transformers' dynamic layers grow by ``torch.cat`` at every decoded token, copying the whole cache each
    step (half of the decoding time for a ~1,000-token prompt on CPU); a preallocated layer writes the new
    position in place and hands attention a view. Returns ``cache`` (modified in place).
    """
    from transformers.cache_utils import DynamicLayer

    class PreallocatedLayer(DynamicLayer):
        def __init__(self, keys: torch.Tensor, values: torch.Tensor) -> None:
            super().__init__()
            batch, heads, length, dim = keys.shape
            self._keys = keys.new_empty((batch, heads, max(capacity, length), dim))
            self._values = values.new_empty((batch, heads, max(capacity, length), values.shape[-1]))
            self._keys[:, :, :length] = keys
            self._values[:, :, :length] = values
            self._length = length
            self.device, self.is_initialized = keys.device, True
            self._views()

        def _views(self) -> None:
            self.keys = self._keys[:, :, : self._length]
            self.values = self._values[:, :, : self._length]

        def update(self, key_states, value_states, *args, **kwargs):
            end = self._length + key_states.shape[-2]
            if end > self._keys.shape[2]:  # past the planned capacity: grow like a dynamic layer
                self._keys = torch.cat([self._keys, torch.empty_like(self._keys)], dim=2)
                self._values = torch.cat([self._values, torch.empty_like(self._values)], dim=2)
            self._keys[:, :, self._length : end] = key_states
            self._values[:, :, self._length : end] = value_states
            self._length = end
            self._views()
            return self.keys, self.values

        def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
            self._keys = self._keys.index_select(0, beam_idx.to(self._keys.device))
            self._values = self._values.index_select(0, beam_idx.to(self._values.device))
            self._views()

    layers = getattr(cache, "layers", None)
    if layers is None or not all(type(layer) is DynamicLayer and layer.is_initialized for layer in layers):
        return cache  # another cache type (sliding window, legacy tuples): leave it as it is
    cache.layers = [PreallocatedLayer(layer.keys, layer.values) for layer in layers]
    return cache
