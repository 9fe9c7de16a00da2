"""The VLA world model on real gym-pusht episodes: calibration helps on held-out seeds, and an
anti-correlated world model is detected (seeded; ~30 s on 2 cores)."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from wmrl.algorithms.debias import rank_correlation
from wmrl.callbacks import OnlineDebiasing

pytestmark = pytest.mark.lerobot


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    from wmrl.vla.simulators.pusht import PushTSimulator, ScriptedController
    from wmrl.vla.world_models.progress import ProgressWorldModel

    simulator = PushTSimulator(max_episode_steps=100, success_threshold=0.85, max_offset=25.0, max_angle=0.25)
    demonstrations = simulator.play(range(100_000, 100_030), ScriptedController(seed=0))
    checkpoint = tmp_path_factory.mktemp("reward_model") / "reward_model.pt"
    world_model = ProgressWorldModel(chunk_size=4, train_steps=300, refresh_every=0, checkpoint=str(checkpoint), seed=0)
    world_model.fit_demonstrations(demonstrations)
    # on-policy-like rollouts: the demonstrator with exploration noise, on train and on held-out initial states
    train = simulator.play([s for s in range(16) for _ in range(2)], ScriptedController(noise=15.0, seed=1))
    heldout = simulator.play(range(16, 50), ScriptedController(noise=15.0, seed=2))
    simulator.close()
    return {"world_model": world_model, "checkpoint": checkpoint, "train": train, "heldout": heldout}


def test_calibrated_reward_is_closer_to_real_success_than_the_raw_one_on_heldout_seeds(scored):
    world_model, train, heldout = scored["world_model"], scored["train"], scored["heldout"]
    real_train = np.array([e.success for e in train], dtype=float)
    real_heldout = np.array([e.success for e in heldout], dtype=float)
    assert 0.2 < real_train.mean() < 0.8 and 0.2 < real_heldout.mean() < 0.8  # both outcomes occur
    raw_train, raw_heldout = world_model.score_episodes(train), world_model.score_episodes(heldout)

    debias = OnlineDebiasing(min_pairs=16, refit_every=16)
    debias.push(raw_train, real_train, groups=[e.seed for e in train])  # the anchor pairs (train seeds only)
    assert debias.fitted and debias.rank_corr > 0
    calibrated = debias.calibration(raw_heldout)

    mae_raw, mae_cal = np.abs(raw_heldout - real_heldout).mean(), np.abs(calibrated - real_heldout).mean()
    mse_raw, mse_cal = ((raw_heldout - real_heldout) ** 2).mean(), ((calibrated - real_heldout) ** 2).mean()
    print(f"held-out ({len(heldout)} episodes, success {real_heldout.mean():.2f}): MAE raw {mae_raw:.3f} -> "
          f"calibrated {mae_cal:.3f}; MSE raw {mse_raw:.3f} -> calibrated {mse_cal:.3f}; rank corr (train) "
          f"{debias.rank_corr:.3f}, (held-out) {rank_correlation(raw_heldout, real_heldout):.3f}")
    assert mse_cal < mse_raw and mae_cal < mae_raw
    assert rank_correlation(raw_heldout, real_heldout) > 0  # the world model carries real signal


def test_an_anti_correlated_world_model_is_detected(scored, caplog):
    from wmrl.vla.world_models.progress import ProgressWorldModel

    # the pretrained reward model, loaded from its local file, served backwards
    inverted = ProgressWorldModel(chunk_size=4, checkpoint=str(scored["checkpoint"]), invert=True)
    assert inverted.pretrained
    train = scored["train"]
    raw = inverted.score_episodes(train)
    debias = OnlineDebiasing(min_pairs=16, refit_every=16)
    with caplog.at_level(logging.WARNING, logger="wmrl.callbacks.debiasing"):
        debias.push(raw, [float(e.success) for e in train], groups=[e.seed for e in train])
    print(f"anti-correlated world model: rank correlation {debias.rank_corr:.3f}, map flat {debias.calibration.is_flat}")
    assert debias.rank_corr <= 0
    assert "rank correlation" in caplog.text and "no better than chance" in caplog.text
