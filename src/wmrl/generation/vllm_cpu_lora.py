"""vLLM's LoRA on CPU with one matrix product per adapter instead of a copy of the adapter per token.

vLLM's CPU build applies LoRA adapters with its PyTorch reference ops (``vllm.lora.ops.torch_ops``, used by
``PunicaWrapperCPU``): each op first gathers every token's adapter matrix (``weights[token_indices]``, a
``[tokens, out, rank]`` copy) and then takes one small product per token. For a prefill that copy dominates: on this
project's 2-core machine, SmolLM2-135M's MLP projection (576 -> 1,536, rank 16) over a 1,400-token prompt took 450 ms
for its shrink and expand, where one product per adapter takes 5 ms, and the policy's adapter sits on every
projection of every layer.

:func:`register` replaces those ops, as ``PunicaWrapperCPU`` calls them, with versions that group the tokens by
adapter slot and take one product per slot. The arithmetic is the same (the same slot's matrix for each token,
negative indices included: they select as tensor indexing does), so outputs agree up to float rounding
(``tests/vllm_real/test_vllm_cpu_lora.py`` compares every op with vLLM's on mixed slots).

vLLM calls :func:`register` in every process it starts (the engine core and its workers), as a general plugin: wmrl
declares it under the ``vllm.general_plugins`` entry points, so an install of wmrl next to vLLM's CPU build
(``.venv-vllm``) is enough. It does nothing on other platforms (a GPU has vLLM's own kernels). To keep vLLM's ops,
list the plugins vLLM should load without it: ``VLLM_PLUGINS=`` (none) in the environment.
"""

from __future__ import annotations

from typing import Any

#: the name of wmrl's entry point in the ``vllm.general_plugins`` group (pyproject.toml)
PLUGIN = "wmrl_cpu_lora"


def register() -> None:
    """Swap ``PunicaWrapperCPU``'s LoRA ops for the per-slot ones on vLLM's CPU platform; elsewhere nothing."""
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return
    import vllm.lora.punica_wrapper.punica_cpu as punica_cpu

    for name, op in OPS.items():
        setattr(punica_cpu, name, op)


def per_slot_product(inputs: Any, weights: Any, indices: Any, dtype: Any) -> Any:
    """``einsum("bi,boi->bo", inputs, weights[indices])`` without the per-token copy of ``weights``.

    Args:
        inputs: ``[tokens, in]``.
        weights: the stacked adapters, ``[slots, out, in]`` or ``[slots, 1, out, in]``.
        indices: ``[tokens]``, each token's slot (negative values count from the end, as tensor indexing does).
        dtype: the product's dtype (inputs and weights are cast to it).
    """
    import torch

    if weights.dim() == 4:
        weights = weights.squeeze(1)
    inputs = inputs.to(dtype)
    if inputs.shape[0] != indices.shape[0]:  # not the ops' usual layout: the reference computation
        return torch.einsum("bi,boi->bo", inputs, weights[indices].to(dtype))
    slots = torch.unique(indices).tolist()
    if len(slots) == 1:
        return inputs @ weights[slots[0]].to(dtype).T
    outputs = inputs.new_empty((inputs.shape[0], weights.shape[1]))
    for slot in slots:
        rows = (indices == slot).nonzero().squeeze(1)
        outputs[rows] = inputs[rows] @ weights[slot].to(dtype).T
    return outputs


def bgmv_shrink(inputs, lora_a_weights, output_tensor, lora_indices_tensor, scaling: float = 1.0) -> None:
    """vLLM's ``bgmv_shrink``: ``output[:, :rank] = scaling * x A_slot^T`` per token."""
    outputs = per_slot_product(inputs, lora_a_weights, lora_indices_tensor, output_tensor.dtype)
    output_tensor[:, : outputs.shape[1]] = scaling * outputs


def bgmv_expand(inputs, lora_b_weights, output_tensor, lora_indices_tensor, add_inputs: bool = True) -> None:
    """vLLM's ``bgmv_expand``: ``output (+)= x B_slot^T`` per token, over the output's first columns."""
    outputs = per_slot_product(inputs, lora_b_weights, lora_indices_tensor, output_tensor.dtype)
    # as vLLM's op: a single row of outputs is broadcast over the output's rows; widths may differ by padding
    rows = 1 if outputs.shape[0] == 1 and output_tensor.shape[0] != 1 else output_tensor.shape[0]
    width = min(outputs.shape[1], output_tensor.shape[1])
    if add_inputs:
        output_tensor[:, :width] += outputs[:rows, :width]
    else:
        output_tensor[:, :width] = outputs[:rows, :width]


def bgmv_expand_slice(inputs, lora_b_weights, output_tensor, lora_indices_tensor, slice_offset: int,
                      slice_size: int, add_inputs: bool = True) -> None:
    """vLLM's ``bgmv_expand_slice``: :func:`bgmv_expand` into the output's columns ``[offset, offset + size)``."""
    outputs = per_slot_product(inputs, lora_b_weights, lora_indices_tensor, output_tensor.dtype)
    if add_inputs:
        output_tensor[:, slice_offset : slice_offset + slice_size] += outputs
    else:
        output_tensor[:, slice_offset : slice_offset + slice_size] = outputs


def _per_token(lora_indices_tensor, seq_len_tensor):
    """A sequence-level op's slots, one per token (each sequence's slot repeated over its tokens)."""
    import torch

    return torch.repeat_interleave(lora_indices_tensor, seq_len_tensor)


def sgmv_shrink(inputs, lora_a_weights, output_tensor, b_seq_start_loc, seq_len_tensor, lora_indices_tensor,
                batches, max_seq_length, token_nums, scaling: float) -> None:
    """vLLM's ``sgmv_shrink``: :func:`bgmv_shrink` with a slot per sequence."""
    bgmv_shrink(inputs, lora_a_weights, output_tensor, _per_token(lora_indices_tensor, seq_len_tensor), scaling)


def sgmv_expand(inputs, lora_b_weights, output_tensor, b_seq_start_loc, seq_len_tensor, lora_indices_tensor,
                batches, max_seq_length, token_nums, add_inputs: bool = False) -> None:
    """vLLM's ``sgmv_expand``: :func:`bgmv_expand` with a slot per sequence."""
    bgmv_expand(inputs, lora_b_weights, output_tensor, _per_token(lora_indices_tensor, seq_len_tensor), add_inputs)


def sgmv_expand_slice(inputs, lora_b_weights, output_tensor, b_seq_start_loc, seq_len_tensor, lora_indices_tensor,
                      batches, max_seq_length, token_nums, slice_offset: int, slice_size: int,
                      add_inputs: bool = False) -> None:
    """vLLM's ``sgmv_expand_slice``: :func:`bgmv_expand_slice` with a slot per sequence."""
    bgmv_expand_slice(inputs, lora_b_weights, output_tensor, _per_token(lora_indices_tensor, seq_len_tensor),
                      slice_offset, slice_size, add_inputs)


#: the ops ``PunicaWrapperCPU`` imports from ``vllm.lora.ops.torch_ops``, by name, with the same signatures
OPS = {op.__name__: op for op in (bgmv_shrink, bgmv_expand, bgmv_expand_slice, sgmv_shrink, sgmv_expand,
                                   sgmv_expand_slice)}
