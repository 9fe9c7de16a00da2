"""Held-out intervals: the paired gain over the starting policy, and the end-of-fit report a newcomer reads."""

from __future__ import annotations

import numpy as np
import pytest

from wmrl.algorithms.stats import bootstrap_mean, describe_gain, paired_gain
from wmrl.evaluation.report import held_out_report


def _runs(gain: float, noise: float, tasks: int = 4, samples: int = 6, seed: int = 0):
    rng = np.random.default_rng(seed)
    before = {f"t{k}": rng.uniform(0.3, 0.6, samples).tolist() for k in range(tasks)}
    after = {t: np.clip(np.asarray(v) + gain + rng.normal(0, noise, samples), 0, 1).tolist() for t, v in before.items()}
    return before, after


def test_a_consistent_gain_is_measured_above_zero_and_pure_noise_is_not():
    gain, low, high = paired_gain(*_runs(gain=0.15, noise=0.05))
    assert 0.1 < gain < 0.2 and low > 0
    gain, low, high = paired_gain(*_runs(gain=0.0, noise=0.1))  # symmetric: no clipping at 0.3 +- 0.3
    assert low < 0 < high


def test_pairing_makes_a_small_gain_visible_that_independent_resampling_misses():
    before, after = _runs(gain=0.05, noise=0.01, samples=4)
    _, paired_low, _ = paired_gain(before, after)
    after_low = bootstrap_mean(after)[1]
    before_high = bootstrap_mean(before)[2]
    assert paired_low > 0 and after_low < before_high  # the two intervals overlap, the paired gain does not cross 0


def test_paired_gain_refuses_unpaired_evaluations():
    with pytest.raises(ValueError, match="different tasks"):
        paired_gain({"a": [0.1]}, {"b": [0.1]})
    with pytest.raises(ValueError, match="task a: 2 samples before and 1 after"):
        paired_gain({"a": [0.1, 0.2]}, {"a": [0.1]})


def test_the_words_match_the_interval():
    assert describe_gain(0.1, 0.02, 0.2, False).startswith("improved")
    assert describe_gain(-0.1, -0.2, -0.02, False).startswith("got worse")
    assert describe_gain(0.03, -0.02, 0.08, False).startswith("within noise")
    assert describe_gain(0.0, 0.0, 0.0, True).startswith("no change")


def test_the_end_of_fit_report_prints_the_gain_only_for_a_paired_evaluation():
    summary = {"score": 0.4, "mean_position": 0.4, "valid_rate": 0.5, "best_of_k": 0.8}
    history = [("start", summary), ("step 6", {**summary, "score": 0.7})]
    before, after = _runs(gain=0.2, noise=0.02)
    report = held_out_report(history, [before, after])
    assert "gain over the start: improved: +0.2" in report and "24 samples of 4 tasks, same seeds" in report
    assert "gain over" not in held_out_report(history[1:], [after])  # no start: nothing to pair with
    assert "gain over" not in held_out_report(history, [before, {"t0": [0.1]}])  # different samples: not paired
