"""`AnchorEpisodeRecorder`: every anchor episode into a LeRobotDataset, with its world-model scores beside it.

An :class:`~wmrl.callbacks.RLCallback` like the WMRL mechanisms: at ``on_advantages`` (when the raw side-grade and
the calibrated world-model reward are both filled) it appends every anchor episode of the step to the
LeRobotDataset at ``root`` (replay it in the simulator, train on it, or view it with
``lerobot-dataset-viz --repo-id <repo_id> --root <root> --episode-index N``) and writes one JSON line per episode to
``<root>/anchors.jsonl``: dataset episode index, training step, initial-state seed, real success, raw and calibrated
world-model reward. Those are the (r_wm, r_real) pairs of the same seeds that the corrections used.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

from wmrl.callbacks.base import RLCallback
from wmrl.vla.episode import episode_of

if TYPE_CHECKING:
    import lightning.pytorch as pl

    from wmrl.types import RolloutBatch


class AnchorEpisodeRecorder(RLCallback):
    """Append anchor episodes to a local LeRobotDataset and their (r_wm, r_real) pairs to ``anchors.jsonl``.

    Args:
        root: the anchors' LeRobotDataset directory (created on the first anchor, appended to afterwards).
        repo_id: the dataset's name in its metadata (local only).
        images: also record 96 x 96 renders (replays the episode's actions from its seed to render them).
    """

    def __init__(self, root: str = "runs/vla/anchors", repo_id: str = "local/pusht_anchors", images: bool = False) -> None:
        self.root, self.repo_id, self.images = Path(root), repo_id, images
        self.recorded = 0

    def on_advantages(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: RolloutBatch) -> None:
        from wmrl.vla.dataset import write_episodes

        rows = [i for i, t in enumerate(batch.trajectories) if bool(batch.is_real[i]) and episode_of(t)]
        if not rows or (trainer is not None and not trainer.is_global_zero):
            return
        episodes = [batch.trajectories[i].episode for i in rows]
        simulator = pl_module.simulator
        frames = self._frames(simulator, episodes) if self.images else None
        indices = write_episodes(self.root, self.repo_id, episodes, simulator.success_threshold, frames)
        step = trainer.global_step if trainer is not None else 0
        with (self.root / "anchors.jsonl").open("a") as f:
            for index, i, episode in zip(indices, rows, episodes, strict=True):
                f.write(json.dumps({
                    "episode_index": index, "step": step, "seed": episode.seed, "success": episode.success,
                    "wm_raw": _number(batch.wm_rewards[i]), "wm_calibrated": _number(batch.wm_calibrated[i]),
                }) + "\n")
        self.recorded += len(rows)
        pl_module.log("anchor/recorded_episodes", float(self.recorded), on_step=True, batch_size=len(batch))

    @staticmethod
    def _frames(simulator, episodes):
        """Renders of each episode, replayed from its seed with its recorded actions (the simulator is
        deterministic given the initial state and the actions)."""
        from wmrl.vla.simulators.pusht import ReplayController

        frames: list = []
        for episode in episodes:
            simulator.play([episode.seed], ReplayController(episode.actions), n_action_steps=len(episode),
                           frames=frames, max_steps=len(episode))
        return frames

    @property
    def state_key(self) -> str:
        """The dataset's name, not its folder: a run resumed from a moved or copied run directory keeps counting."""
        return self._generate_state_key(repo_id=self.repo_id)

    def state_dict(self) -> dict:
        return {"recorded": self.recorded}

    def load_state_dict(self, state_dict: dict) -> None:
        self.recorded = int(state_dict["recorded"])


def _number(value) -> float | None:
    value = float(value)
    return None if math.isnan(value) else value
