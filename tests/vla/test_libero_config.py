"""configs/vla/libero_gpu.yaml (on configs/vla/pusht_gpu.yaml): instantiates without LIBERO, and its first use names
the missing package; the shipped VLA bases take every seed from ``--seed_everything``."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.lerobot
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(importlib.util.find_spec("libero") is not None,
                    reason="LIBERO (hf-libero) is installed here: the missing-package error cannot occur")
def test_libero_config_fails_with_an_error_naming_the_missing_package(tmp_path, monkeypatch):
    from wmrl.cli import lightning_cli
    from wmrl.vla.requirements import MissingVLADependency
    from wmrl.vla.simulators.libero import LiberoSimulator

    monkeypatch.chdir(tmp_path)
    cli = lightning_cli(["-c", str(ROOT / "configs/vla/pusht_gpu.yaml"), "-c", str(ROOT / "configs/vla/libero_gpu.yaml"),
                         "--trainer.accelerator=cpu", f"--trainer.default_root_dir={tmp_path}"], run=False)
    assert isinstance(cli.model.simulator, LiberoSimulator) and cli.model.simulator.suite == "libero_10"
    policy = cli.model.policy  # the overlay's class_path replaces the base's ACT
    assert type(policy).__name__ == "SmolVLAChunkPolicy" and policy.settings.chunk_size == 50
    assert policy.settings.vlm_model_name == "/models/SmolVLM2-500M-Video-Instruct"
    with pytest.raises(MissingVLADependency, match=r"hf-libero.*lerobot\[libero\]==0.6.1"):
        cli.datamodule.prepare_data()  # the first thing a fit does: record demonstrations in the simulator
    assert not (tmp_path / "demos" / "meta" / "info.json").exists()


def test_libero_simulator_configuration_errors_name_the_key():
    from wmrl.vla.simulators.libero import LiberoSimulator

    with pytest.raises(ValueError, match=r"model.init_args.simulator.init_args.suite must be one of .*libero_10"):
        LiberoSimulator(suite="libero_long")


@pytest.mark.parametrize("config", ["pusht_quickstart", "pusht_gpu"])
def test_seed_everything_reaches_every_seed_of_a_shipped_vla_config(config, tmp_path, monkeypatch):
    """``--seed_everything=k`` is the module's, the data module's, the anchor draw's and the world model's seed (the
    configs interpolate it); the demonstrations' and the initial states' seeds do not move."""
    from wmrl.callbacks import AnchorRouting, WorldModelReward
    from wmrl.cli import lightning_cli

    monkeypatch.chdir(tmp_path)
    cli = lightning_cli(["-c", str(ROOT / f"configs/vla/{config}.yaml"), "--trainer.accelerator=cpu",
                         "--seed_everything=2"], run=False)
    (routing,) = [c for c in cli.trainer.callbacks if isinstance(c, AnchorRouting)]
    (reward,) = [c for c in cli.trainer.callbacks if isinstance(c, WorldModelReward)]
    assert cli.model.hparams.seed == cli.datamodule.seed == routing.seed == 2
    assert reward.world_model.generator.initial_seed() == 2
    assert (cli.datamodule.demo_seed, cli.datamodule.train_seeds[0]) == (100000, 0)
