"""The VLA module runs the same training step as the LLM module (one definition, wmrl.modules.base): its
rollout seed has the rank term and its steps get the missing-reward check."""

from wmrl.modules.base import RLModule
from wmrl.vla.grpo import VLAGRPOModule


def test_the_vla_module_uses_the_shared_training_step():
    assert VLAGRPOModule.training_step is RLModule.training_step
    assert "training_step" not in vars(VLAGRPOModule) and issubclass(VLAGRPOModule, RLModule)
