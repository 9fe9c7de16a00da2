"""`AnchorRouting`: which groups of a step run for real (the anchors) and which the world model serves.

Routing is group-pure (a group is all real or all world model), so GRPO's within-group normalisation always
sees one reward scale. Per step, of ``G`` groups, ``k = min(free, G, max(floor, round(fraction * G)))``
groups are anchors (paper: ~10% realised, a floor of 2 of 8 groups, capped by sandbox capacity).

Capacity counts sandbox slots in flight, as the paper's does. ``capacity`` is the sandbox's size in anchor
groups (slots / group size); an optional ``in_flight`` reporter (e.g. the sandbox pool's live count) says how
many real executions are still running when the step is planned (an asynchronous pipeline: a previous step's
anchors still executing). They occupy whole group slots, ``ceil(in_flight / group_size)``, so
``free = max(0, capacity - ceil(in_flight / group_size))``. Without a reporter (synchronous execution:
nothing runs at plan time) ``free = capacity``, the static per-step cap. Capacity wins over the floor: the
floor is a wish for calibration data and cannot create sandbox slots, so a step whose slots are busy gets
fewer anchors than the floor (down to none).

Selections:

- ``random`` (the paper): ``k`` groups uniformly at random.
- ``stratified``: the groups whose tasks have had the fewest anchors so far (ties at random), so every task
  keeps being calibrated.
- ``uncertainty``: the groups whose tasks the world model has been least sure about (the running mean of its
  predicted-reward variance on that task; unseen tasks first). The plan is made before rollouts, so the
  uncertainty is the task's history, not the current rollouts'.
- ``least_separated``: the groups whose tasks the world model tells apart least, asked before the rollouts
  (:class:`~wmrl.types.KnowsItsSeparation`: the spread of its rewards over the scripts the task's prompt offers;
  tasks it cannot say about after those it can, ties at random). Group normalisation scales a world-model group's
  small differences up to full-size advantages, so where it separates little its advantages are mostly its
  errors: the anchor replaces that group. Needs a world model that declares the capability. Offline, on the
  train split's menu, it raised a step's agreement with all-real advantages over random placement (0.788 against
  0.765, ``benchmarks/anchor_value.py``); in training (``speedup.py --preset suite-quality``, 2 seeds) it did worse
  than random placement (held-out along the run -0.092 [-0.118, -0.067]), so ``random`` stays the default.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, get_args

from wmrl.callbacks.base import RLCallback, rank_of
from wmrl.types import KnowsItsSeparation, Source, declares

if TYPE_CHECKING:
    import lightning.pytorch as pl

    from wmrl.types import RolloutBatch, RolloutPlan

Selection = Literal["random", "stratified", "uncertainty", "least_separated"]
SELECTIONS: tuple[str, ...] = get_args(Selection)


class AnchorRouting(RLCallback):
    """Route ``fraction`` of each step's groups (at least ``floor``, at most ``capacity``) to real execution.

    Args:
        fraction: share of groups executed for real (paper ~0.1; 0 with ``floor: 0`` is pure world model).
        floor: minimum anchor groups per step (paper: 2 of 8).
        capacity: maximum anchor groups per step (sandbox slots / group size); ``null``: no cap.
        in_flight: reports the real executions (rollouts, not groups) still running when a step is planned;
            they take ``ceil(in_flight / group_size)`` of the ``capacity`` group slots. ``None`` (default):
            synchronous execution, nothing in flight, ``capacity`` is a static per-step cap. Needs
            ``capacity``. Wired in Python (e.g. ``sandbox.in_flight``, which counts a sandbox's running
            ``run_many`` executions), not from YAML; it is live
            state of the pool, not of this callback, so it is not checkpointed.
        selection: ``random`` | ``stratified`` | ``uncertainty`` | ``least_separated`` (see the module docstring).
        seed: seeds the selection (rank ``r`` of a distributed run uses ``seed + r``).
        uncertainty_decay: EWMA decay of the per-task uncertainty (``uncertainty`` selection).
    """

    def __init__(
        self,
        fraction: float = 0.1,
        floor: int = 2,
        capacity: int | None = None,
        selection: Selection = "random",
        seed: int = 0,
        uncertainty_decay: float = 0.8,
        in_flight: Callable[[], int] | None = None,
    ) -> None:
        problems = []
        if not 0.0 <= fraction <= 1.0:
            problems.append(f"AnchorRouting fraction must be in [0, 1] (got {fraction})")
        if floor < 0:
            problems.append(f"AnchorRouting floor must be >= 0 (got {floor})")
        if capacity is not None and capacity < 0:
            problems.append(f"AnchorRouting capacity must be >= 0 or null (got {capacity})")
        if selection not in SELECTIONS:
            problems.append(f"AnchorRouting selection must be one of {', '.join(SELECTIONS)} (got {selection!r})")
        if not 0.0 <= uncertainty_decay < 1.0:
            problems.append(f"AnchorRouting uncertainty_decay must be in [0, 1) (got {uncertainty_decay})")
        if in_flight is not None and not callable(in_flight):
            problems.append(
                f"AnchorRouting in_flight must be a callable returning an int or null (got {in_flight!r})"
            )
        if in_flight is not None and capacity is None:
            problems.append(
                "AnchorRouting in_flight needs a capacity (sandbox slots / group size): executions in flight "
                "can only take slots from a finite capacity"
            )
        if problems:
            raise ValueError("invalid AnchorRouting configuration:\n  - " + "\n  - ".join(problems))
        self.fraction, self.floor, self.capacity, self.selection = fraction, floor, capacity, selection
        self.seed, self.uncertainty_decay = seed, uncertainty_decay
        self.in_flight = in_flight
        self.rng = random.Random(seed)
        self.anchors_per_task: dict[str, int] = {}
        self.uncertainty: dict[str, float] = {}
        self.executions = 0
        self.separation: Callable[[str], float | None] | None = None  # the world model's, for least_separated

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        rank = rank_of(trainer)
        if rank:
            self.rng = random.Random(self.seed + rank)

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.selection != "least_separated":
            return
        world_model = pl_module.environments.get("world_model")
        if not declares(world_model, KnowsItsSeparation):
            raise ValueError(
                "AnchorRouting selection: least_separated asks the world model how far apart its rewards lie for a "
                f"task's scripts, and {type(world_model).__name__} does not say (it does not declare "
                "wmrl.types.KnowsItsSeparation; TaskAwareWorldModel does): choose another selection or that world model"
            )
        self.separation = world_model.separation

    def free_capacity(self, group_size: int = 1) -> int | None:
        """Anchor groups the sandbox can take now: ``capacity`` less the group slots of executions in flight.

        >>> AnchorRouting(capacity=4, in_flight=lambda: 3).free_capacity(group_size=1)
        1
        >>> AnchorRouting(capacity=4, in_flight=lambda: 5).free_capacity(group_size=4)  # 5 runs: 2 group slots
        2
        >>> AnchorRouting(capacity=None).free_capacity() is None  # no cap
        True
        """
        if self.capacity is None:
            return None
        if self.in_flight is None:
            return self.capacity
        running = self.in_flight()
        if isinstance(running, bool) or int(running) != running or running < 0:
            raise ValueError(
                f"AnchorRouting in_flight must report a count >= 0 of running executions (got {running!r})"
            )
        return max(0, self.capacity - math.ceil(int(running) / group_size))

    def anchors_for(self, groups: int, group_size: int = 1) -> int:
        """How many of ``groups`` groups (of ``group_size`` rollouts) run for real this step.

        >>> AnchorRouting(fraction=0.1, floor=2).anchors_for(8)
        2
        >>> AnchorRouting(fraction=0.5, floor=2, capacity=3).anchors_for(8)
        3
        >>> AnchorRouting(fraction=0.1, floor=2, capacity=4, in_flight=lambda: 3).anchors_for(8)  # capacity wins
        1
        """
        k = max(self.floor, round(self.fraction * groups))
        free = self.free_capacity(group_size)
        if free is not None:
            k = min(k, free)
        return min(k, groups)

    def select(self, task_ids: list[str], group_size: int = 1) -> list[int]:
        """The anchor groups among ``task_ids`` (indices, sorted); ``group_size`` as in :meth:`anchors_for`."""
        k = self.anchors_for(len(task_ids), group_size)
        order = list(range(len(task_ids)))
        self.rng.shuffle(order)  # random order first: ties below are broken at random
        if self.selection == "stratified":
            order.sort(key=lambda g: self.anchors_per_task.get(task_ids[g], 0))
        elif self.selection == "uncertainty":
            order.sort(key=lambda g: -self.uncertainty.get(task_ids[g], float("inf")))
        elif self.selection == "least_separated" and k:
            spread = {task: self.separation(task) for task in set(task_ids)} if self.separation else {}
            order.sort(key=lambda g: (spread.get(task_ids[g]) is None, spread.get(task_ids[g]) or 0.0))
        return sorted(order[:k])

    def on_rollout_plan(self, trainer: pl.Trainer, pl_module: pl.LightningModule, plan: RolloutPlan) -> None:
        anchors = set(self.select(plan.task_ids, plan.group_size))
        plan.environments[:] = ["real" if g in anchors else "world_model" for g in range(len(plan.task_ids))]
        for g in anchors:
            task = plan.task_ids[g]
            self.anchors_per_task[task] = self.anchors_per_task.get(task, 0) + 1

    def on_rollout_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: RolloutBatch) -> None:
        by_task: dict[str, list[float]] = {}
        for trajectory in batch.trajectories:
            if trajectory.source is Source.REAL:
                self.executions += sum(t.code is not None for t in trajectory.turns)
                continue
            for turn in trajectory.turns:
                if turn.outcome.variance is not None:
                    by_task.setdefault(trajectory.task_id, []).append(turn.outcome.variance)
        for task, variances in by_task.items():
            value = sum(variances) / len(variances)
            old = self.uncertainty.get(task)
            d = self.uncertainty_decay
            self.uncertainty[task] = value if old is None else d * old + (1 - d) * value
        pl_module.log("anchor/executions_total", float(self.executions), on_step=True, batch_size=len(batch))

    @property
    def state_key(self) -> str:
        return self._generate_state_key(fraction=self.fraction, floor=self.floor, capacity=self.capacity,
                                        selection=self.selection, seed=self.seed,
                                        uncertainty_decay=self.uncertainty_decay)

    def state_dict(self) -> dict:
        return {
            "rng": _encode_rng(self.rng.getstate()),
            "anchors_per_task": dict(self.anchors_per_task),
            "uncertainty": dict(self.uncertainty),
            "executions": self.executions,
        }

    def load_state_dict(self, state_dict: dict) -> None:
        self.rng.setstate(_decode_rng(state_dict["rng"]))
        self.anchors_per_task = dict(state_dict["anchors_per_task"])
        self.uncertainty = dict(state_dict["uncertainty"])
        self.executions = int(state_dict["executions"])


def _encode_rng(state: tuple) -> list:
    version, internal, gauss = state
    return [version, list(internal), gauss]


def _decode_rng(state: list) -> tuple:
    version, internal, gauss = state
    return (version, tuple(internal), gauss)
