"""The VLA wing's plug-in contracts, beside the core's (:mod:`wmrl.types`): a :class:`Simulator` plays and grades
episodes (an :class:`EpisodeGrader`), an :class:`EpisodeWorldModel` grades them instead, a :class:`ChunkPolicy`
acts (Gaussian or not), a :class:`DemonstrationData` data module carries the demonstrations that a
:class:`LearnsFromDemonstrations` world model and a :class:`ClonesBehaviour` module learn from. Runtime-checkable
protocols, as the core's; :data:`CAPABILITIES` are the wing's optional capabilities, declared among a plug-in's
bases (:func:`wmrl.types.declares`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from wmrl.types import GradesTrajectories, Outcome, Source

if TYPE_CHECKING:
    import torch


@runtime_checkable
class EpisodeGrader(Protocol):
    """What grades played episodes (:class:`~wmrl.vla.episode.Episode`): one outcome per episode, in order. The
    simulator grades by sparse success (``source`` real), a VLA world model by its prediction (``source``
    world model); ``DistortedOracle(oracle=...)`` distorts any grader's true reward."""

    def grade(self, episodes: Sequence[Any]) -> list[Outcome]: ...


@runtime_checkable
class Simulator(EpisodeGrader, Protocol):
    """The VLA real environment (``model.init_args.simulator``: :class:`~wmrl.vla.simulators.pusht.PushTSimulator`,
    :class:`~wmrl.vla.simulators.libero.LiberoSimulator`, :class:`~wmrl.vla.simulators.bandit.TargetBandit`): plays one episode per
    initial-state seed with a controller (the policy's chunks plus exploration noise) and grades them.
    ``success_threshold`` is the reward counted as a success (recorded with anchor episodes)."""

    source: Source
    success_threshold: float

    def play(self, seeds: Sequence[int], controller: Any, n_action_steps: int = 1, frames: list | None = None,
             max_steps: int | None = None) -> list[Any]: ...


@runtime_checkable
class EpisodeWorldModel(EpisodeGrader, GradesTrajectories, Protocol):
    """A VLA world model (``WorldModelReward(world_model=...)`` on the VLA path): grades the episodes of its groups
    and side-grades anchor trajectories; ``source`` is ``Source.WORLD_MODEL``."""

    source: Source


@runtime_checkable
class LearnsFromDemonstrations(Protocol):
    """A VLA environment trained on the demonstrations before RL (the progress world model): returns the last
    training loss (NaN when it loaded a pretrained checkpoint instead). ``VLAGRPOModule.on_fit_start`` calls it on
    every environment that has it."""

    def fit_demonstrations(self, demonstrations: Sequence[Any]) -> float: ...


@runtime_checkable
class DemonstrationData(Protocol):
    """A VLA data module (``data:``, :class:`~wmrl.vla.datamodule.lerobot.LeRobotVLADataModule`) that carries the
    demonstrations: what behaviour cloning and the world model learn from, recorded on the module's simulator
    (``check_simulator`` refuses another one), and the held-out initial states."""

    heldout_task_ids: Sequence[str]

    def demonstrations(self) -> list[Any]: ...

    def check_simulator(self, simulator: Any) -> None: ...


@runtime_checkable
class ChunkPolicy(Protocol):
    """A VLA policy (``model.init_args.policy_instance``, or the LeRobot one built from ``model.init_args.policy``):
    an ``nn.Module`` predicting action chunks ``[B, H, 2]`` in the normalised action space.

    Each policy owns its losses: ``rl_loss(obs, chunk, std, reference)`` gives the per-sample loss ``[B]`` that the
    GRPO advantage weights and the KL to ``reference`` (the frozen SFT policy; ``None``: no KL term, 0). A Gaussian
    policy around ``mean_chunk`` (ACT) gives its NLL and the closed-form Gaussian KL from one forward pass
    (:func:`wmrl.algorithms.gaussian.gaussian_rl_loss`); a flow-matching policy (SmolVLA) its flow-matching loss and
    no KL. ``per_sample_loss`` is that per-sample loss alone; ``bc_loss`` the supervised loss of behaviour cloning."""

    chunk_size: int
    n_action_steps: int

    def parameters(self, recurse: bool = True) -> Any: ...

    def mean_chunk(self, obs: dict[str, torch.Tensor]) -> torch.Tensor: ...

    def per_sample_loss(self, obs: dict[str, torch.Tensor], chunk: torch.Tensor, std: float) -> torch.Tensor: ...

    def rl_loss(self, obs: dict[str, torch.Tensor], chunk: torch.Tensor, std: float,
                reference: Any) -> tuple[torch.Tensor, torch.Tensor]: ...

    def bc_loss(self, obs: dict[str, torch.Tensor], chunk: torch.Tensor, is_pad: torch.Tensor) -> torch.Tensor: ...


@runtime_checkable
class ClonesBehaviour(Protocol):
    """A module whose policy (``policy_to_clone()``, a :class:`ChunkPolicy`)
    :class:`~wmrl.vla.warm_start.BehaviourCloningWarmStart` clones its ``demonstrations()`` into
    (:class:`~wmrl.vla.module.VLAGRPOModule`): the batches drawn in an order seeded by ``seed``, the steps
    taken counted in ``cloned_steps``. (A method, not a ``policy`` attribute: a torch submodule is invisible to the
    static lookup ``isinstance`` does on Python 3.12.)"""

    seed: int
    cloned_steps: int

    def demonstrations(self) -> list[Any]: ...

    def policy_to_clone(self) -> Any: ...


#: the wing's optional capabilities (:func:`wmrl.types.declares`)
CAPABILITIES: tuple[type, ...] = (LearnsFromDemonstrations,)

__all__ = ["CAPABILITIES", "ChunkPolicy", "ClonesBehaviour", "DemonstrationData", "EpisodeGrader",
           "EpisodeWorldModel", "LearnsFromDemonstrations", "Simulator"]
