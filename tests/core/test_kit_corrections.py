"""The kit's corrections (issue: the world model can only help): a calibration that never erases a ranking, and a
fusion whose world-model share follows the measured agreement down to 0. Pure functions first, then the callbacks on
hand-made batches, then the paper variant's keys unchanged."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from support.fakes import LoggingModule
from test_wmrl_method import make_batch

from wmrl.algorithms.debias import CalibrationMap, fit_calibration, fit_strict_calibration
from wmrl.algorithms.fusion import AgreementEstimate, fusion_scales
from wmrl.callbacks import OnlineDebiasing, VarianceFusion
from wmrl.types import KnowsItsAgreement


def _ties(values) -> int:
    values = np.asarray(values)
    return len(values) - len(np.unique(values))


@pytest.mark.parametrize("power", [1.0, 6.0, 20.0])
def test_the_strict_map_introduces_no_ties_on_a_strictly_ranked_group(power):
    rng = np.random.default_rng(0)
    real = rng.random(400)
    wm = real**power
    strict, paper = fit_strict_calibration(wm, real), fit_calibration(wm, real)
    group = np.sort(rng.random(8)) ** power  # a world-model group, strictly ranked, some beyond the anchors' range
    group = np.sort(np.append(group, [wm.max() * 1.01, 1.0]))
    mapped = strict(group)
    assert _ties(mapped) == 0 and np.all(np.diff(mapped) > 0)
    if power == 20.0:
        assert _ties(paper(group)) > 0  # the paper's map ties them (most fall in its first bin, flat ends)


def test_the_strict_map_follows_the_anchors_and_keeps_sloped_ends():
    rng = np.random.default_rng(1)
    real = rng.random(300)
    calibration = fit_strict_calibration(real**6, real)
    probe = np.linspace(0.05, 0.95, 10)
    assert np.abs(calibration(probe**6) - probe).max() < 0.12  # it undoes r^6, up to the ramp's 5% and the knots
    assert calibration.ends == "slope" and CalibrationMap.from_dict(calibration.to_dict()) == calibration


def test_a_backwards_or_chance_world_model_gets_a_flat_map_no_signal():
    rng = np.random.default_rng(2)
    real = rng.random(200)
    assert fit_strict_calibration(1 - real, real).is_flat
    assert fit_strict_calibration(np.array([0.1, 0.2]), np.array([0.3, 0.3])).is_identity  # equal real rewards


def _observe(estimate, rng, make_wm, groups, size=8):
    shares = []
    for _ in range(groups):
        real = rng.random(size)
        estimate.observe(make_wm(real, rng), real)
        shares.append(estimate.share())
    return shares


def test_a_chance_world_models_share_stays_at_zero():
    """Within 16 anchor groups of 8 and from then on, a world model independent of reality gets no share (seeded;
    the lower bound starts at 0, so it is 0 from the first group in most draws)."""
    for seed in range(5):
        shares = _observe(AgreementEstimate(), np.random.default_rng(seed), lambda r, g: g.random(len(r)), 64)
        assert max(shares) <= 0.25, shares
        assert all(s == 0.0 for s in shares[16:]), (seed, shares)


def test_a_backwards_world_models_share_is_zero_from_the_start():
    shares = _observe(AgreementEstimate(), np.random.default_rng(0), lambda r, g: 1 - r, 32)
    assert shares == [0.0] * 32


def test_an_exact_world_model_rises_to_its_full_share_from_its_first_group():
    shares = _observe(AgreementEstimate(), np.random.default_rng(0), lambda r, g: r, 8)
    assert min(shares) > 0.99, shares
    few = _observe(AgreementEstimate(), np.random.default_rng(0), lambda r, g: r, 1, size=3)
    assert few == [0.0]  # 2 degrees of freedom: under MIN_DOF, no share yet


def test_a_noisy_world_models_share_is_its_agreement_less_its_uncertainty():
    estimate = AgreementEstimate()
    _observe(estimate, np.random.default_rng(3), lambda r, g: r + g.normal(0, 0.29, len(r)), 200)
    assert 0.6 < estimate.agreement < 0.8  # corr(r, r + N(0, .29^2)) = 0.707 for r ~ U(0, 1)
    assert estimate.agreement - 0.15 < estimate.share() < estimate.agreement


def test_the_agreement_forgets_with_its_half_life():
    estimate = AgreementEstimate(half_life=4)
    rng = np.random.default_rng(4)
    _observe(estimate, rng, lambda r, g: r, 20)
    assert estimate.share() > 0.95
    _observe(estimate, rng, lambda r, g: 1 - r, 20)  # the world model turned: 20 half-lives later it is backwards
    assert estimate.agreement < -0.9 and estimate.share() == 0.0


def test_fusion_scales_are_the_minimum_variance_fusion():
    for real_rows, wm_rows, share in [(8, 56, 0.0), (8, 56, 0.5), (16, 48, 1.0)]:
        real_scale, wm_scale = fusion_scales(real_rows, wm_rows, share)
        # the loss averages over every row: (real_scale * sum_E + wm_scale * sum_WM) / (E + WM)
        assert real_scale / (real_rows + wm_rows) == pytest.approx(1 / (real_rows + share * wm_rows))
        assert wm_scale == pytest.approx(share * real_scale)
    with pytest.raises(ValueError, match="share must lie in"):
        fusion_scales(8, 8, 1.5)


def test_the_fusion_callback_silences_a_chance_world_model_and_keeps_an_exact_one():
    real = [0.1, 0.4, 0.6, 0.9]
    for wm_of_anchors, expected_wm_scale in (([0.9, 0.1, 0.6, 0.4], 0.0), (real, 1.0)):
        fusion, module = VarianceFusion(), LoggingModule()
        for _ in range(3):
            batch = make_batch(real + [0.5] * 4, wm_of_anchors + [0.2, 0.4, 0.6, 0.8], [0] * 4 + [1] * 4,
                               [True] * 4 + [False] * 4)
            batch.used.fill_(True)
            batch.advantages.copy_(torch.tensor([-1.0, -0.5, 0.5, 1.0] * 2))
            fusion.on_advantages(None, module, batch)
        real_scale, wm_scale = fusion_scales(4, 4, fusion.share)
        assert fusion.share == pytest.approx(expected_wm_scale, abs=0.02)
        assert batch.advantages[:4].tolist() == pytest.approx([-real_scale, -0.5 * real_scale, 0.5 * real_scale,
                                                               real_scale])
        assert batch.advantages[4:].tolist() == pytest.approx([-wm_scale, -0.5 * wm_scale, 0.5 * wm_scale, wm_scale])
        assert module.logged["fusion/wm_share"] == pytest.approx(4 * fusion.share / (4 + 4 * fusion.share))


def test_the_world_models_own_variance_moves_weight_between_its_rows_not_to_its_stream():
    """With ``per_sample_variance`` the world-model rows it predicts surely weigh more, the stream's total stays the
    measured share's; without a variance (or the option) every row weighs alike."""
    import dataclasses

    from wmrl.algorithms.fusion import certainty_weights

    real = [0.1, 0.4, 0.6, 0.9]
    variances = [0.01, 0.01, 0.09, 0.09]
    runs = {}
    for option in (False, True):
        fusion, module = VarianceFusion(per_sample_variance=option), LoggingModule()
        for _ in range(3):
            batch = make_batch(real + [0.5] * 4, real + [0.2, 0.4, 0.6, 0.8], [0] * 4 + [1] * 4,
                               [True] * 4 + [False] * 4)
            rows = list(batch.trajectories)
            for i, v in zip(range(4, 8), variances, strict=True):  # the world model's own uncertainty of each row
                turn = rows[i].turns[0]
                rows[i] = dataclasses.replace(rows[i], turns=(dataclasses.replace(
                    turn, outcome=dataclasses.replace(turn.outcome, variance=v)),))
            batch = dataclasses.replace(batch, trajectories=tuple(rows))
            batch.used.fill_(True)
            batch.advantages.copy_(torch.tensor([-1.0, -0.5, 0.5, 1.0] * 2))
            fusion.on_advantages(None, module, batch)
        runs[option] = (fusion, batch.advantages.clone())
    (plain, alike), (weighted, by_variance) = runs[False], runs[True]
    assert plain.share == weighted.share > 0.9
    assert torch.equal(alike[:4], by_variance[:4])  # the anchors as before
    expected = alike[4:] * torch.as_tensor(certainty_weights(variances), dtype=alike.dtype)
    assert by_variance[4:].tolist() == pytest.approx(expected.tolist())
    assert abs(by_variance[4]) > abs(alike[4]) and abs(by_variance[7]) < abs(alike[7])
    assert certainty_weights(variances).mean() == pytest.approx(1.0)  # the stream's total weight is unchanged
    assert plain.state_key != weighted.state_key


def test_the_strict_debiasing_hands_the_fusion_out_of_sample_anchors():
    debias = OnlineDebiasing(min_pairs=4, refit_every=4, method="strict")
    wm, real = [0.2, 0.4, 0.6, 0.8], [0.1, 0.3, 0.6, 0.95]
    first = make_batch(real, wm, [0] * 4, [True] * 4)
    debias.on_calibrate(None, LoggingModule(), first)
    assert debias.fitted and first.wm_calibrated.tolist() == pytest.approx(wm)  # the map before these pairs: identity
    second = make_batch(real, wm, [0] * 4, [True] * 4)
    debias.on_calibrate(None, LoggingModule(), second)
    assert second.wm_calibrated.tolist() == pytest.approx(debias.calibration(np.array(wm)).tolist(), abs=1e-6)


def test_the_paper_variant_keeps_its_state_key_and_the_method_is_checked():
    assert OnlineDebiasing(min_pairs=16).state_key == OnlineDebiasing(min_pairs=16, method="paper").state_key
    assert OnlineDebiasing(method="strict").state_key != OnlineDebiasing().state_key
    with pytest.raises(ValueError, match="method must be 'paper' or 'strict'"):
        OnlineDebiasing(method="isotonic")
    with pytest.raises(ValueError, match="half_life must be > 0"):
        VarianceFusion(half_life=0)


def test_the_end_of_fit_line_says_when_the_world_model_ranks_against_reality():
    fusion = VarianceFusion()
    assert "no anchor group was measured" in fusion.summary()
    rng = np.random.default_rng(5)
    _observe(fusion.estimate, rng, lambda r, g: 1 - r, 6)
    assert "agreement with the anchors -1.00 over 6 anchor groups" in fusion.summary()
    assert fusion.summary().endswith("(it ranks rollouts at chance or against reality: its rows carried no weight)")
    exact = VarianceFusion()
    _observe(exact.estimate, rng, lambda r, g: r, 6)
    assert exact.summary().endswith("its rows' weight at the end 1.00")


def test_a_prior_gives_a_share_from_the_start_and_fades_under_anchors_at_chance():
    estimate = AgreementEstimate()
    estimate.add_prior(0.85, 16)
    assert estimate.share() == pytest.approx(0.673, abs=1e-3)  # tanh(atanh(0.85) - 1.645 / sqrt(14))
    shares = _observe(estimate, np.random.default_rng(0), lambda r, g: g.random(len(r)), 64)
    assert shares[0] > 0.3 and shares[-1] == 0.0  # the anchors outweigh it, and it decays like old evidence
    assert estimate.prior_dof == pytest.approx(16 * 0.5 ** (64 / 32))
    with pytest.raises(ValueError, match="agreement in"):
        estimate.add_prior(1.5, 4)


class KnowsAgreement(KnowsItsAgreement):
    """A world model that measured its agreement before the run (as the pretrained task-aware model does)."""

    def __init__(self, prior):
        self.prior, self.asked = prior, 0

    def agreement_prior(self):
        self.asked += 1
        return self.prior


def anchor_step(fusion, module, wm_of_anchors=(0.9, 0.1, 0.6, 0.4)):
    real = [0.1, 0.4, 0.6, 0.9]
    batch = make_batch(real + [0.5] * 4, list(wm_of_anchors) + [0.2, 0.4, 0.6, 0.8], [0] * 4 + [1] * 4,
                       [True] * 4 + [False] * 4)
    batch.used.fill_(True)
    batch.advantages.copy_(torch.tensor([-1.0, -0.5, 0.5, 1.0] * 2))
    fusion.on_advantages(None, module, batch)
    return batch


def test_the_fusion_takes_the_world_models_measured_agreement_once_and_caps_its_weight():
    world_model = KnowsAgreement((0.85, 122.0))
    fusion, module = VarianceFusion(), LoggingModule({"world_model": world_model})
    batch = anchor_step(fusion, module, wm_of_anchors=(0.1, 0.4, 0.6, 0.9))
    assert world_model.asked == 1 and fusion.estimate.prior_agreement == 0.85
    assert module.logged["fusion/prior_dof"] == pytest.approx(16 * 0.5 ** (1 / 32))  # capped at 16, one group old
    assert fusion.share > 0.9 and batch.advantages[4:].abs().sum() > 0  # agreement shown on top of the prior
    anchor_step(fusion, module)
    assert world_model.asked == 1  # read once a run
    restored = VarianceFusion()
    restored.load_state_dict(fusion.state_dict())
    assert restored.prior_taken and restored.estimate.prior_dof == fusion.estimate.prior_dof

    # at chance on the anchors from the first step, the prior alone still carries the world model's rows a while
    alone, module = VarianceFusion(), LoggingModule({"world_model": KnowsAgreement((0.85, 122.0))})
    anchor_step(alone, module)
    assert 0 < alone.share < 0.673

    for ignored in (VarianceFusion(prior_dof=0), VarianceFusion()):
        environments = {"world_model": KnowsAgreement((0.85, 122.0))} if ignored.prior_dof == 0 else {}
        anchor_step(ignored, LoggingModule(environments))
        assert ignored.estimate.prior_dof == 0 and ignored.share == 0.0  # no prior: nothing shown yet
    with pytest.raises(ValueError, match="prior_dof must be >= 0"):
        VarianceFusion(prior_dof=-1)
