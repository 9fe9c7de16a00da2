"""The policy playing the simulator: :class:`PolicyController` (its action chunks plus Gaussian exploration noise)
and :func:`held_out_episodes` (the held-out evaluation's episodes, noise-free and, optionally, noisy).

The noise is drawn on the CPU from the given generator, so the same seed plays the same rollouts on any device.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from wmrl.vla.contracts import ChunkPolicy, Simulator
from wmrl.vla.episode import seed_of
from wmrl.vla.policies.chunk import observation_batch, to_pixels

EVAL_NOISE_SEED = 10_000_019  # the noisy held-out episodes' generator: seed + this, beyond any step's or rank's seed


class PolicyController:
    """Drives the simulator with the policy: its action chunk plus Gaussian exploration noise."""

    def __init__(self, policy: ChunkPolicy, std: float, generator: torch.Generator | None) -> None:
        self.policy, self.std, self.generator = policy, std, generator

    def reset(self, count: int) -> None:
        pass

    @torch.no_grad()
    def __call__(self, agent, env_state, block_pose, rows):
        device = next(self.policy.parameters()).device
        obs = observation_batch(torch.as_tensor(agent), torch.as_tensor(env_state))
        mean = self.policy.mean_chunk({k: v.to(device) for k, v in obs.items()}).float().cpu()
        chunk = mean
        if self.generator is not None and self.std > 0:  # noise drawn on the CPU: the same rollouts on any device
            chunk = mean + self.std * torch.randn(mean.shape, generator=self.generator)
        return to_pixels(chunk).clamp(0.0, 512.0).numpy(), chunk.numpy()


def held_out_episodes(simulator: Simulator, policy: ChunkPolicy, task_ids: Sequence[str], noisy: int = 0,
                      std: float = 0.0, seed: int = 0) -> list[dict]:
    """One noise-free episode per initial state: ``{"task_id", "success", "coverage", "steps"}`` each
    (``coverage``: the best goal coverage reached). ``noisy`` > 0 adds ``noisy_success``: the mean success of
    that many episodes per state with exploration noise ``std`` (a generator seeded by ``seed``)."""
    policy.eval()
    steps = policy.n_action_steps
    episodes = simulator.play([seed_of(t) for t in task_ids], PolicyController(policy, 0.0, None), n_action_steps=steps)
    out = [{"task_id": t, "success": float(e.success), "coverage": float(e.coverage.max(initial=0.0)),
            "steps": len(e)} for t, e in zip(task_ids, episodes, strict=True)]
    if noisy:
        generator = torch.Generator().manual_seed(seed + EVAL_NOISE_SEED)
        seeds = [seed_of(t) for t in task_ids for _ in range(noisy)]
        played = simulator.play(seeds, PolicyController(policy, std, generator), n_action_steps=steps)
        for i, record in enumerate(out):
            record["noisy_success"] = float(np.mean([e.success for e in played[i * noisy : (i + 1) * noisy]]))
    return out
