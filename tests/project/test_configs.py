"""Every shipped YAML parses and instantiates; configuration mistakes name the key and the fix."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from lightning.pytorch.loggers import CSVLogger
from support.config_overlays import ABLATIONS, FULL, KIT, OVERLAY_LINE, composed, declared_bases

from wmrl.autoresearch.datamodule import tasks_for_step
from wmrl.cli import lightning_cli

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted(ROOT.glob("configs/**/*.yaml")) + sorted(ROOT.glob("benchmarks/*.yaml"))
# Configs for GPU machines instantiate here with their GPU-only choices swapped for CPU stand-ins (the vLLM engine
# and world-model backend stay: they import vllm only when they first generate).
_GPU_TO_CPU = ["--trainer.accelerator=cpu", "--trainer.precision=32-true", "--model.init_args.model=smollm2-135m-instruct",
               "--model.init_args.dtype=float32"]
CPU_STANDINS = {"configs/autoresearch/paper_4b.yaml": _GPU_TO_CPU,
                "configs/vla/pusht_gpu.yaml": ["--trainer.accelerator=cpu"],
                "configs/vla/libero_gpu.yaml": ["--trainer.accelerator=cpu"]}


# The paper's VLA table (benchmarks/vla_arms.py): each arm's overlay on configs/vla/arms/pusht.yaml.
VLA_ARMS = {"pusht": [], "smolvla": [], "raw_world_model": ["AnchorRouting", "WorldModelReward"], "wmrl": KIT,
            "wmrl_paper": FULL,
            "debias_only": ABLATIONS["debias_only"], "denoise_only": ABLATIONS["denoise_only"],
            "uncorrected": ABLATIONS["uncorrected"], "sparse_budget": [], "shaped_oracle": []}


def expected_callbacks(name: str) -> list[str] | None:
    if name.startswith("configs/vla/arms/"):
        return VLA_ARMS[Path(name).stem]
    if name in ("configs/autoresearch/world_models/learned.yaml", "configs/autoresearch/paper_4b_vllm.yaml"):
        return FULL
    if name in ("configs/autoresearch/world_models/task_aware.yaml", "configs/autoresearch/world_models/served.yaml"):
        return KIT
    if name.startswith("configs/autoresearch/ablations/paper/"):  # the paper's scale and constants: its method
        return FULL if Path(name).stem == "wmrl" else ABLATIONS[Path(name).stem]
    if name.startswith("configs/autoresearch/ablations/"):
        return ABLATIONS[Path(name).stem]
    return [] if name.startswith("configs/autoresearch/") else None


def relative(path: Path) -> str:
    return str(path.relative_to(Path(__file__).resolve().parents[2]))


def test_configs_exist():
    assert {relative(c) for c in CONFIGS} >= {"configs/autoresearch/quickstart.yaml", "configs/autoresearch/paper_4b.yaml"}


@pytest.mark.parametrize("config", CONFIGS, ids=relative)
def test_a_config_is_a_base_or_says_on_which_bases_it_goes(config):
    """A base names its model and data classes; an overlay's first line names its bases, each an existing config
    whose own bases come before it (``a + b``: ``b`` is an overlay on ``a``), the first one a base."""
    import yaml

    name, bases = relative(config), declared_bases(config)
    first = config.read_text().partition("\n")[0]
    assert bases or "overlay" not in first.lower(), f"{name}: write its first line as `{OVERLAY_LINE}<base>.yaml`"
    if not bases:
        settings = yaml.safe_load(config.read_text()) or {}
        assert all("class_path" in (settings.get(k) or {}) for k in ("model", "data")), (
            f"{name} names no model or data class: an overlay's first line is `{OVERLAY_LINE}<base>.yaml`")
    for i, base in enumerate(bases):
        assert (ROOT / base).is_file(), f"{name}: its base {base} does not exist"
        assert declared_bases(ROOT / base) == bases[:i], f"{name}: {base} goes on {declared_bases(ROOT / base)}"


@pytest.mark.parametrize("config", CONFIGS, ids=relative)
def test_config_instantiates(config, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # relative run dirs land in the temp dir
    (tmp_path / "examples").symlink_to(ROOT / "examples")  # configs/tasks/ name the example folder relatively
    name = relative(config)
    bases = declared_bases(config)
    args = [*composed(config), *CPU_STANDINS.get(bases[0] if bases else name, [])]
    if name == "configs/strategy/fsdp.yaml":
        check_fsdp_overlay(config, args)
        return
    cli = lightning_cli(args, run=False)
    if name == "configs/strategy/ddp.yaml":
        from lightning.pytorch.strategies import DDPStrategy

        assert isinstance(cli.trainer.strategy, DDPStrategy) and cli.trainer.num_devices == 2
    if name == "configs/autoresearch/paper_4b_vllm.yaml":
        from lightning.pytorch.callbacks import ModelCheckpoint

        from wmrl.generation.vllm import VLLMGenerationEngine
        from wmrl.generation.vllm_world_model import VLLMWorldModelBackend

        assert isinstance(cli.model.engine, VLLMGenerationEngine) and cli.model.engine.settings.max_model_len == 24576
        # the engine is the run's infrastructure, not a model setting: a checkpoint evaluated on another machine
        # (`--ckpt_path`) samples with that machine's configured engine
        assert "engine" not in cli.model.hparams and cli.model.hparams["_class_path"] == "wmrl.autoresearch.module.GRPOModule"
        (world_model,) = [c.world_model for c in cli.trainer.callbacks if hasattr(c, "world_model")]
        assert isinstance(world_model.backend, VLLMWorldModelBackend) and world_model.mode == "generate"
        (checkpoint,) = [c for c in cli.trainer.callbacks if isinstance(c, ModelCheckpoint)]
        assert checkpoint._every_n_train_steps == 10  # the base's checkpoint_every, kept under the overlay
    if name == "configs/autoresearch/world_models/served.yaml":
        from wmrl.generation.served_world_model import ServedWorldModelBackend

        (world_model,) = [c.world_model for c in cli.trainer.callbacks if hasattr(c, "world_model")]
        assert isinstance(world_model.backend, ServedWorldModelBackend) and world_model.mode == "score"
        assert world_model.backend.urls == ["http://localhost:8100"]
    if name == "configs/autoresearch/vllm_cpu.yaml":
        from wmrl.generation.vllm import VLLMGenerationEngine

        assert isinstance(cli.model.engine, VLLMGenerationEngine) and cli.model.engine.settings.enforce_eager
    if name.startswith("configs/autoresearch/ablations/paper/") and "real_grpo" not in name:
        from wmrl.generation.hf_world_model import HFWorldModelBackend

        (world_model,) = [c.world_model for c in cli.trainer.callbacks if hasattr(c, "world_model")]
        assert isinstance(world_model.backend, HFWorldModelBackend) and world_model.backend.batch_size == 64
    assert cli.model.hparams.group_size == cli.datamodule.group_size  # linked, not repeated
    assert cli.datamodule.train_tasks and cli.datamodule.eval_task_ids
    assert cli.trainer.max_steps > 0
    for logger in cli.trainer.loggers:  # every finished step's metrics are on disk: a killed run keeps them
        if isinstance(logger, CSVLogger):
            logger.log_metrics({"probe": 1.0}, step=0)
            assert "probe" in Path(logger.experiment.metrics_file_path).read_text()
    if name == "benchmarks/no_execution_cache.yaml":
        assert cli.model.environments["real"].log.use_cache is False
    if name.startswith("configs/tasks/"):
        assert cli.datamodule.train_tasks == cli.datamodule.eval_task_ids == ["state_violent_crime"]
        assert cli.model.environments["real"].suite.get("state_violent_crime").spec.folder is not None
    expected = expected_callbacks(name)
    if expected is not None:
        from wmrl.autoresearch.world_models.lm import LMWorldModel
        from wmrl.callbacks import AnchorRouting, RLCallback, WorldModelReward

        rl = [c for c in cli.trainer.callbacks if isinstance(c, RLCallback)]
        assert [type(c).__name__ for c in rl] == expected
        for c in rl:
            if isinstance(c, WorldModelReward) and "learned" in name:
                from wmrl.autoresearch.world_models.learned import LearnedWorldModel

                assert isinstance(c.world_model, LearnedWorldModel) and c.world_model.execution_log
            elif isinstance(c, WorldModelReward) and "task_aware" in name:
                from wmrl.autoresearch.world_models.task_aware import TaskAwareWorldModel

                assert isinstance(c.world_model, TaskAwareWorldModel) and c.world_model.recall
                assert (ROOT / c.world_model.pretrained).is_file()  # the shipped artefact, relative to the checkout
            elif isinstance(c, WorldModelReward) and name.startswith("configs/vla/"):
                from wmrl.vla.world_models.progress import ProgressWorldModel

                assert isinstance(c.world_model, ProgressWorldModel) and c.world_model.refresh_every == 0  # frozen
                assert c.side_grade == ("raw_world_model" not in name)
            elif isinstance(c, WorldModelReward):
                assert isinstance(c.world_model, LMWorldModel) and c.world_model.model_name == "policy"
                assert c.side_grade == ("pure_world_model" not in name)
            if isinstance(c, AnchorRouting) and ("pure_world_model" in name or "raw_world_model" in name):
                assert c.anchors_for(8) == 0
            if isinstance(c, AnchorRouting) and name.startswith("configs/vla/arms/") and "raw_world_model" not in name:
                assert c.anchors_for(cli.datamodule.groups_per_step) == 1  # one group in eight: the paper's ~10%


AUTORESEARCH_CONFIGS = [c for c in CONFIGS if not relative(c).startswith(("configs/vla/", "configs/strategy/"))]


@pytest.mark.slow  # two instantiations per config; tests/core/test_checkpoint_cli.py runs the quickstart's end to end
@pytest.mark.parametrize("config", AUTORESEARCH_CONFIGS, ids=relative)
def test_wmrl_validate_reads_a_checkpoint_of_every_shipped_autoresearch_config(config, tmp_path, monkeypatch,
                                                                               tiny_model_dir):
    """`wmrl validate -c CONFIG --ckpt_path CKPT` parses the checkpoint's model settings and restores its state
    (callbacks included) for every shipped AutoResearch config (the VLA configs: tests/vla/test_vla_cli_checkpoints.py).
    The checkpoint is the instantiated run's, saved as a fit saves it; validation itself is skipped (0 batches)."""
    from wmrl.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    name = relative(config)
    bases = declared_bases(config)
    args = [*composed(config), *CPU_STANDINS.get(bases[0] if bases else name, []),
            f"--model.init_args.model={tiny_model_dir}",
            f"--trainer.default_root_dir={tmp_path / 'run'}", "--model.init_args.dtype=float32"]
    cli = lightning_cli(args, run=False)
    cli.trainer.strategy.connect(cli.model)
    checkpoint = tmp_path / "last.ckpt"
    cli.trainer.save_checkpoint(checkpoint)
    assert main(["validate", *args, f"--ckpt_path={checkpoint}", "--trainer.limit_val_batches=0",
                 "--trainer.enable_progress_bar=false"]) == 0


def check_fsdp_overlay(config: Path, args: list[str]) -> None:
    """FSDP is GPU-only in Lightning 2.6.6: on CPU the config is refused with a clear error, and its strategy
    arguments are checked by building the strategy itself."""
    import yaml
    from lightning.pytorch.strategies import FSDPStrategy

    with pytest.raises(ValueError, match="The strategy `fsdp` requires a GPU accelerator"):
        lightning_cli(args, run=False)
    strategy = yaml.safe_load(config.read_text())["trainer"]["strategy"]
    assert strategy["class_path"] == "lightning.pytorch.strategies.FSDPStrategy"
    built = FSDPStrategy(**strategy["init_args"])
    assert built.sharding_strategy.name == "FULL_SHARD" and built._state_dict_type == "full"


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("--data.init_args.group_size=1", "data.group_size must be >= 2"),  # the data module, checked first
        ("--model.init_args.clip_eps=-0.2", "model.init_args.clip_eps must be > 0"),
        ("--data.init_args.split=nonexistent", "unknown split 'nonexistent'"),
        ("--model.init_args.not_a_key=3", "not_a_key"),
    ],
)
def test_bad_values_name_the_key(override, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = ["-c", str(ROOT / "configs/autoresearch/quickstart.yaml"), "-c", str(ROOT / "configs/debug/fast.yaml"), override]
    with pytest.raises(Exception) as error:  # noqa: B017 - jsonargparse and our checks raise different types
        lightning_cli(args, run=False)
    text = str(error.value) + capsys.readouterr().err
    assert message in text


def test_overriding_the_run_dir_moves_logs_and_checkpoints(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run_dir = str(tmp_path / "elsewhere")
    cli = lightning_cli(["-c", str(ROOT / "configs/autoresearch/quickstart.yaml"),
                         f"--trainer.default_root_dir={run_dir}"], run=False)
    assert [logger.save_dir for logger in cli.trainer.loggers] == [run_dir, run_dir]
    assert [c.dirpath for c in cli.trainer.callbacks if hasattr(c, "dirpath")] == [f"{run_dir}/checkpoints"]


def test_overriding_the_run_dir_under_the_fit_subcommand(tmp_path):
    """`wmrl fit` nests the config under `fit`; the configs' ${trainer.default_root_dir} still resolves."""
    import subprocess
    import sys

    run_dir = str(tmp_path / "elsewhere")
    overlay = tmp_path / "own_checkpoint.yaml"  # a user's overlay that interpolates the run dir into a callback
    overlay.write_text("# overlay on: configs/autoresearch/paper_4b.yaml\ntrainer:\n  callbacks+:\n"
                       "    - class_path: lightning.pytorch.callbacks.ModelCheckpoint\n"
                       '      init_args: {dirpath: "${trainer.default_root_dir}/checkpoints", monitor: null}\n')
    out = subprocess.run(
        [sys.executable, "-m", "wmrl.cli", "fit", "-c", str(ROOT / "configs/autoresearch/paper_4b.yaml"),
         "-c", str(overlay), f"--trainer.default_root_dir={run_dir}", "--print_config"],
        capture_output=True, text=True, check=True, cwd=tmp_path,
    ).stdout
    assert f"default_root_dir: {run_dir}" in out and f"dirpath: {run_dir}/checkpoints" in out


def test_no_shipped_yaml_repeats_the_loggers_progress_bar_or_checkpoint():
    """wmrl fit adds them to every run (wmrl.cli.trainer.default_loggers / default_callbacks); a config sets only how
    often the checkpoint is saved (``checkpoint_every``)."""
    yamls = CONFIGS + sorted(ROOT.glob("examples/**/*.yaml")) + sorted(ROOT.glob("docs/**/*.yaml"))
    for config in yamls:
        text = config.read_text()
        assert not any(name in text for name in ("TensorBoardLogger", "CSVLogger", "RichProgressBar",
                                                 "ModelCheckpoint", "every_n_train_steps")), config


def test_checkpoint_every_sets_the_runs_checkpoint_and_a_bad_one_names_the_key(tmp_path, monkeypatch):
    from lightning.pytorch.callbacks import ModelCheckpoint

    monkeypatch.chdir(tmp_path)
    quickstart = ["-c", str(ROOT / "configs/autoresearch/quickstart.yaml"), f"--trainer.default_root_dir={tmp_path}"]
    cli = lightning_cli([*quickstart, "--checkpoint_every=3"], run=False)
    (checkpoint,) = [c for c in cli.trainer.callbacks if isinstance(c, ModelCheckpoint)]
    assert checkpoint._every_n_train_steps == 3 and checkpoint.save_last
    assert checkpoint.dirpath == f"{tmp_path}/checkpoints"
    with pytest.raises(Exception, match="checkpoint_every must be a whole number of training steps >= 1"):
        lightning_cli([*quickstart, "--checkpoint_every=0"], run=False)


def test_every_run_gets_the_loggers_the_progress_bar_and_a_checkpoint_once(tmp_path, monkeypatch):
    from lightning.pytorch.callbacks import ModelCheckpoint, ProgressBar
    from lightning.pytorch.loggers import TensorBoardLogger

    from wmrl.callbacks.progress import PlainProgress

    monkeypatch.chdir(tmp_path)
    quickstart = ["-c", str(ROOT / "configs/autoresearch/quickstart.yaml"),
                  "-c", str(ROOT / "configs/autoresearch/ablations/cpu/wmrl.yaml")]
    cli = lightning_cli([*quickstart, f"--trainer.default_root_dir={tmp_path}"], run=False)
    bars = [c for c in cli.trainer.callbacks if isinstance(c, ProgressBar)]
    checkpoints = [c for c in cli.trainer.callbacks if isinstance(c, ModelCheckpoint)]
    assert len(bars) == 1 and isinstance(bars[0], PlainProgress)  # pytest's stdout is no terminal: lines, not a bar
    assert len(checkpoints) == 1 and checkpoints[0]._every_n_train_steps == 1 and checkpoints[0].save_last
    assert checkpoints[0].dirpath == f"{tmp_path}/checkpoints"
    assert [type(lg) for lg in cli.trainer.loggers] == [TensorBoardLogger, CSVLogger]
    assert [lg.log_dir for lg in cli.trainer.loggers] == [f"{tmp_path}/tensorboard/version_0", f"{tmp_path}/csv/version_0"]

    paper = lightning_cli(["-c", str(ROOT / "configs/autoresearch/paper_4b.yaml"), *_GPU_TO_CPU], run=False)
    (own,) = [c for c in paper.trainer.callbacks if isinstance(c, ModelCheckpoint)]
    assert own._every_n_train_steps == 10  # its own frequency, not a second checkpoint

    off = lightning_cli([*quickstart, "--trainer.logger=false", "--trainer.enable_checkpointing=false",
                         "--trainer.enable_progress_bar=false"], run=False)
    assert off.trainer.loggers == [] and not any(isinstance(c, ModelCheckpoint | ProgressBar)
                                                 for c in off.trainer.callbacks)


def test_the_progress_bar_says_the_step_budget():
    from types import SimpleNamespace

    from wmrl.callbacks.progress import StepProgressBar

    bar = StepProgressBar()
    bar._trainer = SimpleNamespace(max_steps=3, max_epochs=-1)
    assert bar._get_train_description(0) == "Training: 3 steps"


CONFIGURABLE = ["wmrl.autoresearch.module:GRPOModule", "wmrl.autoresearch.datamodule:AutoResearchDataModule",
                "wmrl.callbacks:AnchorRouting", "wmrl.callbacks:WorldModelReward", "wmrl.callbacks:OnlineDebiasing",
                "wmrl.callbacks:InverseVarianceDenoising", "wmrl.callbacks:VarianceFusion", "wmrl.callbacks:RewardTerms",
                "wmrl.autoresearch.world_models.lm:LMWorldModel", "wmrl.autoresearch.world_models.learned:LearnedWorldModel",
                "wmrl.autoresearch.world_models.task_aware:TaskAwareWorldModel",
                "wmrl.autoresearch.environments.real:SandboxEnvironment", "wmrl.generation.hf_world_model:HFWorldModelBackend",
                "wmrl.generation.vllm_world_model:VLLMWorldModelBackend", "wmrl.generation.vllm:VLLMGenerationEngine"]


@pytest.mark.parametrize("target", CONFIGURABLE)
def test_every_config_key_has_its_own_help_line(target):
    """`wmrl fit --help` reads each init arg's help from the class docstring: a grouped entry (``a / b: ...``)
    left both keys without one."""
    import importlib
    import inspect

    from docstring_parser import parse

    module, name = target.split(":")
    cls = getattr(importlib.import_module(module), name)
    described = {p.arg_name: p.description for p in parse(cls.__doc__ or "").params}
    keys = [k for k in inspect.signature(cls.__init__).parameters if k != "self"]
    assert [k for k in keys if not described.get(k)] == []


def test_the_cpu_engine_overlay_replaces_the_paper_overlays_gpu_settings(tmp_path, monkeypatch):
    """quickstart + paper_4b_vllm + vllm_cpu (docs/scale-out.md): the paper's WMRL callbacks and world model on vLLM,
    with the engine settings a CPU and SmolLM2 take (no CUDA graphs, a context SmolLM2 has, an explicit KV cache)."""
    from wmrl.generation.vllm_world_model import VLLMWorldModelBackend

    monkeypatch.chdir(tmp_path)
    cli = lightning_cli([*(a for c in ("quickstart", "paper_4b_vllm", "vllm_cpu")
                           for a in ("-c", str(ROOT / f"configs/autoresearch/{c}.yaml")))], run=False)
    settings = cli.model.engine.settings
    assert settings.enforce_eager and settings.max_model_len == 4096 and settings.kv_cache_memory_gib == 1.0
    assert settings.dtype == "float32"
    (world_model,) = [c.world_model for c in cli.trainer.callbacks if hasattr(c, "world_model")]
    assert isinstance(world_model.backend, VLLMWorldModelBackend) and world_model.model_name == "policy"


@pytest.mark.parametrize("seed", [0, 2])
@pytest.mark.parametrize("overlays", [("ablations/cpu/wmrl",), ("paper_4b_vllm", "vllm_cpu")])
def test_seed_everything_reaches_every_seed_of_an_autoresearch_run(seed, overlays, tmp_path, monkeypatch):
    """``--seed_everything=k`` is the rollouts' seed (the module's), the task draw's (the data module's), the anchor
    draw's and the sampling world model's: the shipped configs interpolate it; 0 is what they set."""
    from wmrl.callbacks import AnchorRouting

    monkeypatch.chdir(tmp_path)
    cli = lightning_cli([*(a for c in ("quickstart", *overlays) for a in ("-c", str(ROOT / f"configs/autoresearch/{c}.yaml"))),
                         f"--seed_everything={seed}"], run=False)
    (routing,) = [c for c in cli.trainer.callbacks if isinstance(c, AnchorRouting)]
    assert cli.model.hparams.seed == cli.datamodule.seed == routing.seed == seed
    (world_model,) = [c.world_model for c in cli.trainer.callbacks if hasattr(c, "world_model")]
    assert world_model.seed == (seed if world_model.mode == "generate" else 0)  # score mode samples nothing
    if seed:  # another seed plays other tasks
        data = cli.datamodule
        assert data.tasks_of_step(0) != tasks_for_step(data.train_tasks, data.groups_per_step, 0, 0)


def test_the_old_policy_type_form_is_refused_naming_the_key_and_the_new_form(tmp_path, monkeypatch, capsys):
    """``policy: {type: act, ...}`` (before policies were chosen by ``class_path``) fails with the new form written out."""
    monkeypatch.chdir(tmp_path)
    text = (ROOT / "configs/vla/pusht_quickstart.yaml").read_text()
    new = ("    policy:\n      class_path: wmrl.vla.policies.chunk.ACTChunkPolicy\n"
           "      init_args: {chunk_size: 4, n_action_steps: 2, dim_model: 64, n_heads: 4, dim_feedforward: 128,\n"
           "                  n_encoder_layers: 1, n_decoder_layers: 1, pretrained_path: null}\n")
    assert new in text
    old = tmp_path / "old.yaml"
    old.write_text(text.replace(new, "    policy: {type: act, chunk_size: 4, n_action_steps: 2}\n"))
    with pytest.raises(Exception) as error:  # noqa: B017 - jsonargparse may wrap our ValueError
        lightning_cli(["-c", str(old)], run=False)
    said = str(error.value) + capsys.readouterr().err
    assert "model.init_args.policy: `type: act` is the old form" in said
    assert "policy: {class_path: wmrl.vla.policies.chunk.ACTChunkPolicy, init_args: {chunk_size: 4, n_action_steps: 2}}" in said


def test_the_arm_overlays_are_written_from_one_table():
    """Every arm overlay of every scale is what configs/arms.py writes from its table (a scale's constants and its
    world model once, an arm's callbacks by name), and each names its callbacks in the scale's order."""
    spec = importlib.util.spec_from_file_location("arms", ROOT / "configs" / "arms.py")
    arms = importlib.util.module_from_spec(spec)
    sys.modules["arms"] = arms  # its dataclasses resolve their annotations through it
    spec.loader.exec_module(arms)
    written = arms.rendered()
    assert len(written) >= 20 and all(path.is_file() for path in written)
    stale = [str(path.relative_to(ROOT)) for path, text in written.items() if path.read_text() != text]
    assert not stale, f"edited by hand, not in configs/arms.py's table (run python configs/arms.py): {stale}"
    assert arms.main(["--check"]) == 0
    import subprocess  # the command the configs reference shows, as written: up to date, it writes nothing

    run = subprocess.run([sys.executable, "configs/arms.py"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout == "", run.stdout + run.stderr
    cpu = next(scale for scale in arms.SCALES if scale.folder.endswith("ablations/cpu"))
    assert "method: strict" in cpu.render("wmrl") and "method: strict" not in cpu.render("wmrl_paper")
