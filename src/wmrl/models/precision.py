"""The update's precision: float32, or bfloat16 autocast where the running machine makes it faster and it agrees.

On a CPU with bfloat16 instructions (AVX512-BF16, AMX) the update's forward and backward passes run faster under
``torch.autocast(dtype=torch.bfloat16)``; elsewhere they run slower. Which one holds is measured, never assumed:
``update_precision: auto`` times the first update's first micro-batch both ways (:func:`measure`), compares the
gradients, and keeps bfloat16 only when it is faster by :data:`MIN_SPEEDUP` and its gradient agrees with
float32's (cosine >= :data:`MIN_COSINE`, norm within :data:`MAX_NORM_CHANGE`). The choice is logged
(``update/bfloat16``) and kept in the checkpoint, so that a resumed fit runs as it started.

Under autocast the output head still runs in float32 (:func:`autocast`): log-probs of bfloat16 logits would carry
errors of ~0.05 nats at logits of ~15 (8 bits of mantissa), and the importance ratio to the behaviour log-probs
(float32, from generation) would read that noise as a policy change.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
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
    """One micro-batch's loss and backward timed in float32 and under bfloat16 autocast."""

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
        return (f"update precision: {choice} (measured on this machine's first micro-batch: float32 "
                f"{self.float32_s:.2f} s, bfloat16 {self.bfloat16_s:.2f} s, {self.speedup:.2f}x; gradient cosine "
                f"{self.cosine:.4f}, norm {self.norm_change:+.1%}; bfloat16 needs >= {MIN_SPEEDUP}x, cosine >= "
                f"{MIN_COSINE} and norm within {MAX_NORM_CHANGE:.0%}; set model.init_args.update_precision to choose)")

    def metrics(self) -> dict[str, float]:
        return {"update/probe_speedup": self.speedup, "update/probe_cosine": self.cosine,
                "update/probe_norm_change": self.norm_change}


def measure(
    loss: Callable[[torch.dtype | None], tuple[torch.Tensor, Any]], parameters: Sequence[torch.Tensor]
) -> tuple[Probe, tuple[torch.Tensor | None, ...], Any]:
    """Time ``loss(dtype)`` (its forward passes under :func:`autocast` with the dtype it is given; it returns the loss
    and anything else) and its gradient with respect to ``parameters``, under bfloat16 autocast and then in float32
    (the first pass pays the fit's one-time allocations: the order favours float32). The gradients are returned by
    ``torch.autograd.grad``, never accumulated. Returns the probe, and the gradients and extra of the precision it
    chooses, so that the probed micro-batch need not run a third time."""
    runs: dict[torch.dtype | None, tuple[float, tuple[torch.Tensor | None, ...], Any]] = {}
    for dtype in (torch.bfloat16, None):
        start = time.perf_counter()
        value, extra = loss(dtype)
        found = torch.autograd.grad(value, list(parameters), allow_unused=True)
        runs[dtype] = (time.perf_counter() - start, found, extra)

    def flat(found: tuple[torch.Tensor | None, ...]) -> torch.Tensor:
        return torch.cat([(g if g is not None else torch.zeros_like(p)).float().flatten()
                          for g, p in zip(found, parameters, strict=True)])

    full, half = flat(runs[None][1]), flat(runs[torch.bfloat16][1])
    norm = float(full.norm())
    cosine = float(torch.nn.functional.cosine_similarity(full, half, dim=0)) if norm > 0 else 1.0
    change = abs(float(half.norm()) - norm) / norm if norm > 0 else 0.0
    probe = Probe(float32_s=runs[None][0], bfloat16_s=runs[torch.bfloat16][0], cosine=cosine, norm_change=change)
    _, grads, extra = runs[torch.bfloat16 if probe.bfloat16 else None]
    return probe, grads, extra
