"""The method's invariants: Online Debiasing, Inverse-Variance Denoising, anchor routing (pure parts and callbacks)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch
from support.fakes import LoggingModule

from wmrl.algorithms.debias import CalibrationMap, bias_reduction, fit_calibration, rank_correlation
from wmrl.algorithms.denoise import InverseVarianceWeight, fused_variance, group_disagreement
from wmrl.algorithms.grpo import group_advantages
from wmrl.callbacks import AnchorRouting, InverseVarianceDenoising, OnlineDebiasing
from wmrl.types import Outcome, RolloutBatch, RolloutPlan, Source, Status, Trajectory, Turn


def distorted_pairs(n: int, seed: int = 0, noise: float = 0.05):
    """Real rewards on the ladder and a world model that over-predicts them through a concave distortion."""
    rng = np.random.default_rng(seed)
    real = rng.choice([0.0, 0.1, 0.2, 0.55, 0.7, 0.85, 1.0], size=n)
    wm = np.clip(np.sqrt(real) + rng.normal(0, noise, n), 0, 1)
    return wm, real


# -- Online Debiasing: the map ----------------------------------------------------------------------------
def test_the_map_never_reorders_a_group():
    wm, real = distorted_pairs(500, noise=0.2)
    calibration = fit_calibration(wm, real)
    rng = np.random.default_rng(1)
    for _ in range(200):
        group = rng.uniform(0, 1, 8)
        mapped = calibration(group)
        order = np.argsort(group)
        assert np.all(np.diff(mapped[order]) >= -1e-12)  # monotone: x_i < x_j => m(x_i) <= m(x_j)
    assert list(calibration.ys) == sorted(calibration.ys)


def test_the_map_interpolates_between_bin_means_and_is_flat_outside():
    calibration = fit_calibration([0.05, 0.05, 0.55, 0.95], [0.0, 0.2, 0.6, 0.9])
    assert calibration.xs == (0.05, 0.55, 0.95)
    assert calibration.ys == pytest.approx((0.1, 0.6, 0.9))
    assert calibration([0.0, 0.3, 1.0]) == pytest.approx([0.1, 0.35, 0.9])


def test_isotonic_fit_is_weighted_by_bin_counts():
    # bin 0.35 holds 9 pairs with mean 0.2, bin 0.45 holds 1 pair with mean 0.0: pooled, weighted by counts
    wm = [0.35] * 9 + [0.45]
    real = [0.2] * 9 + [0.0]
    calibration = fit_calibration(wm, real)
    assert calibration.ys == pytest.approx((0.18, 0.18))


def test_calibration_survives_group_standardisation_where_an_affine_map_would_not():
    wm, real = distorted_pairs(2000, noise=0.0)
    calibration = fit_calibration(wm, real)
    groups = torch.arange(8).repeat_interleave(8)
    graded = torch.ones(64, dtype=torch.bool)
    rng = np.random.default_rng(2)
    idx = rng.integers(0, len(wm), 64)
    true_adv, _ = group_advantages(torch.tensor(real[idx]), groups, graded)
    raw_adv, _ = group_advantages(torch.tensor(wm[idx]), groups, graded)
    affine_adv, _ = group_advantages(torch.tensor(0.3 * wm[idx] + 0.1), groups, graded)
    cal_adv, _ = group_advantages(torch.tensor(calibration(wm[idx])), groups, graded)
    assert torch.allclose(raw_adv, affine_adv, atol=1e-2)  # standardisation cancels an affine map (up to eps)
    raw_error = float(((raw_adv - true_adv) ** 2).mean())
    cal_error = float(((cal_adv - true_adv) ** 2).mean())
    assert cal_error < 0.2 * raw_error, (raw_error, cal_error)


def test_identity_before_min_pairs_then_refits_exactly_on_cadence():
    debias = OnlineDebiasing(min_pairs=20, refit_every=8)
    wm, real = distorted_pairs(100)
    refits = []
    for start in range(0, 60, 4):
        refits.append(debias.push(wm[start : start + 4], real[start : start + 4], [start] * 4))
        if len(debias.pairs) < 20:
            assert debias.calibration.is_identity
            assert debias.calibration([0.3])[0] == 0.3
    # 4 pairs per push: first fit at 20 pairs (5th push), then every 8 new pairs (every 2nd push)
    assert [i for i, r in enumerate(refits) if r] == [4, 6, 8, 10, 12, 14]
    assert debias.refits == 6 and not debias.calibration.is_identity


def test_fifo_buffer_keeps_the_newest_pairs():
    debias = OnlineDebiasing(min_pairs=5, refit_every=5, buffer_size=10)
    debias.push(list(np.linspace(0, 1, 25)), [0.5] * 25, list(range(25)))
    assert len(debias.pairs) == 10 and debias.pairs[0][2] == 15


def test_bias_reduction_and_rank_correlation():
    wm, real = distorted_pairs(400, noise=0.02)
    groups = np.arange(400) // 8
    calibration = fit_calibration(wm, real)
    assert bias_reduction(wm, real, groups, calibration) > 0.5
    assert bias_reduction(wm, real, groups, CalibrationMap()) == 0.0
    assert rank_correlation(wm, real) > 0.9
    assert rank_correlation(1 - wm, real) < -0.9


# -- Inverse-Variance Denoising ------------------------------------------------------------------------------
def test_disagreement_of_a_group():
    assert group_disagreement([0.2, 0.4], [0.1, 0.3]) == pytest.approx(0.0)  # an offset is no disagreement
    assert group_disagreement([0.3, 0.1], [0.1, 0.3]) == pytest.approx(0.04 / 0.01)
    assert group_disagreement([0.1, 0.9], [0.5, 0.5]) is None  # real rewards constant: skipped


def test_weight_is_one_before_calibration_then_target_then_within_clip():
    state = InverseVarianceWeight()
    rng = random.Random(0)
    for i in range(31):
        state.observe(rng.uniform(0.1, 2.0))
        assert state.weight == 1.0, i
    state.observe(rng.uniform(0.1, 2.0))
    assert state.weight == pytest.approx(2.0)
    for _ in range(2000):
        state.observe(rng.choice([0.0, 0.01, 5.0, 50.0]))
        assert 1.0 <= state.weight <= 4.0


def test_ewma_half_life():
    state = InverseVarianceWeight(half_life=64)
    state.observe(1.0)
    for _ in range(64):
        state.observe(0.0)
    assert state.ewma == pytest.approx(0.5)


def test_fused_variance_is_below_both_streams():
    rng = random.Random(0)
    for _ in range(100):
        ve, vw = rng.uniform(0.01, 5), rng.uniform(0.01, 5)
        ne, nw = rng.randint(1, 16), rng.randint(1, 64)
        fused = fused_variance(ve, ne, vw, nw)
        assert fused < ve / ne and fused < vw / nw


# -- callbacks on hand-built batches -------------------------------------------------------------------------
def make_batch(real_rows, wm_rows, groups, is_real, graded=None) -> RolloutBatch:
    n = len(groups)
    graded = torch.ones(n, dtype=torch.bool) if graded is None else torch.tensor(graded)
    rewards = torch.tensor([r if g else math.nan for r, g in zip(real_rows, graded.tolist(), strict=True)],
                           dtype=torch.float32)
    is_real_t = torch.tensor(is_real)
    trajectories = tuple(
        Trajectory("t", g, (Turn("", "x = 1", Outcome(Status.RUNTIME_ERR, 0.1) if ok else
                                 Outcome(Status.INFRA_ERROR, None), 1, "stop"),),
                   Source.REAL if real else Source.WORLD_MODEL)
        for g, real, ok in zip(groups, is_real, graded.tolist(), strict=True)
    )
    return RolloutBatch(
        trajectories=trajectories, group_ids=torch.tensor(groups), input_ids=torch.zeros((n, 2), dtype=torch.long),
        attention_mask=torch.ones((n, 2), dtype=torch.bool), response_mask=torch.ones((n, 2), dtype=torch.bool),
        old_logprobs=torch.zeros((n, 2)), rewards=rewards, graded=graded, is_real=is_real_t,
        advantages=torch.zeros(n), used=torch.zeros(n, dtype=torch.bool),
        wm_rewards=torch.tensor(wm_rows, dtype=torch.float32), wm_calibrated=torch.full((n,), math.nan),
    )


def test_infra_errors_are_excluded_from_pairs_never_zero():
    debias = OnlineDebiasing(min_pairs=1000)
    batch = make_batch([0.1, 0.7, 0.0, 0.2], [0.3, 0.8, 0.4, 0.5], [0, 0, 0, 0], [True] * 4,
                       graded=[True, True, False, True])
    debias.on_calibrate(None, LoggingModule(), batch)
    assert [x for p in debias.pairs for x in p[:2]] == pytest.approx([0.3, 0.1, 0.8, 0.7, 0.5, 0.2])
    assert math.isnan(float(batch.rewards[2]))


def test_world_model_rewards_pass_through_the_map_and_anchors_keep_real_rewards():
    debias = OnlineDebiasing(min_pairs=4, refit_every=4)
    # anchors say: the world model over-predicts, by 0.25 to 0.35
    batch = make_batch([0.05, 0.1, 0.5, 0.65, 0.9, 0.9, 0.9, 0.9], [0.35, 0.45, 0.75, 0.95, 0.4, 0.85, 0.3, 1.0],
                       [0, 0, 0, 0, 1, 1, 2, 2], [True] * 4 + [False] * 4)
    batch.rewards[4:] = batch.wm_rewards[4:]
    module = LoggingModule()
    debias.on_calibrate(None, module, batch)
    assert batch.rewards[:4].tolist() == pytest.approx([0.05, 0.1, 0.5, 0.65])
    assert batch.rewards[4:].tolist() == pytest.approx([0.075, 0.575, 0.05, 0.65])
    assert batch.wm_calibrated[:4].tolist() == pytest.approx([0.05, 0.1, 0.5, 0.65])
    assert module.logged["debias/pairs"] == 4 and module.logged["debias/refits"] == 1
    assert module.logged["debias/bias_reduction"] == pytest.approx(1.0)


def test_denoising_waits_for_calibration_skips_degenerate_groups_and_weights_anchor_rows():
    denoise = InverseVarianceDenoising(warmup=2)
    batch = make_batch([0.1, 0.3, 0.5, 0.5, 0.2, 0.4], [0.3, 0.1, 0.2, 0.6, 0.2, 0.4], [0, 0, 1, 1, 2, 2],
                       [True, True, True, True, False, False])
    batch.corrections.calibrating = True  # as the module leaves it before the calibration hook, its map not fitted
    batch.advantages.copy_(torch.tensor([-1.0, 1.0, 0.0, 0.0, -1.0, 1.0]))
    denoise.on_advantages(None, LoggingModule(), batch)
    assert denoise.state.observations == 0 and denoise.weight == 1.0  # not calibrated yet
    batch.wm_calibrated.copy_(batch.wm_rewards)
    for _ in range(2):
        denoise.on_advantages(None, LoggingModule(), batch)
    assert denoise.state.observations == 2  # group 1 (real rewards constant) skipped each time
    assert denoise.weight == pytest.approx(2.0)
    assert batch.advantages.tolist() == pytest.approx([-2.0, 2.0, 0.0, 0.0, -1.0, 1.0])  # anchors only


def test_the_calibration_tells_the_denoiser_through_the_batch():
    """No callback looks up another: the module marks the batch when a callback calibrates
    (``corrections.calibrating``), and the denoiser reads the mark."""
    def rows():
        return make_batch([0.1, 0.3, 0.5, 0.9], [0.3, 0.1, 0.9, 0.5], [0, 0, 1, 1], [True] * 4)

    alone = InverseVarianceDenoising(warmup=2)
    alone.on_advantages(None, LoggingModule(), rows())
    assert alone.state.observations == 2  # no calibration in the run: the raw world-model rewards, from the start
    calibrated, batch = InverseVarianceDenoising(warmup=2), rows()
    batch.corrections.calibrating = True  # as the module sets it for a run whose callbacks calibrate
    OnlineDebiasing(min_pairs=100).on_calibrate(None, LoggingModule(), batch)
    calibrated.on_advantages(None, LoggingModule(), batch)
    assert calibrated.state.observations == 0  # a calibration ran but its map is not fitted yet: wait for it


def test_anchor_counts_floor_fraction_capacity():
    assert AnchorRouting(0.1, floor=2).anchors_for(8) == 2
    assert AnchorRouting(0.5, floor=0).anchors_for(8) == 4
    assert AnchorRouting(0.5, floor=0, capacity=1).anchors_for(8) == 1
    assert AnchorRouting(0.0, floor=0).anchors_for(8) == 0
    assert AnchorRouting(1.0, floor=0).anchors_for(3) == 3


def test_routing_is_group_pure_seeded_and_stratified():
    plan = RolloutPlan(list("abcdefgh"), 4, ["real"] * 8)
    AnchorRouting(0.25, floor=0, seed=3).on_rollout_plan(None, None, plan)
    assert plan.environments.count("real") == 2 and set(plan.environments) == {"real", "world_model"}
    again = RolloutPlan(list("abcdefgh"), 4, ["real"] * 8)
    AnchorRouting(0.25, floor=0, seed=3).on_rollout_plan(None, None, again)
    assert again.environments == plan.environments
    stratified = AnchorRouting(0.25, floor=0, selection="stratified", seed=0)
    seen = []
    for _ in range(4):
        p = RolloutPlan(list("abcdefgh"), 4, ["real"] * 8)
        stratified.on_rollout_plan(None, None, p)
        seen += [t for t, e in zip(p.task_ids, p.environments, strict=True) if e == "real"]
    assert sorted(seen) == list("abcdefgh")  # every task anchored once before any twice


def test_uncertainty_routing_prefers_unseen_then_uncertain_tasks():
    routing = AnchorRouting(0.25, floor=0, selection="uncertainty")
    routing.uncertainty = {"a": 0.01, "b": 0.2, "c": 0.05, "d": 0.02}
    assert [list("abcd")[g] for g in routing.select(list("abcd"))] == ["b"]
    assert routing.select(list("abcz")) == [3]  # z never seen: most uncertain


def test_least_separated_routing_anchors_the_tasks_the_world_model_tells_apart_least():
    from types import SimpleNamespace

    from wmrl.types import KnowsItsSeparation

    class Separating(KnowsItsSeparation):
        spread = {"a": 0.2, "b": 0.01, "c": None, "d": 0.1}

        def separation(self, task_id):
            return self.spread[task_id]

    module = SimpleNamespace(environments={"world_model": Separating()})
    one, two = (AnchorRouting(share, floor=0, selection="least_separated") for share in (0.25, 0.5))
    for routing in (one, two):
        routing.on_fit_start(None, module)
    assert [list("abcd")[g] for g in one.select(list("abcd"))] == ["b"]
    assert [list("abcd")[g] for g in two.select(list("abcd"))] == ["b", "d"]
    assert [list("acd")[g] for g in two.select(list("acd"))] == ["a", "d"]  # c: it cannot say, so last
    unsaying = AnchorRouting(0.25, floor=0, selection="least_separated")
    with pytest.raises(ValueError, match="does not declare wmrl.types.KnowsItsSeparation; TaskAwareWorldModel does"):
        unsaying.on_fit_start(None, SimpleNamespace(environments={"world_model": object()}))
    with pytest.raises(ValueError, match="selection must be one of random, stratified, uncertainty, least_separated"):
        AnchorRouting(selection="closest")


def test_callback_state_round_trips_exactly():
    routing = AnchorRouting(0.3, floor=1, seed=7)
    for _ in range(3):
        routing.on_rollout_plan(None, None, RolloutPlan(list("abcdef"), 2, ["real"] * 6))
    debias = OnlineDebiasing(min_pairs=10, refit_every=5)
    wm, real = distorted_pairs(23)
    debias.push(wm, real, range(23))
    denoise = InverseVarianceDenoising(warmup=3)
    for s2 in (0.5, 0.7, 0.2, 0.9):
        denoise.state.observe(s2)

    routing2, debias2, denoise2 = AnchorRouting(0.3, floor=1), OnlineDebiasing(10, 5), InverseVarianceDenoising(warmup=3)
    routing2.load_state_dict(routing.state_dict())
    debias2.load_state_dict(debias.state_dict())
    denoise2.load_state_dict(denoise.state_dict())
    assert routing2.select(list("abcdef")) == routing.select(list("abcdef"))
    assert debias2.calibration == debias.calibration and list(debias2.pairs) == list(debias.pairs)
    assert debias2.since_fit == debias.since_fit
    more_wm, more_real = distorted_pairs(7, seed=5)
    assert debias2.push(more_wm, more_real, range(7)) == debias.push(more_wm, more_real, range(7))
    assert debias2.calibration == debias.calibration
    assert (denoise2.state.ewma, denoise2.state.c, denoise2.weight) == (denoise.state.ewma, denoise.state.c, denoise.weight)
