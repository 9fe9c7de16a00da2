"""`LeRobotVLADataModule`: scripted PushT demonstrations in a local LeRobotDataset, and seeded initial states.

At ``prepare_data`` it generates ``demonstrations`` episodes with the scripted pusher
(:class:`~wmrl.vla.policies.scripted.ScriptedPushTPolicy`) from their own seeds (``demo_seed`` on, never a training or
held-out initial state) and writes them with ``LeRobotDataset.create`` / ``add_frame`` / ``save_episode`` /
``finalize`` under ``root``; ``setup`` loads that dataset back from disk (``LeRobotDataset(repo_id, root=root)``:
local, never a hub download) and every consumer (the behaviour-cloning warm start, the world model) reads the
episodes from it.

Initial states are seeds: ``train_states`` seeds from ``first_seed`` serve the GRPO groups, the next
``heldout_states`` seeds are held out (paper: states 0-15 train, 16-49 held out) and only ever evaluated with the
real simulator. Each training step is one batch of ``groups_per_step`` task ids (``pusht-seed-<seed>``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from lightning.pytorch.utilities import rank_zero_info

from wmrl.vla.datamodule.initial_states import InitialStatesDataModule, split_problems
from wmrl.vla.episode import Episode
from wmrl.vla.requirements import require_lerobot

SIMULATOR_FIELDS = ("max_episode_steps", "success_threshold", "initial_states", "max_offset", "max_angle")


class LeRobotVLADataModule(InitialStatesDataModule):
    """PushT demonstrations (a local LeRobotDataset) and the train / held-out initial states.

    Args:
        root: directory of the demonstrations' LeRobotDataset (created when absent, reused when present).
        repo_id: the dataset's name inside LeRobot's metadata (local only; nothing is pushed or pulled).
        simulator: the PushT simulator the demonstrations are recorded in; must match
            ``model.init_args.simulator``.
        demonstrations: scripted episodes to record.
        demo_noise: std (pixels) of noise on the scripted actions (varied demonstrations).
        demo_seed: the seed of the first demonstration (its seeds are never a training or held-out state).
        images: also record 96 x 96 renders (``observation.image``) for visualisation.
        train_states: initial states trained on (see the module docstring).
        heldout_states: initial states evaluated on, never trained on.
        first_seed: the seed of the first initial state; the split is consecutive seeds from it.
        group_size: rollouts per initial state (linked to ``model.init_args.group_size``).
        groups_per_step: initial states per training step.
        steps_per_epoch: training steps per epoch (held-out success is measured after each epoch).
        seed: seeds the order of initial states.
    """

    def __init__(
        self,
        root: str = "runs/vla/pusht_demos",
        repo_id: str = "local/pusht_scripted",
        simulator: object = None,
        demonstrations: int = 40,
        demo_seed: int = 100_000,
        demo_noise: float = 0.0,
        images: bool = False,
        train_states: int = 16,
        heldout_states: int = 34,
        first_seed: int = 0,
        group_size: int = 4,
        groups_per_step: int = 2,
        steps_per_epoch: int = 4,
        seed: int = 0,
    ) -> None:
        key = "data.init_args."
        checks = [
            (demonstrations >= 1, f"{key}demonstrations must be >= 1 (got {demonstrations})"),
            (not first_seed <= demo_seed < first_seed + train_states + heldout_states,
             f"{key}demo_seed must not fall among the training / held-out seeds "
             f"[{first_seed}, {first_seed + train_states + heldout_states})"),
        ]
        problems = split_problems(train_states, heldout_states, group_size, groups_per_step, steps_per_epoch)
        problems += [message for ok, message in checks if not ok]
        if problems:
            raise ValueError("invalid LeRobotVLADataModule configuration:\n  - " + "\n  - ".join(problems))
        super().__init__(train_states, heldout_states, first_seed, group_size, groups_per_step, steps_per_epoch, seed)
        if simulator is None:
            from wmrl.vla.simulators.pusht import PushTSimulator

            simulator = PushTSimulator()
        self.root, self.repo_id, self.simulator = Path(root), repo_id, simulator
        self.num_demonstrations, self.demo_seed, self.demo_noise, self.images = demonstrations, demo_seed, demo_noise, images
        self.dataset = None
        self._episodes: list[Episode] | None = None

    def recipe(self) -> dict:
        """What the stored demonstrations were generated with (a mismatch means a stale dataset)."""
        return {"demonstrations": self.num_demonstrations, "demo_seed": self.demo_seed, "demo_noise": self.demo_noise,
                "images": self.images, **{f: getattr(self.simulator, f) for f in SIMULATOR_FIELDS}}

    def check_simulator(self, simulator) -> None:
        """The module's simulator must be the demonstrations' (same initial states, steps and success)."""
        differ = [f for f in SIMULATOR_FIELDS if getattr(simulator, f) != getattr(self.simulator, f)]
        if differ:
            raise ValueError(
                "model.init_args.simulator and data.init_args.simulator differ in " + ", ".join(
                    f"{f} ({getattr(simulator, f)!r} vs {getattr(self.simulator, f)!r})" for f in differ)
                + ": give both the same values (the configs use one YAML anchor for both)"
            )

    def prepare_data(self) -> None:
        require_lerobot("LeRobotVLADataModule")
        from wmrl.vla.dataset import write_episodes
        from wmrl.vla.simulators.pusht import ScriptedController

        recipe_file = self.root / "meta" / "wmrl_recipe.json"
        if (self.root / "meta" / "info.json").exists():
            stored = json.loads(recipe_file.read_text()) if recipe_file.exists() else None
            if stored != self.recipe():
                raise ValueError(
                    f"data.init_args.root {str(self.root)!r} holds demonstrations made with {stored}, not with this "
                    f"config's {self.recipe()}: delete that directory or choose another data.init_args.root"
                )
            return
        start = time.perf_counter()
        rank_zero_info(f"recording {self.num_demonstrations} scripted PushT demonstrations into {self.root} ...")
        seeds = list(range(self.demo_seed, self.demo_seed + self.num_demonstrations))
        frames: list | None = [] if self.images else None
        episodes = self.simulator.play(seeds, ScriptedController(noise=self.demo_noise, seed=self.demo_seed),
                                       frames=frames)
        write_episodes(self.root, self.repo_id, episodes, self.simulator.success_threshold, frames)
        recipe_file.write_text(json.dumps(self.recipe()))
        rank_zero_info(f"recorded {len(episodes)} scripted PushT demonstrations ({sum(e.success for e in episodes)} "
                       f"successful) into the LeRobotDataset at {self.root} in {time.perf_counter() - start:.1f} s")

    def setup(self, stage: str | None = None) -> None:
        from wmrl.vla.dataset import load_dataset, read_episodes

        require_lerobot("LeRobotVLADataModule")
        if self.dataset is None:
            self.dataset = load_dataset(self.root, self.repo_id)
            self._episodes = read_episodes(self.dataset)

    def demonstrations(self) -> list[Episode]:
        """The demonstration episodes, as read back from the LeRobotDataset."""
        if self._episodes is None:
            self.setup()
        return list(self._episodes)
