"""wmrl's LoRA ops for vLLM's CPU build (:mod:`wmrl.generation.vllm_cpu_lora`): each equals vLLM's own op on the
same inputs (tokens of several adapter slots, a negative slot, a sequence-level call), and vLLM loads the plugin
from wmrl's entry point, so the engine's processes use them."""

from __future__ import annotations

import importlib.metadata

import pytest
import torch

from wmrl.generation import vllm_cpu_lora


def slots(*counts: int) -> torch.Tensor:
    """Token slots: ``counts[k]`` tokens of slot k in turn, the last group's slot written as -1."""
    values = [k if k < len(counts) - 1 else -1 for k, count in enumerate(counts) for _ in range(count)]
    return torch.tensor(values)


def both(name: str, *args, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
    """vLLM's op and wmrl's on copies of the same output tensor (args[2])."""
    from vllm.lora.ops import torch_ops

    theirs, ours = args[2].clone(), args[2].clone()
    getattr(torch_ops, name)(*args[:2], theirs, *args[3:], **kwargs)
    vllm_cpu_lora.OPS[name](*args[:2], ours, *args[3:], **kwargs)
    return theirs, ours


@pytest.mark.parametrize("counts", [(7,), (3, 4), (2, 3, 2)], ids=["one slot", "two slots", "three slots"])
def test_the_per_slot_ops_equal_vllms(counts):
    generator = torch.Generator().manual_seed(0)
    tokens, hidden, out, rank, stacked = sum(counts), 24, 40, 4, 3
    x = torch.randn(tokens, hidden, generator=generator)
    a = torch.randn(stacked, 1, rank, hidden, generator=generator)  # the stacked shrink matrices
    b = torch.randn(stacked, 1, out, rank, generator=generator)  # the stacked expand matrices
    h = torch.randn(tokens, rank, generator=generator)
    y = torch.randn(tokens, out + 8, generator=generator)  # wider than the adapter's output: padding
    index = slots(*counts)
    for theirs, ours in (
        both("bgmv_shrink", x, a, torch.zeros(tokens, rank), index, 0.5),
        both("bgmv_expand", h, b, y, index, add_inputs=True),
        both("bgmv_expand", h, b, y, index, add_inputs=False),
        both("bgmv_expand_slice", h, b, y, index, 4, out, add_inputs=True),
        both("bgmv_expand", h[:1], b, y, index[:1], add_inputs=True),  # one row, broadcast as vLLM does
    ):
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)
    # the sequence-level ops: each sequence's slot over its tokens
    lengths = torch.tensor(counts)
    starts = torch.cumsum(lengths, 0) - lengths
    sequences = slots(*[1] * len(counts))
    shape = (starts, lengths, sequences, len(counts), max(counts), tokens)
    for theirs, ours in (
        both("sgmv_shrink", x, a, torch.zeros(tokens, rank), *shape, 2.0),
        both("sgmv_expand", h, b, y, *shape, add_inputs=True),
        both("sgmv_expand_slice", h, b, y, *shape, 2, out, add_inputs=True),
    ):
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)


def test_vllm_loads_the_plugin_and_its_cpu_wrapper_calls_the_per_slot_ops():
    import vllm.lora.punica_wrapper.punica_cpu as punica_cpu
    from vllm.plugins import load_general_plugins

    declared = {e.name: e.value for e in importlib.metadata.entry_points(group="vllm.general_plugins")}
    assert declared.get(vllm_cpu_lora.PLUGIN) == "wmrl.generation.vllm_cpu_lora:register", (
        "wmrl's vLLM plugin is not installed in this environment: reinstall wmrl (.venv-vllm/bin/pip install --no-deps -e .)")
    load_general_plugins()  # what vLLM's engine core and workers call at their start
    for name, op in vllm_cpu_lora.OPS.items():
        assert getattr(punica_cpu, name) is op, name
