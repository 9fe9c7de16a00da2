"""`ProgressRewardModel`: a learned progress/success model on (observation, action chunk), and the shaped reward.

``compute_reward(batch)`` follows LeRobot's reward-model convention (a batch dict of LeRobot feature names in,
one value per sample out): ``observation.state`` ``[B, 2]``, ``observation.environment_state`` ``[B, 16]`` and
``action`` ``[B, H, 2]`` (the action chunk that follows the observation) give the predicted task progress in
[0, 1]. The trajectory reward is potential-based shaping over ``frames`` evenly spaced steps of an episode
(paper: 8 frames, the mean of the last 3 progress values minus the mean of the first 3), clipped to [0, 1] so it
shares the sparse success's scale (no progress or regress: 0).

PushT coordinates lie in [0, 512]: inputs are normalised by the fixed map ``x / 256 - 1``, so the model needs no
dataset statistics and a checkpoint is self-contained.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from wmrl.vla.episode import Episode

SCALE = 256.0


def normalise(x: torch.Tensor) -> torch.Tensor:
    """PushT pixels ``[0, 512]`` -> ``[-1, 1]``.

    >>> normalise(torch.tensor([0.0, 256.0, 512.0])).tolist()
    [-1.0, 0.0, 1.0]
    """
    return x / SCALE - 1.0


def shaped_reward(progress: np.ndarray, k: int) -> float:
    """Potential-based shaping: mean of the last ``k`` progress values minus the mean of the first ``k``,
    clipped to [0, 1].

    >>> shaped_reward(np.array([0.1, 0.1, 0.2, 0.6, 0.9, 0.9]), k=2)
    0.8
    >>> shaped_reward(np.array([0.5, 0.4, 0.2]), k=1)
    0.0
    """
    k = max(1, min(k, len(progress) // 2 or 1))
    value = float(np.mean(progress[-k:]) - np.mean(progress[:k]))
    return round(min(max(value, 0.0), 1.0), 12)


def chunk_at(actions: np.ndarray, start: int, horizon: int) -> np.ndarray:
    """``[horizon, 2]`` the actions from ``start`` on, padded with the last action past the episode's end."""
    chunk = actions[start : start + horizon]
    if len(chunk) < horizon:
        chunk = np.concatenate([chunk, np.repeat(actions[-1:], horizon - len(chunk), axis=0)])
    return chunk


def frame_indices(length: int, frames: int) -> np.ndarray:
    """``frames`` evenly spaced steps of an episode of ``length`` steps (first and last included).

    >>> frame_indices(10, 4).tolist()
    [0, 3, 6, 9]
    """
    return np.unique(np.linspace(0, max(length - 1, 0), frames).round().astype(np.int64))


def episode_samples(episode: Episode, steps: np.ndarray, horizon: int) -> dict[str, torch.Tensor]:
    """The reward model's batch for ``steps`` of ``episode``."""
    return {
        "observation.state": torch.as_tensor(episode.states[steps]),
        "observation.environment_state": torch.as_tensor(episode.env_states[steps]),
        "action": torch.as_tensor(np.stack([chunk_at(episode.actions, int(t), horizon) for t in steps])),
    }


class ProgressRewardModel(nn.Module):
    """An MLP from (agent position, block keypoints, action chunk) to task progress in [0, 1].

    Args:
        chunk_size: ``H``, the length of the action chunk it reads.
        hidden: width of the two hidden layers.
    """

    def __init__(self, chunk_size: int = 8, hidden: int = 128) -> None:
        super().__init__()
        self.chunk_size, self.hidden = chunk_size, hidden
        self.net = nn.Sequential(
            nn.Linear(2 + 16 + 2 * chunk_size, hidden), nn.SiLU(),
            nn.Linear(hidden, hidden), nn.SiLU(),
            nn.Linear(hidden, 1),
        )

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """``[B]`` progress logits."""
        action = batch["action"]
        if action.dim() != 3 or action.shape[1:] != (self.chunk_size, 2):
            raise ValueError(f"ProgressRewardModel batch['action'] must have shape [B, {self.chunk_size}, 2] (the "
                             f"action chunk); got {tuple(action.shape)}")
        features = torch.cat([
            normalise(batch["observation.state"].float()),
            normalise(batch["observation.environment_state"].float()),
            normalise(action.float()).flatten(1),
        ], dim=1)
        return self.net(features).squeeze(-1)

    @torch.no_grad()
    def compute_reward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """``[B]`` predicted progress in [0, 1] (LeRobot's reward-model call)."""
        return torch.sigmoid(self(batch))
