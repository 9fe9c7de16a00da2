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


def test_a_held_out_sample_lost_to_the_infrastructure_is_missing_never_a_zero():
    """A sandbox that cannot start the script (exit 127 before the script ran) makes the sample missing: it counts
    in no summary value and no gain, the printout names it with its error, and the report says it is the
    infrastructure, not the policy (before, 18 such samples printed as "score 0.000" with the no-foothold advice)."""
    from wmrl.evaluation import mean_summary, sample_record, task_line, task_summary
    from wmrl.evaluation.report import MISSING_ADVICE, NO_VALID_ADVICE
    from wmrl.types import Outcome, Status, Trajectory, Turn

    def sample(outcome):
        return sample_record(Trajectory("t", 0, (Turn("```python\nx\n```", "x", outcome, 5, "stop"),)))

    lost = Outcome(Status.INFRA_ERROR, None, error="infra: sandbox did not start the script (exit code 127)")
    records = [sample(Outcome(Status.VALID, 0.9, position=0.8)), sample(lost), sample(Outcome(Status.RUNTIME_ERR, 0.1))]
    assert [r["missing"] for r in records] == [False, True, False]
    summary = task_summary("t", records)
    assert summary["valid_rate"] == 0.5 and summary["mean_position"] == 0.4 and summary["missing"] == 1
    assert summary["positions"] == [0.8, None, 0.0] and summary["valid"] == [True, None, False]
    assert task_line({**summary, "samples": records}) == (
        "t: 1/2 valid, positions 0.80 ? -; 1 missing (infra: sandbox did not start the script (exit code 127))")

    all_lost = task_summary("u", [sample(lost), sample(lost)])
    assert all_lost["score"] is None and all_lost["best_of_k"] is None and all_lost["missing"] == 2
    start = mean_summary([summary, all_lost])
    assert start["valid_rate"] == 0.5 and start["missing"] == 3  # the task measured, not a 0 for the other

    nothing = mean_summary([all_lost])
    report = held_out_report([("start", nothing), ("step 3", nothing)], [{"u": [None, None]}, {"u": [None, None]}])
    assert "score missing" in report and "(2 samples missing)" in report
    assert "gain over the start: not measured" in report
    assert MISSING_ADVICE in report and NO_VALID_ADVICE not in report

    assert paired_gain({"t": [0.8, None, 0.0]}, {"t": [0.9, 0.5, None]})[0] == pytest.approx(0.1)  # one pair left
    assert bootstrap_mean({"t": [0.8, None, 0.0]})[0] == pytest.approx(0.4)
