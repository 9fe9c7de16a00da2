"""Edge cases of the calibrator (Online Debiasing, Inverse-Variance Denoising, anchor routing capacity).

Each test pins one scenario of the reference implementation that an earlier version got wrong: a one-bin
map that zeroes every world-model advantage in silence, NaN pairs poisoning every later refit, a scale ``c``
frozen on a numerically-zero disagreement, and a routing cap blind to executions still in flight.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest
import torch
from support.fakes import LoggingModule

from wmrl.algorithms.debias import CalibrationMap, fit_calibration
from wmrl.algorithms.denoise import InverseVarianceWeight
from wmrl.callbacks import AnchorRouting, InverseVarianceDenoising, OnlineDebiasing
from wmrl.types import Outcome, RolloutBatch, RolloutPlan, Source, Status, Trajectory, Turn

DEBIAS_LOG = "wmrl.callbacks.debiasing"


def anchor_batch(real_rows, wm_rows, groups) -> RolloutBatch:
    """Every row an anchor (real, graded) with its world-model side-grade."""
    n = len(groups)
    trajectories = tuple(
        Trajectory("t", g, (Turn("", "x = 1", Outcome(Status.RUNTIME_ERR, 0.1), 1, "stop"),), Source.REAL)
        for g in groups
    )
    return RolloutBatch(
        trajectories=trajectories, group_ids=torch.tensor(groups), input_ids=torch.zeros((n, 2), dtype=torch.long),
        attention_mask=torch.ones((n, 2), dtype=torch.bool), response_mask=torch.ones((n, 2), dtype=torch.bool),
        old_logprobs=torch.zeros((n, 2)), rewards=torch.tensor(real_rows, dtype=torch.float32),
        graded=torch.ones(n, dtype=torch.bool), is_real=torch.ones(n, dtype=torch.bool),
        advantages=torch.zeros(n), used=torch.zeros(n, dtype=torch.bool),
        wm_rewards=torch.tensor(wm_rows, dtype=torch.float32), wm_calibrated=torch.full((n,), math.nan),
    )


# -- 10: every world-model reward in one bin ----------------------------------------------------------------
def test_one_populated_bin_keeps_the_identity_map_and_says_why(caplog):
    debias = OnlineDebiasing(min_pairs=8, refit_every=8)
    wm = [0.31, 0.32, 0.33, 0.34, 0.35, 0.36, 0.37, 0.38]  # all in bin [0.3, 0.4)
    real = [0.0, 0.1, 0.2, 0.5, 0.6, 0.7, 0.9, 1.0]
    with caplog.at_level(logging.WARNING, logger=DEBIAS_LOG):
        debias.push(wm, real, range(8))
    assert debias.calibration.is_identity
    assert debias.calibration([0.31, 0.38]).tolist() == pytest.approx([0.31, 0.38])  # groups keep their ranking
    message = " ".join(r.getMessage() for r in caplog.records)
    assert "all 8 pairs fall in one bin [0.3, 0.4)" in message
    assert "the map stays identity until world-model rewards spread" in message


def test_one_bin_then_spread_fits_the_map():
    debias = OnlineDebiasing(min_pairs=4, refit_every=64)
    debias.push([0.31, 0.32, 0.33, 0.34], [0.0, 0.2, 0.5, 0.9], range(4))
    assert debias.calibration.is_identity
    debias.push([0.85, 0.87], [0.9, 1.0], [4, 5])  # the world model spreads: fit at once, not 64 pairs later
    assert not debias.calibration.is_identity and len(debias.calibration.xs) == 2


def test_fit_calibration_of_one_bin_is_the_identity():
    assert fit_calibration([0.41, 0.45, 0.49], [0.0, 0.5, 1.0]) == CalibrationMap()


def test_equal_real_rewards_keep_the_identity_map_until_they_differ(caplog):
    # the cpu-learn run's first step: two anchors in two bins, both real 0.1 -- a fit would be the constant 0.1
    # and zero every world-model group's advantages on no evidence about the world model's ranking
    debias = OnlineDebiasing(min_pairs=2, refit_every=1)
    with caplog.at_level(logging.WARNING, logger=DEBIAS_LOG):
        assert debias.push([0.19, 0.24], [0.1, 0.1], [0, 0]) is False
    assert debias.calibration.is_identity and debias.refits == 0
    assert "all 2 anchor pairs have the same real reward 0.100" in caplog.text
    batch = anchor_batch([0.1, 0.1], [0.19, 0.24], [0, 0])
    assert debias.calibration(batch.wm_rewards.numpy()).tolist() == pytest.approx([0.19, 0.24])
    debias.push([0.29, 0.72], [0.975, 0.975], [1, 1])  # real rewards now differ: the map comes at once
    assert not debias.calibration.is_identity and not debias.calibration.is_flat and debias.refits == 1
    assert fit_calibration([0.19, 0.24, 0.72], [0.1, 0.1, 0.1]) == CalibrationMap()


def test_a_flat_map_always_warns(caplog):
    # two populated bins, but the world model ranks them backwards: isotonic pools them into one constant
    debias = OnlineDebiasing(min_pairs=8, refit_every=8)
    wm = [0.15] * 4 + [0.85] * 4
    real = [0.9, 0.8, 0.9, 0.8, 0.1, 0.2, 0.1, 0.2]
    with caplog.at_level(logging.WARNING, logger=DEBIAS_LOG):
        debias.push(wm, real, range(8))
    assert debias.calibration.is_flat
    assert any("flat" in r.getMessage() and "every world-model reward" in r.getMessage() for r in caplog.records)


def test_a_flat_map_warns_even_when_the_rank_correlation_is_positive(caplog):
    # bin [0.2, 0.3) ranks its rollouts perfectly (mean real 0.5); bin [0.3, 0.4) holds one pair with real 0.45:
    # the bin means decrease, isotonic pools them into one constant, yet the overall rank correlation is 0.66
    debias = OnlineDebiasing(min_pairs=6, refit_every=6)
    wm = [0.21, 0.23, 0.25, 0.27, 0.29, 0.35]
    real = [0.0, 0.25, 0.5, 0.75, 1.0, 0.45]
    with caplog.at_level(logging.WARNING, logger=DEBIAS_LOG):
        debias.push(wm, real, range(6))
    assert debias.rank_corr > 0 and debias.calibration.is_flat
    assert any("flat" in r.getMessage() for r in caplog.records)


# -- 11: non-finite pairs ------------------------------------------------------------------------------------
def test_non_finite_pairs_are_dropped_counted_and_refits_keep_working(caplog):
    debias = OnlineDebiasing(min_pairs=4, refit_every=2)
    with caplog.at_level(logging.WARNING, logger=DEBIAS_LOG):
        debias.push([0.1, math.nan, 0.5, 0.9], [0.0, 0.3, math.inf, 1.0], range(4))
    assert len(debias.pairs) == 2 and debias.dropped_nonfinite == 2
    assert all(math.isfinite(x) for p in debias.pairs for x in p[:2])
    assert any("non-finite" in r.getMessage() for r in caplog.records)
    debias.push([0.3, 0.7], [0.2, 0.8], [4, 5])  # the refit is due now and must not raise
    assert not debias.calibration.is_identity
    assert debias.state_dict()["dropped_nonfinite"] == 2


def test_non_finite_rewards_of_a_batch_are_logged_as_dropped():
    debias = OnlineDebiasing(min_pairs=100)
    batch = anchor_batch([0.1, 0.7, 0.3, 0.2], [0.3, 0.8, 0.4, 0.5], [0, 0, 1, 1])
    batch.rewards[1] = math.inf
    module = LoggingModule()
    debias.on_calibrate(None, module, batch)
    assert len(debias.pairs) == 3
    assert module.logged["debias/dropped_nonfinite"] == 1.0


def test_load_state_dict_drops_nan_pairs_of_old_checkpoints():
    debias = OnlineDebiasing(min_pairs=4, refit_every=2)
    state = debias.state_dict()
    state["pairs"] = [[0.1, 0.0, 0], [math.nan, 0.5, 1], [0.5, 0.6, 2], [0.9, float("nan"), 3], [0.7, 0.8, 4]]
    state.pop("dropped_nonfinite", None)  # a checkpoint written before the counter existed
    restored = OnlineDebiasing(min_pairs=4, refit_every=2)
    restored.load_state_dict(state)
    assert [p[2] for p in restored.pairs] == [0, 2, 4] and restored.dropped_nonfinite == 2
    restored.push([0.3], [0.3], [5])  # 4 pairs: the first fit, which must not raise
    assert not restored.calibration.is_identity


# -- 12: the scale c freezes only on a meaningful disagreement ----------------------------------------------
def test_c_does_not_freeze_on_a_numerically_zero_disagreement():
    state = InverseVarianceWeight()
    for _ in range(40):
        state.observe(0.0)  # perfect agreement through the warm-up
    state.observe(1e-9)  # a rounding-level disagreement
    assert state.c is None and state.weight == 1.0
    state.observe(1e-9)
    assert state.weight == 1.0  # not the cap 4
    state.observe(1.0)  # a meaningful disagreement: c freezes so that w is the target at that moment
    assert state.c is not None and state.ewma >= state.min_disagreement
    assert state.weight == pytest.approx(2.0)


def test_denoising_callback_exposes_the_disagreement_floor():
    denoise = InverseVarianceDenoising(warmup=2, min_disagreement=0.5)
    batch = anchor_batch([0.1, 0.3, 0.5, 0.9], [0.1, 0.3, 0.5, 0.9], [0, 0, 1, 1])  # perfect agreement
    assert not batch.corrections.calibrating  # no calibration ran: the raw world-model rewards are compared
    for _ in range(3):
        denoise.on_advantages(None, LoggingModule(), batch)
    assert denoise.state.observations == 6 and denoise.weight == 1.0 and denoise.state.c is None
    with pytest.raises(ValueError, match="min_disagreement"):
        InverseVarianceDenoising(min_disagreement=0.0)


# -- 13: anchor capacity counts executions in flight ---------------------------------------------------------
def test_in_flight_executions_take_anchor_capacity():
    in_flight = 3
    routing = AnchorRouting(fraction=1.0, floor=2, capacity=4, seed=0, in_flight=lambda: in_flight)
    plan = RolloutPlan(list("abcdefgh"), 1, ["real"] * 8)
    routing.on_rollout_plan(None, None, plan)
    assert plan.environments.count("real") == 1  # 4 slots, 3 busy: the floor of 2 cannot be met, capacity wins
    in_flight = 0
    plan = RolloutPlan(list("abcdefgh"), 1, ["real"] * 8)
    routing.on_rollout_plan(None, None, plan)
    assert plan.environments.count("real") == 4  # the static cap, as before


def test_in_flight_is_counted_in_executions_and_occupies_whole_group_slots():
    in_flight = 0
    routing = AnchorRouting(fraction=1.0, floor=0, capacity=4, seed=0, in_flight=lambda: in_flight)
    for executions, anchors in [(0, 4), (1, 3), (4, 3), (5, 2), (12, 1), (16, 0), (40, 0)]:
        in_flight = executions
        plan = RolloutPlan(list("abcdefgh"), 4, ["real"] * 8)  # groups of 4 rollouts: 16 sandbox slots
        routing.on_rollout_plan(None, None, plan)
        assert plan.environments.count("real") == anchors, executions


def test_without_an_in_flight_reporter_routing_is_unchanged_and_resume_is_exact():
    plain = AnchorRouting(fraction=0.5, floor=2, capacity=3, seed=5)
    reporting = AnchorRouting(fraction=0.5, floor=2, capacity=3, seed=5, in_flight=lambda: 0)
    for _ in range(3):
        a, b = (RolloutPlan(list("abcdefgh"), 4, ["real"] * 8) for _ in range(2))
        plain.on_rollout_plan(None, None, a)
        reporting.on_rollout_plan(None, None, b)
        assert a.environments == b.environments and a.environments.count("real") == 3
    resumed = AnchorRouting(fraction=0.5, floor=2, capacity=3, in_flight=lambda: 0)
    resumed.load_state_dict(reporting.state_dict())
    assert resumed.select(list("abcdefgh"), group_size=4) == reporting.select(list("abcdefgh"), group_size=4)


def test_in_flight_needs_a_capacity_and_a_sane_count():
    with pytest.raises(ValueError, match="capacity"):
        AnchorRouting(capacity=None, in_flight=lambda: 0)
    routing = AnchorRouting(capacity=2, in_flight=lambda: -1)
    with pytest.raises(ValueError, match="in_flight"):
        routing.on_rollout_plan(None, None, RolloutPlan(list("ab"), 2, ["real"] * 2))


def test_numpy_counts_are_accepted():
    routing = AnchorRouting(fraction=1.0, floor=0, capacity=2, in_flight=lambda: np.int64(1))
    plan = RolloutPlan(list("abcd"), 1, ["real"] * 4)
    routing.on_rollout_plan(None, None, plan)
    assert plan.environments.count("real") == 1


def test_a_sandbox_reports_its_runs_in_flight_to_anchor_routing():
    """Item 13 wired for real: ``Sandbox.in_flight`` counts the runs of ``run_many`` executing now, and routing
    planned while two of them run gets the capacity they leave."""
    import threading

    from wmrl.autoresearch.environments.sandbox.base import ExecutionRequest, ExecutionResult, Sandbox

    release, started = threading.Event(), threading.Barrier(3)

    class Blocking(Sandbox):
        name = "blocking"

        def run(self, request: ExecutionRequest) -> ExecutionResult:
            started.wait(timeout=10)
            release.wait(timeout=10)
            return ExecutionResult(exit_code=0, wall_seconds=0.0, backend=self.name)

    sandbox = Blocking(max_concurrency=2)
    routing = AnchorRouting(fraction=1.0, floor=0, capacity=3, in_flight=sandbox.in_flight)
    assert routing.anchors_for(8) == 3
    worker = threading.Thread(target=sandbox.run_many, args=([ExecutionRequest("x"), ExecutionRequest("y")],))
    worker.start()
    started.wait(timeout=10)
    try:
        assert sandbox.in_flight() == 2 and routing.anchors_for(8) == 1
    finally:
        release.set()
        worker.join(timeout=10)
    assert sandbox.in_flight() == 0 and routing.anchors_for(8) == 3
