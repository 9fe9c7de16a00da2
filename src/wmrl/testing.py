"""Checks a user runs on their own plug-ins: does a world model (or environment) keep wmrl's contracts?

    from wmrl.testing import check_world_model
    report = check_world_model(MyWorldModel())
    assert report.ok, report.problems
    print(report.capabilities)   # e.g. ['LearnsFromAnchors', 'Checkpointable'] (declared by its bases)

It asks the object about three turns (no code block, a syntax error, a small script) and checks what comes back
against :mod:`wmrl.types`: one :class:`~wmrl.types.Outcome` per request, in order, each from the world model,
a reward in [0, 1] or missing (``None``, an infrastructure failure, never 0), a finite non-negative variance,
and the two gated turns answered 0.0 like every shipped world model's gate.
"""

from __future__ import annotations

import math
from collections.abc import Sized
from dataclasses import dataclass, field
from typing import Any

from wmrl.autoresearch.contracts import ComparesWithStarter
from wmrl.types import (
    BindsToEnvironment,
    BindsToPolicy,
    Checkpointable,
    Environment,
    GradesTrajectories,
    KnowsItsAgreement,
    KnowsItsSeparation,
    LearnsFromAnchors,
    Outcome,
    ReportsMetrics,
    Source,
    StepRequest,
    declares,
    undeclared,
)

#: what a world model may declare (``Checkpointable`` is structural: ``state_dict`` is every torch module's contract)
WORLD_MODEL_CAPABILITIES = (LearnsFromAnchors, GradesTrajectories, BindsToPolicy, BindsToEnvironment,
                            ComparesWithStarter, ReportsMetrics, KnowsItsAgreement, KnowsItsSeparation)
SCRIPT = "import numpy as np\nprint(np.arange(3).sum())\n"


@dataclass
class Report:
    problems: list[str] = field(default_factory=list)
    capabilities: list[str] = field(default_factory=list)
    outcomes: list = field(default_factory=list)  # the answers to the checked requests

    @property
    def ok(self) -> bool:
        return not self.problems


def check_environment(environment: Any, task_id: str = "smoke_iris", source: Source | None = None,
                      requests: list[StepRequest] | None = None) -> Report:
    """Problems of ``environment`` against :class:`~wmrl.types.Environment` (``source``: the one it must have)."""
    report = Report()
    if not isinstance(environment, Environment):
        missing = [name for name in ("source", "step_many") if name not in dir(environment)]
        report.problems.append(f"{type(environment).__name__} is not a wmrl.types.Environment: it has no "
                               f"{' and no '.join(missing)}")
        return report
    if source is not None and environment.source is not source:
        report.problems.append(f"source is {environment.source!r}, expected {source!r}")
    requests = requests or [StepRequest(task_id, None, "no code here"),
                            StepRequest(task_id, "def broken(:\n", "```python\ndef broken(:\n```"),
                            StepRequest(task_id, SCRIPT, f"```python\n{SCRIPT}```")]
    try:
        outcomes = environment.step_many(requests)
    except Exception as exc:  # the point is to report it
        report.problems.append(f"step_many raised {type(exc).__name__}: {exc}")
        return report
    if not isinstance(outcomes, list) or len(outcomes) != len(requests):
        report.problems.append(f"step_many must return a list of one Outcome per request ({len(requests)}), got "
                               f"{type(outcomes).__name__} of {len(outcomes) if isinstance(outcomes, Sized) else '?'}")
        return report
    report.outcomes = outcomes
    for i, outcome in enumerate(outcomes):
        if not isinstance(outcome, Outcome):
            report.problems.append(f"answer {i} is a {type(outcome).__name__}, not a wmrl.types.Outcome")
            continue
        if source is not None and outcome.source is not source:
            report.problems.append(f"answer {i} has source {outcome.source!r}, expected {source!r}")
        if outcome.reward is not None and not (0.0 <= outcome.reward <= 1.0):
            report.problems.append(f"answer {i} has reward {outcome.reward}, outside [0, 1] (None means missing)")
        if outcome.variance is not None and not (math.isfinite(outcome.variance) and outcome.variance >= 0):
            report.problems.append(f"answer {i} has variance {outcome.variance}, not finite and >= 0")
    return report


def check_world_model(world_model: Any, task_id: str = "smoke_iris") -> Report:
    """Problems of ``world_model`` against the world-model contract, and the optional capabilities it declares
    (:func:`wmrl.types.declares`; one it has the members of without declaring it is a problem: the kit would not
    use it)."""
    report = Report(capabilities=[c.__name__ for c in WORLD_MODEL_CAPABILITIES if c in type(world_model).__mro__])
    if isinstance(world_model, Checkpointable):
        report.capabilities.append(Checkpointable.__name__)
    report.problems += [f"{type(world_model).__name__} has the members of {c.__name__} but does not declare it, so "
                        f"the kit does not use them: add {c.__name__} (from wmrl.types) to its bases"
                        for c in undeclared(world_model, WORLD_MODEL_CAPABILITIES)]
    if declares(world_model, GradesTrajectories) and not isinstance(world_model, Environment):
        return report  # a trajectory grader (the VLA progress model) answers no turns
    found = check_environment(world_model, task_id, Source.WORLD_MODEL)
    report.problems += found.problems
    if found.ok:  # the first two checked requests have no code block and a syntax error
        for outcome, what in zip(found.outcomes[:2], ("no code block", "a syntax error"), strict=True):
            if outcome.reward != 0.0:
                report.problems.append(f"a turn with {what} must be answered 0.0 without a model call (use "
                                       f"wmrl.autoresearch.world_models.gate.gate), got {outcome.reward}")
    return report
