"""The behaviour-cloning warm start is its own step, a callback: with it the policy is cloned before the first
training step and the KL reference is that cloned policy; without it the module starts from the policy it was
given; a resumed run does not clone again (policy and reference come from the checkpoint).

Real pieces: gym-pusht, a LeRobot ACT, a LeRobotDataset of demonstrations; no world model (plain GRPO).
"""

from __future__ import annotations

import copy

import lightning.pytorch as pl
import pytest
import torch

pytestmark = pytest.mark.lerobot

SIMULATOR = {"max_episode_steps": 40, "success_threshold": 0.85, "initial_states": "near_goal", "max_offset": 25.0,
             "max_angle": 0.25}
POLICY = {"chunk_size": 4, "n_action_steps": 2, "dim_model": 32, "n_heads": 2, "dim_feedforward": 64}


class PolicyAtTrainStart(pl.Callback):
    """Copies the policy and the KL reference as the first training step will see them."""

    def on_train_start(self, trainer, pl_module):
        self.policy = copy.deepcopy(pl_module.policy.state_dict())
        self.reference = copy.deepcopy(pl_module._reference[0].state_dict())


def untrained_policy():
    from wmrl.vla.policies.chunk import ACTChunkPolicy

    torch.manual_seed(0)
    return ACTChunkPolicy(**POLICY).build()


def fit(run_dir, demos_root, warm_start, policy_instance, max_steps=1, ckpt_path=None):
    from wmrl.vla.datamodule.lerobot import LeRobotVLADataModule
    from wmrl.vla.module import VLAGRPOModule
    from wmrl.vla.policies.chunk import ACTChunkPolicy
    from wmrl.vla.simulators.pusht import PushTSimulator

    pl.seed_everything(0)
    module = VLAGRPOModule(simulator=PushTSimulator(**SIMULATOR), policy=ACTChunkPolicy(**POLICY), group_size=2,
                           exploration_std=0.1, lr=1e-3, kl_coef=0.04, eval_at_start=False, torch_threads=1, seed=0,
                           policy_instance=policy_instance)
    data = LeRobotVLADataModule(root=str(demos_root), simulator=PushTSimulator(**SIMULATOR), demonstrations=6,
                                train_states=4, heldout_states=2, group_size=2, groups_per_step=2, steps_per_epoch=2)
    probe = PolicyAtTrainStart()
    checkpoint = pl.callbacks.ModelCheckpoint(dirpath=run_dir / "checkpoints", save_last=True, every_n_train_steps=1)
    trainer = pl.Trainer(max_steps=max_steps, callbacks=[*warm_start, probe, checkpoint], logger=False,
                         accelerator="cpu", enable_progress_bar=False, enable_model_summary=False,
                         num_sanity_val_steps=0, limit_val_batches=0, default_root_dir=run_dir)
    try:
        trainer.fit(module, datamodule=data, ckpt_path=ckpt_path)
    finally:
        module.simulator.close()
        data.simulator.close()
    return module, probe


def assert_equal(actual: dict, expected: dict) -> None:
    assert actual.keys() == expected.keys()
    for name, value in expected.items():
        torch.testing.assert_close(actual[name], value, rtol=0, atol=0, msg=name)


def changed(actual: dict, expected: dict) -> list[str]:
    return [name for name, value in expected.items() if not torch.equal(actual[name], value)]


def test_the_warm_start_is_a_callback_that_a_resumed_run_does_not_repeat(tmp_path):
    from wmrl.vla.warm_start import BehaviourCloningWarmStart

    demos = tmp_path / "demos"
    untrained = untrained_policy().state_dict()

    # with the callback: cloned before the first step, and the KL reference is the cloned policy
    warm_start = BehaviourCloningWarmStart(steps=20, batch_size=32, lr=1e-3)
    module, probe = fit(tmp_path / "warm", demos, [warm_start], untrained_policy())
    assert warm_start.loss is not None and torch.isfinite(torch.tensor(warm_start.loss))
    assert module.cloned_steps == 20
    assert len(changed(probe.policy, untrained)) > len(untrained) // 2  # most tensors moved
    assert_equal(probe.reference, probe.policy)

    # without it: the module starts from the policy it was given, which is also the reference
    module, cold = fit(tmp_path / "cold", demos, [], untrained_policy())
    assert module.cloned_steps == 0
    assert_equal(cold.policy, untrained)
    assert_equal(cold.reference, untrained)

    # resumed with the callback listed: no second cloning; policy and reference are the checkpoint's
    last = tmp_path / "warm" / "checkpoints" / "last.ckpt"
    saved = torch.load(last, map_location="cpu", weights_only=True)
    saved_policy = {k.removeprefix("policy."): v for k, v in saved["state_dict"].items() if k.startswith("policy.")}
    again = BehaviourCloningWarmStart(steps=20, batch_size=32, lr=1e-3)
    module, resumed = fit(tmp_path / "warm", demos, [again], untrained_policy(), max_steps=2, ckpt_path=last)
    assert again.loss is None and module.cloned_steps == 0 and module.global_step == 2
    assert_equal(resumed.policy, saved_policy)
    assert_equal(resumed.reference, saved["wmrl_vla_reference"])
    assert_equal(resumed.reference, probe.policy)  # still the first run's policy after SFT


def test_an_untrained_policy_without_the_warm_start_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"policy.pretrained_path is null and trainer.callbacks has no "
                                         r"wmrl.vla.warm_start.BehaviourCloningWarmStart"):
        fit(tmp_path / "run", tmp_path / "demos", [], policy_instance=None)


def test_bad_warm_start_settings_name_the_key_and_the_fix():
    from wmrl.vla.warm_start import BehaviourCloningWarmStart

    with pytest.raises(ValueError, match=r"steps must be >= 1 \(got 0\); to start from .*remove the callback"):
        BehaviourCloningWarmStart(steps=0)
    with pytest.raises(ValueError, match=r"batch_size must be >= 1.*\n.*lr must be > 0"):
        BehaviourCloningWarmStart(batch_size=0, lr=0.0)
