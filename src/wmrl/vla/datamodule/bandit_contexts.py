"""`BanditDataModule`: the seeded contexts of :class:`~wmrl.vla.simulators.bandit.TargetBandit` (no demonstrations).

The same split as :class:`~wmrl.vla.datamodule.lerobot.LeRobotVLADataModule`
(:class:`~wmrl.vla.datamodule.initial_states.InitialStatesDataModule`): ``train_states`` seeds from ``first_seed`` serve
the GRPO groups, the next ``heldout_states`` seeds are only ever evaluated. The bandit's policy starts as given (no
SFT stage), so there are no demonstrations.
"""

from __future__ import annotations

from wmrl.vla.datamodule.initial_states import InitialStatesDataModule, split_problems
from wmrl.vla.episode import Episode


class BanditDataModule(InitialStatesDataModule):
    """Training and held-out contexts of the target bandit.

    Args:
        train_states: contexts trained on.
        heldout_states: contexts evaluated on, never trained on.
        first_seed: the seed of the first context; the split is consecutive seeds from it.
        group_size: rollouts per context (linked to ``model.init_args.group_size``).
        groups_per_step: contexts per training step.
        steps_per_epoch: training steps per epoch (held-out reward is measured after each epoch).
        seed: seeds the order of training contexts.
    """

    def __init__(self, train_states: int = 64, heldout_states: int = 400, first_seed: int = 0, group_size: int = 8,
                 groups_per_step: int = 8, steps_per_epoch: int = 50, seed: int = 0) -> None:
        problems = split_problems(train_states, heldout_states, group_size, groups_per_step, steps_per_epoch)
        if problems:
            raise ValueError("invalid BanditDataModule configuration:\n  - " + "\n  - ".join(problems))
        super().__init__(train_states, heldout_states, first_seed, group_size, groups_per_step, steps_per_epoch, seed)

    def check_simulator(self, simulator) -> None:
        """Nothing to match: the contexts are the simulator's own, and there are no demonstrations."""

    def demonstrations(self) -> list[Episode]:
        """None: the bandit's policy starts as given, with no SFT stage."""
        return []
