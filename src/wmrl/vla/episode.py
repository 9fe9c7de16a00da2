"""`Episode` and `EpisodeTrajectory`: one embodied rollout, as the simulator played it and as the RL hooks see it.

An :class:`EpisodeTrajectory` is a :class:`wmrl.types.Trajectory` (so ``RolloutBatch``, the routing, debiasing and
denoising callbacks handle it unchanged) that also carries the :class:`Episode` it came from: the world model
side-grades anchors from it and the loss reads its action chunks. An episode has one :class:`EpisodeTurn`
(:func:`episode_turn`): no text, ``code`` ``""`` (an executed episode, not a script; ``AnchorRouting`` counts it as
one execution), ``success`` the simulator's sparse success, and an ``outcome`` holding the episode's reward (real
sparse success or the world model's shaped progress).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from wmrl.types import Outcome, Trajectory, Turn

#: the task string every PushT frame carries in the LeRobotDataset (a VLA's language instruction)
PUSHT_TASK = "Push the T-shaped block onto the T-shaped target."


def dense_reward(coverage: np.ndarray, success_threshold: float) -> np.ndarray:
    """``[T]`` gym-pusht's dense reward as a LeRobotDataset records it (``next.reward``): goal coverage over the
    success threshold, capped at 1.

    >>> dense_reward(np.array([0.2, 0.9]), 0.8).tolist()
    [0.25, 1.0]
    """
    return np.minimum(np.asarray(coverage, dtype=np.float32) / np.float32(success_threshold), 1.0)


@dataclass
class Episode:
    """One rollout in the simulator. ``T`` = control steps, ``C`` = action chunks, ``H`` = chunk length.

    Attributes:
        seed: the initial state (the simulator's reset seed).
        states: ``[T, 2]`` float32, the agent position before each step (``observation.state``).
        env_states: ``[T, 16]`` float32, the block keypoints before each step (``observation.environment_state``).
        actions: ``[T, 2]`` float32, the executed action (target agent position) of each step.
        coverage: ``[T]`` float32, the goal coverage after each step (the simulator's dense signal; never
            given to the world model or the policy).
        success: the sparse success (coverage >= the simulator's ``success_threshold`` at some step).
        chunk_starts: ``[C]`` long, the step at which each policy chunk was sampled.
        chunk_actions: ``[C, K, 2]`` float32, the executed (exploration-noised) actions of each chunk in the
            policy's normalised action space (``K`` = the policy's ``n_action_steps`` <= ``H``: actions of a chunk
            that were never executed did not shape the outcome and carry no gradient); empty for scripted episodes.
        wall_seconds: simulator wall-clock of the episode.
        reward: ``[T]`` float32 or ``None``, the dense reward after each step as a LeRobotDataset stores it
            (``next.reward``: gym-pusht's goal coverage over the success threshold, capped at 1); what a reward
            model may learn from in *demonstrations* (``ProgressWorldModel(label="reward")``), never from rollouts.
    """

    seed: int
    states: np.ndarray
    env_states: np.ndarray
    actions: np.ndarray
    coverage: np.ndarray
    success: bool
    chunk_starts: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    chunk_actions: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 2), dtype=np.float32))
    wall_seconds: float = 0.0
    reward: np.ndarray | None = None

    def __post_init__(self) -> None:
        steps = len(self.actions)
        for name, width in (("states", 2), ("env_states", 16), ("actions", 2)):
            shape = np.shape(getattr(self, name))
            if shape != (steps, width):
                raise ValueError(f"Episode.{name} must have shape ({steps}, {width}) (T steps); got {shape}")
        if np.shape(self.coverage) != (steps,):
            raise ValueError(f"Episode.coverage must have shape ({steps},); got {np.shape(self.coverage)}")
        if len(self.chunk_starts) != len(self.chunk_actions):
            raise ValueError(
                f"Episode.chunk_starts ({len(self.chunk_starts)}) and chunk_actions ({len(self.chunk_actions)}) "
                "must have one entry per chunk"
            )

    def __len__(self) -> int:
        return len(self.actions)

    def progress_labels(self, label: str = "time") -> np.ndarray:
        """``[T]`` the progress target of each step. ``time``: ``t / (T - 1)`` on successful episodes, 0 on failed
        ones (a progress estimator's usual label). ``reward``: the episode's recorded dense reward.

        >>> e = Episode(0, np.zeros((3, 2)), np.zeros((3, 16)), np.zeros((3, 2)), np.zeros(3), True,
        ...             reward=np.array([0.25, 0.5, 1.0], np.float32))
        >>> e.progress_labels().tolist(), e.progress_labels("reward").tolist()
        ([0.0, 0.5, 1.0], [0.25, 0.5, 1.0])
        """
        steps = len(self)
        if label == "reward":
            if self.reward is None or np.isnan(self.reward).any():
                raise ValueError("this episode has no recorded dense reward (next.reward) to label progress with: "
                                 "use label 'time', or demonstrations written by wmrl.vla.dataset")
            return np.asarray(self.reward, dtype=np.float32)
        if label != "time":
            raise ValueError(f"progress label must be 'time' or 'reward' (got {label!r})")
        if not self.success or steps == 0:
            return np.zeros(steps, dtype=np.float32)
        return (np.arange(steps) / max(steps - 1, 1)).astype(np.float32)


@dataclass(frozen=True)
class EpisodeTrajectory(Trajectory):
    """A :class:`~wmrl.types.Trajectory` with the :class:`Episode` behind it (``None`` only in test doubles)."""

    episode: Episode | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class EpisodeTurn(Turn):
    """The one :class:`~wmrl.types.Turn` of an episode. An episode has no text: ``response`` is ``""``, ``code`` is
    ``""`` (executed, so never a ``malformed`` turn), ``response_tokens`` counts its action chunks, and ``success``
    says whether it reached the goal. ``finish_reason`` follows from it for the shared rollout records: ``stop`` on
    success, ``length`` when the episode ran out of steps (as a text turn cut at its token limit)."""

    success: bool = False


def episode_turn(episode: Episode, outcome: Outcome) -> EpisodeTurn:
    """The turn of ``episode`` graded as ``outcome`` (see :class:`EpisodeTurn`).

    >>> e = Episode(0, np.zeros((1, 2)), np.zeros((1, 16)), np.zeros((1, 2)), np.zeros(1), False)
    >>> turn = episode_turn(e, Outcome("valid", 0.0))
    >>> turn.success, turn.finish_reason, turn.code, turn.response_tokens
    (False, 'length', '', 0)
    """
    return EpisodeTurn(response="", code="", outcome=outcome, response_tokens=len(episode.chunk_starts),
                       finish_reason="stop" if episode.success else "length", success=bool(episode.success))


def episode_of(trajectory: Trajectory) -> Episode | None:
    """The episode behind a trajectory (``None`` for a trajectory without one: a text rollout or a test double)."""
    return trajectory.episode if isinstance(trajectory, EpisodeTrajectory) else None


_ARRAYS = ("states", "env_states", "actions", "coverage", "chunk_starts", "chunk_actions")


def episode_state(episode: Episode) -> dict:
    """An episode as tensors and numbers only (checkpoints load with ``torch.load(weights_only=True)``)."""
    import torch

    return {"seed": int(episode.seed), "success": bool(episode.success), "wall_seconds": float(episode.wall_seconds),
            **{name: torch.from_numpy(np.ascontiguousarray(getattr(episode, name))) for name in _ARRAYS}}


def episode_from_state(state: dict) -> Episode:
    """The inverse of :func:`episode_state` (bit-exact arrays).

    >>> e = Episode(3, np.ones((2, 2), np.float32), np.zeros((2, 16), np.float32), np.ones((2, 2), np.float32),
    ...             np.array([0.1, 0.9], np.float32), True)
    >>> back = episode_from_state(episode_state(e))
    >>> back.seed, back.success, bool((back.coverage == e.coverage).all()), back.chunk_actions.shape
    (3, True, True, (0, 0, 2))
    """
    return Episode(seed=int(state["seed"]), success=bool(state["success"]), wall_seconds=float(state["wall_seconds"]),
                   **{name: state[name].numpy() for name in _ARRAYS})


def task_id(seed: int) -> str:
    """The task id of an initial state: ``pusht-seed-<seed>``."""
    return f"pusht-seed-{seed}"


def seed_of(task: str) -> int:
    """The initial state of a task id (inverse of :func:`task_id`).

    >>> seed_of(task_id(17))
    17
    """
    prefix = "pusht-seed-"
    if not task.startswith(prefix):
        raise ValueError(f"not a PushT initial state task id: {task!r} (expected {prefix}<seed>)")
    return int(task[len(prefix):])
