"""Typed records that flow through wmrl (stdlib and torch only).

An :class:`Outcome` is what an environment (the real sandbox or, later, a world model) says about one
executed turn. Its ``reward`` follows the ladder of DESIGN.md section 1; ``None`` means *missing*
(an infrastructure failure), which is excluded from its group and never counted as 0.
"""

from __future__ import annotations

import enum
import math
from dataclasses import asdict, dataclass
from typing import Any


class Status(str, enum.Enum):
    """What happened to one solution script, from worst to best on the reward ladder."""

    MALFORMED = "malformed"  # no code block / empty script: 0.0
    SYNTAX_ERR = "syntax_err"  # compile() fails: 0.0
    TIMEOUT = "timeout"  # ran past its time budget: 0.0
    FLAGGED = "flagged"  # tripwire: read answers / bundled data, wrote outside the work dir: 0.0
    RUNTIME_ERR = "runtime_err"  # exception or killed by a limit: 0.1
    RAN_NO_SUB = "ran_no_sub"  # exited 0 without a valid submission: 0.2
    VALID = "valid"  # graded submission: 0.5 + 0.5 * position
    INFRA_ERROR = "infra_error"  # sandbox or grader failed: reward missing (None)


class Source(str, enum.Enum):
    """Who produced an outcome."""

    REAL = "real"
    WORLD_MODEL = "world_model"


@dataclass(frozen=True)
class Outcome:
    """The result of executing (or simulating) one solution script.

    Attributes:
        status: see :class:`Status`.
        reward: ladder reward in [0, 1]; ``None`` if and only if ``status`` is ``infra_error``.
        score: the task metric on the hidden answers (valid submissions only).
        position: leaderboard percentile of ``score`` in [0, 1] (valid submissions only).
        feedback: the text an agent sees next, like a real sandbox would print it.
        wall_seconds: wall-clock of the execution (of the original run when served from the cache).
        source: ``real`` or ``world_model``.
        validation_score: the script's self-reported ``VALIDATION_SCORE=<float>``, a feature, never the reward.
        stdout_tail / stderr_tail: bounded tails of the script's output.
        flags: tripwire reasons (``flagged`` outcomes) or containment notes.
        error: short machine-readable error (exception type, ``infra`` detail, submission problem).
        cached: served from the execution cache instead of being re-executed.
    """

    status: Status
    reward: float | None
    score: float | None = None
    position: float | None = None
    feedback: str = ""
    wall_seconds: float = 0.0
    source: Source = Source.REAL
    validation_score: float | None = None
    stdout_tail: str = ""
    stderr_tail: str = ""
    flags: tuple[str, ...] = ()
    error: str | None = None
    cached: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.status, Status):
            object.__setattr__(self, "status", Status(self.status))
        if not isinstance(self.source, Source):
            object.__setattr__(self, "source", Source(self.source))
        object.__setattr__(self, "flags", tuple(self.flags))
        if (self.reward is None) != (self.status is Status.INFRA_ERROR):
            raise ValueError(
                f"Outcome.reward must be None exactly for infra_error (status={self.status.value}, "
                f"reward={self.reward})"
            )
        if self.reward is not None and not (0.0 <= self.reward <= 1.0 and math.isfinite(self.reward)):
            raise ValueError(f"Outcome.reward must lie in [0, 1] (got {self.reward})")
        if self.position is not None and not 0.0 <= self.position <= 1.0:
            raise ValueError(f"Outcome.position must lie in [0, 1] (got {self.position})")

    @property
    def missing(self) -> bool:
        """True for infrastructure failures: excluded from their group, never scored."""
        return self.reward is None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = self.status.value
        d["source"] = self.source.value
        d["flags"] = list(self.flags)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Outcome:
        return cls(**{**d, "flags": tuple(d.get("flags", ()))})


__all__ = ["Outcome", "Source", "Status"]
