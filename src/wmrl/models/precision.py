"""The update's precision: float32, or bfloat16 autocast where the running machine makes it faster and it agrees.

On a CPU with bfloat16 instructions (AVX512-BF16, AMX) the update's forward and backward passes run faster under
``torch.autocast(dtype=torch.bfloat16)``; elsewhere they run slower. Which one holds is measured, never assumed:
``update_precision: auto`` times a forward and backward pass of the policy both ways before its first update
(:func:`measure`), compares the gradients, and keeps bfloat16 only when it is faster by :data:`MIN_SPEEDUP` and its
gradient agrees with float32's (cosine >= :data:`MIN_COSINE`, norm within :data:`MAX_NORM_CHANGE`). The choice is logged
(``update/bfloat16``) and kept in the checkpoint, so that a resumed fit runs as it started.

Under autocast the output head still runs in float32 (:func:`autocast`): log-probs of bfloat16 logits would carry
errors of ~0.05 nats at logits of ~15 (8 bits of mantissa), and the importance ratio to the behaviour log-probs
(float32, from generation) would read that noise as a policy change.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import torch

Precision = Literal["float32", "bfloat16", "auto"]
#: bfloat16 is kept only when the probed micro-batch ran at least this much faster
MIN_SPEEDUP = 1.15
#: ... and its gradient points where float32's does
MIN_COSINE = 0.99
#: ... with a norm within this fraction of float32's
MAX_NORM_CHANGE = 0.05
#: the probe's batch: rows x tokens of random token ids (a few seconds a pass for a 135M model on 2 cores)
PROBE_ROWS, PROBE_TOKENS = 1, 384


@contextlib.contextmanager
def autocast(model: Any, dtype: torch.dtype | None) -> Iterator[None]:
    """The forward passes inside run under ``torch.autocast(dtype)`` (``None``: as they are), with the model's output
    head in float32."""
    if dtype is None:
        yield
        return
    from wmrl.models.resolve import is_peft_model

    base = model.get_base_model() if is_peft_model(model) else model
    head = base.get_output_embeddings()
    device = head.weight.device.type

    def float32_head(hidden: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device, enabled=False):
            bias = None if head.bias is None else head.bias.float()
            return torch.nn.functional.linear(hidden.float(), head.weight.float(), bias)

    head.forward = float32_head  # an instance attribute: nn.Module.__call__ finds it before the class's forward
    try:
        with torch.autocast(device, dtype=dtype):
            yield
    finally:
        del head.forward


@dataclass(frozen=True)
class Probe:
    """A forward and backward pass of the policy timed in float32 and under bfloat16 autocast (the faster of two runs
    each), and the agreement of their gradients."""

    float32_s: float
    bfloat16_s: float
    cosine: float
    norm_change: float

    @property
    def speedup(self) -> float:
        return self.float32_s / self.bfloat16_s

    @property
    def agrees(self) -> bool:
        return self.cosine >= MIN_COSINE and self.norm_change <= MAX_NORM_CHANGE

    @property
    def bfloat16(self) -> bool:
        """Whether the update runs under bfloat16 autocast: faster by :data:`MIN_SPEEDUP` and agreeing."""
        return self.agrees and self.speedup >= MIN_SPEEDUP

    def line(self) -> str:
        choice = "bfloat16 autocast" if self.bfloat16 else "float32"
        return (f"update precision: {choice} (measured on this machine before the first update: float32 "
                f"{self.float32_s:.2f} s, bfloat16 {self.bfloat16_s:.2f} s, {self.speedup:.2f}x; gradient cosine "
                f"{self.cosine:.4f}, norm {self.norm_change:+.1%}; bfloat16 needs >= {MIN_SPEEDUP}x, cosine >= "
                f"{MIN_COSINE} and norm within {MAX_NORM_CHANGE:.0%}; set model.init_args.update_precision to choose)")

    def metrics(self) -> dict[str, float]:
        return {"update/probe_speedup": self.speedup, "update/probe_cosine": self.cosine,
                "update/probe_norm_change": self.norm_change}


def measure(model: Any, rows: int = PROBE_ROWS, tokens: int = PROBE_TOKENS, seed: int = 0) -> Probe:
    """Time a forward and backward pass of ``model`` in float32 and under bfloat16 autocast, and compare their
    gradients with respect to its trainable parameters.

    The pass is the update's own (:func:`autocast`, then the mean token log-prob) over ``rows`` x ``tokens`` token ids
    drawn from the model's vocabulary with a generator of its own (the global RNG is untouched): the speed of the
    precisions on this machine and model, not of one batch. Each precision runs twice, alternating, and its faster
    run counts, so that one-time allocations and a busy moment weigh on neither. Gradients are returned by
    ``torch.autograd.grad``, never accumulated: the update that follows starts from none."""
    from wmrl.algorithms.grpo import token_logprobs

    parameters = [p for p in model.parameters() if p.requires_grad]
    device = parameters[0].device if parameters else torch.device("cpu")
    vocabulary = model.get_input_embeddings().num_embeddings
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocabulary, (rows, tokens), generator=generator).to(device)
    seconds: dict[torch.dtype | None, float] = {}
    grads: dict[torch.dtype | None, torch.Tensor] = {}
    for dtype in (None, torch.bfloat16) * 2:
        start = time.perf_counter()
        with autocast(model, dtype):
            logits = model(input_ids=ids).logits
        loss = -token_logprobs(logits, ids).mean()
        found = torch.autograd.grad(loss, parameters, allow_unused=True)
        took = time.perf_counter() - start
        seconds[dtype] = min(seconds.get(dtype, took), took)
        grads[dtype] = torch.cat([(g if g is not None else torch.zeros_like(p)).float().flatten()
                                  for g, p in zip(found, parameters, strict=True)])
    full, half = grads[None], grads[torch.bfloat16]
    norm = float(full.norm())
    cosine = float(torch.nn.functional.cosine_similarity(full, half, dim=0)) if norm > 0 else 1.0
    change = abs(float(half.norm()) - norm) / norm if norm > 0 else 0.0
    return Probe(float32_s=seconds[None], bfloat16_s=seconds[torch.bfloat16], cosine=cosine, norm_change=change)
