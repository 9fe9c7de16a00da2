"""Decoding rows that share prompts while reading each prompt's KV cache once per step.

A GRPO group's rollouts start from one prompt. Repeating the prompt's KV cache per row (what a plain batched
decode needs) makes every decoded token read the prompt's keys and values once *per row*: measured on this
project's 2-core machine (SmolLM2-135M with the quickstart's LoRA, two ~1,200-token prompts x 4 rows, one torch
thread), attention was 59 of the 158 ms a decode step took, the rest the weights' matmuls. Here each distinct
prompt's keys and values stay one copy, and each step's attention runs in two parts:

- the prompt part, per distinct prompt: the queries of all its rows (and, under grouped-query attention, all the
  query heads of one key/value head) against the prompt's keys at once, pads masked;
- the answer part, per row: against the tokens that row has decoded so far;

merged exactly by their softmax normalisers (``m = max(m1, m2)``, ``o = (o1 e^(m1-m) + o2 e^(m2-m)) /
(l1 e^(m1-m) + l2 e^(m2-m))``). Everything else is the model's own modules (norms, projections with any LoRA
adapter, rotary embedding, MLP, head), so the logits equal the model's plain forward up to float rounding
(``tests/core/test_shared_decode.py``).

It applies to Llama-architecture decoders (:func:`supports`: SmolLM2, Llama; no sliding window, no per-head norms);
:class:`~wmrl.generation.hf.HFGenerationEngine` decodes other models through their own forward.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

#: architectures whose decoder layer is exactly: input norm, attention (q/k/v/o projections, rotary), residual,
#: post-attention norm, MLP, residual; and whose model is embed_tokens, rotary_emb, layers, norm, lm_head
LLAMA_LIKE = frozenset({"llama"})


def _base(model: Any) -> Any:
    from wmrl.models.resolve import is_peft_model

    return model.get_base_model() if is_peft_model(model) else model


def supports(model: Any) -> bool:
    """Whether :class:`SharedPrefixDecoder` computes this model's decode step (a Llama-architecture causal LM in
    its attention's plain form: no sliding window, no tensor-parallel slicing of its projections)."""
    try:
        fields = _base(model).config.to_dict()  # a transformers model's config
    except AttributeError:  # no transformers model
        return False
    return (
        fields.get("model_type") in LLAMA_LIKE
        and fields.get("sliding_window") is None
        and (fields.get("pretraining_tp") or 1) <= 1
    )


class SharedPrefixDecoder:
    """The decode steps after a prefill of the distinct prompts, for rows that each continue one of them.

    Args:
        model: the causal LM (a ``peft.PeftModel`` around one included) that ran the prefill; :func:`supports` it.
        cache: the prefill's KV cache (``DynamicCache``): one row per distinct prompt, left-padded to one width.
        prompt_mask: ``[distinct, width]``, 1 where the prefill's row holds a real token.
        row_prompt: for each decoded row, the index of its distinct prompt.
        capacity: the most tokens a row will decode.

    Every row stays in the batch until the end (a finished row's input is ignored by the caller): at a few rows a
    decode step reads the weights once whatever the rows, so dropping a row saves nearly nothing, and keeping the
    layout fixed keeps the prompt part one batched product when every prompt has as many rows.
    """

    def __init__(
        self, model: Any, cache: Any, prompt_mask: torch.Tensor, row_prompt: Sequence[int], capacity: int
    ) -> None:
        base = _base(model)
        self.core, self.head = base.model, base.lm_head
        config = base.config
        self.heads = config.num_attention_heads
        self.kv_heads = config.num_key_value_heads
        self.head_dim = config.to_dict().get("head_dim") or config.hidden_size // self.heads
        self.rep = self.heads // self.kv_heads
        self.scaling = self.head_dim**-0.5
        layers = cache.layers
        keys = layers[0].keys
        self.device, self.dtype = keys.device, keys.dtype
        self.prefix_keys = [layer.keys for layer in layers]  # [distinct, kv_heads, width, dim]
        self.prefix_values = [layer.values for layer in layers]
        distinct = keys.shape[0]
        # an additive mask over the prompt's positions: 0 where real, -inf at the left padding
        self.prefix_bias = torch.zeros(prompt_mask.shape, dtype=self.dtype, device=self.device).masked_fill(
            ~prompt_mask.bool().to(self.device), float("-inf"))[:, None, None, :]  # [distinct, 1, 1, width]
        self.rows = len(row_prompt)
        counts = [0] * distinct
        for prompt in row_prompt:
            counts[prompt] += 1
        # rows ordered by prompt: the prompt part reads a contiguous block of rows per prompt (the engine's rows come
        # in that order already, its prompts sorted by length: then no row is moved at all)
        order = sorted(range(self.rows), key=lambda r: row_prompt[r])
        self.order = None if order == list(range(self.rows)) else torch.tensor(order, device=self.device)
        if self.order is not None:
            self.inverse = torch.empty_like(self.order)
            self.inverse[self.order] = torch.arange(self.rows, device=self.device)
        self.counts = counts
        self.equal = len(set(counts)) == 1
        shape = (self.rows, self.kv_heads, capacity, self.head_dim)
        self.answer_keys = [torch.empty(shape, dtype=self.dtype, device=self.device) for _ in layers]
        self.answer_values = [torch.empty(shape, dtype=self.dtype, device=self.device) for _ in layers]
        self.length = 0

    def step(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Feed one token per row (``[rows]``, at ``positions`` ``[rows]``); returns the next-token logits
        ``[rows, vocab]`` in the model's dtype."""
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

        core = self.core
        hidden = core.embed_tokens(tokens[:, None])  # [rows, 1, hidden]
        cos, sin = core.rotary_emb(hidden, positions[:, None])
        at = self.length
        for index, layer in enumerate(core.layers):
            attention = layer.self_attn
            x = layer.input_layernorm(hidden)
            query = attention.q_proj(x).view(self.rows, 1, -1, self.head_dim).transpose(1, 2)
            key = attention.k_proj(x).view(self.rows, 1, -1, self.head_dim).transpose(1, 2)
            value = attention.v_proj(x).view(self.rows, 1, -1, self.head_dim).transpose(1, 2)
            query, key = apply_rotary_pos_emb(query, key, cos, sin)
            self.answer_keys[index][:, :, at : at + 1] = key
            self.answer_values[index][:, :, at : at + 1] = value
            out = self._attend(index, query, at + 1)  # [rows, heads, dim]
            hidden = hidden + attention.o_proj(out.reshape(self.rows, 1, self.heads * self.head_dim))
            hidden = hidden + layer.mlp(layer.post_attention_layernorm(hidden))
        self.length = at + 1
        return self.head(core.norm(hidden))[:, -1, :]

    def _attend(self, index: int, query: torch.Tensor, length: int) -> torch.Tensor:
        rows, kv, rep, dim = self.rows, self.kv_heads, self.rep, self.head_dim
        q = query.reshape(rows, kv, rep, dim) * self.scaling  # head h reads key/value head h // rep
        # the answer part, per row: [rows, kv, rep, length]
        keys = self.answer_keys[index][:, :, :length]
        scores = q @ keys.transpose(-1, -2)
        answer_max = scores.amax(-1, keepdim=True)
        weights = (scores - answer_max).exp()
        answer_sum = weights.sum(-1, keepdim=True)
        answer_out = weights @ self.answer_values[index][:, :, :length]  # [rows, kv, rep, dim]
        # the prompt part, per distinct prompt, its rows' queries together
        if self.order is None:
            prompt_max, prompt_sum, prompt_out = self._prompt_part(index, q)
        else:
            parts = self._prompt_part(index, q.index_select(0, self.order))
            prompt_max, prompt_sum, prompt_out = (t.index_select(0, self.inverse) for t in parts)
        top = torch.maximum(answer_max, prompt_max)
        a, p = (answer_max - top).exp(), (prompt_max - top).exp()
        out = (answer_out * a + prompt_out * p) / (answer_sum * a + prompt_sum * p)
        return out.reshape(rows, kv * rep, dim)

    def _prompt_part(self, index: int, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Max, normaliser and unnormalised output ``[rows, kv, rep, 1|dim]`` of the prompt part; ``q`` is in
        prompt order."""
        keys, values, bias = self.prefix_keys[index], self.prefix_values[index], self.prefix_bias
        kv, rep, dim = self.kv_heads, self.rep, self.head_dim
        if self.equal:
            per = self.counts[0]
            grouped = q.reshape(len(self.counts), per, kv, rep, dim).transpose(1, 2).reshape(len(self.counts), kv, per * rep, dim)
            return self._unflatten(*self._softmax_parts(grouped, keys, values, bias), per)
        parts: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
        start = 0
        for prompt, per in enumerate(self.counts):
            if not per:
                continue
            grouped = q[start : start + per].transpose(0, 1).reshape(1, kv, per * rep, dim)
            sl = slice(prompt, prompt + 1)
            parts.append(self._unflatten(*self._softmax_parts(grouped, keys[sl], values[sl], bias[sl]), per))
            start += per
        return tuple(torch.cat(column) for column in zip(*parts, strict=True))  # type: ignore[return-value]

    @staticmethod
    def _softmax_parts(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, bias: torch.Tensor):
        scores = q @ keys.transpose(-1, -2) + bias  # [prompts, kv, rows*rep, width]
        top = scores.amax(-1, keepdim=True)
        weights = (scores - top).exp()
        return top, weights.sum(-1, keepdim=True), weights @ values

    def _unflatten(self, top: torch.Tensor, total: torch.Tensor, out: torch.Tensor, per: int):
        """``[prompts, kv, per*rep, n]`` -> ``[prompts*per, kv, rep, n]``."""
        kv, rep = self.kv_heads, self.rep

        def back(t: torch.Tensor) -> torch.Tensor:
            prompts, n = t.shape[0], t.shape[-1]
            return t.reshape(prompts, kv, per, rep, n).transpose(1, 2).reshape(prompts * per, kv, rep, n)

        return back(top), back(total), back(out)
