"""Policy-gradient losses of an action-chunk policy, pure: a Gaussian policy ``N(mean, std^2)`` per action dimension.

GRPO on a continuous policy with one update per rollout batch (the PPO ratio is 1, so clipping never binds) is
the advantage-weighted negative log-likelihood of the executed actions; the KL to the SFT reference, both policies
sharing the exploration ``std``, is the squared distance of their means over ``2 std^2``. Constants of the
log-density are dropped (they carry no gradient). Shapes: chunks and means ``[B, K, D]``, advantages ``[B]``.

>>> import torch
>>> chunk, mean = torch.zeros(2, 3, 2), torch.ones(2, 3, 2)
>>> chunk_nll(chunk, mean, std=1.0).tolist()
[0.5, 0.5]
>>> float(policy_gradient_loss(torch.tensor([1.0, -1.0]), chunk_nll(chunk, mean, std=1.0)))
0.0
>>> float(gaussian_kl(mean, torch.zeros(2, 3, 2), std=0.5))
2.0
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor


def chunk_nll(chunk: Tensor, mean: Tensor, std: float) -> Tensor:
    """``[B]``: the negative log-likelihood per action dimension of each executed ``chunk`` under ``N(mean, std^2)``."""
    return ((chunk - mean) ** 2).mean(dim=(1, 2)) / (2 * std**2)


def policy_gradient_loss(advantage: Tensor, nll: Tensor) -> Tensor:
    """The advantage-weighted per-sample loss, averaged: its gradient is GRPO's policy gradient (ratio 1)."""
    return (advantage * nll).mean()


def gaussian_kl(mean: Tensor, reference: Tensor, std: float) -> Tensor:
    """``KL(N(mean, std^2) || N(reference, std^2))`` per action dimension, averaged over the batch."""
    return ((mean - reference) ** 2).mean() / (2 * std**2)


def gaussian_rl_loss(mean_chunk: Callable[[dict], Tensor], obs: dict, chunk: Tensor, std: float,
                     reference: Callable[[dict], Tensor] | None) -> tuple[Tensor, Tensor]:
    """A Gaussian chunk policy's GRPO losses from one forward pass of its ``mean_chunk``: the per-sample NLL ``[B]``
    of the executed prefix ``chunk`` ``[B, K, D]`` and the KL to the ``reference`` policy's mean (no gradient; 0
    without a reference)."""
    mean = mean_chunk(obs)[:, : chunk.shape[1]]  # executed actions only
    nll = chunk_nll(chunk, mean, std)
    if reference is None:
        return nll, torch.zeros((), device=chunk.device)
    with torch.no_grad():
        target = reference(obs)[:, : chunk.shape[1]]
    return nll, gaussian_kl(mean, target, std)
