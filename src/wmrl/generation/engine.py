"""The generation engine's records (sample continuations of token prompts with behaviour log-probs) and what every
engine shares: the code fences a turn stops at and the end-of-sequence ids (torch-free, so vLLM's engine needs no
import of the transformers one)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# the contract and its records live in wmrl.types; re-exported here, where the engines are
from wmrl.types import FinishReason as FinishReason
from wmrl.types import Generation as Generation
from wmrl.types import GenerationEngine as GenerationEngine
from wmrl.types import SamplingParams as SamplingParams

OPEN_FENCE = "```python"  # a turn's code block opens with this ...
FENCE = "```"  # ... and closes with this


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


def generations(tokenizer: Any, tokens: Sequence[Sequence[int]], logprobs: Sequence[Sequence[float]],
                reasons: Sequence[FinishReason]) -> list[Generation]:
    """One :class:`Generation` per row from its sampled tokens, their log-probs and why it stopped (the text decoded
    with special tokens skipped)."""
    return [
        Generation(token_ids=tuple(row_tokens), logprobs=tuple(row_logprobs),
                   text=tokenizer.decode(list(row_tokens), skip_special_tokens=True), finish_reason=reason)
        for row_tokens, row_logprobs, reason in zip(tokens, logprobs, reasons, strict=True)
    ]
