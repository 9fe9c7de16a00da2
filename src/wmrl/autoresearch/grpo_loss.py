"""The token-level GRPO loss of one micro-batch of `GRPOModule`'s update, and the micro-batches themselves.

Rollouts stay on the CPU for the callbacks; each micro-batch goes to the policy's device, is cut to the window
the loss reads (from the first response token of any row: logits at ``p - 1`` predict the token at ``p``), and
runs the policy once (with ``share_prefix``, each prompt once: :func:`wmrl.models.kv.causal_lm_logits`). The KL
reference is the policy with its LoRA adapter disabled, or the frozen copy of a fully trained policy.
"""

from __future__ import annotations

from typing import Any

import torch

from wmrl.algorithms.grpo import GRPOLossOutput, entropy_from_logits, grpo_loss, token_logprobs
from wmrl.models import precision
from wmrl.models.kv import causal_lm_logits, positions_run, prompt_micro_batches
from wmrl.types import RolloutBatch


def micro_batches(batch: RolloutBatch, rows: list[int], size: int, share_prefix: bool) -> list[list[int]]:
    """The update's micro-batches of ``rows``: rows sharing a prompt together (``share_prefix``), else in order."""
    if share_prefix:  # each micro-batch runs its prompt once
        return prompt_micro_batches(batch.input_ids, batch.response_mask, rows, size)
    return [rows[start : start + size] for start in range(0, len(rows), size)]


def micro_batch_loss(policy: Any, frozen: list | None, batch: RolloutBatch, rows: list[int], mask: torch.Tensor,
                     normaliser: float, max_tokens: int, hp: Any, device: torch.device,
                     autocast: torch.dtype | None = None) -> tuple[GRPOLossOutput, int]:
    """The loss of ``rows`` (``hp``: the module's hyperparameters) and the token positions its passes compute; the
    forward passes under ``autocast`` (:func:`wmrl.models.precision.autocast`; ``None``: the model's own dtype)."""
    ids = batch.input_ids[rows].to(device)
    attention = batch.attention_mask[rows].to(device)
    length = int(attention.sum(1).max())
    ids, attention = ids[:, :length], attention[:, :length]
    window_mask = mask[rows][:, :length].to(device)
    first = int(window_mask.float().argmax(1)[window_mask.any(1)].min())
    window = slice(first - 1, length)  # logits at p-1 predict the token at p
    keep = length - first + 1
    positions = positions_run(ids, attention, keep, hp.share_prefix)  # what this pass computes (the floor's)
    with precision.autocast(policy, autocast):
        logits = causal_lm_logits(policy, ids, attention, keep, share_prefix=hp.share_prefix)
    logprobs = token_logprobs(logits, ids[:, window], temperature=hp.temperature)
    entropy = entropy_from_logits(logits, temperature=hp.temperature) if hp.entropy_coef > 0 else None
    ref = reference_logprobs(policy, frozen, ids, attention, window, keep, hp, autocast) if hp.kl_coef > 0 else None
    out = grpo_loss(
        logprobs,
        batch.old_logprobs[rows][:, window].to(device),
        ref,
        batch.advantages[rows].to(device),
        window_mask[:, window],
        entropy,
        clip_eps=hp.clip_eps,
        kl_coef=hp.kl_coef,
        entropy_coef=hp.entropy_coef,
        mode=hp.loss_aggregation,
        normaliser=normaliser,
        max_tokens=max_tokens,
    )
    return out, positions


@torch.no_grad()
def reference_logprobs(policy: Any, frozen: list | None, ids: torch.Tensor, attention: torch.Tensor, window: slice,
                       keep: int, hp: Any, autocast: torch.dtype | None = None) -> torch.Tensor:
    """The reference's log-probs of the window's tokens: the LoRA policy with its adapter off, else ``frozen[0]``."""
    if frozen is None:
        from wmrl.models import reference_mode

        with reference_mode(policy) as reference, precision.autocast(reference, autocast):
            logits = causal_lm_logits(reference, ids, attention, keep, share_prefix=hp.share_prefix)
    else:
        with precision.autocast(frozen[0], autocast):
            logits = causal_lm_logits(frozen[0], ids, attention, keep, share_prefix=hp.share_prefix)
    return token_logprobs(logits, ids[:, window], temperature=hp.temperature)
