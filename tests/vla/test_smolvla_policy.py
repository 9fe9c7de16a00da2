"""SmolVLA behind SmolVLAChunkPolicy on CPU: a tiny SmolVLM generated locally (nothing downloaded), its per-sample loss
(``forward(batch, reduction="none")``) advantage-weighted, gradients into the trainable parts only, and real
weights loaded when ``vlm_model_name`` names a local checkpoint directory."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch

pytestmark = [
    pytest.mark.lerobot,
    pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                       reason="needs transformers: pip install 'lerobot[smolvla]==0.6.1' into .venv312"),
]

TINY = {"chunk_size": 4, "n_action_steps": 2, "dim_model": 32, "n_heads": 4,
        "dim_feedforward": 64, "n_encoder_layers": 2, "image_size": 32, "num_steps": 2}


def observations(count: int, seed: int = 0):
    from wmrl.vla.policies.chunk import observation_batch

    generator = torch.Generator().manual_seed(seed)
    return observation_batch(torch.rand(count, 2, generator=generator) * 512,
                             torch.rand(count, 16, generator=generator) * 512)


@pytest.fixture(scope="module")
def policy():
    from wmrl.vla.policies.chunk import SmolVLAChunkPolicy

    torch.manual_seed(0)
    return SmolVLAChunkPolicy(**TINY).build()


def test_tiny_smolvla_is_built_locally_and_samples_action_chunks(policy):
    from wmrl.vla.contracts import ChunkPolicy

    assert type(policy.policy).__name__ == "SmolVLAPolicy"
    assert isinstance(policy, ChunkPolicy) and type(policy).__name__ == "SmolVLAChunkPolicy"
    assert (policy.chunk_size, policy.n_action_steps) == (4, 2)
    batch = policy.smolvla_batch(observations(3))
    assert batch["observation.image"].shape == (3, 3, 32, 32) and batch["observation.state"].shape == (3, 18)
    tokens = batch["observation.language.tokens"]
    assert tokens.shape[0] == 3 and (tokens != policy.policy.model.vlm_with_expert.processor.tokenizer.unk_token_id).all()
    chunk = policy.mean_chunk(observations(3))
    assert chunk.shape == (3, 4, 2) and torch.isfinite(chunk).all()


def test_advantage_weighted_per_sample_loss_differs_per_sample_and_trains_only_the_trainable_parts(policy):
    obs = observations(6, seed=1)
    chunk = torch.rand(6, 2, 2) * 2 - 1  # executed prefix (K=2) of H=4-step chunks
    policy.train()
    torch.manual_seed(1)
    loss = policy.per_sample_loss(obs, chunk, std=0.1)
    assert loss.shape == (6,) and torch.isfinite(loss).all()
    assert loss.unique().numel() == 6  # one flow-matching loss per sample

    advantages = torch.tensor([1.0, -1.0, 0.5, 0.0, 2.0, -0.5])
    policy.zero_grad(set_to_none=True)
    (advantages * loss).mean().backward()
    trainable = {n: p for n, p in policy.named_parameters() if p.requires_grad}
    frozen = {n: p for n, p in policy.named_parameters() if not p.requires_grad}
    assert trainable and frozen  # SmolVLA trains its action expert and projections; the VLM stays frozen
    assert all(".vlm." in n or "lm_head" in n for n in frozen)
    reached = [n for n, p in trainable.items() if p.grad is not None and p.grad.abs().sum() > 0]
    assert any("action_out_proj" in n for n in reached) and any("lm_expert" in n for n in reached)
    assert any("state_proj" in n for n in reached)  # the state observation reaches the loss
    assert all(p.grad is None for p in frozen.values())


def test_a_positive_advantage_lowers_that_samples_loss(policy):
    obs, chunk = observations(4, seed=2), torch.rand(4, 2, 2) * 2 - 1
    optimizer = torch.optim.SGD([p for p in policy.parameters() if p.requires_grad], lr=1e-2)
    policy.train()

    def loss_with_fixed_noise():
        torch.manual_seed(3)  # the same flow-matching noise and time before and after the step
        return policy.per_sample_loss(obs, chunk, std=0.1)

    before = loss_with_fixed_noise().detach()
    optimizer.zero_grad(set_to_none=True)
    (torch.tensor([1.0, 0, 0, 0]) * loss_with_fixed_noise()).mean().backward()
    optimizer.step()
    assert float(loss_with_fixed_noise()[0]) < float(before[0])


def test_vlm_weights_load_from_a_local_checkpoint_directory(tmp_path):
    from safetensors.torch import load_file

    from wmrl.vla.policies.chunk import SmolVLAChunkPolicy
    from wmrl.vla.policies.smolvlm import write_tiny_smolvlm

    checkpoint = write_tiny_smolvlm(tmp_path / "smolvlm", hidden_size=32, intermediate_size=64, num_layers=2,
                                    num_heads=4, weights=True, seed=7)
    saved = load_file(str(checkpoint / "model.safetensors"))
    policy = SmolVLAChunkPolicy(**{**TINY, "vlm_model_name": str(checkpoint)}).build()
    vlm = policy.policy.model.vlm_with_expert.vlm.state_dict()
    name = next(n for n in saved if "embed_tokens" in n)
    loaded = next(v for n, v in vlm.items() if n.endswith("embed_tokens.weight"))
    torch.testing.assert_close(loaded.float(), saved[name].float(), rtol=0, atol=1e-2)  # bfloat16 load
    with pytest.raises(FileNotFoundError, match="vlm_model_name .* is not a local directory .*never downloads"):
        SmolVLAChunkPolicy(**{**TINY, "vlm_model_name": "HuggingFaceTB/SmolVLM2-500M-Video-Instruct"}).build()


def test_smolvla_configuration_errors_name_the_key():
    from wmrl.vla.module import VLAGRPOModule
    from wmrl.vla.policies.chunk import SmolVLAChunkPolicy

    with pytest.raises(ValueError, match=r"model.init_args.kl_coef must be 0 for model.init_args.policy "
                                         r"SmolVLAChunkPolicy"):
        VLAGRPOModule(policy=SmolVLAChunkPolicy(**TINY), kl_coef=0.04)
    with pytest.raises(ValueError, match=r"model.init_args.policy.init_args.image_size must be a positive multiple "
                                         r"of 16"):
        VLAGRPOModule(policy=SmolVLAChunkPolicy(**{**TINY, "image_size": 20}), kl_coef=0.0)


def test_pusht_smolvla_quickstart_config_runs_and_reports_heldout_success(tmp_path, fit_shortened):
    """`wmrl fit -c configs/vla/pusht_quickstart.yaml -c configs/vla/pusht_smolvla_quickstart.yaml`, shortened (2 steps,
    fewer demos / SFT / held-out)."""
    import csv

    run_dir = tmp_path / "run"
    fit_shortened(["configs/vla/pusht_quickstart.yaml", "configs/vla/pusht_smolvla_quickstart.yaml"], run_dir,
                  demonstrations=12, heldout_states=4, sft_steps=40)
    (metrics_file,) = run_dir.glob("csv/version_*/metrics.csv")
    rows = list(csv.DictReader(metrics_file.open()))
    losses = [float(r["loss/total"]) for r in rows if r.get("loss/total")]
    assert len(losses) == 2 and all(np.isfinite(losses))
    assert {"heldout/success", "anchor/real_success", "debias/pairs", "sft/loss"} <= {
        k for row in rows for k, v in row.items() if v != ""}
    checkpoint = torch.load(run_dir / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert checkpoint["hyper_parameters"]["policy"]["class_path"] == "wmrl.vla.policies.chunk.SmolVLAChunkPolicy"
    assert any("lm_expert" in name for name in checkpoint["state_dict"])
