"""The controlled test of each correction (benchmarks/corrections.py): the distorted-oracle world model, the target
bandit, and the benchmark end to end at a tiny budget through the real VLAGRPOModule and callbacks."""

from __future__ import annotations

import doctest
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from wmrl.vla.simulators import bandit as bandit_module
from wmrl.vla.simulators.bandit import TargetBandit
from wmrl.vla.world_models import distorted_oracle as oracle_module
from wmrl.vla.world_models.distorted_oracle import DistortedOracle

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("corrections", ROOT / "benchmarks" / "corrections.py")
corrections = importlib.util.module_from_spec(spec)
sys.modules["corrections"] = corrections
spec.loader.exec_module(corrections)


class FixedPolicy:
    """A controller that always plays the same pixel action (no exploration)."""

    def __init__(self, action) -> None:
        self.action = np.asarray(action, dtype=np.float32)

    def reset(self, count: int) -> None:
        pass

    def __call__(self, agent, env_state, block_pose, rows):
        chunk = np.tile(self.action, (len(rows), 1, 1))
        return chunk, chunk / 256.0 - 1.0


def episodes(count: int = 16):
    """Episodes of the bandit at the arena's centre: true rewards spread over (0, 1] by the targets' distances."""
    return TargetBandit().play(list(range(count)), FixedPolicy([[256.0, 256.0]]))


@pytest.mark.parametrize("module", [bandit_module, oracle_module])
def test_docstring_examples(module):
    assert doctest.testmod(module).failed == 0


def test_the_bandit_grades_with_the_true_reward():
    played = episodes()
    truth = [o.reward for o in TargetBandit().grade(played)]
    assert len(set(truth)) == len(truth) and 0 < min(truth) < max(truth) <= 1  # continuous, not 0/1
    for episode, reward in zip(played, truth, strict=True):
        assert len(episode) == 1 and episode.chunk_actions.shape == (1, 1, 2) and episode.success == (reward >= 0.5)
        _, keypoints = TargetBandit().context(episode.seed)
        assert reward == pytest.approx(np.exp(-np.sum((256.0 - keypoints[:2]) ** 2) / (2 * 64.0**2)), rel=1e-6)


def test_the_distorted_oracle_is_a_known_monotone_distortion_plus_seeded_noise():
    played, bandit = episodes(), TargetBandit()
    truth = np.array([o.reward for o in bandit.grade(played)])
    biased = DistortedOracle(bandit, distortion="power", power=3.0)
    assert np.allclose(biased.score_episodes(played), truth**3)  # exactly the distortion, no noise
    assert [o.source.value for o in biased.grade(played)] == ["world_model"] * len(played)
    noisy = DistortedOracle(bandit, noise_sd=0.05, seed=3)
    first = noisy.score_episodes(played)
    again = DistortedOracle(bandit, noise_sd=0.05, seed=3).score_episodes(played)
    assert np.array_equal(first, again) and not np.allclose(first, np.clip(truth, 0, 1))  # seeded, and noisy
    assert abs(float(np.std(first - truth)) - 0.05) < 0.03
    # resume: the noise generator is checkpointed
    state = noisy.state_dict()
    later = noisy.score_episodes(played)
    restored = DistortedOracle(bandit, noise_sd=0.05, seed=99)
    restored.load_state_dict(json.loads(json.dumps(state)))
    assert np.array_equal(restored.score_episodes(played), later)
    clipped = DistortedOracle(bandit, offset=0.9, noise_sd=0.0)
    assert clipped.score_episodes(played).max() == 1.0 and clipped.metrics()["clipped"] > 0


def test_bad_settings_name_the_key():
    with pytest.raises(ValueError) as error:
        DistortedOracle(object(), distortion="cubic", power=-1.0, scale=0.0, noise_sd=-0.1)
    message = str(error.value)
    for key in ("oracle must grade", "distortion must be one of identity, power, logistic, reverse, independent", "power must be > 0",
                "scale must be > 0", "noise_sd must be finite and >= 0"):
        assert f"world_model.init_args.{key}" in message
    with pytest.raises(ValueError, match="TargetBandit width must be > 0"):
        TargetBandit(width=0.0)


def test_the_benchmark_runs_the_real_method_at_a_tiny_budget(tmp_path):
    """Two steps per arm, two seeds, two settings, the arms the checks need: the machinery, not the result. With the world model
    equal to the truth (``clean``) the uncorrected and the denoising-only arms must train exactly as the oracle arm
    (the same rewards and advantages, and a denoising weight that stays 1 when the world model never disagrees), and
    the kit's fusion gives such a world model its full share; the arms without a world model run once per seed."""
    results = tmp_path / "results"
    flags = ["--seeds", "0", "1", "--steps", "2", "--heldout-states", "8", "--settings", "clean", "noise", "--arms",
             "oracle", "anchors_only", "uncorrected", "denoise_only_paper", "denoise_only", "--out", str(tmp_path / "runs"),
             "--results",
             str(results)]
    corrections.main(flags)
    report = json.loads((results / "results" / "corrections.json").read_text())
    assert set(report["summary"]) == {"clean", "noise"} and report["seeds"] == [0, 1]
    clean = report["summary"]["clean"]
    assert set(clean) == {"oracle", "anchors_only", "uncorrected", "denoise_only_paper", "denoise_only", "start"}
    for arm in ("uncorrected", "denoise_only_paper"):
        same = clean[arm]["reward_vs_oracle"]
        assert (same["point"], same["low"], same["high"], same["per_seed"]) == (0.0, 0.0, 0.0, [0.0, 0.0])
        assert clean[arm]["advantage_agreement"] == pytest.approx(1.0)
    assert clean["denoise_only_paper"]["denoise_weight"] == 1.0
    assert clean["denoise_only"]["fusion_rho"] > 0.99 and abs(clean["denoise_only"]["reward_vs_oracle"]["point"]) < 1e-4
    assert clean["denoise_only"]["reward_vs_anchors_only"]["over_seeds"].keys() >= {"point", "low", "high"}
    noise = report["summary"]["noise"]
    assert noise["uncorrected"]["advantage_agreement"] < 0.99  # the noise reaches the world-model rows
    assert noise["anchors_only"]["anchor_share"] == 1.0 and 0 < noise["uncorrected"]["anchor_share"] < 1
    assert clean["uncorrected"]["tied"] == 0.0  # a continuous reward: no world-model row ties another
    assert [v["check"] for v in report["verdicts"]] == [
        "noise: the paper's denoising recovers: denoise_only_paper - uncorrected above 0"]
    assert not (tmp_path / "runs" / "noise" / "seed0" / "oracle").exists()  # one oracle run per seed, every setting
    assert (tmp_path / "runs" / "any" / "seed0" / "oracle" / "heldout.jsonl").is_file()
    episodes_file = tmp_path / "runs" / "noise" / "seed1" / "denoise_only" / "heldout.jsonl"
    assert [json.loads(line)["step"] for line in episodes_file.read_text().splitlines()] == [0, 1, 2]
    text = (results / "RESULTS-corrections.md").read_text()
    assert text.startswith("# A controlled test of each correction") and "## Setting `noise`" in text
    uncorrected = noise["denoise_only_paper"]["reward_vs_uncorrected"]
    assert len(uncorrected["per_seed"]) == 2 and uncorrected["point"] == pytest.approx(np.mean(uncorrected["per_seed"]))
    # --reuse reads the finished runs (no training: the runs' files stay as they were) and keeps the reading
    (results / "RESULTS-corrections.md").write_text(text + "\n## Reading (by hand, 2026-12-02)\nkept\n")
    before = episodes_file.stat().st_mtime_ns
    corrections.main([*flags, "--reuse"])
    again = json.loads((results / "results" / "corrections.json").read_text())
    assert again["summary"] == json.loads(json.dumps(report["summary"])) and episodes_file.stat().st_mtime_ns == before
    assert "20 of 20 runs read from disk (--reuse)" in again["sitting"]
    assert (results / "RESULTS-corrections.md").read_text().endswith("kept\n")
