"""docs/extending.md: every file it shows is written out and used as a user would (its YAML overlays instantiate
on the quickstart, its callback, reward terms and world model run in a real GRPO fit), and `RewardTerms` keeps
missing rewards missing and runs after every calibration, wherever it is listed."""

from __future__ import annotations

import math
import re
from pathlib import Path
from types import SimpleNamespace

import lightning.pytorch as pl
import pytest
import torch
from support.fakes import LoggingModule, LowTokenEnvironment, byte_tokenizer

from wmrl.autoresearch.module import GRPOModule
from wmrl.callbacks import RewardTerms, RLCallback
from wmrl.cli import lightning_cli
from wmrl.models import tiny_llama
from wmrl.types import Outcome, RewardCorrections, Source, Status, StepRequest, Trajectory, Turn

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "extending.md"


def guide_files() -> dict[str, str]:
    text = GUIDE.read_text()
    return dict(re.findall(r"<!-- file: (\S+) -->\n```\w+\n(.*?)```", text, flags=re.S))


@pytest.fixture
def user_dir(tmp_path, monkeypatch):
    for name, body in guide_files().items():
        (tmp_path / name).write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_guide_shows_every_kind_of_plug_in():
    assert set(guide_files()) == {"my_callbacks.py", "clip.yaml", "my_rewards.py", "terms.yaml",
                                  "my_world_model.py", "world_model.yaml"}


@pytest.mark.parametrize(("overlay", "expected"), [("clip.yaml", "ClipRewards"), ("terms.yaml", "RewardTerms"),
                                                   ("world_model.yaml", "WorldModelReward")])
def test_its_overlays_instantiate_on_the_quickstart(user_dir, overlay, expected):
    cli = lightning_cli(["-c", str(ROOT / "configs/autoresearch/quickstart.yaml"), "-c", overlay,
                         "--trainer.default_root_dir", str(user_dir / "run")], run=False)
    names = [type(c).__name__ for c in cli.trainer.callbacks]
    assert expected in names
    if overlay == "world_model.yaml":
        (wm,) = [c.world_model for c in cli.trainer.callbacks if type(c).__name__ == "WorldModelReward"]
        assert type(wm).__name__ == "ImportCheckWorldModel"


def test_an_overlay_appends_its_callback_after_a_wmrl_configs_own_and_keys_its_state_by_its_settings(user_dir):
    from my_callbacks import ClipRewards

    cli = lightning_cli(["-c", str(ROOT / "configs/autoresearch/quickstart.yaml"),
                         "-c", str(ROOT / "configs/autoresearch/ablations/cpu/wmrl.yaml"), "-c", "clip.yaml",
                         "--trainer.default_root_dir", str(user_dir / "run")], run=False)
    names = [type(c).__name__ for c in cli.trainer.callbacks if isinstance(c, RLCallback)]
    assert names == ["AnchorRouting", "WorldModelReward", "OnlineDebiasing", "VarianceFusion", "ClipRewards"]
    keys = {ClipRewards(0.1, 0.9).state_key, ClipRewards(0.2, 0.8).state_key, ClipRewards(0.1, 0.9).state_key}
    assert len(keys) == 2 and all("ClipRewards" in key for key in keys)


class Snapshot(RLCallback):
    def __init__(self) -> None:
        self.rewards: list[torch.Tensor] = []
        self.trajectories: list = []

    def on_rewards(self, trainer, pl_module, batch):
        self.rewards.append(batch.rewards.clone())
        self.trajectories.append(batch.trajectories)


def fit(callbacks, steps: int = 1):
    model, tokenizer = tiny_llama(byte_tokenizer(), seed=0)
    module = GRPOModule(policy=(model, tokenizer), lora=None, environment=LowTokenEnvironment(tokenizer),
                        group_size=4, max_new_tokens=12, lr=1e-3, kl_coef=0.0, entropy_coef=0.0, micro_batch_size=8)
    data = torch.utils.data.DataLoader([["task_a", "task_b"]] * steps, batch_size=None)
    pl.Trainer(max_steps=steps, logger=False, enable_checkpointing=False, enable_progress_bar=False,
               enable_model_summary=False, accelerator="cpu", callbacks=callbacks).fit(module, data)
    return module


def test_the_callback_and_the_reward_terms_run_in_a_fit(user_dir):
    from my_callbacks import ClipRewards
    from my_rewards import closed_code_block, short_answer

    before, between, after = Snapshot(), Snapshot(), Snapshot()
    clip = ClipRewards(low=0.6, high=0.7)
    terms = RewardTerms(["my_rewards.closed_code_block", "my_rewards.short_answer"], weights=[0.1, 0.05])
    fit([before, clip, between, terms, after])
    raw, clipped, shaped = before.rewards[0], between.rewards[0], after.rewards[0]
    assert torch.equal(clipped, raw.clamp(0.6, 0.7)) and clip.clipped == int((raw != clipped).sum()) > 0
    assert clip.state_dict() == {"clipped": clip.clipped}
    # the terms, recomputed on the same trajectories, are exactly what was added
    expected = torch.tensor([0.1 * closed_code_block(t) + 0.05 * short_answer(t) for t in after.trajectories[0]])
    assert torch.allclose(shaped - clipped, expected, atol=1e-6) and torch.any(expected != 0)
    assert closed_code_block(Trajectory("t", 0, ())) == 1.0 and short_answer(Trajectory("t", 0, ())) is None


def test_the_world_model_predicts_crashes_from_imports_and_learns_from_anchors(user_dir):
    from my_world_model import ImportCheckWorldModel

    wm = ImportCheckWorldModel()
    good = "import numpy as np\nprint(np.zeros(1))\n"
    bad = "import nosuch_module_for_wmrl\n"
    answers = wm.step_many([StepRequest("t", good, ""), StepRequest("t", bad, ""), StepRequest("t", None, "no code")])
    assert [a.status for a in answers] == [Status.VALID, Status.RUNTIME_ERR, Status.MALFORMED]
    assert all(a.source is Source.WORLD_MODEL for a in answers) and answers[0].reward == 0.5
    wm.observe([StepRequest("t", good, "")] * 2, [Outcome(Status.VALID, 0.9), Outcome(Status.INFRA_ERROR, None)])
    assert wm.step_many([StepRequest("t", good, "")])[0].reward == pytest.approx(0.9)  # the missing one taught nothing
    restored = ImportCheckWorldModel()
    restored.load_state_dict(wm.state_dict())
    assert restored.seen == 1

    from wmrl.testing import check_world_model  # what the guide tells its reader to run

    report = check_world_model(ImportCheckWorldModel())
    assert report.ok, report.problems
    assert report.capabilities == ["LearnsFromAnchors", "Checkpointable"]


def test_reward_terms_leave_missing_rewards_missing_and_count_silent_terms():
    turn = Turn(response="```python\nprint(1)\n```", code="print(1)\n", outcome=Outcome(Status.VALID, 0.8),
                response_tokens=12, finish_reason="stop")
    trajectories = (Trajectory("t", 0, (turn,)), Trajectory("t", 0, (turn,)), Trajectory("t", 0, ()))
    batch = SimpleNamespace(trajectories=trajectories, rewards=torch.tensor([0.8, math.nan, 0.2]),
                            graded=torch.tensor([True, False, True]),
                            wm_calibrated=torch.tensor([0.7, math.nan, math.nan]), corrections=RewardCorrections())

    def bonus(trajectory):
        return 1.0 if trajectory.turns else None

    module = LoggingModule()
    RewardTerms([bonus], weights=[0.5]).on_rewards(None, module, batch)
    assert batch.rewards[0] == pytest.approx(1.3) and math.isnan(batch.rewards[1]) and batch.rewards[2] == pytest.approx(0.2)
    assert batch.wm_calibrated[0] == pytest.approx(1.2)  # the anchor's calibrated prediction moves with it
    assert module.logged["reward_terms/bonus"] == 1.0 and module.logged["reward_terms/bonus_missing"] == 1.0


class Calibrates(RLCallback):
    """A calibration's view of the rewards: the environment's, whatever runs later in its step."""

    def __init__(self) -> None:
        self.rewards: list[torch.Tensor] = []

    def on_calibrate(self, trainer, pl_module, batch):
        self.rewards.append(batch.rewards.clone())


def test_a_calibration_sees_the_environments_rewards_wherever_the_reward_terms_are_listed():
    seen, after = Calibrates(), Snapshot()
    fit([RewardTerms([lambda t: 1.0]), seen, after])  # the terms listed first: their hook still comes after
    graded = ~torch.isnan(after.rewards[0])
    assert graded.any() and torch.allclose(after.rewards[0][graded] - seen.rewards[0][graded], torch.ones(1))


def test_reward_terms_name_bad_paths():
    with pytest.raises(ValueError, match="cannot import 'no_such_pkg'"):
        RewardTerms(["no_such_pkg.fn"])
    with pytest.raises(ValueError, match="has no function 'nothing_here'"):
        RewardTerms(["math.nothing_here"])
    with pytest.raises(ValueError, match="2 weights for 1 fns"):
        RewardTerms(["math.sqrt"], weights=[1.0, 2.0])
