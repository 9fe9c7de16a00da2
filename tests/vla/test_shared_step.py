"""The VLA module runs the same training step as the LLM module (one definition, wmrl.modules.base): its
rollout seed has the rank term and its steps get the missing-reward check."""

from wmrl.modules.base import RLModule
from wmrl.vla.module import VLAGRPOModule


def test_the_vla_module_uses_the_shared_training_step():
    assert VLAGRPOModule.training_step is RLModule.training_step
    assert "training_step" not in vars(VLAGRPOModule) and issubclass(VLAGRPOModule, RLModule)


def test_a_vla_step_with_nothing_to_train_on_still_counts(tmp_path):
    """The empty-step rule RLModule owns (tests/autoresearch/test_grpo_module.py checks the LLM module's): a step whose rewards
    are all dropped trains nothing, yet global_step advances, so the next step plays its own seed."""
    import lightning.pytorch as pl
    import pytest

    from wmrl.callbacks import RLCallback

    pytest.importorskip("lerobot", reason="needs LeRobot (the Python 3.12 environment, .venv312)")
    from test_vla_resume import build

    class DropFirst(RLCallback):
        def on_rewards(self, trainer, pl_module, batch):
            if trainer.global_step == 0:
                batch.rewards.fill_(float("nan"))
                batch.graded.fill_(False)

    skipped, seeds = [], []

    class Seen(RLCallback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            skipped.append(float(trainer.callback_metrics["train/skipped_step"]))

    pl.seed_everything(0)
    module, data, callbacks, _ = build(tmp_path, tmp_path / "demos")
    rollout = module.rollout

    def recording(plan, seed):
        seeds.append(seed)
        return rollout(plan, seed)

    module.rollout = recording
    trainer = pl.Trainer(max_steps=2, callbacks=[callbacks[0], DropFirst(), Seen()], logger=False, accelerator="cpu",
                         enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                         limit_val_batches=0, enable_checkpointing=False, default_root_dir=tmp_path)
    trainer.fit(module, datamodule=data)
    module.simulator.close()
    data.simulator.close()
    assert trainer.global_step == 2 and seeds == [0, 1] and skipped == [1.0, 0.0]  # step 2 trained
