"""`gate`: the deterministic part of every AutoResearch world model's answer. A turn without a code block is
``malformed`` and a script that ``compile()`` refuses is ``syntax_err``, both 0.0, exactly as the real sandbox decides
them, with no model call; such outcomes have ``basis`` :attr:`~wmrl.types.Basis.EXACT`: they are neither calibrated
nor paired with real rewards."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from wmrl.autoresearch.environments.grader import check_script
from wmrl.types import Basis, Outcome, Source, StepRequest


def gate(requests: Sequence[StepRequest]) -> tuple[list[Outcome | None], list[int]]:
    """The exact outcome of each request the gate decides (no code block, ``compile()`` fails: 0.0), ``None`` for
    the others, and the indices of those others (what the world model must predict)."""
    outcomes: list[Outcome | None] = [None] * len(requests)
    todo = []
    for i, request in enumerate(requests):
        gated = check_script(request.code)
        if gated is not None:
            outcomes[i] = replace(gated, source=Source.WORLD_MODEL, basis=Basis.EXACT)
        else:
            todo.append(i)
    return outcomes, todo
