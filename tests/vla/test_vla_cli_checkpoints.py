"""The VLA quickstart's life from the command line: `wmrl fit` stopped after step 1 and resumed with `--ckpt_path`
ends where an uninterrupted 2-step fit ends (policy, world model, calibration, denoising); `wmrl validate|test
--ckpt_path` evaluate the checkpoint as trained (the same held-out episodes as the fit's last evaluation).

Each command runs `python -m wmrl.cli` in a fresh process on a shortened copy of configs/vla/pusht_quickstart.yaml
(fewer demonstrations, SFT steps and held-out states; a checkpoint every step), as tests/vla/conftest.py does.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

ROOT = Path(__file__).resolve().parents[2]
SHORT = ["--data.init_args.steps_per_epoch=2", "--data.init_args.demonstrations=8",
         "--data.init_args.heldout_states=3", "--data.init_args.groups_per_step=2"]


def shortened(where: Path) -> Path:
    settings = yaml.safe_load((ROOT / "configs/vla/pusht_quickstart.yaml").read_text())
    for callback in settings["trainer"]["callbacks"]:
        if callback["class_path"].endswith("BehaviourCloningWarmStart"):
            callback["init_args"]["steps"] = 60
    settings["checkpoint_every"] = 1
    path = where / "pusht_short.yaml"
    path.write_text(yaml.safe_dump(settings, sort_keys=False))
    return path


def wmrl(config: Path, *args: str) -> str:
    run = subprocess.run([sys.executable, "-m", "wmrl.cli", *args[:1], "-c", str(config), *args[1:], *SHORT],
                         cwd=config.parent, capture_output=True, text=True, timeout=600)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-4000:]
    return output


def evaluations(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "heldout.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("vla-cli")
    config = shortened(root)
    straight, resumed = root / "straight", root / "resumed"
    wmrl(config, "fit", f"--trainer.default_root_dir={straight}", "--trainer.max_steps=2")
    wmrl(config, "fit", f"--trainer.default_root_dir={resumed}", "--trainer.max_steps=1")
    (resumed / "checkpoints" / "last.ckpt").rename(resumed / "step1.ckpt")
    wmrl(config, "fit", f"--trainer.default_root_dir={resumed}", "--trainer.max_steps=2",
         f"--ckpt_path={resumed / 'step1.ckpt'}")
    return {"config": config, "straight": straight, "resumed": resumed}


def test_a_vla_fit_stopped_after_step_1_and_resumed_equals_an_uninterrupted_fit(runs):
    straight = torch.load(runs["straight"] / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    resumed = torch.load(runs["resumed"] / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    step1 = torch.load(runs["resumed"] / "step1.ckpt", map_location="cpu", weights_only=True)
    assert straight["global_step"] == resumed["global_step"] == 2 and step1["global_step"] == 1
    moved = False
    for name, value in straight["state_dict"].items():
        assert torch.equal(resumed["state_dict"][name], value), name
        moved |= not torch.equal(step1["state_dict"][name], value)
    assert moved  # step 2 changed the policy: the equality above is not the checkpoint of step 1
    # routing, the world model (weights, optimizer, anchors, refreshes), calibration, denoising, the anchor recorder
    rl = [k for k in straight["callbacks"] if not k.startswith("ModelCheckpoint")]
    assert len(rl) >= 5 and all(k in resumed["callbacks"] for k in rl)
    for key in rl:
        assert_same(straight["callbacks"][key], resumed["callbacks"][key], key)
    assert evaluations(runs["straight"])[-1]["episodes"] == evaluations(runs["resumed"])[-1]["episodes"]


#: state that says how a run went, not where it is: execution wall-clock, and whether the world model was loaded
#: from a checkpoint rather than trained in this process
BOOKKEEPING = {"wall_seconds", "pretrained"}


def assert_same(a, b, where: str) -> None:
    """``a == b`` for nested checkpoint state (tensors exactly, other values by repr: NaN equals NaN), :data:`BOOKKEEPING` aside."""
    if isinstance(a, dict):
        assert set(a) == set(b), where
        for k in a:
            if k not in BOOKKEEPING:
                assert_same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, torch.Tensor):
        assert torch.equal(a, b), where
    else:
        assert repr(a) == repr(b), where


@pytest.mark.parametrize("command", ["validate", "test"])
def test_validate_and_test_from_a_vla_checkpoint_replay_the_fits_last_evaluation(runs, tmp_path, command):
    last = runs["straight"] / "checkpoints" / "last.ckpt"
    output = wmrl(runs["config"], command, f"--trainer.default_root_dir={tmp_path}", f"--ckpt_path={last}")
    split = "heldout" if command == "validate" else "test"
    assert f"{split}/success" in output
    (line,) = evaluations(tmp_path)
    fitted = evaluations(runs["straight"])[-1]
    assert line["split"] == split and line["step"] == fitted["step"] == 2  # labelled with the checkpoint's step
    assert line["episodes"] == fitted["episodes"]  # the trained policy, the same initial states and seeds


VLA_CONFIGS = sorted(p for p in (ROOT / "configs" / "vla").rglob("*.yaml") if p.parent.name != "arms") + \
    sorted((ROOT / "configs" / "vla" / "arms").glob("*.yaml"))


@pytest.mark.parametrize("config", VLA_CONFIGS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shipped_vla_config_saves_hyperparameters_that_ckpt_path_reads(config, tmp_path, monkeypatch):
    """What `--ckpt_path` needs of a checkpoint, for every shipped VLA config: the module's config with its class
    path (LightningCLI's form), loadable with weights_only. The end-to-end commands run above on the quickstart."""
    import io

    from support.config_overlays import composed

    from wmrl.cli import lightning_cli

    monkeypatch.chdir(tmp_path)
    args = [*composed(config), "--trainer.accelerator=cpu", f"--trainer.default_root_dir={tmp_path}"]
    cli = lightning_cli(args, run=False)
    hparams = dict(cli.model.hparams)
    assert hparams["_class_path"] == "wmrl.vla.module.VLAGRPOModule"
    assert isinstance(hparams["policy"], dict) and "simulator" not in hparams
    buffer = io.BytesIO()
    torch.save({"hyper_parameters": hparams}, buffer)
    buffer.seek(0)
    assert torch.load(buffer, weights_only=True)["hyper_parameters"] == hparams
