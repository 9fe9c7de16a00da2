"""`TargetBandit`: a one-step contextual bandit behind the VLA path's interfaces, for controlled tests of the corrections.

A diagnostic domain, the cheapest that runs the real :class:`~wmrl.vla.module.VLAGRPOModule` and the real WMRL
callbacks (``benchmarks/corrections.py``): a PushT episode costs ~100 simulator steps and a minute-long SFT stage
comes first; here an episode is one action and a training step takes milliseconds, so many seeds and settings fit
in minutes. Nothing in the method changes: the module plays, grades, calibrates, weights and updates exactly as on
PushT.

Each initial state (a seed) is a context shaped like a PushT observation: an agent position ``[2]`` and eight
keypoints ``[16]`` in pixels, the first of which is the target (the other seven are distractors). An episode is one
action, a target position in pixels; its **true reward** is ``exp(-|action - target|^2 / (2 width^2))`` in (0, 1]:
continuous, so that a monotone distortion of it is not an affine map (which GRPO's group standardisation would
cancel). ``success`` is the reward reaching ``success_threshold``; an episode's ``coverage`` holds the reward (the
held-out record's ``coverage`` is then the true reward of the noise-free action).

:class:`LinearGaussianPolicy` is the policy: a linear map from the normalised observation to the action's mean
(``mean_chunk``, a chunk of one action), Gaussian around it as the module's loss assumes. It starts at zero (every
mean action at the arena's centre), so every seed starts from the same policy.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from wmrl.algorithms.gaussian import chunk_nll, gaussian_rl_loss
from wmrl.types import Outcome, Source, Status
from wmrl.vla.episode import Episode

ARENA = 512.0  # pixels, as PushT
KEYPOINTS = 8


class TargetBandit:
    """One-action episodes from seeded contexts, graded by the true reward (see the module docstring).

    Args:
        width: the reward's length scale in pixels (the reward is ``exp(-1/2)`` at this distance).
        target_range: targets lie within this many pixels of the arena's centre on each axis.
        success_threshold: the true reward counted as a success.
    """

    source = Source.REAL
    max_episode_steps = 1

    def __init__(self, width: float = 64.0, target_range: float = 128.0, success_threshold: float = 0.5) -> None:
        problems = []
        if width <= 0:
            problems.append(f"TargetBandit width must be > 0 pixels (got {width})")
        if not 0 < target_range <= ARENA / 2:
            problems.append(f"TargetBandit target_range must be in (0, {ARENA / 2:g}] pixels (got {target_range})")
        if not 0 < success_threshold <= 1:
            problems.append(f"TargetBandit success_threshold must be in (0, 1] (got {success_threshold})")
        if problems:
            raise ValueError("invalid TargetBandit configuration (model.init_args.simulator):\n  - "
                             + "\n  - ".join(problems))
        self.width, self.target_range, self.success_threshold = width, target_range, success_threshold

    def context(self, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """The agent position ``[2]`` and keypoints ``[16]`` (target first) of initial state ``seed``.

        >>> agent, keypoints = TargetBandit().context(3)
        >>> agent.shape, keypoints.shape, bool(abs(keypoints[:2] - 256).max() <= 128)
        ((2,), (16,), True)
        """
        rng = np.random.default_rng(seed)
        agent = rng.uniform(0.0, ARENA, 2)
        keypoints = rng.uniform(0.0, ARENA, 2 * KEYPOINTS)
        keypoints[:2] = ARENA / 2 + rng.uniform(-self.target_range, self.target_range, 2)
        return agent, keypoints

    def true_reward(self, action: np.ndarray, keypoints: np.ndarray) -> float:
        """``exp(-|action - target|^2 / (2 width^2))``.

        >>> bandit = TargetBandit(width=64.0)
        >>> keypoints = np.full(16, 300.0)
        >>> bandit.true_reward(np.array([300.0, 300.0]), keypoints), round(bandit.true_reward(np.array([364.0, 300.0]), keypoints), 4)
        (1.0, 0.6065)
        """
        distance2 = float(np.sum((np.asarray(action, dtype=np.float64) - keypoints[:2]) ** 2))
        return float(np.exp(-distance2 / (2 * self.width**2)))

    def play(self, seeds: Sequence[int], controller, n_action_steps: int = 1, frames: list | None = None,
             max_steps: int | None = None) -> list[Episode]:
        """One episode per seed: the controller's first action of its chunk, executed once and graded."""
        count = len(seeds)
        contexts = [self.context(int(s)) for s in seeds]
        agent = np.stack([c[0] for c in contexts])
        keypoints = np.stack([c[1] for c in contexts])
        controller.reset(count)
        chunk, record = controller(agent, keypoints, np.zeros((count, 3)), np.arange(count))
        episodes = []
        for i, seed in enumerate(seeds):
            action = np.asarray(chunk[i][0], dtype=np.float32)
            reward = self.true_reward(action, keypoints[i])
            executed = np.zeros((0, 1, 2), np.float32) if record is None else np.asarray(record[i][:1], np.float32)[None]
            episodes.append(Episode(
                seed=int(seed), states=agent[i : i + 1].astype(np.float32), env_states=keypoints[i : i + 1].astype(np.float32),
                actions=action[None], coverage=np.array([reward], np.float32), success=reward >= self.success_threshold,
                chunk_starts=np.zeros(len(executed), np.int64), chunk_actions=executed,
                reward=np.array([reward], np.float32),
            ))
        return episodes

    def grade(self, episodes: Sequence[Episode]) -> list[Outcome]:
        """The true reward of each episode."""
        return [Outcome(Status.VALID, float(e.coverage[0]), score=float(e.coverage[0]),
                        feedback="success" if e.success else "no success", source=Source.REAL) for e in episodes]


class LinearGaussianPolicy(nn.Module):
    """The mean action as a linear map of the normalised observation (agent ``[2]`` and keypoints ``[16]``): a chunk
    of one action in the normalised action space, which the module treats as the mean of its Gaussian policy."""

    chunk_size = 1
    n_action_steps = 1

    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Linear(2 + 2 * KEYPOINTS, 2)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)  # every mean action at the arena's centre: one start for every seed

    def mean_chunk(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """``[B, 1, 2]`` the mean action (normalised) for ``observation.state`` ``[B, 2]`` and
        ``observation.environment_state`` ``[B, 16]``."""
        features = torch.cat([obs["observation.state"], obs["observation.environment_state"]], dim=1)
        return self.head(features).unsqueeze(1)

    def per_sample_loss(self, obs: dict[str, torch.Tensor], chunk: torch.Tensor, std: float) -> torch.Tensor:
        """``[B]`` the Gaussian NLL of the executed ``chunk`` (what the module computes from ``mean_chunk``)."""
        return chunk_nll(chunk, self.mean_chunk(obs)[:, : chunk.shape[1]], std)

    def rl_loss(self, obs: dict[str, torch.Tensor], chunk: torch.Tensor, std: float,
                reference: LinearGaussianPolicy | None) -> tuple[torch.Tensor, torch.Tensor]:
        """The losses of ``N(mean_chunk, std^2)``: its NLL and the KL to ``reference``."""
        return gaussian_rl_loss(self.mean_chunk, obs, chunk, std, None if reference is None else reference.mean_chunk)

    def bc_loss(self, obs: dict[str, torch.Tensor], chunk: torch.Tensor, is_pad: torch.Tensor) -> torch.Tensor:
        """Behaviour cloning: the L1 distance of the mean action to the demonstrated one (ACT's loss), padding masked."""
        error = (self.mean_chunk(obs) - chunk[:, :1]).abs().mean(-1)
        return error[~is_pad[:, :1]].mean()
