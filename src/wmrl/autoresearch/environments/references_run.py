"""Run a task's reference solutions for real: to record its leaderboard, or to check it reproduces.

**What "reproduces" means across machines.** A reference's score is a float computed by BLAS kernels, iterative
optimisers and tie-breaking comparisons; another CPU (another instruction set, another BLAS kernel) sums in
another order and may land a few ulps, or a few neighbours, elsewhere. Demanding 12 identical digits holds only on
the machine that recorded the lock. What the reward needs is the leaderboard's *order*: a submission's position is
interpolated between neighbouring reference scores, so a reference that keeps its rank among the others leaves
every submission's position within a hair of where it was. A reference therefore reproduces when

* its score equals the recorded one to 12 significant digits (``exact``: same machine, same packages), or
* it is within its model family's tolerance (:data:`FAMILY_REL_TOL`, below) **and** keeps its rank among the
  task's other references (``tolerated``).

Anything else ``differs``. Exactness stays where it is real: the execution cache, resume and the world model's
bookkeeping compare values computed on one machine in one run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from enum import Enum

from wmrl.autoresearch.environments.grader import grade
from wmrl.autoresearch.environments.real import SandboxEnvironment
from wmrl.autoresearch.tasks.build import BuiltTask
from wmrl.types import Outcome, Status

# Same machine, same packages: the recorded digits come back.
EXACT_REL_TOL = 1e-12

# Relative tolerance per model family, each the smallest that covers how that family's floats move across CPUs
# (x86-64 with and without AVX-512 measured; each at least 10x the largest difference seen there):
# - arithmetic: means, differences, repeats of the history; only the order of a float sum can change (~1e-15).
# - convex: naive Bayes, Cox/Weibull by Newton steps, autoregression by OLS, ridge by Cholesky on dense features.
#   One optimum, reached by a direct solve or Newton steps to near machine precision (seen: 1.2e-8).
# - iterative: the same kind of optimum reached by a solver that stops at a stopping tolerance of 1e-4 (ridge by
#   conjugate gradients on sparse one-hot features, logistic and Poisson regression by L-BFGS, the lasso by
#   coordinate descent): rounding bends the path and the solver stops elsewhere within its tolerance (seen: 7.3e-5,
#   epa_fuel_economy's linear baseline in CI against the machine that recorded the lock, where 1e-6 failed).
# - trees: fixed seeds, splits chosen by comparing impurity sums; rounding moves a threshold between two equal
#   candidates, rarely and by little (seen: < 1e-9).
# - neighbours: a distance tie broken the other way swaps one neighbour of one row (seen: 1.4e-4).
# - smoothing: Holt-Winters fitted by L-BFGS-B from heuristic starting values (seen: 7e-5 on sunspots; the former
#   brute-force start jumped between local optima, 4.8% on us_employment).
# A reference that is not listed gets the convex family's tolerance.
FAMILY_REL_TOL = {
    "arithmetic": 1e-9, "convex": 1e-6, "iterative": 1e-3, "trees": 1e-6, "neighbours": 1e-3, "smoothing": 1e-3
}
REFERENCE_FAMILY = {
    "trivial": "arithmetic",
    "drift": "arithmetic",
    "seasonal_naive": "arithmetic",
    "seasonal_mean": "arithmetic",
    "single_feature": "arithmetic",
    "linear_baseline": "iterative",
    "linear_strong_l2": "iterative",
    "lasso": "iterative",
    "log_linear": "iterative",
    "naive_bayes": "convex",
    "autoregressive": "convex",
    "cox_light_penalty": "convex",
    "weibull_aft": "convex",
    "logistic_event": "convex",
    "decision_tree_shallow": "trees",
    "random_forest": "trees",
    "extra_trees": "trees",
    "gradient_boosting": "trees",
    "gradient_boosting_bagged": "trees",
    "trend_plus_boosting": "trees",
    "random_forest_log_time": "trees",
    "gradient_boosting_event": "trees",
    "knn": "neighbours",
    "knn_event": "neighbours",
    "holt_winters": "smoothing",
}


def family_tolerance(reference: str) -> float:
    """The relative tolerance of a reference's score across machines (see :data:`FAMILY_REL_TOL`).

    >>> family_tolerance("knn"), family_tolerance("trivial"), family_tolerance("someone_elses_model")
    (0.001, 1e-09, 1e-06)
    """
    return FAMILY_REL_TOL[REFERENCE_FAMILY.get(reference, "convex")]


class Reproduction(str, Enum):
    EXACT = "exact"
    TOLERATED = "tolerated"
    DIFFERS = "differs"
    GRADED = "graded"  # a folder task's leaderboard is its file, not its references: a valid grade is what counts


def relative_difference(score: float, recorded: float) -> float:
    """``|score - recorded| / |recorded|`` (absolute where the recorded score is 0).

    >>> relative_difference(1.01, 1.0) < 0.0100001, relative_difference(0.0, 0.0)
    (True, 0.0)
    """
    return abs(score - recorded) / abs(recorded) if recorded else abs(score)


def rank_among(score: float, others: Mapping[str, float], higher_is_better: bool) -> tuple[int, int]:
    """How many of ``others`` ``score`` beats and ties: its place in the leaderboard's order.

    >>> rank_among(0.5, {"a": 0.1, "b": 0.5, "c": 0.9}, True), rank_among(0.5, {"a": 0.1, "c": 0.9}, False)
    ((1, 1), (1, 0))
    """
    sign = 1.0 if higher_is_better else -1.0
    beaten = sum(sign * score > sign * v for v in others.values())
    tied = sum(score == v for v in others.values())
    return beaten, tied


def reproduction(
    name: str, score: float | None, leaderboard: Mapping[str, float], higher_is_better: bool
) -> tuple[Reproduction, str]:
    """Judge one reference's new ``score`` against the recorded ``leaderboard``; the reason says why.

    >>> board = {"trivial": 0.3, "knn": 0.69846, "forest": 0.8}
    >>> reproduction("knn", 0.69856, board, True)[0].value        # 1.4e-4 apart, same rank
    'tolerated'
    >>> reproduction("knn", 0.81, board, True)[0].value           # passes the forest
    'differs'
    """
    recorded = leaderboard.get(name)
    if recorded is None:
        return Reproduction.DIFFERS, "no recorded score"
    if score is None or not math.isfinite(score):
        return Reproduction.DIFFERS, "no valid score"
    difference = relative_difference(score, recorded)
    if math.isclose(score, recorded, rel_tol=EXACT_REL_TOL, abs_tol=1e-15):
        return Reproduction.EXACT, ""
    tolerance = family_tolerance(name)
    others = {k: v for k, v in leaderboard.items() if k != name}
    if rank_among(score, others, higher_is_better) != rank_among(recorded, others, higher_is_better):
        return Reproduction.DIFFERS, f"changes its rank among the references (relative difference {difference:.2g})"
    if difference > tolerance:
        return Reproduction.DIFFERS, (
            f"relative difference {difference:.2g} > {tolerance:g} ({REFERENCE_FAMILY.get(name, 'convex')})"
        )
    return Reproduction.TOLERATED, f"relative difference {difference:.2g} <= {tolerance:g}, same rank"


@dataclass(frozen=True)
class ReferenceRun:
    """One reference solution run again, with the leaderboard it was recorded into."""

    task_id: str
    name: str
    outcome: Outcome
    leaderboard: Mapping[str, float]
    higher_is_better: bool
    external: bool = False  # the leaderboard is a file's (a folder task's leaderboard.csv), not recorded references

    @property
    def recorded(self) -> float | None:
        return self.leaderboard.get(self.name)

    @property
    def verdict(self) -> tuple[Reproduction, str]:
        if self.external and self.recorded is None:
            if self.outcome.status is Status.VALID:
                return Reproduction.GRADED, f"valid, position {self.outcome.position:.3f} on the task's leaderboard"
            return Reproduction.DIFFERS, f"{self.outcome.status.value}: {self.outcome.error or ''}".strip()
        return reproduction(self.name, self.outcome.score, self.leaderboard, self.higher_is_better)

    @property
    def reproduced(self) -> bool:
        return self.verdict[0] is not Reproduction.DIFFERS


def run_references(
    env: SandboxEnvironment,
    tasks: list[BuiltTask],
    on_done: Callable[[ReferenceRun], None] | None = None,
    record: bool = False,
    only: Mapping[str, Collection[str]] | None = None,
) -> list[ReferenceRun]:
    """Execute every reference solution of ``tasks`` (bypassing the cache) and grade it.

    With ``record=True`` the scores become the tasks' leaderboards in the suite lock; a reference that does not
    produce a valid submission is then an error. ``only`` (task id -> reference names) runs a sample instead;
    recording needs every reference.
    """
    if record and only is not None:
        raise ValueError("run_references: recording a leaderboard needs every reference (drop `only`)")
    jobs = [(task, name, script) for task in tasks for name, script in task.references().items()
            if only is None or name in only.get(task.id, ())]
    requests = [env.request(task, script) for task, _, script in jobs]
    runs: list[ReferenceRun | None] = [None] * len(jobs)

    def finished(i: int, result) -> None:
        task, name, _ = jobs[i]
        outcome = _score_only(task, result) if record else grade(task, result)
        external = task.spec.folder is not None and task.spec.folder.leaderboard is not None
        runs[i] = ReferenceRun(task.id, name, outcome, dict(task.leaderboard), task.higher_is_better, external)
        if on_done is not None:
            on_done(runs[i])

    env.sandbox.run_many(requests, on_done=finished)
    if record:
        for task in tasks:
            mine = [r for r in runs if r is not None and r.task_id == task.id]
            bad = [f"{r.name}: {r.outcome.status.value} {r.outcome.error or ''}" for r in mine if r.outcome.score is None]
            if bad:
                raise RuntimeError(f"task {task.id}: reference solutions failed, nothing recorded: {bad}")
            env.suite.record(
                task,
                {r.name: r.outcome.score for r in mine},
                {r.name: r.outcome.wall_seconds for r in mine},
            )
    return runs  # type: ignore[return-value]


def _score_only(task: BuiltTask, result) -> Outcome:
    """Grade against a placeholder leaderboard: recording needs the score, not yet a position."""
    from dataclasses import replace

    provisional = replace(task, leaderboard={"_": 0.0})
    outcome = grade(provisional, result)
    if outcome.status is Status.VALID:
        return Outcome(
            Status.VALID, 0.5, score=outcome.score, position=0.0, wall_seconds=outcome.wall_seconds
        )
    return outcome
