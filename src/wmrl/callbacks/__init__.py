"""The WMRL hooks as Lightning callbacks (importing this package imports no model or simulator library).

    trainer.callbacks = [AnchorRouting(0.1, floor=2), WorldModelReward(world_model),
                         OnlineDebiasing(min_pairs=200, refit_every=64), InverseVarianceDenoising()]

With none of them the module is real-execution GRPO; each ablation of the paper is a subset (a config file of
ablation overlays).
"""

from wmrl.callbacks.base import RLCallback
from wmrl.callbacks.debiasing import OnlineDebiasing
from wmrl.callbacks.denoising import InverseVarianceDenoising
from wmrl.callbacks.fusion import VarianceFusion
from wmrl.callbacks.reward_terms import RewardTerms
from wmrl.callbacks.routing import AnchorRouting
from wmrl.callbacks.world_model_reward import WorldModelReward

__all__ = ["AnchorRouting", "InverseVarianceDenoising", "OnlineDebiasing", "RLCallback", "RewardTerms",
           "VarianceFusion", "WorldModelReward"]
