"""The VLA path end to end with real LeRobot pieces: LeRobotDataset round trip, the ACT policy's per-sample loss,
config errors, and the CPU quickstart through `wmrl fit` (shortened)."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.lerobot


def test_episodes_round_trip_through_a_local_lerobot_dataset_and_append(tmp_path):
    from wmrl.vla.dataset import load_dataset, read_episodes, write_episodes
    from wmrl.vla.simulators.pusht import PushTSimulator, ScriptedController

    simulator = PushTSimulator(max_episode_steps=30, success_threshold=0.85, max_offset=25.0, max_angle=0.25)
    frames: list = []
    episodes = simulator.play([100_000, 100_001, 100_002], ScriptedController(seed=0), frames=frames)
    assert [f.shape[1:] for f in frames] == [(96, 96, 3)] * 3
    assert write_episodes(tmp_path / "ds", "local/test", episodes[:2], 0.85, frames[:2]) == [0, 1]
    assert write_episodes(tmp_path / "ds", "local/test", episodes[2:], 0.85, frames[2:]) == [2]  # resumed
    dataset = load_dataset(tmp_path / "ds", "local/test")
    assert dataset.num_episodes == 3 and "observation.image" in dataset.features
    back = read_episodes(dataset)
    for stored, played in zip(back, episodes, strict=True):
        np.testing.assert_array_equal(stored.actions, played.actions)
        np.testing.assert_array_equal(stored.env_states, played.env_states)
        assert stored.success == played.success
        # the dense reward the dataset records (next.reward) comes back: what ProgressWorldModel(label="reward")
        # learns from; the simulator's own value is the same coverage over the threshold, capped at 1
        np.testing.assert_allclose(stored.reward, np.minimum(played.coverage / 0.85, 1.0), rtol=1e-6)
        np.testing.assert_allclose(stored.progress_labels("reward"), played.reward, rtol=1e-6)
    with pytest.raises(FileNotFoundError, match="never downloads"):
        load_dataset(tmp_path / "absent", "lerobot/pusht")
    simulator.close()


def test_simulator_shaped_reward_is_a_perfect_progress_models_and_success_stays_the_default():
    from wmrl.vla.simulators.pusht import PushTSimulator, ScriptedController
    from wmrl.vla.world_models.reward_model import frame_indices, shaped_reward

    settings = dict(max_episode_steps=40, success_threshold=0.85, max_offset=25.0, max_angle=0.25)
    sparse, shaped = PushTSimulator(**settings), PushTSimulator(**settings, reward="shaped")
    episodes = sparse.play([100_000, 100_001, 100_002, 100_003], ScriptedController(noise=0.5, seed=0))
    assert [o.reward for o in sparse.grade(episodes)] == [1.0 if e.success else 0.0 for e in episodes]
    graded = [o.reward for o in shaped.grade(episodes)]
    for episode, reward in zip(episodes, graded, strict=True):
        progress = np.minimum(episode.coverage / 0.85, 1.0)[frame_indices(len(episode), 8)]
        assert reward == pytest.approx(shaped_reward(progress, 3))  # last 3 of 8 frames minus the first 3
        assert 0.0 <= reward <= 1.0
    assert len(set(graded)) > 1  # a dense signal, not the 0/1 success
    with pytest.raises(ValueError, match="simulator reward must be success or shaped"):
        PushTSimulator(reward="dense")
    with pytest.raises(ValueError, match="shaping_k in"):
        PushTSimulator(reward="shaped", shaping_frames=4, shaping_k=3)
    sparse.close()


def test_act_per_sample_loss_is_the_gaussian_nll_and_a_positive_advantage_pulls_the_chunk_closer():
    from wmrl.vla.contracts import ChunkPolicy
    from wmrl.vla.policies.chunk import ACTChunkPolicy, observation_batch

    torch.manual_seed(0)
    policy = ACTChunkPolicy(chunk_size=4, n_action_steps=2).build()
    assert type(policy.policy).__name__ == "ACTPolicy"
    assert isinstance(policy, ChunkPolicy) and type(policy).__name__ == "ACTChunkPolicy"
    obs = observation_batch(torch.rand(6, 2) * 512, torch.rand(6, 16) * 512)
    with torch.no_grad():
        mean = policy.mean_chunk(obs)
    executed = mean + 0.1 * torch.randn(mean.shape)
    loss = policy.per_sample_loss(obs, executed, std=0.1)
    assert loss.shape == (6,)
    torch.testing.assert_close(loss, ((executed - mean) ** 2).mean((1, 2)) / (2 * 0.01))
    advantages = torch.tensor([1.0, 0, 0, 0, 0, 0])
    optimizer = torch.optim.SGD(policy.parameters(), lr=1e-7)  # gradient norm ~300: a first-order step
    before = float(loss[0])
    (advantages * policy.per_sample_loss(obs, executed, std=0.1)).mean().backward()
    optimizer.step()
    assert float(policy.per_sample_loss(obs, executed, std=0.1)[0]) < before


def test_bad_configuration_names_the_key_and_the_fix():
    from wmrl.vla.datamodule.lerobot import LeRobotVLADataModule
    from wmrl.vla.module import VLAGRPOModule
    from wmrl.vla.simulators.pusht import PushTSimulator

    with pytest.raises(ValueError, match=r"model.init_args.group_size must be >= 2.*set that"):
        VLAGRPOModule(group_size=1)
    with pytest.raises(ValueError, match=r"success_threshold must be in \(0, 1\]"):
        PushTSimulator(success_threshold=1.5)
    with pytest.raises(ValueError, match="data.init_args.demo_seed must not fall among"):
        LeRobotVLADataModule(demo_seed=3)
    data = LeRobotVLADataModule(simulator=PushTSimulator(success_threshold=0.85))
    with pytest.raises(ValueError, match="model.init_args.simulator and data.init_args.simulator differ in "
                                         "success_threshold"):
        data.check_simulator(PushTSimulator(success_threshold=0.9))


def test_pusht_quickstart_config_runs_and_prints_its_paired_heldout_gain_with_an_interval(tmp_path, fit_shortened):
    """`wmrl fit -c configs/vla/pusht_quickstart.yaml`, shortened (2 steps, fewer demos / SFT / held-out states): it
    prints held-out success before and after, and the paired gain over the held-out initial states with its 95%
    interval, the same numbers as the episodes it kept in heldout.jsonl; a gain not above 0 is called a smoke run,
    pointing to the benchmark that shows learning."""
    import re

    from wmrl.algorithms.stats import paired_gain
    from wmrl.vla.heldout_report import SMOKE_RUN_ADVICE

    run_dir = tmp_path / "run"
    output = fit_shortened(["configs/vla/pusht_quickstart.yaml"], run_dir, demonstrations=24, heldout_states=8,
                           sft_steps=300)
    assert "held-out success (simulator, no exploration noise)" in output
    gain = re.search(r"gain over the start: .*?([+-]\d\.\d{3}), 95% interval \[([+-]\d\.\d{3}), ([+-]\d\.\d{3})\].*"
                     r"\(paired bootstrap over 8 held-out initial states, same seeds\)", output)
    assert gain, output[-3000:]
    evaluations = [json.loads(line) for line in (run_dir / "heldout.jsonl").read_text().splitlines()]
    assert [e["step"] for e in evaluations] == [0, 2]
    before, after = ({"states": [e["success"] for e in ev["episodes"]]} for ev in evaluations)
    assert [f"{v:+.3f}" for v in paired_gain(before, after)] == list(gain.groups())  # the states, paired
    assert (SMOKE_RUN_ADVICE in output) == (float(gain.group(2)) <= 0)

    from wmrl.vla.dataset import load_dataset

    demos = load_dataset(run_dir / "demos", "local/pusht_scripted")
    assert demos.num_episodes == 24
    anchors = load_dataset(run_dir / "anchors", "local/pusht_anchors")
    pairs = [json.loads(line) for line in (run_dir / "anchors" / "anchors.jsonl").read_text().splitlines()]
    assert anchors.num_episodes == len(pairs) >= 2 * 4  # every anchor episode of both steps, replayable
    assert sorted(p["episode_index"] for p in pairs) == list(range(len(pairs)))
    assert all(p["wm_raw"] is not None for p in pairs)  # each real outcome paired with the world model's score

    (metrics_file,) = run_dir.glob("csv/version_*/metrics.csv")
    rows = list(csv.DictReader(metrics_file.open()))
    logged = {k for row in rows for k, v in row.items() if v != ""}
    assert {"heldout/success", "anchor/real_success", "debias/pairs", "denoise/weight", "reward/real_mean",
            "reward/world_model_raw_mean", "fidelity/spearman_raw", "time/env", "sft/loss"} <= logged
    pairs_logged = [float(r["debias/pairs"]) for r in rows if r.get("debias/pairs")]
    assert pairs_logged[-1] == len(pairs)  # OnlineDebiasing saw exactly the recorded anchor pairs


def test_progress_world_model_learns_the_demonstrations_recorded_reward_and_anchors_only_their_success():
    """``label: reward`` trains on the demonstrations' dense reward; an anchor's label is its sparse success alone
    (time progress if it succeeded, else 0), never the dense reward the simulator computed for it."""
    from wmrl.vla.episode import Episode
    from wmrl.vla.world_models.progress import ProgressWorldModel

    def episode(success: bool, reward: list[float]) -> Episode:
        steps = len(reward)
        return Episode(0, np.zeros((steps, 2), np.float32), np.zeros((steps, 16), np.float32),
                       np.zeros((steps, 2), np.float32), np.zeros(steps, np.float32), success,
                       reward=np.array(reward, np.float32))

    model = ProgressWorldModel(chunk_size=2, hidden=8, train_steps=0, label="reward")
    model.fit_demonstrations([episode(False, [0.1, 0.3, 0.5])])
    model.anchors = [episode(True, [0.2, 0.2, 0.2]), episode(False, [0.7, 0.8, 0.9])]
    labels = model._training_set()["progress"].tolist()
    assert labels == pytest.approx([0.1, 0.3, 0.5, 0.0, 0.5, 1.0, 0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="label must be time or reward"):
        ProgressWorldModel(label="coverage")
    no_reward = Episode(0, np.zeros((2, 2)), np.zeros((2, 16)), np.zeros((2, 2)), np.zeros(2), True)
    with pytest.raises(ValueError, match="no recorded dense reward"):
        no_reward.progress_labels("reward")


def test_noisy_held_out_episodes_are_reproducible_and_leave_the_noise_free_ones_alone():
    """``eval_noisy_episodes`` adds the Gaussian policy's success per state, from its own seeded generator: two
    evaluations agree, and the noise-free episodes are those of an evaluation without it."""
    from wmrl.vla.module import VLAGRPOModule
    from wmrl.vla.policies.chunk import ACTChunkPolicy
    from wmrl.vla.simulators.pusht import PushTSimulator

    torch.manual_seed(0)
    simulator = PushTSimulator(max_episode_steps=15, success_threshold=0.85, max_offset=25.0, max_angle=0.25)
    module = VLAGRPOModule(simulator=simulator, policy_instance=ACTChunkPolicy(chunk_size=4, n_action_steps=2).build(),
                           exploration_std=0.3, eval_noisy_episodes=2)
    tasks = [f"pusht-seed-{s}" for s in range(3)]
    first, second = module.evaluate_episodes(tasks, noisy=2), module.evaluate_episodes(tasks, noisy=2)
    plain = module.evaluate_episodes(tasks)
    assert first == second and [e["noisy_success"] in (0.0, 0.5, 1.0) for e in first] == [True] * 3
    assert [{k: v for k, v in e.items() if k != "noisy_success"} for e in first] == plain
    assert "noisy_success" not in plain[0]
    with pytest.raises(ValueError, match="eval_noisy_episodes must be >= 0"):
        VLAGRPOModule(simulator=simulator, policy_instance=module.policy, eval_noisy_episodes=-1)
    simulator.close()
