"""The VLA path from the Python 3.11 side: its clear dependency error, the callbacks it shares with the
AutoResearch path, and the Python 3.12 VLA suite (tests/vla) run in ``.venv312`` (created by .ci/run)."""

from __future__ import annotations

import sys
from pathlib import Path

import lightning.pytorch as pl
import numpy as np
import pytest
import torch
from support.nested_suite import assert_suite_passes

from wmrl.callbacks import (
    AnchorRouting,
    InverseVarianceDenoising,
    OnlineDebiasing,
    RLCallback,
    WorldModelReward,
)
from wmrl.types import GradesTrajectories, Outcome, Source, Status

ROOT = Path(__file__).resolve().parents[2]
VENV312 = ROOT / ".venv312" / "bin" / "python"


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="checks the error a Python < 3.12 user meets")
def test_vla_path_on_python_311_names_the_extra_and_the_python_requirement():
    from wmrl.vla.datamodule.lerobot import LeRobotVLADataModule
    from wmrl.vla.requirements import MissingVLADependency

    with pytest.raises(MissingVLADependency) as error:
        LeRobotVLADataModule().prepare_data()
    message = str(error.value)
    assert "Python >= 3.12" in message and "wmrl[lerobot]" in message and "Python 3.11" in message
    assert ".venv312" in message  # the fix, not only the problem
    assert "lerobot" not in sys.modules  # the VLA modules import LeRobot only where they need it


# -- one callback list for both paths ---------------------------------------------------------------------
def wmrl_callbacks(world_model) -> list[RLCallback]:
    """The full WMRL callback list, exactly as both paths get it."""
    return [AnchorRouting(fraction=0.5, floor=1, seed=0), WorldModelReward(world_model),
            OnlineDebiasing(min_pairs=8, refit_every=4), InverseVarianceDenoising(warmup=2)]


class Probe(RLCallback):
    def __init__(self) -> None:
        self.hooks: list[str] = []
        self.batches = []

    def on_rollout_plan(self, trainer, pl_module, plan):
        self.hooks.append("on_rollout_plan")

    def on_rollout_end(self, trainer, pl_module, batch):
        self.hooks.append("on_rollout_end")

    def on_calibrate(self, trainer, pl_module, batch):
        self.hooks.append("on_calibrate")

    def on_rewards(self, trainer, pl_module, batch):
        self.hooks.append("on_rewards")

    def on_advantages(self, trainer, pl_module, batch):
        self.hooks.append("on_advantages")
        self.batches.append(batch)


class LineSimulator:
    """A test double of PushTSimulator: the agent's x after 4 steps decides success (x > 256).

    Stands beside the real gym-pusht simulator (exercised by tests/vla in the 3.12 environment).
    """

    source = Source.REAL
    success_threshold = 0.5

    def play(self, seeds, controller, n_action_steps=1, frames=None, max_steps=None):
        from wmrl.vla.episode import Episode

        count = len(seeds)
        agent = np.full((count, 2), 256.0)
        env_state = np.tile(np.linspace(200, 300, 16), (count, 1))
        controller.reset(count)
        chunk, record = controller(agent, env_state, np.zeros((count, 3)), np.arange(count))
        episodes = []
        for i, seed in enumerate(seeds):
            actions = chunk[i][:4].astype(np.float32)
            success = bool(actions[:, 0].mean() > 256 + (seed % 3) * 2)
            episodes.append(Episode(
                seed=int(seed), states=np.repeat(agent[i : i + 1], len(actions), 0).astype(np.float32),
                env_states=np.repeat(env_state[i : i + 1], len(actions), 0).astype(np.float32),
                actions=actions, coverage=np.full(len(actions), float(success), np.float32), success=success,
                chunk_starts=np.array([0]), chunk_actions=record[i : i + 1].astype(np.float32),
            ))
        return episodes

    def grade(self, episodes):
        return [Outcome(Status.VALID, float(e.success), source=Source.REAL) for e in episodes]


class SquashedWorldModel(GradesTrajectories):
    """A test double of ProgressWorldModel: a monotone distortion of how far right the agent pushed."""

    source = Source.WORLD_MODEL
    parse_failures = 0

    def score(self, episode) -> float:
        return float(1 / (1 + np.exp(-(episode.actions[:, 0].mean() - 256) / 4))) ** 3

    def grade(self, episodes):
        return [Outcome(Status.VALID, self.score(e), source=Source.WORLD_MODEL) for e in episodes]

    def grade_trajectories(self, trajectories):
        return [self.score(t.episode) for t in trajectories]


class LinearChunkPolicy(torch.nn.Module):
    chunk_size, n_action_steps = 4, 4

    def __init__(self) -> None:
        super().__init__()
        self.head = torch.nn.Linear(18, 8)
        torch.nn.init.zeros_(self.head.bias)  # starts at x = 256: half the exploratory rollouts succeed

    def mean_chunk(self, obs):
        x = torch.cat([obs["observation.state"], obs["observation.environment_state"]], 1)
        return self.head(x).view(-1, 4, 2) * 0.0 + self.head.bias.view(1, 4, 2)

    def per_sample_loss(self, obs, chunk, std):
        from wmrl.algorithms.gaussian import chunk_nll

        return chunk_nll(chunk, self.mean_chunk(obs)[:, : chunk.shape[1]], std)

    def rl_loss(self, obs, chunk, std, reference):
        from wmrl.algorithms.gaussian import gaussian_rl_loss

        return gaussian_rl_loss(self.mean_chunk, obs, chunk, std, None if reference is None else reference.mean_chunk)

    def bc_loss(self, obs, chunk, is_pad):
        raise AssertionError("this test starts from the given policy: no behaviour cloning")


class SeedsData(pl.LightningDataModule):
    heldout_task_ids = [f"pusht-seed-{s}" for s in range(8, 12)]

    def check_simulator(self, simulator):
        pass

    def demonstrations(self):
        return []

    def train_dataloader(self):
        return torch.utils.data.DataLoader([[f"pusht-seed-{s}" for s in range(4)]] * 4, batch_size=None)


def test_autoresearch_and_vla_paths_run_the_same_callback_classes():
    from support.fakes import DistortedWorldModel, LowTokenEnvironment, byte_tokenizer

    from wmrl.autoresearch.module import GRPOModule
    from wmrl.models import tiny_llama
    from wmrl.vla.module import VLAGRPOModule

    def fit(module, callbacks, data):
        probe = Probe()
        trainer = pl.Trainer(max_steps=3, callbacks=[*callbacks, probe], logger=False, enable_checkpointing=False,
                             enable_progress_bar=False, enable_model_summary=False, accelerator="cpu",
                             limit_val_batches=0)
        trainer.fit(module, **data)
        return probe

    model, tokenizer = tiny_llama(byte_tokenizer(), seed=0)
    autoresearch = GRPOModule(policy=(model, tokenizer), lora=None, environment=LowTokenEnvironment(tokenizer),
                              group_size=4, max_new_tokens=6, lr=3e-3, entropy_coef=0.0, micro_batch_size=8,
                              prefill="none")
    autoresearch_callbacks = wmrl_callbacks(DistortedWorldModel(tokenizer))
    steps = [["task_a", "task_b", "task_c", "task_d"]] * 4
    text_probe = fit(autoresearch, autoresearch_callbacks,
                     {"train_dataloaders": torch.utils.data.DataLoader(steps, batch_size=None)})

    torch.manual_seed(0)
    vla = VLAGRPOModule(simulator=LineSimulator(), group_size=4, exploration_std=0.1, lr=1e-2,
                        eval_at_start=False, torch_threads=None, policy_instance=LinearChunkPolicy())
    vla_callbacks = wmrl_callbacks(SquashedWorldModel())
    vla_probe = fit(vla, vla_callbacks, {"datamodule": SeedsData()})

    assert [type(c) for c in autoresearch_callbacks] == [type(c) for c in vla_callbacks]
    order = ["on_rollout_plan", "on_rollout_end", "on_calibrate", "on_rewards", "on_advantages"] * 3
    assert text_probe.hooks == order and vla_probe.hooks == order
    for callbacks, probe in ((autoresearch_callbacks, text_probe), (vla_callbacks, vla_probe)):
        routing, _, debias, denoise = callbacks
        assert sum(routing.anchors_per_task.values()) >= 4 and len(debias.pairs) >= 8 and debias.fitted
        last = probe.batches[-1]
        anchors, simulated = last.is_real, ~last.is_real
        assert anchors.any() and simulated.any()
        assert not torch.isnan(last.wm_rewards[anchors]).any()  # side-graded by WorldModelReward
        assert torch.equal(last.rewards[simulated], last.wm_calibrated[simulated])  # OnlineDebiasing's map
        assert denoise.state.observations >= 1
    assert vla_probe.batches[-1].input_ids.shape == (16, 0)  # episodes carry no tokens


# -- the Python 3.12 suite -------------------------------------------------------------------------------
@pytest.mark.slow  # a nested pytest run in another interpreter: the slow tier (.ci/run)
@pytest.mark.lerobot
@pytest.mark.skipif(not VENV312.exists(), reason="no Python 3.12 lerobot env at .venv312 (.ci/run creates it)")
def test_vla_suite_in_the_python_312_lerobot_env():
    assert_suite_passes(VENV312, "vla", timeout_s=1800)
