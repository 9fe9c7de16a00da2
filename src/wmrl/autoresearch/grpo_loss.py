"""The token-level GRPO loss of one micro-batch of `GRPOModule`'s update, its settings, its KL reference, and the
micro-batches themselves.

Rollouts stay on the CPU for the callbacks; each micro-batch goes to the policy's device, is cut to the window
the loss reads (from the first response token of any row: logits at ``p - 1`` predict the token at ``p``), and
runs the policy once (with ``share_prefix``, each prompt once: :func:`wmrl.models.kv.causal_lm_logits`). The KL
reference (:class:`Reference`) is the policy with its LoRA adapter disabled, or a frozen copy of a fully trained
policy; while the adapter still adds exact zeros (every ``lora_B`` at its zero initialisation: the first step of a
LoRA fit) the policy's own log-probs are the reference's, and its pass is not run. The loss itself is
:func:`wmrl.algorithms.grpo.grpo_loss`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from wmrl.algorithms.grpo import GRPOLossOutput, entropy_from_logits, grpo_loss, token_logprobs
from wmrl.models import precision
from wmrl.models.kv import causal_lm_logits, positions_run, prompt_micro_batches
from wmrl.types import RolloutBatch


@dataclass(frozen=True)
class LossSettings:
    """What the loss of a micro-batch reads from the module's settings (``model.init_args``).

    Attributes:
        temperature: the sampling temperature the log-probs are taken at (the behaviour policy's).
        clip_eps: the surrogate's clip range.
        kl_coef: the weight of the KL to the reference (0: no reference pass).
        entropy_coef: the weight of the entropy bonus (0: no entropy).
        aggregation: how token losses become the step's loss (``loss_aggregation``).
        max_tokens: the response tokens a rollout can hold (``max_new_tokens x max_turns``), for the fixed
            normaliser of ``seq-mean-token-sum-norm``.
        share_prefix: each prompt runs once per micro-batch.
    """

    temperature: float
    clip_eps: float
    kl_coef: float
    entropy_coef: float
    aggregation: str
    max_tokens: int
    share_prefix: bool

    @classmethod
    def of(cls, hparams: Any) -> LossSettings:
        """The settings of a :class:`~wmrl.autoresearch.module.GRPOModule`'s saved hyperparameters."""
        return cls(temperature=hparams.temperature, clip_eps=hparams.clip_eps, kl_coef=hparams.kl_coef,
                   entropy_coef=hparams.entropy_coef, aggregation=hparams.loss_aggregation,
                   max_tokens=hparams.max_new_tokens * hparams.max_turns, share_prefix=hparams.share_prefix)


class Reference:
    """The KL reference: the policy itself with its LoRA adapter disabled, or, for a fully trained policy, a frozen
    copy made at the start (held here, not as a submodule: it is in no checkpoint and no optimizer)."""

    def __init__(self, policy: Any, uses_lora: bool) -> None:
        self.policy = policy
        self.frozen = None
        if not uses_lora:
            from wmrl.models import frozen_copy

            self.frozen = frozen_copy(policy)

    def equals_policy(self) -> bool:
        """Whether the policy computes exactly what the reference does: a LoRA adapter whose every trainable
        parameter is a ``lora_A`` or a ``lora_B`` and every ``lora_B`` is still zero (PEFT's initialisation), so the
        adapter adds exact zeros to each layer's output. The update then takes the policy's log-probs, detached, as
        the reference's (the KL and its gradient are zero either way) instead of a second forward pass: a quarter of
        the first step's update. Anything else (a frozen copy, other trainable modules, an adapter that moved)
        answers ``False``."""
        if self.frozen is not None:
            return False
        for name, parameter in self.policy.named_parameters():
            if not parameter.requires_grad or "lora_A" in name:
                continue
            if "lora_B" not in name or bool(parameter.detach().any()):
                return False
        return True

    @torch.no_grad()
    def logprobs(self, ids: torch.Tensor, attention: torch.Tensor, window: slice, keep: int, settings: LossSettings,
                 autocast: torch.dtype | None = None) -> torch.Tensor:
        """The reference's log-probs of the window's tokens."""
        if self.frozen is None:
            from wmrl.models import reference_mode

            with reference_mode(self.policy) as reference, precision.autocast(reference, autocast), \
                    precision.float32_products(reference, autocast):
                logits = causal_lm_logits(reference, ids, attention, keep, share_prefix=settings.share_prefix)
        else:
            with precision.autocast(self.frozen, autocast), precision.float32_products(self.frozen, autocast):
                logits = causal_lm_logits(self.frozen, ids, attention, keep, share_prefix=settings.share_prefix)
        return token_logprobs(logits, ids[:, window], temperature=settings.temperature)


def micro_batches(batch: RolloutBatch, rows: list[int], size: int, share_prefix: bool) -> list[list[int]]:
    """The update's micro-batches of ``rows``: rows sharing a prompt together (``share_prefix``), else in order."""
    if share_prefix:  # each micro-batch runs its prompt once
        return prompt_micro_batches(batch.input_ids, batch.response_mask, rows, size)
    return [rows[start : start + size] for start in range(0, len(rows), size)]


def micro_batch_loss(policy: Any, reference: Reference | None, batch: RolloutBatch, rows: list[int],
                     mask: torch.Tensor, normaliser: float, settings: LossSettings, device: torch.device,
                     autocast: torch.dtype | None = None, reference_is_policy: bool = False,
                     ) -> tuple[GRPOLossOutput, int]:
    """The loss of ``rows`` (``mask``: the step's loss mask, ``normaliser``: the step's aggregation normaliser;
    ``reference``: ``None`` without a KL term) and the token positions its passes compute; the forward passes under
    ``autocast`` (:func:`wmrl.models.precision.autocast`; ``None``: the model's own dtype). ``reference_is_policy``
    (:meth:`Reference.equals_policy`): the policy's detached log-probs stand for the reference's."""
    ids = batch.input_ids[rows].to(device)
    attention = batch.attention_mask[rows].to(device)
    length = int(attention.sum(1).max())
    ids, attention = ids[:, :length], attention[:, :length]
    window_mask = mask[rows][:, :length].to(device)
    first = int(window_mask.float().argmax(1)[window_mask.any(1)].min())
    window = slice(first - 1, length)  # logits at p-1 predict the token at p
    keep = length - first + 1
    positions = positions_run(ids, attention, keep, settings.share_prefix)  # what this pass computes (the floor's)
    with precision.autocast(policy, autocast), precision.float32_products(policy, autocast):
        logits = causal_lm_logits(policy, ids, attention, keep, share_prefix=settings.share_prefix)
    logprobs = token_logprobs(logits, ids[:, window], temperature=settings.temperature)
    entropy = entropy_from_logits(logits, temperature=settings.temperature) if settings.entropy_coef > 0 else None
    use_reference = reference is not None and settings.kl_coef > 0
    ref = None
    if use_reference:
        ref = logprobs.detach() if reference_is_policy else reference.logprobs(ids, attention, window, keep, settings,
                                                                                autocast)
    out = grpo_loss(
        logprobs,
        batch.old_logprobs[rows][:, window].to(device),
        ref,
        batch.advantages[rows].to(device),
        window_mask[:, window],
        entropy,
        clip_eps=settings.clip_eps,
        kl_coef=settings.kl_coef,
        entropy_coef=settings.entropy_coef,
        mode=settings.aggregation,
        normaliser=normaliser,
        max_tokens=settings.max_tokens,
    )
    return out, positions
