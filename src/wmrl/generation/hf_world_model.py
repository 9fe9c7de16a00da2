"""The transformers backend of a language-model world model (:class:`~wmrl.types.LanguageModelBackend`; the default).

The world model's language model runs in the training process: the policy's own weights with the LoRA adapter
disabled (``model: policy``, as in the paper: no extra memory), or a checkpoint of its own loaded here.

- ``score`` mode: prompts are batched per prefix group (a task: its overview and data dictionary are most of every
  script's prompt), and a batch's shared prefix runs once (:func:`wmrl.models.kv.last_token_logits`); the
  option letters' logits are renormalised by a softmax over them.
- ``generate`` mode: :class:`~wmrl.generation.hf.HFGenerationEngine` samples the JSON answer (no stop at a code
  block), seeded per call.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any


class HFWorldModelBackend:
    """Answers a language-model world model's two questions (:class:`~wmrl.types.LanguageModelBackend`) with a transformers model.

    Args:
        batch_size: prompts per forward pass (``score``) and per generation pass (``generate``).
        dtype: weights dtype when the world model loads a model of its own (not ``model: policy``).
    """

    def __init__(self, batch_size: int = 8, dtype: str = "float32") -> None:
        if batch_size < 1:
            raise ValueError(f"HFWorldModelBackend batch_size must be >= 1 (got {batch_size})")
        self.batch_size, self.dtype = batch_size, dtype
        self.model: Any = None
        self.tokenizer: Any = None

    def load(self, model: str) -> None:
        from wmrl.models import load_policy

        self.model, self.tokenizer = load_policy(model, None, dtype=self.dtype)
        self.model.eval().requires_grad_(False)

    def bind(self, policy: Any, tokenizer: Any) -> None:
        self.model, self.tokenizer = policy, tokenizer

    def frozen(self) -> contextlib.AbstractContextManager:
        """The model as the frozen world model: a PEFT adapter disabled, no gradients."""
        import torch

        from wmrl.models import is_peft_model, reference_mode

        if is_peft_model(self.model):
            return reference_mode(self.model)
        return torch.no_grad()

    def option_probabilities(self, prompts: Sequence[Sequence[int]], option_ids: Sequence[int],
                             prefix_groups: Sequence[str]) -> list[list[float] | None]:
        import torch

        from wmrl.models.kv import last_token_logits

        letters = torch.tensor([int(i) for i in option_ids])
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        by_group: dict[str, list[int]] = {}
        for index, group in enumerate(prefix_groups):
            by_group.setdefault(group, []).append(index)
        result: list[list[float]] = [[] for _ in prompts]
        with self.frozen():
            for indices in by_group.values():
                for first in range(0, len(indices), self.batch_size):
                    chunk = indices[first : first + self.batch_size]
                    logits = last_token_logits(self.model, [list(prompts[i]) for i in chunk], pad).float()
                    probabilities = torch.softmax(logits[:, letters.to(logits.device)], dim=-1)
                    for index, row in zip(chunk, probabilities.cpu().tolist(), strict=True):
                        result[index] = row
        return result

    def generate(self, prompts: Sequence[Sequence[int]], max_new_tokens: int, temperature: float, top_p: float,
                 seed: int) -> list[str | None]:
        from wmrl.generation.engine import SamplingParams
        from wmrl.generation.hf import HFGenerationEngine

        engine = HFGenerationEngine(self.model, self.tokenizer, max_batch_size=self.batch_size)
        params = SamplingParams(max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p,
                                stop_after_code_block=False, seed=seed)
        with self.frozen():
            return [g.text for g in engine.generate(prompts, params)]
