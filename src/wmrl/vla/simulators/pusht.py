"""`PushTSimulator`: the real environment of the VLA path (gym-pusht), with the sparse success as its reward.

Rollouts always run in the simulator (as in the paper's VLA transfer); what the world model replaces is the
*reward*: anchor groups are graded by the simulator's sparse success, the other groups by the world model's
shaped progress. The simulator plays many episodes in lock-step (one gym-pusht environment each), asking a
controller for an action chunk whenever the previous one has been executed.

Initial states are seeds. ``initial_states: gym`` uses gym-pusht's own reset distribution (agent and block
anywhere, any angle: the benchmark's); ``near_goal`` (the CPU default) draws the block within ``max_offset``
pixels and ``max_angle`` radians of the goal pose and the agent anywhere clear of it, so that a policy trained
for a few CPU minutes can succeed at all. ``success_threshold`` is the goal coverage that counts as success
(gym-pusht: 0.95).
"""

from __future__ import annotations

import atexit
import math
import time
from collections.abc import Sequence
from typing import Literal, Protocol

import numpy as np

from wmrl.types import Outcome, Source, Status
from wmrl.vla.episode import Episode, dense_reward
from wmrl.vla.policies.scripted import GOAL_POSE, ScriptedPushTPolicy
from wmrl.vla.requirements import require_lerobot
from wmrl.vla.world_models.reward_model import frame_indices, shaped_reward

InitialStates = Literal["near_goal", "gym"]
Reward = Literal["success", "shaped"]


class Controller(Protocol):
    """What drives the simulator: one call per chunk for every live environment."""

    def reset(self, count: int) -> None: ...

    def __call__(
        self, agent: np.ndarray, env_state: np.ndarray, block_pose: np.ndarray, rows: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """``[n, 2]``, ``[n, 16]``, ``[n, 3]`` for the environments ``rows`` -> the chunk to execute ``[n, H, 2]``
        (target agent positions, pixels) and, optionally, what to record for the loss ``[n, H, 2]``."""
        ...


class ScriptedController:
    """Drives each environment with a :class:`ScriptedPushTPolicy` (chunks of one step), plus optional noise."""

    def __init__(self, noise: float = 0.0, seed: int = 0) -> None:
        self.noise = noise
        self.rng = np.random.default_rng(seed)
        self.policies: list[ScriptedPushTPolicy] = []

    def reset(self, count: int) -> None:
        self.policies = [ScriptedPushTPolicy() for _ in range(count)]

    def __call__(self, agent, env_state, block_pose, rows):
        actions = np.stack([self.policies[r].act(a, p) for r, a, p in zip(rows, agent, block_pose, strict=True)])
        if self.noise:
            actions = actions + self.rng.normal(0.0, self.noise, actions.shape)
        return np.clip(actions, 0.0, 512.0)[:, None, :].astype(np.float32), None


class ReplayController:
    """Replays one recorded action sequence (a single environment), e.g. to render a stored episode."""

    def __init__(self, actions: np.ndarray) -> None:
        self.actions = np.asarray(actions, dtype=np.float32)

    def reset(self, count: int) -> None:
        if count != 1:
            raise ValueError(f"ReplayController replays one episode (got {count} environments)")

    def __call__(self, agent, env_state, block_pose, rows):
        return self.actions[None], None


class PushTSimulator:
    """gym-pusht episodes from seeded initial states, graded by sparse success (or, as a diagnostic, by the
    shaped dense reward a perfect progress model would give).

    Args:
        max_episode_steps: control steps per episode (10 Hz; gym-pusht's LeRobot config uses 300).
        success_threshold: goal coverage that counts as success (gym-pusht: 0.95).
        initial_states: ``near_goal`` (CPU default) or ``gym`` (the benchmark's reset distribution).
        max_offset: ``near_goal`` only: the block's largest distance from the goal pose (pixels).
        max_angle: ``near_goal`` only: the block's largest rotation from the goal pose (radians).
        reward: what ``grade`` returns. ``success``: the sparse 0/1 success (the real reward of the VLA path).
            ``shaped``: the simulator's own dense reward (goal coverage over the threshold, capped at 1) read at
            ``shaping_frames`` evenly spaced steps and shaped as the progress world model shapes its predictions
            (mean of the last ``shaping_k`` minus the first ``shaping_k``): the reward of a *perfect* progress
            world model, to tell a world model's errors from the shaping objective's own mismatch with success.
            Held-out evaluation always counts success.
        shaping_frames: ``shaped`` only: steps read per episode (the paper's 8).
        shaping_k: ``shaped`` only: the shaping window (the paper's 3).
    """

    source = Source.REAL

    def __init__(
        self,
        max_episode_steps: int = 100,
        success_threshold: float = 0.95,
        initial_states: InitialStates = "near_goal",
        max_offset: float = 60.0,
        max_angle: float = 0.6,
        reward: Reward = "success",
        shaping_frames: int = 8,
        shaping_k: int = 3,
    ) -> None:
        problems = []
        if max_episode_steps < 1:
            problems.append(f"simulator max_episode_steps must be >= 1 (got {max_episode_steps})")
        if not 0.0 < success_threshold <= 1.0:
            problems.append(f"simulator success_threshold must be in (0, 1], e.g. 0.95 (got {success_threshold})")
        if initial_states not in ("near_goal", "gym"):
            problems.append(f"simulator initial_states must be near_goal or gym (got {initial_states!r})")
        if reward not in ("success", "shaped"):
            problems.append(f"simulator reward must be success or shaped (got {reward!r})")
        if shaping_frames < 2 or not 1 <= shaping_k <= shaping_frames // 2:
            problems.append(f"simulator shaping_frames must be >= 2 and shaping_k in [1, shaping_frames // 2] "
                            f"(got {shaping_frames}, {shaping_k})")
        if problems:
            raise ValueError("invalid PushTSimulator configuration (model.init_args.simulator):\n  - "
                             + "\n  - ".join(problems))
        self.max_episode_steps, self.success_threshold = max_episode_steps, success_threshold
        self.initial_states, self.max_offset, self.max_angle = initial_states, max_offset, max_angle
        self.reward, self.shaping_frames, self.shaping_k = reward, shaping_frames, shaping_k
        self._envs: list = []

    # -- initial states --------------------------------------------------------------------------------
    def initial_state(self, seed: int) -> np.ndarray | None:
        """``[5]`` (agent x, y, block x, y, angle) of ``seed``; ``None`` for gym-pusht's own reset."""
        if self.initial_states == "gym":
            return None
        rng = np.random.default_rng(seed)
        radius = self.max_offset * math.sqrt(rng.uniform())
        direction = rng.uniform(0, 2 * math.pi)
        block = np.array(GOAL_POSE[:2]) + radius * np.array([math.cos(direction), math.sin(direction)])
        angle = GOAL_POSE[2] + rng.uniform(-self.max_angle, self.max_angle)
        while True:  # the agent anywhere in the arena, clear of the block
            agent = rng.uniform(50, 462, size=2)
            if np.linalg.norm(agent - block) > 130:
                break
        return np.array([*agent, *block, angle])

    def _env(self, index: int):
        while len(self._envs) <= index:
            require_lerobot("PushTSimulator")
            import gym_pusht  # noqa: F401  (registers gym_pusht/PushT-v0)
            import gymnasium as gym

            env = gym.make("gym_pusht/PushT-v0", obs_type="environment_state_agent_pos", render_mode="rgb_array",
                           disable_env_checker=True).unwrapped
            env.success_threshold = self.success_threshold
            if not self._envs:
                atexit.register(self.close)
            self._envs.append(env)
        return self._envs[index]

    def close(self) -> None:
        """Drop the environments while the interpreter is alive (pymunk spaces freed at interpreter exit crash)."""
        import gc

        for env in self._envs:
            env.close()
        self._envs.clear()
        gc.collect()

    def render(self, index: int) -> np.ndarray:
        """``[96, 96, 3]`` uint8, the current frame of environment ``index`` (for datasets and videos)."""
        env = self._env(index)
        return env._render()  # gym-pusht's observation-size render

    # -- rollouts --------------------------------------------------------------------------------------
    def play(self, seeds: Sequence[int], controller: Controller, n_action_steps: int = 1,
             frames: list | None = None, max_steps: int | None = None) -> list[Episode]:
        """One episode per seed, all in lock-step; the controller is asked for a chunk every ``n_action_steps``
        steps (or when its chunk runs out). ``frames`` (a list) collects ``[T, 96, 96, 3]`` renders."""
        count = len(seeds)
        start = time.perf_counter()
        agent = np.zeros((count, 2))
        env_state = np.zeros((count, 16))
        pose = np.zeros((count, 3))
        logs = [dict(states=[], env_states=[], actions=[], coverage=[], starts=[], chunks=[], frames=[])
                for _ in range(count)]
        success = np.zeros(count, dtype=bool)
        for i, seed in enumerate(seeds):
            state = self.initial_state(int(seed))
            obs, info = self._env(i).reset(seed=int(seed), options=None if state is None else {"reset_to_state": state})
            agent[i], env_state[i], pose[i] = obs["agent_pos"], obs["environment_state"], info["block_pose"]
        controller.reset(count)
        alive = np.ones(count, dtype=bool)
        queue: list[list[np.ndarray]] = [[] for _ in range(count)]
        for step in range(self.max_episode_steps if max_steps is None else max_steps):
            rows = np.flatnonzero(alive & np.array([not q for q in queue]))
            if len(rows):
                chunk, record = controller(agent[rows], env_state[rows], pose[rows], rows)
                for k, r in enumerate(rows):
                    queue[r] = list(chunk[k][:n_action_steps])
                    if record is not None:
                        logs[r]["starts"].append(step)
                        logs[r]["chunks"].append(record[k][:n_action_steps])  # the executed part only
            for i in np.flatnonzero(alive):
                action = queue[i].pop(0)
                log = logs[i]
                log["states"].append(agent[i].copy())
                log["env_states"].append(env_state[i].copy())
                log["actions"].append(np.asarray(action, dtype=np.float32))
                if frames is not None:
                    log["frames"].append(self.render(i))
                obs, _, terminated, _, info = self._env(i).step(np.asarray(action, dtype=np.float64))
                agent[i], env_state[i], pose[i] = obs["agent_pos"], obs["environment_state"], info["block_pose"]
                log["coverage"].append(info["coverage"])
                if terminated:
                    success[i] = True
                    alive[i] = False
            if not alive.any():
                break
        seconds = (time.perf_counter() - start) / count
        episodes = []
        for i, seed in enumerate(seeds):
            log = logs[i]
            horizon = len(log["chunks"][0]) if log["chunks"] else 1
            episodes.append(Episode(
                seed=int(seed),
                states=np.array(log["states"], dtype=np.float32).reshape(-1, 2),
                env_states=np.array(log["env_states"], dtype=np.float32).reshape(-1, 16),
                actions=np.array(log["actions"], dtype=np.float32).reshape(-1, 2),
                coverage=np.array(log["coverage"], dtype=np.float32),
                success=bool(success[i]),
                chunk_starts=np.array(log["starts"], dtype=np.int64),
                chunk_actions=np.array(log["chunks"], dtype=np.float32).reshape(-1, horizon, 2),
                wall_seconds=seconds,
                reward=dense_reward(np.array(log["coverage"]), self.success_threshold),
            ))
            if frames is not None:
                frames.append(np.stack(log["frames"]))
        return episodes

    def grade(self, episodes: Sequence[Episode]) -> list[Outcome]:
        """The sparse success of each episode (1.0 or 0.0), or its shaped dense reward (``reward: shaped``);
        ``score`` is the best coverage reached."""
        return [
            Outcome(Status.VALID, self._reward(e), score=float(e.coverage.max(initial=0.0)),
                    feedback="success" if e.success else "no success", wall_seconds=e.wall_seconds,
                    source=Source.REAL)
            for e in episodes
        ]

    def _reward(self, episode: Episode) -> float:
        if self.reward == "success":
            return 1.0 if episode.success else 0.0
        steps = frame_indices(len(episode), self.shaping_frames)
        return shaped_reward(dense_reward(episode.coverage[steps], self.success_threshold), self.shaping_k)
