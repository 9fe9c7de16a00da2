"""`rollout_batch`: finished trajectories as the :class:`~wmrl.types.RolloutBatch` the RL hooks see, for both domains.

The token fields are the domain's (an LLM rollout's right-padded tokens; ``[N, 0]`` for embodied episodes, which
have none); the reward fields are built here once: ``rewards`` (``NaN`` where missing), ``graded``, ``is_real``, and
``wm_rewards``, the world model's raw rewards of the rows it predicted (``NaN`` on real rows and on world-model rows
whose every turn the deterministic gate decided: those hold exact rewards, not predictions).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import torch

from wmrl.types import Basis, Outcome, RolloutBatch, Source, Trajectory, Turn


class TokenRows(NamedTuple):
    """The token fields of a batch, ``[N, L]`` each (``L`` = 0 for a domain without tokens)."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    response_mask: torch.Tensor
    old_logprobs: torch.Tensor

    @classmethod
    def empty(cls, n: int) -> TokenRows:
        """``[N, 0]`` fields: an embodied rollout has no tokens."""
        empty = torch.zeros((n, 0))
        return cls(empty.long(), empty.bool(), empty.bool(), empty.float())


def rollout_batch(trajectories: Sequence[Trajectory], groups: Sequence[int], tokens: TokenRows) -> RolloutBatch:
    """The batch of ``trajectories`` (row ``i`` in group ``groups[i]``) with the domain's ``tokens``."""
    n = len(trajectories)
    rewards = torch.tensor([math.nan if t.reward is None else t.reward for t in trajectories], dtype=torch.float32)
    is_real = torch.tensor([t.source is Source.REAL for t in trajectories], dtype=torch.bool)
    predicted = torch.tensor([any(turn.outcome.basis is not Basis.EXACT for turn in t.turns) for t in trajectories],
                             dtype=torch.bool)
    return RolloutBatch(
        trajectories=tuple(trajectories),
        group_ids=torch.tensor(list(groups), dtype=torch.long),
        input_ids=tokens.input_ids,
        attention_mask=tokens.attention_mask,
        response_mask=tokens.response_mask,
        old_logprobs=tokens.old_logprobs,
        rewards=rewards,
        graded=~torch.isnan(rewards),
        is_real=is_real,
        advantages=torch.zeros(n, dtype=torch.float32),
        used=torch.zeros(n, dtype=torch.bool),
        wm_rewards=torch.where(is_real | predicted.logical_not(), torch.full_like(rewards, math.nan), rewards),
        wm_calibrated=torch.full_like(rewards, math.nan),
    )


def batch_state(batch: RolloutBatch) -> dict:
    """A batch as it left its rollout (before any hook), as plain data and tensors: what a checkpoint holds of a
    rollout played ahead (loadable with ``torch.load(weights_only=True)``)."""
    return {
        "trajectories": [{"task_id": t.task_id, "group": t.group, "source": t.source.value,
                          "turns": [{"response": u.response, "code": u.code, "outcome": u.outcome.to_dict(),
                                     "response_tokens": u.response_tokens, "finish_reason": u.finish_reason}
                                    for u in t.turns]} for t in batch.trajectories],
        "groups": batch.group_ids.tolist(),
        "tokens": {field: getattr(batch, field).clone() for field in TokenRows._fields},
    }


def batch_from_state(state: dict) -> RolloutBatch:
    """The batch :func:`batch_state` describes, as :func:`rollout_batch` built it."""
    trajectories = [
        Trajectory(t["task_id"], int(t["group"]),
                   tuple(Turn(u["response"], u["code"], Outcome.from_dict(u["outcome"]), int(u["response_tokens"]),
                              u["finish_reason"]) for u in t["turns"]),
                   source=Source(t["source"]))
        for t in state["trajectories"]
    ]
    return rollout_batch(trajectories, state["groups"], TokenRows(**state["tokens"]))
