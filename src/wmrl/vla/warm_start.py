"""`BehaviourCloningWarmStart`: the SFT stage before VLA post-training, as its own step.

What it does: at fit start it clones the data module's successful demonstrations into the module's policy
(:func:`behaviour_cloning`: ``steps`` AdamW steps of the policy's own loss, ``bc_loss``, on ``batch_size``
demonstration chunks each, at learning rate ``lr``; the last loss is logged as ``sft/loss``). The SFT stage lives
here only: the module knows nothing of it but the count of steps cloned (``cloned_steps``), by which it refuses
to start RL from an untrained policy.

When it runs: in ``on_fit_start``, once per fit, before any rollout. Lightning calls the callbacks' hooks before
the module's own, so it has finished when :class:`~wmrl.vla.module.VLAGRPOModule`'s ``on_fit_start`` snapshots
the KL reference: the reference is the policy after SFT, and the world model is trained after it, as in the paper.

A resumed run (``wmrl fit --ckpt_path ...``: its checkpoint holds the trained policy and the SFT reference) does
not run it again; the policy and reference come from the checkpoint. Without this callback the policy starts as
given (``model.init_args.policy.pretrained_path`` or an in-process ``policy_instance``); with neither the module
refuses to start untrained.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

import numpy as np
import torch
from lightning.pytorch import Callback

from wmrl.vla.contracts import ClonesBehaviour
from wmrl.vla.policies.chunk import observation_batch
from wmrl.vla.world_models.reward_model import normalise

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
            raise TypeError(f"BehaviourCloningWarmStart needs a module with a policy to clone into (VLAGRPOModule, a "
                            f"wmrl.vla.contracts.ClonesBehaviour), not {type(pl_module).__name__}: remove the callback from "
                            "trainer.callbacks")
        successful = [e for e in pl_module.demonstrations() if e.success]
        self.loss = behaviour_cloning(pl_module, successful, self.steps, self.batch_size, self.lr)


def demonstration_chunks(demonstrations: list, horizon: int) -> tuple[dict[str, torch.Tensor], torch.Tensor,
                                                                      torch.Tensor]:
    """Every step of every episode as a training example: its observation, the next ``horizon`` actions
    (normalised; past the episode's end the last action repeated and marked in ``is_pad``) and ``is_pad``."""
    states, env_states, chunks, pads = [], [], [], []
    for e in demonstrations:
        for t in range(len(e)):
            window = e.actions[t : t + horizon]
            pad = np.zeros(horizon, dtype=bool)
            pad[len(window):] = True
            window = np.concatenate([window, np.repeat(e.actions[-1:], horizon - len(window), axis=0)])
            states.append(e.states[t]), env_states.append(e.env_states[t]), chunks.append(window), pads.append(pad)
    obs = observation_batch(torch.as_tensor(np.array(states)), torch.as_tensor(np.array(env_states)))
    return obs, normalise(torch.as_tensor(np.array(chunks))), torch.as_tensor(np.array(pads))


def behaviour_cloning(module: ClonesBehaviour, demonstrations: list, steps: int, batch_size: int, lr: float) -> float:
    """The SFT stage: ``steps`` AdamW steps of the module's policy's own loss on demonstration chunks (``batch_size``
    drawn per step, in an order seeded by the module's ``seed``). Returns the last loss, also logged as ``sft/loss``
    with ``sft/seconds`` and ``sft/demonstration_steps`` (the steps cloned); counts ``module.cloned_steps``."""
    from rich.progress import Progress

    if not demonstrations:
        raise ValueError("no successful demonstration to clone (data.init_args.demonstrations, or the "
                         "simulator's success_threshold, too strict)")
    policy = module.policy_to_clone()
    obs, chunk, is_pad = demonstration_chunks(demonstrations, policy.chunk_size)
    obs = {k: v.to(module.device) for k, v in obs.items()}
    chunk, is_pad = chunk.to(module.device), is_pad.to(module.device)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(module.seed)
    started = time.perf_counter()
    policy.train()
    loss = torch.tensor(math.nan)
    with Progress(disable=not module.trainer.is_global_zero) as progress:
        task = progress.add_task(f"SFT on {len(demonstrations)} demonstrations", total=steps)
        for step in range(steps):
            rows = torch.randint(0, len(chunk), (batch_size,), generator=generator)
            loss = policy.bc_loss({k: v[rows] for k, v in obs.items()}, chunk[rows], is_pad[rows])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if step % 25 == 0 or step == steps - 1:
                progress.update(task, completed=step + 1, description=f"SFT loss {float(loss.detach()):.3f}")
    module.cloned_steps += steps
    metrics = {"sft/loss": float(loss.detach()), "sft/seconds": time.perf_counter() - started,
               "sft/demonstration_steps": float(sum(len(e) for e in demonstrations))}
    for logger in module.loggers:
        logger.log_metrics(metrics, step=0)
    return float(loss.detach())
