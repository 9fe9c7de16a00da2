"""Run a task's reference solutions for real: to record its leaderboard, or to check it reproduces."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from wmrl.environments.grader import grade
from wmrl.environments.real import SandboxEnvironment
from wmrl.tasks.build import BuiltTask
from wmrl.types import Outcome, Status

# Scores are compared to 12 significant digits: exact on one machine kind and package set, and robust to
# the last-bit noise a different BLAS kernel may add to a float sum.
REL_TOL = 1e-12


@dataclass(frozen=True)
class ReferenceRun:
    task_id: str
    name: str
    outcome: Outcome
    recorded: float | None

    @property
    def reproduced(self) -> bool:
        return (
            self.recorded is not None
            and self.outcome.score is not None
            and math.isclose(self.outcome.score, self.recorded, rel_tol=REL_TOL, abs_tol=1e-15)
        )


def run_references(
    env: SandboxEnvironment,
    tasks: list[BuiltTask],
    on_done: Callable[[ReferenceRun], None] | None = None,
    record: bool = False,
) -> list[ReferenceRun]:
    """Execute every reference solution of ``tasks`` (bypassing the cache) and grade it.

    With ``record=True`` the scores become the tasks' leaderboards in the suite lock; a reference that does not
    produce a valid submission is then an error.
    """
    jobs = [(task, name, script) for task in tasks for name, script in task.references().items()]
    requests = [env.request(task, script) for task, _, script in jobs]
    runs: list[ReferenceRun | None] = [None] * len(jobs)

    def finished(i: int, result) -> None:
        task, name, _ = jobs[i]
        outcome = _score_only(task, result) if record else grade(task, result)
        runs[i] = ReferenceRun(task.id, name, outcome, task.leaderboard.get(name))
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
