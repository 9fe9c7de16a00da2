"""Generation with a transformers causal LM (PEFT-wrapped or not) in the training process.

The engine shares the policy's weights, so :meth:`HFGenerationEngine.sync_weights` is a no-op and every
generation samples from the current policy.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import torch

from wmrl.generation.engine import (
    OPEN_FENCE,
    FinishReason,
    Generation,
    GenerationEngine,
    SamplingParams,
    closes_code_block,
    eos_ids,
    generations,
)
from wmrl.models import packed, shared_decode
from wmrl.models.kv import cache_kwarg, preallocate, returned_cache
from wmrl.models.shared_decode import SharedPrefixDecoder
from wmrl.types import KnowsContext


class HFGenerationEngine(GenerationEngine, KnowsContext):
    """Batched sampling with a KV cache, straight from a transformers model (CPU or one GPU).

    Our own decoding loop rather than ``model.generate`` so that the behaviour log-probs, the per-sequence
    code-block stop and seeding (a ``torch.Generator``, not the global RNG) are explicit:

    - prompts are split into micro-batches of ``max_batch_size`` (after sorting by length, which keeps
      padding small), left-padded, with position ids counted from each prompt's first real token, so a
      padded batch computes what each prompt would alone (up to float rounding); identical prompts in a
      micro-batch (the rollouts of a GRPO group) share one prefill, whose KV cache is repeated per row (on
      CPU the prefill of a ~1,200-token task prompt costs far more than sampling a 100-token answer);
    - decoding reads each distinct prompt's KV cache once per step for all the rows continuing it
      (:mod:`wmrl.models.shared_decode`, Llama-architecture models); other models decode through their own
      forward with the prompt's cache repeated per row and preallocated for the whole generation
      (:func:`wmrl.models.kv.preallocate`). Both give the same tokens and log-probs up to float rounding;
    - at each step the log-probs are ``log_softmax(logits / temperature)`` of the *raw* logits, before top-p
      truncation, taken at the sampled token: the distribution the GRPO loss recomputes with a full forward
      pass at the same temperature. Greedy decoding (``temperature == 0``) reports temperature-1 log-probs;
    - top-p keeps the smallest set of tokens whose probability (at the sampling temperature) reaches
      ``top_p`` and samples from it renormalised;
    - a sequence stops at an EOS token (kept in ``token_ids``) or, with ``stop_after_code_block``, as soon as
      its decoded text has closed a ```` ```python ```` block; finished rows are dropped from the batch and
      the KV cache;
    - on the CPU, the model's float32 linear layers compute with oneDNN's prepacked products
      (:mod:`wmrl.models.packed`: a generation of two quickstart groups 1.5x faster on an AMD EPYC, the same tokens,
      log-probs within float rounding), from weights packed once and packed again when they change.

    The model runs in eval mode under ``torch.no_grad()``; its previous train/eval mode is restored.

    Args:
        model: a causal LM (``transformers`` or a ``peft.PeftModel`` around one); generation uses its
            current weights, adapter included.
        tokenizer: its tokenizer (decodes the text and supplies the pad and EOS ids).
        max_batch_size: prompts per forward pass (bounds activation and KV-cache memory).
        eos_token_ids: tokens that end a sequence; default the tokenizer's EOS plus the model's
            ``generation_config.eos_token_id``.
        shared_prefix_decode: decode with the prompts' KV cache read once per step (``None``: where
            :func:`wmrl.models.shared_decode.supports` the model); ``False`` takes the model's own forward.
        packed_linears: the CPU float32 linear layers through oneDNN's prepacked products (where PyTorch has them;
            one more copy of those weights in memory); ``False`` keeps PyTorch's own product.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        max_batch_size: int = 8,
        eos_token_ids: Sequence[int] | None = None,
        shared_prefix_decode: bool | None = None,
        packed_linears: bool = True,
    ) -> None:
        if max_batch_size < 1:
            raise ValueError(f"HFGenerationEngine max_batch_size must be >= 1 (got {max_batch_size}): set "
                             "model.init_args.generation_batch_size (or engine.init_args.max_batch_size)")
        self.model = model
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        self.eos_token_ids = frozenset(
            eos_token_ids if eos_token_ids is not None else eos_ids(model, tokenizer)
        )
        if not self.eos_token_ids:
            raise ValueError("no EOS token id: the tokenizer defines none; pass eos_token_ids explicitly")
        pad = tokenizer.pad_token_id
        self.pad_token_id = int(pad if pad is not None else min(self.eos_token_ids))
        self._cache_kwarg = cache_kwarg(model)
        #: decode with each distinct prompt's KV cache read once per step (a Llama-architecture model), instead of
        #: through the model's forward with the cache repeated per row; both give the same tokens and log-probs
        #: up to float rounding
        self.shared_prefix_decode = shared_decode.supports(model) if shared_prefix_decode is None else shared_prefix_decode
        self.packed_linears = bool(packed_linears and packed.available())
        # Token ids whose text holds a backtick: only these can complete a fence, so only then is the
        # sequence's text decoded again to check for a closed code block.
        self._backtick_ids = _ids_with_backtick(tokenizer)

    @property
    def context_length(self) -> int | None:
        """The most tokens the policy was trained to attend over (its config's ``max_position_embeddings``)."""
        try:
            value = self.model.config.max_position_embeddings  # a transformers causal LM's
        except AttributeError:  # a model without a transformers config
            return None
        return int(value) if isinstance(value, int) else None

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Generation]:
        """One continuation per prompt; see the class docstring for how log-probs and stops are defined."""
        if any(len(prompt) == 0 for prompt in prompts):
            raise ValueError("every prompt needs at least one token (got an empty prompt)")
        if not prompts:
            return []
        device = _device_of(self.model)
        generator = None
        if params.seed is not None:
            generator = torch.Generator(device=device)
            generator.manual_seed(params.seed)
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
        results: list[Generation | None] = [None] * len(prompts)
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad(), self._linears():
                for first in range(0, len(order), self.max_batch_size):
                    chunk = order[first : first + self.max_batch_size]
                    batch = [list(map(int, prompts[i])) for i in chunk]
                    generations = self._generate_batch(batch, params, generator, device)
                    for index, generation in zip(chunk, generations, strict=True):
                        results[index] = generation
        finally:
            self.model.train(was_training)
        return [generation for generation in results if generation is not None]

    def _linears(self) -> contextlib.AbstractContextManager:
        return packed.active(self.model) if self.packed_linears else contextlib.nullcontext()

    def _generate_batch(
        self, prompts: list[list[int]], params: SamplingParams, generator: Any, device: torch.device
    ) -> list[Generation]:
        size = len(prompts)
        # Identical prompts (a GRPO group) share one prefill: the unique prompts run once, then their KV cache
        # and last logits are repeated for every row that asked for them.
        unique: dict[tuple[int, ...], int] = {}
        inverse = [unique.setdefault(tuple(prompt), len(unique)) for prompt in prompts]
        distinct = [list(prompt) for prompt in unique]
        width = max(len(prompt) for prompt in distinct)
        input_ids = torch.full((len(distinct), width), self.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((len(distinct), width), dtype=torch.long)
        for row, prompt in enumerate(distinct):
            input_ids[row, width - len(prompt) :] = torch.tensor(prompt)
            attention_mask[row, width - len(prompt) :] = 1
        input_ids, attention_mask = input_ids.to(device), attention_mask.to(device)
        position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)

        out = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            use_cache=True,
            logits_to_keep=1,
        )
        self.tokens_run += input_ids.numel()
        self.passes_run += 1
        cache = returned_cache(out)
        logits = out.logits[:, -1, :].float()
        expand = torch.tensor(inverse, device=device)
        if len(distinct) < size:
            logits = logits.index_select(0, expand)
        decode = self._decode_shared if self.shared_prefix_decode else self._decode_repeated
        tokens, logprobs, reasons = decode(
            cache, logits, attention_mask, position_ids, expand, [len(prompt) for prompt in prompts], params,
            generator, width)
        return generations(self.tokenizer, tokens, logprobs, reasons)

    def _decode_shared(
        self, cache: Any, logits: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor,
        expand: torch.Tensor, lengths: list[int], params: SamplingParams, generator: Any, width: int,
    ) -> tuple[list[list[int]], list[list[float]], list[FinishReason]]:
        """Decode with each distinct prompt's KV cache read once per step (:mod:`wmrl.models.shared_decode`);
        every row stays in the batch, and only the unfinished rows are sampled, in row order, so the generator
        draws what the repeated-cache loop draws."""
        size = len(lengths)
        decoder = SharedPrefixDecoder(self.model, cache, attention_mask, expand.tolist(), params.max_new_tokens)
        device = logits.device
        stops = _Stops(self, size, params, device)
        positions = torch.tensor(lengths, device=device)
        fed = torch.full((size,), self.pad_token_id, dtype=torch.long, device=device)
        active = list(range(size))
        rows = None  # the unfinished rows as a tensor, once a row has finished
        for step in range(params.max_new_tokens):
            picked = logits if rows is None else logits.index_select(0, rows)
            next_tokens, next_logprobs = self._sample(picked, params, generator)
            keep = stops.record(active, next_tokens, next_logprobs)
            if not keep or step == params.max_new_tokens - 1:
                break
            if rows is None:
                fed.copy_(next_tokens)
            else:
                fed[rows] = next_tokens  # a finished row's input is its last token: computed, never read
            if len(keep) < len(active):
                active = [active[row] for row in keep]
                rows = torch.tensor(active, device=device)
            logits = decoder.step(fed, positions + step).float()
            self.tokens_run += size
            self.passes_run += 1
        return stops.tokens, stops.logprobs, stops.reasons

    def _decode_repeated(
        self, cache: Any, logits: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor,
        expand: torch.Tensor, lengths: list[int], params: SamplingParams, generator: Any, width: int,
    ) -> tuple[list[list[int]], list[list[float]], list[FinishReason]]:
        """Decode through the model's own forward: the prompts' KV cache repeated per row (preallocated for the
        whole generation), finished rows dropped from the batch and the cache."""
        size, device = len(lengths), logits.device
        if attention_mask.shape[0] < size:  # the distinct prompts' cache, repeated per row
            cache.reorder_cache(expand)
            attention_mask = attention_mask.index_select(0, expand)
            position_ids = position_ids.index_select(0, expand)
        cache = preallocate(cache, width + params.max_new_tokens)
        stops = _Stops(self, size, params, device)
        active = list(range(size))  # original row of each row still in the batch
        for step in range(params.max_new_tokens):
            next_tokens, next_logprobs = self._sample(logits, params, generator)
            keep = stops.record(active, next_tokens, next_logprobs)
            if not keep or step == params.max_new_tokens - 1:
                break
            if len(keep) < len(active):
                index = torch.tensor(keep, device=device)
                cache.reorder_cache(index)
                attention_mask = attention_mask.index_select(0, index)
                position_ids = position_ids.index_select(0, index)
                next_tokens = next_tokens.index_select(0, index)
                active = [active[row] for row in keep]
            attention_mask = torch.cat([attention_mask, attention_mask.new_ones((len(active), 1))], dim=-1)
            position_ids = position_ids[:, -1:] + 1
            out = self.model(
                input_ids=next_tokens[:, None],
                attention_mask=attention_mask,
                position_ids=position_ids,
                use_cache=True,
                **{self._cache_kwarg: cache},
            )
            self.tokens_run += len(active)
            self.passes_run += 1
            cache = returned_cache(out)
            logits = out.logits[:, -1, :].float()
        return stops.tokens, stops.logprobs, stops.reasons

    @staticmethod
    def _sample(
        logits: torch.Tensor, params: SamplingParams, generator: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Next tokens ``[B]`` and their log-probs ``[B]`` from last-position logits ``[B, V]``."""
        if params.temperature == 0:
            chosen = logits.argmax(dim=-1)
            return chosen, logits.log_softmax(dim=-1).gather(-1, chosen[:, None]).squeeze(-1)
        log_probs = (logits / params.temperature).log_softmax(dim=-1)
        probs = log_probs.exp()
        if params.top_p < 1:
            sorted_probs, sorted_ids = probs.sort(dim=-1, descending=True)
            # drop a token when the tokens ranked above it already reach top_p (the first always stays)
            drop = (sorted_probs.cumsum(dim=-1) - sorted_probs) >= params.top_p
            sorted_probs = sorted_probs.masked_fill(drop, 0.0)
            probs = torch.zeros_like(probs).scatter(-1, sorted_ids, sorted_probs)
        chosen = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
        return chosen, log_probs.gather(-1, chosen[:, None]).squeeze(-1)


class _Stops:
    """Each row's tokens, log-probs and finish reason as they are sampled, and which rows go on."""

    def __init__(self, engine: HFGenerationEngine, size: int, params: SamplingParams, device: torch.device) -> None:
        self.engine, self.params = engine, params
        self.eos = torch.tensor(sorted(engine.eos_token_ids), device=device)
        self.opened = OPEN_FENCE + "\n" if params.code_block_open else ""
        self.tokens: list[list[int]] = [[] for _ in range(size)]
        self.logprobs: list[list[float]] = [[] for _ in range(size)]
        self.reasons: list[FinishReason] = ["length"] * size

    def record(self, active: list[int], next_tokens: torch.Tensor, next_logprobs: torch.Tensor) -> list[int]:
        """Append each active row's sampled token (``active[i]`` is the original row of batch row ``i``);
        returns the batch rows that go on (EOS kept in the tokens; a closed code block stops a row when asked)."""
        is_eos = torch.isin(next_tokens, self.eos).tolist()
        next_list, logprob_list = next_tokens.tolist(), next_logprobs.tolist()
        keep = []
        for row, original in enumerate(active):
            self.tokens[original].append(next_list[row])
            self.logprobs[original].append(logprob_list[row])
            if is_eos[row] or (
                self.params.stop_after_code_block
                and next_list[row] in self.engine._backtick_ids
                and closes_code_block(self.opened + self.engine.tokenizer.decode(self.tokens[original]))
            ):
                self.reasons[original] = "stop"
            else:
                keep.append(row)
        return keep


def _ids_with_backtick(tokenizer: Any) -> frozenset[int]:
    vocab = tokenizer.get_vocab()
    # byte-level BPE keeps '`' as itself; decoding every token is the fallback for other vocabularies
    if any("`" in token for token in vocab):
        return frozenset(i for token, i in vocab.items() if "`" in token)
    return frozenset(i for i in vocab.values() if "`" in tokenizer.decode([i]))


def _device_of(model: Any) -> torch.device:
    return next(model.parameters()).device
