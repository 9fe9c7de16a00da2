"""The reward ladder (docs/concepts.md), the same for real and predicted outcomes."""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from wmrl.types import Status

_FLOOR = {
    Status.MALFORMED: 0.0,
    Status.SYNTAX_ERR: 0.0,
    Status.TIMEOUT: 0.0,
    Status.FLAGGED: 0.0,
    Status.RUNTIME_ERR: 0.1,
    Status.RAN_NO_SUB: 0.2,
}


def ladder_reward(status: Status, position: float | None = None) -> float | None:
    """Reward of one outcome: 0.0 / 0.1 / 0.2 below a valid submission, ``0.5 + 0.5 * position`` for one.

    ``infra_error`` has no reward (``None``: missing, excluded from its group), never 0.

    >>> ladder_reward(Status.RUNTIME_ERR)
    0.1
    >>> ladder_reward(Status.VALID, 0.5)
    0.75
    >>> ladder_reward(Status.INFRA_ERROR) is None
    True
    """
    if status is Status.INFRA_ERROR:
        return None
    if status is Status.VALID:
        if position is None or not 0.0 <= position <= 1.0:
            raise ValueError(f"a valid outcome needs a position in [0, 1] (got {position})")
        return 0.5 + 0.5 * position
    return _FLOOR[status]


def leaderboard_position(score: float, leaderboard: Sequence[float], higher_is_better: bool) -> float:
    """Percentile of ``score`` among reference scores: the share of the leaderboard it beats.

    At a reference score, ties count half; between two adjacent distinct reference scores the position is
    interpolated linearly, so a small improvement always moves it. Worse than every entry: 0; better than
    every entry: 1.

    >>> leaderboard_position(0.5, [0.1, 0.5, 0.9], higher_is_better=True)
    0.5
    >>> leaderboard_position(0.7, [0.1, 0.5, 0.9], higher_is_better=True)
    0.6666666666666666
    >>> leaderboard_position(2.0, [1.0, 3.0], higher_is_better=False)
    0.5
    >>> leaderboard_position(0.0, [0.1, 0.5], higher_is_better=True), leaderboard_position(9, [0.1], True)
    (0.0, 1.0)
    """
    if not leaderboard:
        raise ValueError("leaderboard_position needs at least one reference score")
    sign = 1.0 if higher_is_better else -1.0
    ranked = sorted(sign * s for s in leaderboard)
    x, n = sign * score, len(ranked)
    distinct = sorted(set(ranked))
    if x < distinct[0]:
        return 0.0
    if x > distinct[-1]:
        return 1.0

    def share(v: float) -> float:  # share beaten at exactly v: strictly worse + half of the ties
        lo, hi = bisect.bisect_left(ranked, v), bisect.bisect_right(ranked, v)
        return (lo + 0.5 * (hi - lo)) / n

    j = bisect.bisect_left(distinct, x)
    if distinct[j] == x:
        return share(x)
    a, b = distinct[j - 1], distinct[j]
    return share(a) + (share(b) - share(a)) * (x - a) / (b - a)
