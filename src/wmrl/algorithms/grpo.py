"""GRPO math (docs/concepts.md, GRPO advantages) as small pure functions: advantages, log-probs, losses.

Shapes: ``N`` trajectories (``groups x group_size``), ``L`` padded sequence length, ``V`` vocabulary.
Masks may be ``bool`` or 0/1 floats. Nothing here holds state or imports anything beyond torch.

How this differs from the papers it follows:

- Advantages use the *sample* standard deviation (Bessel's correction, ``n - 1``), as TRL's
  ``GRPOTrainer`` and verl's ``compute_grpo_outcome_advantage`` do (both call ``torch.std``, unbiased by
  default); the WMRL paper only writes ``(r - mean) / (std + 1e-4)``. With 8 rollouts per group the two
  estimators differ by a constant factor sqrt(8/7) that the learning rate absorbs.
- Ungraded rollouts (infrastructure failures: docs/concepts.md) are *excluded* from their group's
  statistics, never scored 0; groups with fewer than 2 graded rollouts are skipped.
- ``dr_grpo`` here only changes the loss aggregation (constant normaliser, Liu et al. 2025). The Dr. GRPO
  paper also drops the division by the group std; we keep it because the WMRL method specifies it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

AggregationMode = Literal["token_mean", "seq_mean_token_mean", "dr_grpo"]
AGGREGATION_MODES: tuple[str, ...] = ("token_mean", "seq_mean_token_mean", "dr_grpo")

# exp() of a log-ratio beyond +-20 (a factor of ~5e8) is numerically useless and overflows in half
# precision; clamping keeps one runaway token from turning the whole loss into inf/nan.
LOG_RATIO_CLAMP = 20.0


def _check_shape(name: str, tensor: Tensor, expected: tuple[int, ...], meaning: str) -> None:
    if tuple(tensor.shape) != expected:
        raise ValueError(f"{name} must have shape {meaning} = {list(expected)} (got {list(tensor.shape)})")


def _check_ndim(name: str, tensor: Tensor, ndim: int, meaning: str) -> None:
    if tensor.dim() != ndim:
        raise ValueError(f"{name} must have shape {meaning} ({ndim} dims) (got {list(tensor.shape)})")


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    # bf16/fp16 logits lose too much in a log-softmax over ~50k entries: compute in at least float32
    return torch.promote_types(dtype, torch.float32)


def group_advantages(
    rewards: Tensor, group_ids: Tensor, graded: Tensor, eps: float = 1e-4
) -> tuple[Tensor, Tensor]:
    """Group-relative advantages ``(r - mean_g) / (std_g + eps)`` over the graded rollouts of each group.

    ``std_g`` is the sample standard deviation (``n - 1`` denominator, as in TRL and verl). Ungraded rows
    (missing rewards: infrastructure failures) take no part in their group's mean and std, get advantage 0
    and are marked unused; their reward may be NaN. A group with fewer than 2 graded rollouts is skipped
    (all its rows advantage 0, unused). A group whose graded rewards are all equal has no signal: its
    advantages are exactly 0, but its rows stay *used* (they still carry the KL and entropy terms and count
    in the loss normaliser, as in TRL).

    Args:
        rewards: ``[N]`` float rewards; entries of ungraded rows are ignored (may be NaN).
        group_ids: ``[N]`` integer group id of each row (any values; rows sharing an id form a group).
        graded: ``[N]`` bool (or 0/1), True where the reward exists.
        eps: added to the std; ``0`` is allowed (zero-variance groups still give 0, never NaN).

    Returns:
        ``(advantages [N], used_mask [N] bool)``; advantages have the rewards' float dtype.

    Raises:
        ValueError: on shape mismatches, a negative ``eps`` or a non-finite graded reward.

    >>> nan = float("nan")
    >>> rewards = torch.tensor([1.0, 0.0, 0.5, nan, 0.2, 0.2])
    >>> groups = torch.tensor([0, 0, 1, 1, 2, 2])
    >>> graded = torch.tensor([True, True, True, False, True, True])
    >>> advantages, used = group_advantages(rewards, groups, graded)
    >>> advantages
    tensor([ 0.7070, -0.7070,  0.0000,  0.0000,  0.0000,  0.0000])
    >>> used
    tensor([ True,  True, False, False,  True,  True])
    """
    _check_ndim("rewards", rewards, 1, "[N]")
    n = rewards.shape[0]
    _check_shape("group_ids", group_ids, (n,), "[N]")
    _check_shape("graded", graded, (n,), "[N]")
    if group_ids.is_floating_point() or group_ids.is_complex():
        raise ValueError(f"group_ids must be an integer tensor (got {group_ids.dtype})")
    if eps < 0:
        raise ValueError(f"eps must be >= 0 (got {eps})")
    graded = graded.bool()
    out_dtype = rewards.dtype if rewards.is_floating_point() else torch.float32
    if n == 0:
        return rewards.new_zeros(0, dtype=out_dtype), graded.clone()
    # float64 so that near-equal rewards do not produce rounding-noise advantages
    values = rewards.detach().to(torch.float64)
    if not torch.isfinite(values[graded]).all():
        raise ValueError("rewards of graded rows must be finite; mark missing rewards with graded=False")
    values = torch.where(graded, values, torch.zeros_like(values))  # NaNs of ungraded rows never propagate

    _, group_index = torch.unique(group_ids, return_inverse=True)
    num_groups = int(group_index.max()) + 1
    weight = graded.to(torch.float64)
    zeros = values.new_zeros(num_groups)
    count = zeros.index_add(0, group_index, weight)
    mean = zeros.index_add(0, group_index, values) / count.clamp(min=1)
    deviation = torch.where(graded, values - mean[group_index], torch.zeros_like(values))
    var = zeros.index_add(0, group_index, deviation**2) / (count - 1).clamp(min=1)
    std = var.sqrt()
    # all-equal groups: detected exactly (max == min) rather than through a rounding-noise std
    inf = torch.full_like(values, torch.inf)
    only_graded_max, only_graded_min = torch.where(graded, values, -inf), torch.where(graded, values, inf)
    group_max = zeros.scatter_reduce(0, group_index, only_graded_max, "amax", include_self=False)
    group_min = zeros.scatter_reduce(0, group_index, only_graded_min, "amin", include_self=False)

    used = graded & (count >= 2)[group_index]
    informative = used & (group_max > group_min)[group_index]
    safe_std = torch.where(informative, std[group_index] + eps, torch.ones_like(values))
    advantages = torch.where(informative, deviation / safe_std, torch.zeros_like(values))
    return advantages.to(out_dtype), used


def _gather_next_token(logits: Tensor, input_ids: Tensor) -> tuple[Tensor, Tensor]:
    _check_ndim("logits", logits, 3, "[N, L, V]")
    n, length, _ = logits.shape
    _check_shape("input_ids", input_ids, (n, length), "[N, L]")
    if input_ids.is_floating_point():
        raise ValueError(f"input_ids must be an integer tensor (got {input_ids.dtype})")
    # target of flattened position (i, t) is token t + 1; the last position of each row predicts nothing
    # (dummy target 0, dropped below). Flattening the contiguous logits is free, slicing [:, :-1] is a copy.
    targets = torch.cat([input_ids[:, 1:], input_ids.new_zeros(n, 1)], dim=1).reshape(-1)
    return logits.reshape(n * length, logits.shape[-1]), targets


def _align(per_position: Tensor, n: int, length: int) -> Tensor:
    """``[N * L]`` values of "position t predicts t + 1" -> ``[N, L]`` aligned on the predicted token."""
    if length == 0:
        return per_position.view(n, 0)
    shifted = per_position.view(n, length)[:, :-1]
    return torch.cat([shifted.new_zeros(n, 1), shifted], dim=1)


def _chunks(rows: int, chunk_size: int | None) -> list[slice]:
    if chunk_size is not None and chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1 or None (got {chunk_size})")
    step = rows if chunk_size is None else chunk_size
    return [slice(start, start + step) for start in range(0, rows, max(step, 1))]


def _scaled_chunks(flat_logits: Tensor, temperature: float, chunk_size: int | None):
    """Yield ``(rows, logits[rows] / temperature)`` in the compute dtype, a chunk of positions at a time."""
    dtype = _compute_dtype(flat_logits.dtype)
    for rows in _chunks(flat_logits.shape[0], chunk_size):
        scaled = flat_logits[rows].to(dtype)
        yield rows, scaled if temperature == 1.0 else scaled / temperature


def _concat(pieces: list[Tensor], flat_logits: Tensor) -> Tensor:
    return torch.cat(pieces) if pieces else flat_logits.new_zeros(0, dtype=_compute_dtype(flat_logits.dtype))


def _check_temperature(temperature: float) -> None:
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0 (got {temperature})")


def token_logprobs(
    logits: Tensor, input_ids: Tensor, temperature: float = 1.0, chunk_size: int | None = None
) -> Tensor:
    """Log-probability of each token given the tokens before it, from causal-LM logits.

    ``logits[:, t]`` is the model's prediction for ``input_ids[:, t + 1]``; the result is aligned on the
    predicted token: ``out[:, t] = log p(input_ids[:, t] | input_ids[:, :t])``, and ``out[:, 0] = 0``.
    Computed as ``logit[target] - logsumexp(logits / temperature)`` (equal to log_softmax-then-gather
    without materialising the log-softmax), in at least float32.

    Memory: with the 49152-token vocabulary, ``N * L * V`` floats are large; ``chunk_size`` processes that
    many token positions (rows of the flattened ``[N * L, V]`` logits) at a time, which bounds the extra
    memory of no-grad passes (old and reference log-probs). Under autograd each chunk still keeps what
    its backward needs.

    Args:
        logits: ``[N, L, V]`` raw logits (any float dtype).
        input_ids: ``[N, L]`` token ids.
        temperature: sampling temperature the logits are divided by (1.0 in training, the paper's).
        chunk_size: token positions per chunk; ``None`` processes everything at once.

    Returns:
        ``[N, L]`` log-probs (float32, or float64 for float64 logits).

    >>> logits = torch.zeros(1, 3, 4)  # uniform over 4 tokens
    >>> token_logprobs(logits, torch.tensor([[0, 1, 2]]))
    tensor([[ 0.0000, -1.3863, -1.3863]])
    >>> logits = torch.randn(2, 5, 7)
    >>> ids = torch.randint(0, 7, (2, 5))
    >>> torch.allclose(token_logprobs(logits, ids, chunk_size=3), token_logprobs(logits, ids))
    True
    """
    _check_temperature(temperature)
    flat_logits, targets = _gather_next_token(logits, input_ids)
    n, length = input_ids.shape
    pieces = [
        scaled.gather(-1, targets[rows].unsqueeze(-1)).squeeze(-1) - torch.logsumexp(scaled, dim=-1)
        for rows, scaled in _scaled_chunks(flat_logits, temperature, chunk_size)
    ]
    return _align(_concat(pieces, flat_logits), n, length)


def entropy_from_logits(logits: Tensor, temperature: float = 1.0, chunk_size: int | None = None) -> Tensor:
    """Entropy of the next-token distribution, aligned like :func:`token_logprobs`.

    ``out[:, t]`` is the entropy of the distribution (``softmax(logits[:, t - 1] / temperature)``) that
    predicted token ``t``; ``out[:, 0] = 0``. Differentiable (the entropy bonus trains through it).

    Args:
        logits: ``[N, L, V]`` raw logits.
        temperature: temperature the logits are divided by.
        chunk_size: token positions per chunk, as in :func:`token_logprobs`.

    Returns:
        ``[N, L]`` entropies in nats.

    >>> entropy_from_logits(torch.zeros(1, 3, 4))  # uniform over 4 tokens: log 4
    tensor([[0.0000, 1.3863, 1.3863]])
    """
    _check_temperature(temperature)
    _check_ndim("logits", logits, 3, "[N, L, V]")
    n, length, vocab = logits.shape
    flat_logits = logits.reshape(n * length, vocab)
    # H = logsumexp(x) - sum softmax(x) * x
    pieces = [
        torch.logsumexp(scaled, dim=-1) - (torch.softmax(scaled, dim=-1) * scaled).sum(-1)
        for _, scaled in _scaled_chunks(flat_logits, temperature, chunk_size)
    ]
    return _align(_concat(pieces, flat_logits), n, length)


def kl_k3(logprobs: Tensor, ref_logprobs: Tensor) -> Tensor:
    """Per-token k3 estimator of KL(policy || reference): ``exp(d) - d - 1`` with ``d = ref - logprobs``.

    Unbiased for the KL when tokens are sampled from the policy, and >= 0 elementwise (Schulman,
    "Approximating KL divergence"); the GRPO paper's KL loss. ``d`` is clamped to ``[-20, 20]`` so a token
    the reference finds impossible cannot overflow ``exp``; ``ref_logprobs`` is treated as a constant
    (detached).

    Args:
        logprobs: policy log-probs, any shape (usually ``[N, L]``).
        ref_logprobs: reference log-probs, same shape.

    Returns:
        Elementwise k3, same shape.

    >>> kl_k3(torch.tensor([-1.0, -2.0]), torch.tensor([-1.0, -1.0]))
    tensor([0.0000, 0.7183])
    """
    if logprobs.shape != ref_logprobs.shape:
        raise ValueError(
            f"ref_logprobs must have the shape of logprobs = {list(logprobs.shape)} "
            f"(got {list(ref_logprobs.shape)})"
        )
    log_ratio = (ref_logprobs.detach() - logprobs).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    return torch.expm1(log_ratio) - log_ratio


def clipped_surrogate(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    clip_eps: float = 0.2,
    clip_eps_high: float | None = None,
) -> tuple[Tensor, Tensor]:
    """Token-level PPO clipped surrogate as a loss: ``max(-A * r, -A * clip(r, 1 - eps, 1 + eps_high))``.

    ``ratio = exp(logprobs - old_logprobs)`` (log-ratio clamped to ``[-20, 20]``; ``old_logprobs`` is
    detached). The sequence advantage is broadcast over its tokens. A token is *clipped* when the clipped
    branch is active, i.e. its gradient is zero: ``ratio > 1 + eps_high`` with ``A > 0`` or
    ``ratio < 1 - eps`` with ``A < 0``.

    Args:
        logprobs: ``[N, L]`` current policy log-probs (with grad).
        old_logprobs: ``[N, L]`` log-probs of the policy that sampled the tokens.
        advantages: ``[N]`` per-sequence advantages (or ``[N, L]`` per-token).
        clip_eps: lower clip range (and upper, unless ``clip_eps_high`` is given).
        clip_eps_high: upper clip range ("clip-higher", DAPO); defaults to ``clip_eps``.

    Returns:
        ``(loss [N, L], clipped [N, L])``: per-token loss and the 0/1 float clip indicator (for metrics).

    >>> logprobs = torch.log(torch.tensor([[1.0, 1.5, 0.5]]))  # ratios 1.0, 1.5, 0.5 vs old = 0
    >>> loss, clipped = clipped_surrogate(logprobs, torch.zeros(1, 3), torch.tensor([1.0]))
    >>> loss, clipped
    (tensor([[-1.0000, -1.2000, -0.5000]]), tensor([[0., 1., 0.]]))
    """
    _check_ndim("logprobs", logprobs, 2, "[N, L]")
    _check_shape("old_logprobs", old_logprobs, tuple(logprobs.shape), "[N, L]")
    n = logprobs.shape[0]
    if advantages.dim() == 1:
        _check_shape("advantages", advantages, (n,), "[N]")
        advantages = advantages.unsqueeze(-1)
    else:
        _check_shape("advantages", advantages, tuple(logprobs.shape), "[N] or [N, L]")
    if clip_eps_high is None:
        clip_eps_high = clip_eps
    if not (0 <= clip_eps < 1 and clip_eps_high >= 0):
        raise ValueError(f"need 0 <= clip_eps < 1 and clip_eps_high >= 0 (got {clip_eps}, {clip_eps_high})")
    advantages = advantages.detach().to(logprobs.dtype)
    log_ratio = (logprobs - old_logprobs.detach()).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    ratio = torch.exp(log_ratio)
    unclipped = -advantages * ratio
    clipped = -advantages * ratio.clamp(1.0 - clip_eps, 1.0 + clip_eps_high)
    loss = torch.maximum(unclipped, clipped)
    clipped_high = (ratio > 1.0 + clip_eps_high) & (advantages > 0)
    clipped_low = (ratio < 1.0 - clip_eps) & (advantages < 0)
    is_clipped = clipped_high | clipped_low
    return loss, is_clipped.to(logprobs.dtype).detach()


def aggregation_normaliser(
    response_mask: Tensor, mode: AggregationMode, max_tokens: int | None = None
) -> float:
    """The denominator :func:`aggregate` uses for ``mode`` on this mask.

    Compute it once on the *whole step's* response mask and pass it as ``normaliser`` to every
    micro-batch's :func:`aggregate` call, so that the summed micro-batch gradients equal the full-batch
    gradient exactly.

    Returns:
        ``token_mean``: number of response tokens; ``seq_mean_token_mean``: number of sequences with at
        least one response token; ``dr_grpo``: ``N * max_tokens``.

    >>> mask = torch.tensor([[1, 1, 0], [0, 0, 0]])
    >>> modes = ("token_mean", "seq_mean_token_mean", "dr_grpo")
    >>> [aggregation_normaliser(mask, mode, max_tokens=3) for mode in modes]
    [2.0, 1.0, 6.0]
    """
    _check_ndim("response_mask", response_mask, 2, "[N, L]")
    if mode == "token_mean":
        return float(response_mask.float().sum())
    if mode == "seq_mean_token_mean":
        return float((response_mask.float().sum(-1) > 0).sum())
    if mode == "dr_grpo":
        if max_tokens is None or max_tokens < 1:
            raise ValueError(
                f"mode='dr_grpo' needs max_tokens >= 1, the generation budget per sequence (got {max_tokens})"
            )
        return float(response_mask.shape[0] * max_tokens)
    raise ValueError(f"mode must be one of {AGGREGATION_MODES} (got {mode!r})")


def aggregate(
    loss_per_token: Tensor,
    mask: Tensor,
    mode: AggregationMode = "token_mean",
    max_tokens: int | None = None,
    normaliser: float | None = None,
) -> Tensor:
    """Reduce a per-token loss to a scalar over the masked tokens.

    Modes (they weigh tokens differently, which changes the gradient, not just its scale):

    - ``token_mean``: ``sum(loss * mask) / sum(mask)``; every token in the batch weighs the same, so long
      sequences weigh more (DAPO's token-level loss).
    - ``seq_mean_token_mean``: mean over sequences of each sequence's token mean (the original GRPO);
      every sequence weighs the same, so a token of a short answer weighs more than one of a long answer.
      Sequences without tokens are excluded.
    - ``dr_grpo``: ``sum(loss * mask) / (N * max_tokens)``, a constant normaliser independent of the
      lengths (Dr. GRPO, Liu et al. 2025), removing the length bias of the other two.

    Gradient accumulation: the default denominators are per call, so averaging micro-batch losses is
    *not* the full-batch loss. Pass ``normaliser`` = the whole step's denominator (see
    :func:`aggregation_normaliser`) to every micro-batch; the sum of their losses (and gradients) then
    equals the full batch's exactly. Under DDP, which averages gradients over ranks, pass the global
    denominator divided by the world size. With ``normaliser`` given, ``max_tokens`` is not needed.

    Args:
        loss_per_token: ``[N, L]``.
        mask: ``[N, L]`` bool or 0/1, True on the tokens that count (response tokens).
        mode: one of ``token_mean`` (default), ``seq_mean_token_mean``, ``dr_grpo``.
        max_tokens: generation budget per sequence, required for ``dr_grpo`` without ``normaliser``.
        normaliser: the denominator to use instead of this batch's own (must be > 0).

    Returns:
        A scalar tensor (0 when there are no tokens).

    >>> loss = torch.tensor([[1.0, 3.0, 9.0], [4.0, 0.0, 0.0]])
    >>> mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    >>> aggregate(loss, mask, "token_mean"), aggregate(loss, mask, "seq_mean_token_mean")
    (tensor(2.6667), tensor(3.))
    >>> aggregate(loss, mask, "dr_grpo", max_tokens=4)
    tensor(1.)
    >>> # micro-batches with the global normaliser (3 tokens) sum to the full batch's token_mean
    >>> aggregate(loss[:1], mask[:1], normaliser=3) + aggregate(loss[1:], mask[1:], normaliser=3)
    tensor(2.6667)
    """
    _check_ndim("loss_per_token", loss_per_token, 2, "[N, L]")
    _check_shape("mask", mask, tuple(loss_per_token.shape), "[N, L]")
    if mode not in AGGREGATION_MODES:
        raise ValueError(f"mode must be one of {AGGREGATION_MODES} (got {mode!r})")
    if normaliser is not None and not normaliser > 0:
        raise ValueError(f"normaliser must be > 0 (got {normaliser})")
    weights = mask.to(loss_per_token.dtype)
    masked = loss_per_token * weights
    if mode == "seq_mean_token_mean":
        tokens = weights.sum(-1)
        total = (masked.sum(-1) / tokens.clamp(min=1)).sum()
    else:
        total = masked.sum()
    if normaliser is None:
        normaliser = aggregation_normaliser(mask, mode, max_tokens)
    if normaliser == 0:  # no tokens at all: total is 0 too; keep the graph and avoid 0 / 0
        normaliser = 1.0
    return total / normaliser


@dataclass(frozen=True)
class GRPOLossOutput:
    """What :func:`grpo_loss` returns; every field is a scalar tensor.

    Attributes:
        loss: the total loss to backpropagate (with grad).
        pg_loss: aggregated clipped-surrogate loss (detached).
        kl: aggregated k3 KL to the reference (detached; NaN when no reference was given).
        entropy: aggregated entropy (detached; NaN when no entropy was given).
        clip_fraction: aggregated share of clipped tokens (detached).
        ratio: aggregated importance ratio ``exp(logprobs - old_logprobs)`` (detached): 1 for rollouts of the
            weights being trained, its distance from 1 what a stale rollout (asynchronous steps) is corrected for.

    All detached fields use the same aggregation and normaliser as the loss, so with a global normaliser
    the micro-batch values of a step sum to the step's value.
    """

    loss: Tensor
    pg_loss: Tensor
    kl: Tensor
    entropy: Tensor
    clip_fraction: Tensor
    ratio: Tensor


def grpo_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    ref_logprobs: Tensor | None,
    advantages: Tensor,
    response_mask: Tensor,
    entropy: Tensor | None,
    clip_eps: float = 0.2,
    kl_coef: float = 0.04,
    entropy_coef: float = 0.002,
    mode: AggregationMode = "token_mean",
    normaliser: float | None = None,
    max_tokens: int | None = None,
    clip_eps_high: float | None = None,
) -> GRPOLossOutput:
    """GRPO loss: ``aggregate(pg) + kl_coef * aggregate(k3 KL) - entropy_coef * aggregate(entropy)``.

    Paper constants are the defaults (clip 0.2, KL 0.04 with the k3 estimator, entropy bonus 0.002). The
    KL is a loss term (GRPO), not a reward penalty. Leaving out ``ref_logprobs`` or ``entropy`` requires
    its coefficient to be 0, so a term is never dropped silently.

    Args:
        logprobs: ``[N, L]`` current policy log-probs (with grad).
        old_logprobs: ``[N, L]`` log-probs at sampling time (detached).
        ref_logprobs: ``[N, L]`` frozen reference log-probs, or None with ``kl_coef=0``.
        advantages: ``[N]`` (or ``[N, L]``) advantages.
        response_mask: ``[N, L]`` True on policy-generated tokens (prompt and observations masked out).
        entropy: ``[N, L]`` per-token entropy (:func:`entropy_from_logits`), or None with ``entropy_coef=0``.
        clip_eps: PPO clip range.
        kl_coef: weight of the KL loss.
        entropy_coef: weight of the entropy bonus.
        mode: loss aggregation, see :func:`aggregate`.
        normaliser: global denominator for gradient accumulation, see :func:`aggregate`.
        max_tokens: generation budget per sequence, for ``dr_grpo``.
        clip_eps_high: optional upper clip range (clip-higher).

    Returns:
        :class:`GRPOLossOutput`.

    >>> logprobs = torch.zeros(2, 3, requires_grad=True)
    >>> mask = torch.tensor([[0, 1, 1], [0, 1, 0]])
    >>> out = grpo_loss(logprobs, torch.zeros(2, 3), torch.zeros(2, 3), torch.tensor([1.0, -1.0]), mask,
    ...                 entropy=torch.ones(2, 3))
    >>> out.loss, out.pg_loss, out.kl, out.entropy, out.clip_fraction
    (tensor(-0.3353, grad_fn=<SubBackward0>), tensor(-0.3333), tensor(0.), tensor(1.), tensor(0.))
    """
    _check_ndim("logprobs", logprobs, 2, "[N, L]")
    _check_shape("response_mask", response_mask, tuple(logprobs.shape), "[N, L]")
    if ref_logprobs is None and kl_coef != 0:
        raise ValueError(f"kl_coef={kl_coef} needs ref_logprobs; pass kl_coef=0 to train without a KL term")
    if entropy is None and entropy_coef != 0:
        raise ValueError(f"entropy_coef={entropy_coef} needs entropy; pass entropy_coef=0 to drop the bonus")

    def reduce(per_token: Tensor) -> Tensor:
        return aggregate(per_token, response_mask, mode, max_tokens=max_tokens, normaliser=normaliser)

    pg_per_token, clipped = clipped_surrogate(logprobs, old_logprobs, advantages, clip_eps, clip_eps_high)
    pg_loss = reduce(pg_per_token)
    loss = pg_loss
    nan = logprobs.new_tensor(float("nan"))
    kl = nan
    if ref_logprobs is not None:
        _check_shape("ref_logprobs", ref_logprobs, tuple(logprobs.shape), "[N, L]")
        kl = reduce(kl_k3(logprobs, ref_logprobs))
        loss = loss + kl_coef * kl
    mean_entropy = nan
    if entropy is not None:
        _check_shape("entropy", entropy, tuple(logprobs.shape), "[N, L]")
        mean_entropy = reduce(entropy)
        loss = loss - entropy_coef * mean_entropy
    return GRPOLossOutput(
        loss=loss,
        pg_loss=pg_loss.detach(),
        kl=kl.detach(),
        entropy=mean_entropy.detach(),
        clip_fraction=reduce(clipped).detach(),
        ratio=reduce(torch.exp((logprobs - old_logprobs).detach().clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP))),
    )
