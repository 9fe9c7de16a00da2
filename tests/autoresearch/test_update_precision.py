"""The update's precision: bfloat16 autocast with a float32 output head, agreeing with float32 within the stated
tolerance; ``update_precision: auto`` measures once, logs its choice and keeps it across a resume."""

from __future__ import annotations

import time
from unittest import mock

import pytest
import torch
from support.fakes import LowTokenEnvironment, byte_tokenizer
from test_grpo_module import Steps, trainer

import wmrl.autoresearch.module as grpo
from wmrl.algorithms.grpo import token_logprobs
from wmrl.autoresearch.module import PRECISION_KEY, GRPOModule
from wmrl.models import LoraSettings, precision, tiny_llama
from wmrl.models.kv import causal_lm_logits


def _lora_llama():
    from peft import LoraConfig, get_peft_model

    model, tokenizer = tiny_llama(byte_tokenizer(), hidden=64, layers=2, seed=0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1)
        model = get_peft_model(model, LoraConfig(task_type="CAUSAL_LM", r=4, lora_alpha=8,
                                                 target_modules=["q_proj", "v_proj"]))
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.data.normal_(0, 0.1)
    return model, tokenizer


def _rows() -> torch.Tensor:
    generator = torch.Generator().manual_seed(3)
    prompt = torch.randint(3, 250, (40,), generator=generator)
    return torch.stack([torch.cat([prompt, torch.randint(3, 250, (12,), generator=generator)]) for _ in range(3)])


def test_autocast_runs_the_body_in_bfloat16_and_the_head_in_float32():
    model, _ = _lora_llama()
    seen = []
    hook = model.get_base_model().model.layers[0].mlp.register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    ids = _rows()
    with precision.autocast(model, torch.bfloat16):
        logits = model(input_ids=ids).logits
    hook.remove()
    head = model.get_base_model().get_output_embeddings()
    assert seen == [torch.bfloat16] and logits.dtype == torch.float32
    assert "forward" not in vars(head)  # the head's own forward again
    assert model(input_ids=ids).logits.dtype == torch.float32


def test_the_bfloat16_update_agrees_with_float32_within_the_stated_tolerance():
    """The log-prob loss of three rows sharing a prompt (prefix shared, as the update runs it): the gradient's
    cosine to float32's >= MIN_COSINE, its norm within MAX_NORM_CHANGE, the loss within 1%."""
    model, _ = _lora_llama()
    ids = _rows()
    parameters = [p for p in model.parameters() if p.requires_grad]

    def run(dtype):
        with precision.autocast(model, dtype):
            logits = causal_lm_logits(model, ids, torch.ones_like(ids), logits_to_keep=13)
        loss = -token_logprobs(logits, ids[:, -13:]).mean()
        return loss, torch.cat([g.flatten() for g in torch.autograd.grad(loss, parameters)])

    (full_loss, full), (half_loss, half) = run(None), run(torch.bfloat16)
    assert float(torch.nn.functional.cosine_similarity(full, half, dim=0)) >= precision.MIN_COSINE
    assert abs(float(half.norm()) / float(full.norm()) - 1) <= precision.MAX_NORM_CHANGE
    assert float(half_loss.detach()) == pytest.approx(float(full_loss.detach()), rel=1e-2)
    assert not torch.equal(full, half)  # bfloat16 did run


@pytest.mark.parametrize(("slow_bfloat16", "expected"), [(True, False), (False, True)])
def test_measure_keeps_bfloat16_only_where_it_is_faster(slow_bfloat16, expected):
    """The tiny model's passes, one precision held back by 0.3 s (a hook on the model): bfloat16 is kept only when
    float32 is the slow one; its gradients agree; nothing is accumulated and the global RNG is untouched."""
    model, _ = _lora_llama()
    parameters = [p for p in model.parameters() if p.requires_grad]

    def hold_back(module, args):
        if torch.is_autocast_enabled("cpu") == slow_bfloat16:
            time.sleep(0.3)

    hook = model.get_base_model().model.register_forward_pre_hook(hold_back)
    state = torch.random.get_rng_state()
    with mock.patch.object(precision, "matmul_speedup", lambda model: 2.0):  # past the screen, whatever this CPU
        probe = precision.measure(model, tokens=64)
    hook.remove()
    assert probe.agrees and probe.bfloat16 is expected
    assert torch.equal(torch.random.get_rng_state(), state)
    assert all(p.grad is None for p in parameters)  # measured, never accumulated
    assert ("bfloat16 autocast" if expected else "float32") in probe.line()


def test_a_machine_whose_bfloat16_products_are_slow_times_no_pass():
    """The screen: where a bfloat16 product of the model's shapes is no faster than float32's (a CPU that emulates
    bfloat16), float32 is chosen without timing a forward and backward pass (which took minutes there)."""
    model, _ = _lora_llama()
    passes = []
    hook = model.get_base_model().model.register_forward_pre_hook(lambda module, args: passes.append(1))
    with mock.patch.object(precision, "matmul_speedup", lambda model: 0.08):
        probe = precision.measure(model, tokens=64)
    hook.remove()
    assert passes == [] and probe.screened_out and not probe.bfloat16
    assert "a bfloat16 matrix product runs 0.08x as fast" in probe.line()
    assert probe.metrics()["update/probe_matmul_speedup"] == pytest.approx(0.08)
    assert precision.matmul_speedup(model) > 0  # the real screen runs on the model's own shapes


def test_a_hopeless_first_bfloat16_pass_ends_the_probe_after_one_round():
    model, _ = _lora_llama()
    passes = []

    def count_and_hold_back(module, args):
        passes.append(torch.is_autocast_enabled("cpu"))
        if torch.is_autocast_enabled("cpu"):
            time.sleep(3.0)  # far beyond HOPELESS x a tiny float32 pass, its first one-time allocations included

    hook = model.get_base_model().model.register_forward_pre_hook(count_and_hold_back)
    with mock.patch.object(precision, "matmul_speedup", lambda model: 2.0):
        probe = precision.measure(model, tokens=64)
    hook.remove()
    assert passes == [False, True] and not probe.bfloat16  # one round: float32, then a hopeless bfloat16 pass


def test_a_gradient_that_disagrees_keeps_float32():
    assert not precision.Probe(float32_s=2.0, bfloat16_s=1.0, cosine=0.9, norm_change=0.0).bfloat16
    assert not precision.Probe(float32_s=2.0, bfloat16_s=1.0, cosine=1.0, norm_change=0.2).bfloat16
    assert precision.Probe(float32_s=2.0, bfloat16_s=1.0, cosine=1.0, norm_change=0.0).bfloat16


def _module(**overrides) -> GRPOModule:
    model, tokenizer = tiny_llama(byte_tokenizer(), seed=0)
    settings = dict(policy=(model, tokenizer), lora=LoraSettings(r=4, alpha=8), environment=LowTokenEnvironment(tokenizer),
                    group_size=4, max_new_tokens=12, lr=3e-3, kl_coef=0.04, entropy_coef=0.0, micro_batch_size=4)
    return GRPOModule(**{**settings, **overrides})


def test_auto_measures_once_and_a_resumed_fit_keeps_its_choice(tmp_path, monkeypatch):
    """A fit with ``update_precision: auto`` measures before its first update only, logs ``update/bfloat16`` at every
    step and writes its choice into the checkpoint; a fit resumed from it measures nothing and runs as it started."""
    probes = []
    original = precision.measure

    def recording(model, *args, **kwargs):
        probe = original(model, *args, **kwargs)
        probes.append(probe)
        return probe

    monkeypatch.setattr(grpo.precision, "measure", recording)
    first = trainer(2, enable_checkpointing=True, default_root_dir=tmp_path)
    module = _module(update_precision="auto")
    first.fit(module, torch.utils.data.DataLoader(Steps(2), batch_size=None))
    assert len(probes) == 1
    assert first.callback_metrics["update/bfloat16"] == float(probes[0].bfloat16)
    checkpoint = tmp_path / "auto.ckpt"
    first.save_checkpoint(checkpoint)
    assert torch.load(checkpoint, weights_only=False)[PRECISION_KEY] is probes[0].bfloat16

    # a resumed fit takes the choice from the checkpoint: it must not measure again
    monkeypatch.setattr(grpo.precision, "measure", lambda *a: pytest.fail("a resumed fit measured again"))
    resumed = _module(update_precision="auto")
    trainer(3).fit(resumed, torch.utils.data.DataLoader(Steps(3, start=2), batch_size=None), ckpt_path=checkpoint)
    assert resumed._bfloat16 is probes[0].bfloat16


def test_bad_precision_settings_name_the_key():
    with pytest.raises(ValueError, match="model.init_args.update_precision must be float32, bfloat16 or auto"):
        _module(update_precision="fp16")
    with pytest.raises(ValueError, match="autocasts a float32 policy"):
        _module(update_precision="auto", dtype="bfloat16")
