"""`BehaviourCloningWarmStart`: the SFT stage before VLA post-training, as its own step.

What it does: at fit start it clones the data module's successful demonstrations into the policy
(:meth:`wmrl.vla.grpo.VLAGRPOModule.behaviour_cloning`: ``steps`` AdamW steps of the policy's own loss
on ``batch_size`` demonstration chunks each, at learning rate ``lr``; the last loss is logged as ``sft/loss``).

When it runs: in ``on_fit_start``, once per fit, before any rollout. Lightning calls the callbacks' hooks before
the module's own, so it has finished when :class:`~wmrl.vla.grpo.VLAGRPOModule`'s ``on_fit_start`` snapshots
the KL reference: the reference is the policy after SFT, and the world model is trained after it, as in the paper.

A resumed run (``wmrl fit --ckpt_path ...``: its checkpoint holds the trained policy and the SFT reference) does
not run it again; the policy and reference come from the checkpoint. Without this callback the policy starts as
given (``model.init_args.policy.pretrained_path`` or an in-process ``policy_instance``); with neither the module
refuses to start untrained.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lightning.pytorch import Callback

from wmrl.types import ClonesBehaviour

if TYPE_CHECKING:
    import lightning.pytorch as pl


class BehaviourCloningWarmStart(Callback):
    """Behaviour cloning on the successful demonstrations at the start of a fresh fit (see the module docstring).

    Args:
        steps: behaviour-cloning (AdamW) steps.
        batch_size: demonstration chunks per step (drawn with replacement, seeded by ``model.init_args.seed``).
        lr: the behaviour-cloning learning rate.
    """

    def __init__(self, steps: int = 300, batch_size: int = 64, lr: float = 1e-3) -> None:
        problems = []
        if steps < 1:
            problems.append(f"BehaviourCloningWarmStart steps must be >= 1 (got {steps}); to start from "
                            "model.init_args.policy.pretrained_path as it is, remove the callback")
        if batch_size < 1:
            problems.append(f"BehaviourCloningWarmStart batch_size must be >= 1 (got {batch_size})")
        if lr <= 0:
            problems.append(f"BehaviourCloningWarmStart lr must be > 0 (got {lr})")
        if problems:
            raise ValueError("invalid BehaviourCloningWarmStart configuration:\n  - " + "\n  - ".join(problems))
        self.steps, self.batch_size, self.lr = steps, batch_size, lr
        self.loss: float | None = None  # the last behaviour-cloning loss of this fit (None: it did not run)

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.ckpt_path is not None:  # resumed: the checkpoint's policy is already past this step
            return
        if not isinstance(pl_module, ClonesBehaviour):
            raise TypeError(f"BehaviourCloningWarmStart needs a module with behaviour_cloning (VLAGRPOModule, a "
                            f"wmrl.types.ClonesBehaviour), not {type(pl_module).__name__}: remove the callback from "
                            "trainer.callbacks")
        successful = [e for e in pl_module.demonstrations() if e.success]
        self.loss = pl_module.behaviour_cloning(successful, self.steps, self.batch_size, self.lr)
