"""PushT episodes <-> a local :class:`lerobot.datasets.lerobot_dataset.LeRobotDataset` (never a hub id).

Demonstrations and anchor episodes are stored the LeRobot way (``create`` -> ``add_frame`` -> ``save_episode``
-> ``finalize``), so they can be replayed, visualised (``lerobot-dataset-viz --repo-id <repo_id> --root <dir>``)
and trained on by any LeRobot tool. Features: ``observation.state`` (agent position, 2), ``observation.environment_state``
(block keypoints, 16), ``action`` (target agent position, 2), ``next.success`` (the sparse success after the
step), ``next.reward`` (gym-pusht's coverage reward after the step) and, with ``images=True``,
``observation.image`` (96 x 96 renders).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from wmrl.vla.episode import PUSHT_TASK, Episode, dense_reward
from wmrl.vla.requirements import require_lerobot

FPS = 10  # gym-pusht's control rate


def features(images: bool) -> dict:
    """The LeRobotDataset feature spec of a PushT episode."""
    spec = {
        "observation.state": {"dtype": "float32", "shape": (2,), "names": ["x", "y"]},
        "observation.environment_state": {"dtype": "float32", "shape": (16,), "names": None},
        "action": {"dtype": "float32", "shape": (2,), "names": ["x", "y"]},
        "next.success": {"dtype": "bool", "shape": (1,), "names": None},
        "next.reward": {"dtype": "float32", "shape": (1,), "names": None},
    }
    if images:
        spec["observation.image"] = {"dtype": "image", "shape": (96, 96, 3), "names": ["height", "width", "channel"]}
    return spec


def _quiet() -> None:
    """No per-episode progress bars from the datasets library (one per saved episode otherwise)."""
    import datasets

    datasets.disable_progress_bars()


def open_for_append(root: str | Path, repo_id: str, images: bool = False):
    """A LeRobotDataset at ``root`` in write mode: created when absent, resumed when it holds episodes."""
    require_lerobot("wmrl.vla.dataset")
    _quiet()
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    root = Path(root)
    if (root / "meta" / "info.json").exists():
        return LeRobotDataset.resume(repo_id, root=root, video_backend="pyav")
    return LeRobotDataset.create(repo_id, fps=FPS, features=features(images), root=root, robot_type="pusht",
                                 use_videos=False, video_backend="pyav")  # no videos: never probe torchcodec


def append_episodes(dataset, episodes: Sequence[Episode], success_threshold: float,
                    frames: Sequence[np.ndarray] | None = None) -> list[int]:
    """Write ``episodes`` (and their ``[T, 96, 96, 3]`` frames when the dataset has images); their indices."""
    with_images = "observation.image" in dataset.features
    if with_images and frames is None:
        raise ValueError("this LeRobotDataset stores observation.image: pass the episodes' frames")
    indices = []
    for k, episode in enumerate(episodes):
        reward = dense_reward(episode.coverage, success_threshold)
        for t in range(len(episode)):
            frame = {
                "observation.state": episode.states[t],
                "observation.environment_state": episode.env_states[t],
                "action": episode.actions[t],
                "next.success": np.array([episode.success and t == len(episode) - 1]),
                "next.reward": reward[t : t + 1],
                "task": PUSHT_TASK,
            }
            if with_images:
                frame["observation.image"] = frames[k][t]
            dataset.add_frame(frame)
        indices.append(dataset.meta.total_episodes)
        _quiet()  # LeRobot's SuppressProgressBars re-enables them on exit
        dataset.save_episode()
    return indices


def write_episodes(root: str | Path, repo_id: str, episodes: Sequence[Episode], success_threshold: float,
                   frames: Sequence[np.ndarray] | None = None) -> list[int]:
    """Append ``episodes`` to the dataset at ``root`` (creating it) and finalize it."""
    dataset = open_for_append(root, repo_id, images=frames is not None)
    try:
        return append_episodes(dataset, episodes, success_threshold, frames)
    finally:
        _quiet()
        dataset.finalize()


def load_dataset(root: str | Path, repo_id: str):
    """The finalized LeRobotDataset at ``root`` (local only: a missing dataset is an error, never a download)."""
    require_lerobot("wmrl.vla.dataset")
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    root = Path(root)
    _quiet()
    if not (root / "meta" / "info.json").exists():
        raise FileNotFoundError(f"no LeRobotDataset at {root} (wmrl never downloads one; the data module creates it)")
    return LeRobotDataset(repo_id, root=root, video_backend="pyav")  # no video decoding: skip torchcodec


def read_episodes(dataset) -> list[Episode]:
    """The episodes of a LeRobotDataset written by :func:`append_episodes` (seeds are not stored: -1)."""
    table = dataset.hf_dataset.with_format("numpy")
    columns = {name: np.asarray(table[name]) for name in
               ("episode_index", "observation.state", "observation.environment_state", "action", "next.success",
                "next.reward")}
    episodes = []
    for index in np.unique(columns["episode_index"]):
        rows = columns["episode_index"] == index
        success = columns["next.success"][rows].reshape(-1)
        episodes.append(Episode(
            seed=-1,
            states=columns["observation.state"][rows].astype(np.float32),
            env_states=columns["observation.environment_state"][rows].astype(np.float32),
            actions=columns["action"][rows].astype(np.float32),
            coverage=np.full(int(rows.sum()), np.nan, dtype=np.float32),  # not stored: never a model input
            success=bool(success.any()),
            reward=columns["next.reward"][rows].reshape(-1).astype(np.float32),
        ))
    return episodes
