"""A model's float32 linear layers through oneDNN's prepacked products on CPU: generation, and the update's float32
passes through its frozen layers.

PyTorch runs a CPU float32 ``nn.Linear`` through its BLAS (MKL in the PyPI build), whose GEMM takes a slow path on
some CPUs: on an AMD EPYC with AVX-512 (2026-12-08, 2 cores), SmolLM2's 576 -> 1,536 products at 8 rows, a decoding
step's shape, read their weights at 11 GB/s against 42 GB/s of memory bandwidth, and ran a 1,400-row prefill at 62
GFLOP/s a core. oneDNN, which PyTorch ships for its other CPU kernels, computes the same product from a weight
reordered once into its blocked layout (``torch.ops.mkldnn._reorder_linear_weight`` and ``_linear_pointwise``, the
pair ``torch.compile``'s CPU backend uses for linear layers): 27 GB/s at 8 rows, 2.2x the prefill's throughput, and
a generation of two quickstart groups (8 rows, 128 tokens) in 13.0 s instead of 20.3 s with the same tokens and
log-probs within 6e-5 nats (float rounding: another summation order).

:class:`PackedLinears` keeps the reordered copies (one more copy of the linear weights: ~0.5 GB for a 135M model in
float32) and swaps them in for the duration of :meth:`PackedLinears.active`. With gradients on (the update's float32
passes), only frozen layers (a LoRA adapter's base, the tied output head) are swapped, each with the packed transpose
of its weight for the gradient of its input, which is all a frozen layer's backward computes (a second copy); layers
that train keep PyTorch's product and its autograd. On the same machine a float32 forward and backward of SmolLM2
over a quickstart micro-batch (2 rows of a 1,700-token prompt and 160 tokens) took 7.2 s instead of 9.5 s, the
adapter's gradients within 2.3e-5 of PyTorch's (relative). A weight that changed since it was packed (an optimizer
step of a fully trained policy, a loaded checkpoint: another storage or a newer version counter) is packed again
before it is used; a LoRA adapter's base weights are packed once per fit. :func:`active` uses one process-wide set
of packs, so the engine and the update share them.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator
from typing import Any

import torch

#: the rows a product is packed for (oneDNN's hint): a decoding step's batch; other row counts run correctly
ROWS_HINT = 8


def available() -> bool:
    """Whether this PyTorch build has oneDNN (the PyPI CPU builds do; its prepacked linear ops exist since 2.0)."""
    return bool(torch.backends.mkldnn.is_available())


def _sharded(model: Any) -> bool:
    """Whether FSDP shards the model's parameters (its linear weights are then gathered only inside its forward)."""
    from torch.distributed.fsdp import FSDPModule, FullyShardedDataParallel

    return any(isinstance(m, (FullyShardedDataParallel, FSDPModule)) for m in model.modules())


class PackedLinears:
    """oneDNN-packed copies of a model's CPU float32 linear weights, swapped in while :meth:`active`."""

    def __init__(self) -> None:
        self._packed: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # layer -> (weight key, packed)

    @staticmethod
    def eligible(model: Any) -> list[torch.nn.Linear]:
        """The model's linear layers on the CPU in float32 whose ``forward`` is the class's own."""
        return [m for m in model.modules() if isinstance(m, torch.nn.Linear) and "forward" not in vars(m)
                and m.weight.device.type == "cpu" and m.weight.dtype == torch.float32
                and (m.bias is None or m.bias.dtype == torch.float32)]

    def _pack(self, layer: torch.nn.Linear, transposed: bool = False) -> torch.Tensor:
        weight = layer.weight
        key = (weight.data_ptr(), weight._version)
        held = self._packed.get(layer)
        if held is None or held[0] != key:
            held = (key, {})
            self._packed[layer] = held
        if transposed not in held[1]:
            source = weight.detach().t().contiguous() if transposed else weight.detach()
            held[1][transposed] = torch.ops.mkldnn._reorder_linear_weight(source, ROWS_HINT)
        return held[1][transposed]

    @contextlib.contextmanager
    def active(self, model: Any) -> Iterator[None]:
        """Inside: the model's eligible linear layers compute with their packed weights (with gradients on, its
        frozen ones only; nothing swapped for a model FSDP shards). Their own ``forward`` is back on exit; a
        backward after it still runs through the packs its forward used."""
        grad = torch.is_grad_enabled()
        swapped = []
        try:
            if not _sharded(model):
                for layer in self.eligible(model):
                    bias = None if layer.bias is None else layer.bias.detach()
                    if not grad:
                        layer.forward = _packed_forward(self._pack(layer), bias)  # found before the class's
                    elif not layer.weight.requires_grad and (layer.bias is None or not layer.bias.requires_grad):
                        layer.forward = _frozen_forward(self._pack(layer), self._pack(layer, transposed=True), bias)
                    else:
                        continue
                    swapped.append(layer)
            yield
        finally:
            for layer in swapped:
                del layer.forward


#: the process's packs (:func:`active`)
_SHARED = PackedLinears()


def active(model: Any) -> contextlib.AbstractContextManager:
    """:meth:`PackedLinears.active` with the process's packs where this PyTorch has oneDNN, else nothing swapped."""
    return _SHARED.active(model) if available() else contextlib.nullcontext()


def _packed_forward(packed: torch.Tensor, bias: torch.Tensor | None):
    def forward(x: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")

    return forward


class _FrozenLinear(torch.autograd.Function):
    """``x @ W.T + b`` for a frozen ``W`` and ``b``: forward with the packed ``W``, the input's gradient with the packed
    ``W.T`` (no gradient for the weight or the bias)."""

    @staticmethod
    def forward(x: torch.Tensor, packed: torch.Tensor, transposed: torch.Tensor, bias: torch.Tensor | None):
        return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
        ctx.transposed = inputs[2]

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor):
        return torch.ops.mkldnn._linear_pointwise(grad.contiguous(), ctx.transposed, None, "none", [], ""), None, None, None


def _frozen_forward(packed: torch.Tensor, transposed: torch.Tensor, bias: torch.Tensor | None):
    def forward(x: torch.Tensor) -> torch.Tensor:
        return _FrozenLinear.apply(x, packed, transposed, bias)

    return forward
