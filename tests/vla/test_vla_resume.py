"""Resume is exact on the VLA path: fit 4 steps in one go, or 2 steps and then resume from the last checkpoint
to 4 (crossing an epoch boundary and a world-model refresh); the policy, its KL reference, the world model
(weights, optimizer, anchor buffer, refresh counters), the calibration and the denoising state end up equal.

Real pieces throughout: gym-pusht, a LeRobot ACT, a LeRobotDataset of demonstrations, the four WMRL callbacks.
"""

from __future__ import annotations

import lightning.pytorch as pl
import numpy as np
import pytest
import torch

pytestmark = pytest.mark.lerobot

SIMULATOR = {"max_episode_steps": 40, "success_threshold": 0.85, "initial_states": "near_goal", "max_offset": 25.0,
             "max_angle": 0.25}


def build(run_dir, demos_root):
    from wmrl.callbacks import AnchorRouting, InverseVarianceDenoising, OnlineDebiasing, WorldModelReward
    from wmrl.vla.datamodule.lerobot import LeRobotVLADataModule
    from wmrl.vla.module import VLAGRPOModule
    from wmrl.vla.policies.chunk import ACTChunkPolicy
    from wmrl.vla.simulators.pusht import PushTSimulator
    from wmrl.vla.warm_start import BehaviourCloningWarmStart
    from wmrl.vla.world_models.progress import ProgressWorldModel

    world_model = ProgressWorldModel(chunk_size=4, hidden=32, train_steps=30, refresh_every=4, refresh_steps=5,
                                     batch_size=64, seed=0)
    callbacks = [BehaviourCloningWarmStart(steps=20, batch_size=32),
                 AnchorRouting(fraction=0.5, floor=1, selection="random", seed=0), WorldModelReward(world_model),
                 OnlineDebiasing(min_pairs=4, refit_every=2), InverseVarianceDenoising(warmup=1)]
    module = VLAGRPOModule(
        simulator=PushTSimulator(**SIMULATOR),
        policy=ACTChunkPolicy(chunk_size=4, n_action_steps=2, dim_model=32, n_heads=2, dim_feedforward=64),
        group_size=2, exploration_std=0.1, lr=1e-3, kl_coef=0.04,
        eval_at_start=False, torch_threads=1, seed=0,
    )
    data = LeRobotVLADataModule(root=str(demos_root), simulator=PushTSimulator(**SIMULATOR), demonstrations=6,
                                train_states=6, heldout_states=2, group_size=2, groups_per_step=2, steps_per_epoch=3)
    return module, data, callbacks, world_model


def fit(run_dir, demos_root, max_steps, ckpt_path=None):
    pl.seed_everything(0)
    module, data, callbacks, world_model = build(run_dir, demos_root)
    checkpoint = pl.callbacks.ModelCheckpoint(dirpath=run_dir / "checkpoints", save_last=True, every_n_train_steps=1)
    trainer = pl.Trainer(max_steps=max_steps, callbacks=[*callbacks, checkpoint], logger=False, accelerator="cpu",
                         enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                         limit_val_batches=0, default_root_dir=run_dir)
    trainer.fit(module, datamodule=data, ckpt_path=ckpt_path)
    module.simulator.close()
    data.simulator.close()
    return module, callbacks, world_model, trainer


def test_resume_from_the_last_checkpoint_continues_exactly_like_an_uninterrupted_run(tmp_path):
    demos = tmp_path / "demos"
    straight, straight_callbacks, straight_wm, trainer = fit(tmp_path / "straight", demos, max_steps=4)
    assert trainer.global_step == 4
    fit(tmp_path / "first", demos, max_steps=2)
    last = tmp_path / "first" / "checkpoints" / "last.ckpt"
    saved = torch.load(last, map_location="cpu", weights_only=True)  # plain tensors and numbers only
    (reward_key,) = [key for key in saved["callbacks"] if key.startswith("WorldModelReward")]  # its state_key
    assert len(saved["callbacks"][reward_key]["world_model"]["anchors"]) >= 2  # the anchor buffer
    assert "wmrl_vla_reference" in saved and saved["LeRobotVLADataModule"] == {"steps_done": 2}

    resumed, resumed_callbacks, resumed_wm, trainer = fit(tmp_path / "first", demos, max_steps=4, ckpt_path=last)
    assert trainer.global_step == 4

    # the anchor buffer and the refreshes continue (4 steps x 1-2 anchor groups x 2 rollouts, refresh every 4)
    assert len(resumed_wm.anchors) == len(straight_wm.anchors) >= 4
    assert straight_wm.refreshes >= 1 and resumed_wm.refreshes == straight_wm.refreshes
    assert resumed_wm.new_anchors == straight_wm.new_anchors
    for a, b in zip(resumed_wm.anchors, straight_wm.anchors, strict=True):
        assert a.seed == b.seed and a.success == b.success
        np.testing.assert_array_equal(a.chunk_actions, b.chunk_actions)
    for name, value in straight_wm.model.state_dict().items():
        torch.testing.assert_close(resumed_wm.model.state_dict()[name], value, rtol=0, atol=0, msg=name)

    # the policy and its SFT reference
    for name, value in straight.policy.state_dict().items():
        torch.testing.assert_close(resumed.policy.state_dict()[name], value, rtol=0, atol=0, msg=name)
    for name, value in straight._reference[0].state_dict().items():
        torch.testing.assert_close(resumed._reference[0].state_dict()[name], value, rtol=0, atol=0, msg=name)

    # routing, calibration and denoising
    _, routing, _, debias, denoise = straight_callbacks
    _, routing2, _, debias2, denoise2 = resumed_callbacks
    assert routing2.state_dict() == routing.state_dict()
    assert list(debias2.pairs) == list(debias.pairs) and len(debias.pairs) >= 4
    assert debias2.calibration.to_dict() == debias.calibration.to_dict() and debias2.refits == debias.refits
    assert repr(denoise2.state_dict()) == repr(denoise.state_dict())  # repr: NaN == NaN (an unset EWMA)
    print(f"resume: {len(straight_wm.anchors)} anchors ({sum(a.success for a in straight_wm.anchors)} successful), "
          f"{straight_wm.refreshes} refreshes, {len(debias.pairs)} pairs, rank corr {debias.rank_corr:.3f}, "
          f"denoise observations {denoise.state.observations}")
