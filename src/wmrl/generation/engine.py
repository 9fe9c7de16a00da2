"""The generation engine's records (sample continuations of token prompts with behaviour log-probs) and what every
engine shares: the code fences a turn stops at and the end-of-sequence ids (torch-free, so vLLM's engine needs no
import of the transformers one)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from wmrl.types import GenerationEngine as GenerationEngine  # the contract lives in wmrl.types; re-exported

FinishReason = Literal["stop", "length"]
OPEN_FENCE = "```python"  # a turn's code block opens with this ...
FENCE = "```"  # ... and closes with this


@dataclass(frozen=True)
class SamplingParams:
    """How to sample one turn.

    Attributes:
        max_new_tokens: per turn.
        temperature: 1.0 for training (the paper), 0.8 for evaluation; 0 means greedy.
        top_p: nucleus sampling.
        stop_after_code_block: stop a sequence once it has closed a fenced python block (```python ... ```).
        seed: seeds sampling for reproducible rollouts (``None``: the global RNG).
        code_block_open: the prompt already opened the python block (a prefilled turn), so the first closing
            fence of the continuation ends it.
    """

    max_new_tokens: int = 512
    temperature: float = 1.0
    top_p: float = 1.0
    stop_after_code_block: bool = True
    seed: int | None = None
    code_block_open: bool = False

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1 (got {self.max_new_tokens})")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0 (got {self.temperature})")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1] (got {self.top_p})")


@dataclass(frozen=True)
class Generation:
    """One sampled continuation.

    Attributes:
        token_ids: the new tokens (length T <= max_new_tokens), without padding; includes EOS if produced.
        logprobs: behaviour log-prob of each new token (length T); see :class:`GenerationEngine`.
        text: ``token_ids`` decoded (special tokens skipped).
        finish_reason: ``stop`` (EOS or the code block closed) or ``length``.
    """

    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    text: str
    finish_reason: FinishReason

    def __post_init__(self) -> None:
        if len(self.token_ids) != len(self.logprobs):
            raise ValueError(
                f"Generation.logprobs must have one entry per token: expected {len(self.token_ids)}, "
                f"got {len(self.logprobs)}"
            )


def closes_code_block(text: str) -> bool:
    """Whether ``text`` contains an opening ```` ```python ```` fence followed later by a closing ```` ``` ````.

    >>> closes_code_block("Here:\\n```python\\nprint(1)\\n```\\nDone")
    True
    >>> closes_code_block("```python\\nprint(1)\\n")
    False
    >>> closes_code_block("```\\nnot python\\n```")
    False
    """
    start = text.find(OPEN_FENCE)
    return start >= 0 and text.find(FENCE, start + len(OPEN_FENCE)) >= 0


def eos_ids(model: Any, tokenizer: Any) -> set[int]:
    """The ids that end a sequence: the tokenizer's EOS and the model's generation-config EOS ids."""
    ids = set()
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    config_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if isinstance(config_eos, int):
        ids.add(config_eos)
    elif config_eos is not None:
        ids.update(int(i) for i in config_eos)
    return ids
