"""The update's precision: float32, or bfloat16 autocast where the running machine makes it faster and it agrees.

On a CPU with bfloat16 instructions (AVX512-BF16, AMX) the update's forward and backward passes run faster under
``torch.autocast(dtype=torch.bfloat16)``; elsewhere they run slower. Which one holds is measured, never assumed:
``update_precision: auto`` first times a matrix product of the policy's shapes both ways (milliseconds: where
bfloat16 products are no faster than float32's, as on a CPU that emulates them, autocast cannot be, and nothing more
is timed), then a forward and backward pass of the policy both ways before its first update (:func:`measure`),
compares the gradients, and keeps bfloat16 only when it is faster by :data:`MIN_SPEEDUP` and its
gradient agrees with float32's (cosine >= :data:`MIN_COSINE`, norm within :data:`MAX_NORM_CHANGE`). The choice is logged
(``update/bfloat16``) and kept in the checkpoint, so that a resumed fit runs as it started.

The update's float32 passes compute the frozen layers with oneDNN's prepacked products (:func:`float32_products`);
the probe times float32 with PyTorch's own product. That is a deliberate mismatch: the probe's one short row
under-represents the update's micro-batches, whose attention over ~1,700-token prompts is half their time, and timed
with the packed products it chose float32 (1.04x) on an AMD EPYC where the quickstart's update ran ~1.2x faster under
bfloat16 (2026-12-08); a probe of the update's own shapes would settle it. Under autocast the output head still runs
in float32 (:func:`autocast`): log-probs of bfloat16 logits would carry
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
#: a first bfloat16 pass this many times slower than float32's ends the probe (no second round can reach MIN_SPEEDUP)
HOPELESS = 2.0


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


def float32_products(model: Any, dtype: torch.dtype | None) -> contextlib.AbstractContextManager:
    """The float32 passes (``dtype`` ``None``) compute the model's frozen CPU linear layers with oneDNN's prepacked
    products (:mod:`wmrl.models.packed`); under autocast nothing changes."""
    if dtype is not None:
        return contextlib.nullcontext()
    from wmrl.models import packed

    return packed.active(model)


@dataclass(frozen=True)
class Probe:
    """A forward and backward pass of the policy timed in float32 and under bfloat16 autocast (the faster of two runs
    each), and the agreement of their gradients."""

    float32_s: float
    bfloat16_s: float
    cosine: float
    norm_change: float
    #: float32 / bfloat16 time of a matrix product of the model's shapes, measured first
    matmul_speedup: float = float("nan")

    @property
    def screened_out(self) -> bool:
        """bfloat16 products were no faster than float32's here: the passes were not timed."""
        return self.matmul_speedup < 1.0

    @property
    def speedup(self) -> float:
        return self.float32_s / self.bfloat16_s if not self.screened_out else self.matmul_speedup

    @property
    def agrees(self) -> bool:
        return self.cosine >= MIN_COSINE and self.norm_change <= MAX_NORM_CHANGE

    @property
    def bfloat16(self) -> bool:
        """Whether the update runs under bfloat16 autocast: faster by :data:`MIN_SPEEDUP` and agreeing."""
        return self.agrees and self.speedup >= MIN_SPEEDUP

    def line(self) -> str:
        if self.screened_out:
            return (f"update precision: float32 (measured on this machine before the first update: a bfloat16 matrix "
                    f"product runs {self.matmul_speedup:.2f}x as fast as float32's, so bfloat16 autocast cannot be "
                    f"faster; set model.init_args.update_precision to choose)")
        choice = "bfloat16 autocast" if self.bfloat16 else "float32"
        return (f"update precision: {choice} (measured on this machine before the first update: float32 "
                f"{self.float32_s:.2f} s, bfloat16 {self.bfloat16_s:.2f} s, {self.speedup:.2f}x; gradient cosine "
                f"{self.cosine:.4f}, norm {self.norm_change:+.1%}; bfloat16 needs >= {MIN_SPEEDUP}x, cosine >= "
                f"{MIN_COSINE} and norm within {MAX_NORM_CHANGE:.0%}; set model.init_args.update_precision to choose)")

    def metrics(self) -> dict[str, float]:
        return {"update/probe_speedup": self.speedup, "update/probe_cosine": self.cosine,
                "update/probe_norm_change": self.norm_change, "update/probe_matmul_speedup": self.matmul_speedup}


def matmul_speedup(model: Any, repeats: int = 5) -> float:
    """float32 time / bfloat16 time of one product of the model's shapes (its hidden size by its first linear layer's
    output size, 256 rows), the best of ``repeats`` each: whether this machine multiplies bfloat16 faster at all."""
    from wmrl.models.resolve import is_peft_model

    base = model.get_base_model() if is_peft_model(model) else model
    layer = next((m for m in base.modules() if isinstance(m, torch.nn.Linear)), None)
    rows, (out_features, in_features) = 256, (layer.weight.shape if layer is not None else (1024, 1024))
    device = layer.weight.device if layer is not None else torch.device("cpu")
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(rows, in_features, generator=generator).to(device)
    w = torch.randn(in_features, out_features, generator=generator).to(device)
    best = {}
    for dtype in (torch.float32, torch.bfloat16):
        a, b = x.to(dtype), w.to(dtype)
        a @ b  # the first product pays one-time allocations
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            a @ b
            times.append(time.perf_counter() - start)
        best[dtype] = min(times)
    return best[torch.float32] / best[torch.bfloat16]


def measure(model: Any, rows: int = PROBE_ROWS, tokens: int = PROBE_TOKENS, seed: int = 0) -> Probe:
    """Time a forward and backward pass of ``model`` in float32 and under bfloat16 autocast, and compare their
    gradients with respect to its trainable parameters.

    The pass is the update's own (:func:`autocast`, then the mean token log-prob) over ``rows`` x ``tokens`` token ids
    drawn from the model's vocabulary with a generator of its own (the global RNG is untouched): the speed of the
    precisions on this machine and model, not of one batch. Each precision runs twice, alternating, and its faster
    run counts, so that one-time allocations and a busy moment weigh on neither; a first bfloat16 run
    :data:`HOPELESS` times slower than float32's ends it after one round. Before any pass, a matrix product of the
    model's shapes is timed both ways (:func:`matmul_speedup`): where bfloat16's is no faster, no pass is timed.
    Gradients are returned by ``torch.autograd.grad``, never accumulated: the update that follows starts from none."""
    from wmrl.algorithms.grpo import token_logprobs

    screen = matmul_speedup(model)
    if screen < 1.0:
        nan = float("nan")
        return Probe(float32_s=nan, bfloat16_s=nan, cosine=nan, norm_change=nan, matmul_speedup=screen)
    parameters = [p for p in model.parameters() if p.requires_grad]
    device = parameters[0].device if parameters else torch.device("cpu")
    vocabulary = model.get_input_embeddings().num_embeddings
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocabulary, (rows, tokens), generator=generator).to(device)
    seconds: dict[torch.dtype | None, float] = {}
    grads: dict[torch.dtype | None, torch.Tensor] = {}
    for round_, dtype in enumerate((None, torch.bfloat16) * 2):
        if round_ == 2 and seconds[torch.bfloat16] > HOPELESS * seconds[None]:
            break  # bfloat16 cannot come within MIN_SPEEDUP of float32 in a second round
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
    return Probe(float32_s=seconds[None], bfloat16_s=seconds[torch.bfloat16], cosine=cosine, norm_change=change,
                 matmul_speedup=screen)
