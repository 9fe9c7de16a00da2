"""GRPO math: group advantages, token log-probs, KL, clipped surrogate, loss aggregation (CPU, fast)."""

from __future__ import annotations

import pytest
import torch

from wmrl.algorithms.grpo import (
    aggregate,
    aggregation_normaliser,
    clipped_surrogate,
    entropy_from_logits,
    group_advantages,
    grpo_loss,
    kl_k3,
    token_logprobs,
)

MODES = ("token_mean", "seq_mean_token_mean", "dr_grpo")
NAN = float("nan")


# ---------------------------------------------------------------- advantages


def test_advantages_standardised_within_each_group():
    torch.manual_seed(0)
    rewards = torch.rand(24, dtype=torch.float64)
    rewards[8:16] = rewards[8:16] * 10 + 3  # a group on a different scale gets the same standardisation
    groups = torch.arange(3).repeat_interleave(8)
    advantages, used = group_advantages(rewards, groups, torch.ones(24, dtype=torch.bool), eps=0.0)
    assert used.all()
    for g in range(3):
        a = advantages[groups == g]
        assert a.mean().abs() < 1e-12
        assert a.std() == pytest.approx(1.0, abs=1e-12)  # sample std (n - 1), as in TRL / verl


def test_group_ids_need_not_be_contiguous_or_sorted():
    rewards = torch.tensor([1.0, 5.0, 0.0, 7.0])
    groups = torch.tensor([42, 7, 42, 7])
    advantages, _ = group_advantages(rewards, groups, torch.ones(4, dtype=torch.bool))
    expected, _ = group_advantages(
        torch.tensor([1.0, 0.0, 5.0, 7.0]), torch.tensor([0, 0, 1, 1]), torch.ones(4, dtype=torch.bool)
    )
    torch.testing.assert_close(advantages, expected[[0, 2, 1, 3]])


def test_ungraded_rows_are_excluded_not_scored_zero():
    rewards = torch.tensor([0.2, 0.5, 0.9, NAN, 0.1, 0.4, NAN, 1.0])
    groups = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    graded = torch.isfinite(rewards)
    advantages, used = group_advantages(rewards, groups, graded)
    assert torch.isfinite(advantages).all()
    assert advantages[~graded].eq(0).all() and not used[~graded].any() and used[graded].all()
    # the same as computing on the graded subset alone
    all_graded = torch.ones(int(graded.sum()), dtype=torch.bool)
    subset, _ = group_advantages(rewards[graded], groups[graded], all_graded)
    torch.testing.assert_close(advantages[graded], subset)
    # and a NaN reward is not a zero reward
    as_zero, _ = group_advantages(torch.nan_to_num(rewards), groups, torch.ones(8, dtype=torch.bool))
    assert not torch.allclose(as_zero[graded], advantages[graded])


def test_ungraded_reward_value_is_irrelevant():
    groups = torch.tensor([0, 0, 0])
    graded = torch.tensor([True, True, False])
    a, _ = group_advantages(torch.tensor([0.1, 0.6, NAN]), groups, graded)
    b, _ = group_advantages(torch.tensor([0.1, 0.6, 123.0]), groups, graded)
    torch.testing.assert_close(a, b)


def test_degenerate_groups_are_zero():
    rewards = torch.tensor([0.7, NAN, NAN, 0.3, 0.3, 0.3, 0.2, 0.8])
    groups = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2])
    graded = torch.isfinite(rewards)
    for eps in (1e-4, 0.0):
        advantages, used = group_advantages(rewards, groups, graded, eps=eps)
        assert torch.isfinite(advantages).all()
        # group 0: one graded rollout -> skipped entirely
        assert advantages[:3].eq(0).all() and not used[:3].any()
        # group 1: all rewards equal -> no signal, exactly 0 (kept: still carries KL/entropy terms)
        assert advantages[3:6].eq(0).all() and used[3:6].all()
        assert advantages[6] < 0 < advantages[7]


def test_near_equal_rewards_do_not_amplify_rounding_noise():
    rewards = torch.full((8,), 0.1) + torch.tensor([0.0] * 7 + [1e-9])
    one_group, all_graded = torch.zeros(8, dtype=torch.long), torch.ones(8, dtype=torch.bool)
    advantages, _ = group_advantages(rewards, one_group, all_graded)
    assert advantages.abs().max() < 1e-3  # eps dominates a std of ~1e-10


@pytest.mark.parametrize("scale, shift", [(3.0, 0.5), (0.25, -2.0), (100.0, 7.0)])
def test_advantages_invariant_to_affine_reward_maps(scale, shift):
    torch.manual_seed(1)
    rewards = torch.rand(16, dtype=torch.float64)
    groups = torch.arange(2).repeat_interleave(8)
    graded = torch.ones(16, dtype=torch.bool)
    graded[3] = False
    mapped = rewards.clone()
    mapped[:8] = scale * rewards[:8] + shift  # only group 0 is mapped
    a, _ = group_advantages(rewards, groups, graded, eps=0.0)
    b, _ = group_advantages(mapped, groups, graded, eps=0.0)
    torch.testing.assert_close(a, b)


def test_advantage_errors_name_the_argument():
    ones = torch.ones(4, dtype=torch.bool)
    with pytest.raises(ValueError, match=r"group_ids must have shape \[N\] = \[4\] \(got \[3\]\)"):
        group_advantages(torch.zeros(4), torch.zeros(3, dtype=torch.long), ones)
    with pytest.raises(ValueError, match="graded rows must be finite"):
        group_advantages(torch.tensor([0.0, NAN, 1.0, 1.0]), torch.zeros(4, dtype=torch.long), ones)
    with pytest.raises(ValueError, match="group_ids must be an integer"):
        group_advantages(torch.zeros(4), torch.zeros(4), ones)


# ---------------------------------------------------------------- log-probs and entropy


def _naive_logprobs(logits, input_ids, temperature):
    n, length, _ = logits.shape
    out = torch.zeros(n, length, dtype=torch.float64)
    for i in range(n):
        for t in range(1, length):
            probs = torch.softmax(logits[i, t - 1].double() / temperature, dim=-1)
            out[i, t] = probs[input_ids[i, t]].log()
    return out


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_token_logprobs_match_a_naive_loop(temperature):
    torch.manual_seed(2)
    logits, ids = torch.randn(3, 6, 11), torch.randint(0, 11, (3, 6))
    got = token_logprobs(logits, ids, temperature=temperature)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.double(), _naive_logprobs(logits, ids, temperature), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("chunk_size", [1, 4, 7, 1000])
def test_chunked_equals_unchunked(chunk_size):
    torch.manual_seed(3)
    logits = torch.randn(3, 5, 9, requires_grad=True)
    ids = torch.randint(0, 9, (3, 5))
    chunked = token_logprobs(logits, ids, chunk_size=chunk_size)
    torch.testing.assert_close(chunked, token_logprobs(logits, ids))
    chunked_entropy = entropy_from_logits(logits, chunk_size=chunk_size)
    torch.testing.assert_close(chunked_entropy, entropy_from_logits(logits))
    (grad_chunked,) = torch.autograd.grad(token_logprobs(logits, ids, chunk_size=chunk_size).sum(), logits)
    (grad_full,) = torch.autograd.grad(token_logprobs(logits, ids).sum(), logits)
    torch.testing.assert_close(grad_chunked, grad_full)


def test_token_logprobs_half_precision_logits_are_computed_in_float32():
    torch.manual_seed(4)
    logits, ids = torch.randn(2, 4, 50), torch.randint(0, 50, (2, 4))
    got = token_logprobs(logits.bfloat16(), ids)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, token_logprobs(logits.bfloat16().float(), ids))


def test_entropy_matches_definition_and_alignment():
    torch.manual_seed(5)
    logits = torch.randn(2, 4, 6)
    got = entropy_from_logits(logits, temperature=0.5)
    probs = torch.softmax(logits / 0.5, dim=-1)
    expected = -(probs * probs.log()).sum(-1)
    torch.testing.assert_close(got[:, 1:], expected[:, :-1])
    assert got[:, 0].eq(0).all()


def test_logprob_shape_errors():
    with pytest.raises(ValueError, match=r"input_ids must have shape \[N, L\] = \[2, 3\] \(got \[2, 4\]\)"):
        token_logprobs(torch.zeros(2, 3, 5), torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="temperature must be > 0"):
        token_logprobs(torch.zeros(2, 3, 5), torch.zeros(2, 3, dtype=torch.long), temperature=0.0)


# ---------------------------------------------------------------- KL and clipped surrogate


def test_k3_is_nonnegative_and_zero_when_equal():
    torch.manual_seed(6)
    logprobs, ref = -torch.rand(100) * 5, -torch.rand(100) * 5
    assert kl_k3(logprobs, ref).min() >= 0
    assert kl_k3(logprobs, logprobs).eq(0).all()
    assert torch.isfinite(kl_k3(torch.tensor([0.0]), torch.tensor([-1e4]))).all()  # clamped, no overflow


def test_k3_estimates_kl_in_expectation():
    probs, ref_probs = torch.tensor([0.7, 0.2, 0.1]), torch.tensor([0.4, 0.4, 0.2])
    exact = (probs * (probs / ref_probs).log()).sum()
    expected_k3 = (probs * kl_k3(probs.log(), ref_probs.log())).sum()
    torch.testing.assert_close(expected_k3, exact)


def test_clipped_tokens_get_no_gradient():
    old = torch.zeros(2, 4)
    # ratios 1.5 (A>0: clipped), 0.5 (A>0: not clipped), 1.1 (inside), 0.5 / 1.5 for A<0
    logprobs = torch.log(torch.tensor([[1.5, 0.5, 1.1, 1.0], [0.5, 1.5, 0.9, 1.0]])).requires_grad_()
    advantages = torch.tensor([2.0, -1.0])
    loss, clipped = clipped_surrogate(logprobs, old, advantages, clip_eps=0.2)
    loss.sum().backward()
    torch.testing.assert_close(clipped, torch.tensor([[1.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]]))
    assert logprobs.grad[clipped.bool()].eq(0).all()
    assert logprobs.grad[~clipped.bool()].ne(0).all()


def test_clip_higher_widens_only_the_upper_range():
    logprobs = torch.log(torch.tensor([[1.25, 0.75]]))
    _, symmetric = clipped_surrogate(logprobs, torch.zeros(1, 2), torch.tensor([1.0]), clip_eps=0.2)
    _, higher = clipped_surrogate(logprobs, torch.zeros(1, 2), torch.tensor([1.0]), 0.2, clip_eps_high=0.28)
    assert symmetric.tolist() == [[1.0, 0.0]] and higher.tolist() == [[0.0, 0.0]]


@pytest.mark.parametrize("mode", MODES)
def test_on_policy_gradient_is_minus_advantage_over_normaliser(mode):
    torch.manual_seed(7)
    logprobs = (-torch.rand(4, 5)).requires_grad_()
    advantages = torch.randn(4)
    mask = torch.tensor([[0, 1, 1, 1, 0], [0, 1, 0, 0, 0], [0, 0, 0, 0, 0], [1, 1, 1, 1, 1]])
    out = grpo_loss(
        logprobs,
        logprobs.detach(),
        None,
        advantages,
        mask,
        None,
        kl_coef=0.0,
        entropy_coef=0.0,
        mode=mode,
        max_tokens=5,
    )
    out.loss.backward()
    if mode == "seq_mean_token_mean":
        per_row = mask.sum(-1).clamp(min=1) * (mask.sum(-1) > 0).sum()
        expected = -advantages[:, None] * mask / per_row[:, None]
    else:
        expected = -advantages[:, None] * mask / aggregation_normaliser(mask, mode, max_tokens=5)
    torch.testing.assert_close(logprobs.grad, expected.float())


# ---------------------------------------------------------------- aggregation and micro-batching


def _batch(seed=8, n=6, length=7):
    gen = torch.Generator().manual_seed(seed)
    logprobs = -torch.rand(n, length, generator=gen)
    old = logprobs + 0.3 * torch.randn(n, length, generator=gen)  # some tokens clip
    ref = logprobs + 0.2 * torch.randn(n, length, generator=gen)
    entropy_logits = torch.randn(n, length, 5, generator=gen)
    advantages = torch.randn(n, generator=gen)
    lengths = torch.tensor([7, 3, 0, 5, 1, 6])[:n]
    mask = torch.arange(length)[None, :] < lengths[:, None]
    return logprobs, old, ref, entropy_logits, advantages, mask


def _micro_batch_loss(logprobs, entropy_logits, rows, mode, normaliser, batch):
    _, old, ref, _, advantages, mask = batch
    entropy = entropy_from_logits(entropy_logits)[rows]
    out = grpo_loss(
        logprobs[rows],
        old[rows],
        ref[rows],
        advantages[rows],
        mask[rows],
        entropy,
        mode=mode,
        normaliser=normaliser,
        max_tokens=7,
    )
    return out


@pytest.mark.parametrize("mode", MODES)
def test_micro_batches_with_global_normaliser_match_the_full_batch(mode):
    batch = _batch()
    mask = batch[5]

    def gradients(splits):
        logprobs = batch[0].clone().requires_grad_()
        entropy_logits = batch[3].clone().requires_grad_()
        normaliser = aggregation_normaliser(mask, mode, max_tokens=7)
        total, metrics = 0.0, []
        for rows in splits:
            out = _micro_batch_loss(logprobs, entropy_logits, rows, mode, normaliser, batch)
            out.loss.backward()
            total = total + out.loss.detach()
            metrics.append(torch.stack([out.pg_loss, out.kl, out.entropy, out.clip_fraction]))
        return total, logprobs.grad, entropy_logits.grad, sum(metrics)

    full = gradients([slice(0, 6)])
    split = gradients([slice(0, 2), slice(2, 6)])
    for a, b in zip(full, split, strict=True):
        torch.testing.assert_close(a, b)
    assert full[1].abs().sum() > 0 and full[2].abs().sum() > 0


@pytest.mark.parametrize("mode", MODES)
def test_default_normaliser_equals_the_explicit_one(mode):
    loss, mask = torch.randn(4, 5), torch.rand(4, 5) > 0.4
    explicit = aggregate(loss, mask, mode, normaliser=aggregation_normaliser(mask, mode, max_tokens=5))
    torch.testing.assert_close(aggregate(loss, mask, mode, max_tokens=5), explicit)


def test_aggregation_modes_weigh_tokens_differently():
    loss = torch.tensor([[1.0, 1.0, 1.0, 1.0], [5.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 0, 0, 0]])
    assert aggregate(loss, mask, "token_mean").item() == pytest.approx(9 / 5)
    assert aggregate(loss, mask, "seq_mean_token_mean").item() == pytest.approx(3.0)
    assert aggregate(loss, mask, "dr_grpo", max_tokens=8).item() == pytest.approx(9 / 16)


def test_empty_mask_gives_zero_not_nan():
    loss = torch.randn(2, 3, requires_grad=True)
    for mode in MODES:
        value = aggregate(loss, torch.zeros(2, 3, dtype=torch.bool), mode, max_tokens=3)
        assert value.item() == 0.0


def test_aggregate_errors():
    loss, mask = torch.zeros(2, 3), torch.ones(2, 3)
    with pytest.raises(ValueError, match="dr_grpo' needs max_tokens"):
        aggregate(loss, mask, "dr_grpo")
    with pytest.raises(ValueError, match="mode must be one of"):
        aggregate(loss, mask, "sum")
    with pytest.raises(ValueError, match=r"mask must have shape \[N, L\] = \[2, 3\] \(got \[2, 4\]\)"):
        aggregate(loss, torch.ones(2, 4), "token_mean")
    with pytest.raises(ValueError, match="normaliser must be > 0"):
        aggregate(loss, mask, "token_mean", normaliser=0)


# ---------------------------------------------------------------- the full loss


def test_grpo_loss_combines_the_terms():
    logprobs, old, ref, entropy_logits, advantages, mask = _batch()
    entropy = entropy_from_logits(entropy_logits)
    out = grpo_loss(logprobs, old, ref, advantages, mask, entropy, kl_coef=0.04, entropy_coef=0.002)
    pg, _ = clipped_surrogate(logprobs, old, advantages)
    torch.testing.assert_close(out.pg_loss, aggregate(pg, mask))
    torch.testing.assert_close(out.kl, aggregate(kl_k3(logprobs, ref), mask))
    torch.testing.assert_close(out.loss, out.pg_loss + 0.04 * out.kl - 0.002 * aggregate(entropy, mask))
    assert 0 < out.clip_fraction < 1
    assert not any(t.requires_grad for t in (out.pg_loss, out.kl, out.entropy, out.clip_fraction))


def test_grpo_loss_refuses_to_drop_a_weighted_term():
    logprobs, old, _, _, advantages, mask = _batch()
    with pytest.raises(ValueError, match="kl_coef=0.04 needs ref_logprobs"):
        grpo_loss(logprobs, old, None, advantages, mask, None, entropy_coef=0.0)
    with pytest.raises(ValueError, match="entropy_coef=0.002 needs entropy"):
        grpo_loss(logprobs, old, None, advantages, mask, None, kl_coef=0.0)
    out = grpo_loss(logprobs, old, None, advantages, mask, None, kl_coef=0.0, entropy_coef=0.0)
    assert out.kl.isnan() and out.entropy.isnan()
