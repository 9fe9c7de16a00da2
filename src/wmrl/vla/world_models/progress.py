"""`ProgressWorldModel`: the VLA path's world model, a learned progress reward model serving as an environment.

As in the paper's VLA transfer, rollouts still run in the simulator; the world model replaces the *reward*:
world-model groups are graded by the shaped progress of :class:`~wmrl.vla.world_models.reward_model.ProgressRewardModel`
(8 frames per rollout, last 3 minus first 3), anchor groups by the simulator's sparse success, and every anchor
is also side-graded by the world model (``grade_trajectories``, called by the unchanged
:class:`wmrl.callbacks.WorldModelReward`), giving the (r_wm, r_real) pairs the corrections need.

Training: on the demonstrations at the start of fit (``fit_demonstrations``; skipped when a pretrained
``checkpoint`` is loaded), then refreshed on-policy from the anchor episodes (their real success is the label),
every ``refresh_every`` anchor episodes. Anchors are scored *before* they are learned from, so every pair is an
honest out-of-sample prediction. Deviation from the paper: its progress model (Robometer, Qwen3-VL-4B) is
pretrained and frozen; here it is small and learned (optionally refreshed), because no pretrained PushT progress
model exists offline.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from wmrl.types import GradesTrajectories, Outcome, ReportsMetrics, Source, Status
from wmrl.vla.contracts import LearnsFromDemonstrations
from wmrl.vla.episode import Episode, episode_from_state, episode_of, episode_state
from wmrl.vla.world_models.reward_model import (
    ProgressRewardModel,
    episode_samples,
    frame_indices,
    shaped_reward,
)

log = logging.getLogger(__name__)


class ProgressWorldModel(GradesTrajectories, LearnsFromDemonstrations, ReportsMetrics):
    """A progress reward model as the ``world_model`` environment of the VLA path.

    Args:
        chunk_size: action-chunk length the reward model reads (independent of the policy's chunk).
        hidden: reward-model width.
        frames: steps scored per rollout (paper 8).
        k: shaping window: mean of the last ``k`` minus the first ``k`` progress values (paper 3).
        train_steps: gradient steps on the demonstrations at the start of fit.
        refresh_every: refresh on the anchor episodes after this many new ones (0: never, a frozen world model).
        refresh_steps: gradient steps per refresh.
        batch_size: reward-model training batch size.
        lr: reward-model learning rate.
        checkpoint: a local reward-model file. When it exists, the pretrained model is loaded from it instead
            of training on the demonstrations; when it does not, the model trained on the demonstrations is
            written there (so the next run starts pretrained). Never a hub id.
        invert: serve ``1 - reward`` (an anti-correlated world model, to check that it is detected).
        seed: seeds initialisation and minibatches.
        label: the demonstrations' progress target. ``time``: ``t / (T - 1)`` on successful demonstrations, 0 on
            failed ones (a progress estimator's usual label, as the paper's Robometer). ``reward``: the dense reward
            the demonstrations' LeRobotDataset recorded (``next.reward``: goal coverage over the success threshold),
            a reward model learned from offline rewards. On near-goal PushT the time label does not track success
            (measured: rank correlation with success ~0 on SFT rollouts, 0.45 with ``reward``; docs/vla.md). Anchor
            episodes are always labelled by their sparse success alone (``time``): the only real signal an anchor
            carries.
    """

    source = Source.WORLD_MODEL

    def __init__(
        self,
        chunk_size: int = 8,
        hidden: int = 128,
        frames: int = 8,
        k: int = 3,
        train_steps: int = 400,
        refresh_every: int = 8,
        refresh_steps: int = 50,
        batch_size: int = 256,
        lr: float = 1e-3,
        checkpoint: str | None = None,
        invert: bool = False,
        seed: int = 0,
        label: str = "time",
    ) -> None:
        key = "world_model.init_args."
        problems = []
        if frames < 2:
            problems.append(f"{key}frames must be >= 2 to shape a reward (got {frames})")
        if not 1 <= k <= max(frames // 2, 1):
            problems.append(f"{key}k must be in [1, frames // 2] = [1, {max(frames // 2, 1)}] (got {k})")
        if train_steps < 0 or refresh_steps < 0 or refresh_every < 0:
            problems.append(f"{key}train_steps, refresh_steps and refresh_every must be >= 0")
        if label not in ("time", "reward"):
            problems.append(f"{key}label must be time or reward (got {label!r})")
        if checkpoint is not None and Path(checkpoint).is_dir():
            problems.append(f"{key}checkpoint {checkpoint!r} is a directory: give a reward-model file path "
                            "(e.g. runs/vla/reward_model.pt)")
        if problems:
            raise ValueError("invalid ProgressWorldModel configuration:\n  - " + "\n  - ".join(problems))
        self.frames, self.k, self.invert, self.label = frames, k, invert, label
        self.train_steps, self.refresh_every, self.refresh_steps = train_steps, refresh_every, refresh_steps
        self.batch_size, self.lr = batch_size, lr
        self.generator = torch.Generator().manual_seed(seed)
        torch.manual_seed(seed)
        self.model = ProgressRewardModel(chunk_size, hidden)
        self.pretrained = False
        self.checkpoint = checkpoint
        if checkpoint is not None and Path(checkpoint).is_file():
            self.load(checkpoint)
        self.demonstrations: list[Episode] = []
        self.anchors: list[Episode] = []
        self.new_anchors = 0
        self.refreshes = 0
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=lr)

    # -- persistence -----------------------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        torch.save({"chunk_size": self.model.chunk_size, "hidden": self.model.hidden,
                    "state_dict": self.model.state_dict()}, path)

    def load(self, path: str | Path) -> None:
        saved = torch.load(path, map_location="cpu", weights_only=True)
        self.model = ProgressRewardModel(int(saved["chunk_size"]), int(saved["hidden"]))
        self.model.load_state_dict(saved["state_dict"])
        self.pretrained = True

    def state_dict(self) -> dict:
        """Everything a resumed run needs to continue exactly: the reward model, its optimizer, the minibatch
        generator, the refresh counters and the anchor buffer (the anchor episodes it refreshes on, as tensors;
        the demonstrations are re-read from their LeRobotDataset at fit start)."""
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "generator": self.generator.get_state(), "new_anchors": self.new_anchors,
                "refreshes": self.refreshes, "pretrained": self.pretrained,
                "anchors": [episode_state(e) for e in self.anchors]}

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.generator.set_state(state["generator"])
        self.new_anchors, self.refreshes = int(state["new_anchors"]), int(state["refreshes"])
        self.anchors = [episode_from_state(s) for s in state["anchors"]]
        self.pretrained = True  # trained weights: a resumed run never retrains from scratch

    # -- training --------------------------------------------------------------------------------------
    def fit_demonstrations(self, episodes: Sequence[Episode]) -> float:
        """Train on the demonstrations (unless pretrained); the final training loss (NaN if skipped)."""
        self.demonstrations = list(episodes)
        if self.pretrained or not self.train_steps:
            return math.nan
        loss = self._train(self.train_steps)
        if self.checkpoint is not None:
            Path(self.checkpoint).parent.mkdir(parents=True, exist_ok=True)
            self.save(self.checkpoint)
        return loss

    def _training_set(self) -> dict[str, torch.Tensor]:
        parts, labels = [], []
        labelled = [(d, self.label) for d in self.demonstrations] + [(a, "time") for a in self.anchors]
        for episode, label in labelled:
            steps = np.arange(len(episode))
            parts.append(episode_samples(episode, steps, self.model.chunk_size))
            labels.append(torch.as_tensor(episode.progress_labels(label)))
        batch = {key: torch.cat([p[key] for p in parts]) for key in parts[0]}
        batch["progress"] = torch.cat(labels)
        return batch

    def _train(self, steps: int) -> float:
        data = self._training_set()
        count = len(data["progress"])
        self.model.train()
        loss = torch.tensor(math.nan)
        for _ in range(steps):
            rows = torch.randint(0, count, (min(self.batch_size, count),), generator=self.generator)
            logits = self.model({key: value[rows] for key, value in data.items()})
            loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, data["progress"][rows])
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()
        self.model.eval()
        return float(loss.detach())

    # -- grading ---------------------------------------------------------------------------------------
    def progress(self, episode: Episode) -> np.ndarray:
        """``[frames]`` predicted progress at evenly spaced steps of ``episode``."""
        steps = frame_indices(len(episode), self.frames)
        return self.model.compute_reward(episode_samples(episode, steps, self.model.chunk_size)).numpy()

    def score_episodes(self, episodes: Sequence[Episode]) -> np.ndarray:
        """``[n]`` the shaped world-model reward of each episode, in [0, 1] (``1 -`` it when ``invert``)."""
        rewards = np.array([shaped_reward(self.progress(e), self.k) for e in episodes], dtype=np.float64)
        return 1.0 - rewards if self.invert else rewards

    def grade(self, episodes: Sequence[Episode]) -> list[Outcome]:
        """World-model outcomes for the episodes of a world-model group."""
        start = time.perf_counter()
        rewards = self.score_episodes(episodes)
        seconds = (time.perf_counter() - start) / max(len(episodes), 1)
        return [Outcome(Status.VALID, float(r), feedback="world model", wall_seconds=seconds,
                        source=Source.WORLD_MODEL) for r in rewards]

    def metrics(self) -> dict[str, float]:
        """What ``WorldModelReward`` logs as ``world_model/*`` (a learned progress model never fails to parse)."""
        return {"parse_failures": 0.0}

    def grade_trajectories(self, trajectories: Sequence) -> list[float | None]:
        """Side-grade anchor trajectories (``EpisodeTrajectory``), then learn from them (on-policy refresh)."""
        episodes = [episode_of(t) for t in trajectories]
        scored = [e for e in episodes if e is not None and len(e)]
        rewards = iter(self.score_episodes(scored).tolist())
        out = [next(rewards) if e is not None and len(e) else None for e in episodes]
        self.anchors.extend(scored)
        self.new_anchors += len(scored)
        if self.refresh_every and self.new_anchors >= self.refresh_every and self.refresh_steps:
            self._train(self.refresh_steps)
            self.new_anchors = 0
            self.refreshes += 1
        return out
