"""`wmrl fit|validate|test` as a new user meets it: mistakes are reported in a few lines naming the key and the
fix, keys are never abbreviated, and the CLI class is importable to subclass."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from wmrl.cli import main

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = str(ROOT / "configs" / "autoresearch" / "quickstart.yaml")


def parse_failure(capsys, *args: str) -> list[str]:
    with pytest.raises(SystemExit) as exit_:
        main(["fit", "-c", QUICKSTART, *args])
    assert exit_.value.code == 2
    return [line for line in capsys.readouterr().err.splitlines() if line.strip()]


def test_a_typo_in_a_key_gets_a_did_you_mean_in_a_few_lines(capsys):
    lines = parse_failure(capsys, "--trainer.max_stepz", "7")
    assert len(lines) <= 5, lines
    assert lines[0] == "error: unrecognized arguments: --trainer.max_stepz 7"
    assert "did you mean --trainer.max_steps?" in lines[1] and "`wmrl fit --help`" in lines[-1]


@pytest.mark.parametrize(("key", "meant", "class_path"), [
    ("--model.init_args.lrr", "--model.init_args.lr", "wmrl.autoresearch.module.GRPOModule"),
    ("--data.init_args.groups_per_stp", "--data.init_args.groups_per_step", "wmrl.autoresearch.datamodule.AutoResearchDataModule"),
])
def test_a_typo_in_a_model_or_data_key_is_named_with_a_did_you_mean(capsys, key, meant, class_path):
    """jsonargparse says only that no Union subtype of ``model`` validated; the user reads the key, its class and
    the setting they meant."""
    lines = parse_failure(capsys, key, "1")
    assert len(lines) <= 5, lines
    assert lines[0] == f"error: {key}: {class_path} has no setting {key.rsplit('.', 1)[1]!r}"
    assert lines[1].strip() == f"did you mean {meant}?" and "`wmrl fit --help`" in lines[-1]


def test_abbreviated_keys_are_refused_not_silently_expanded(capsys):
    lines = parse_failure(capsys, "--trainer.max_st", "7")
    assert "unrecognized arguments: --trainer.max_st 7" in lines[0] and "--trainer.max_steps" in lines[1]


def test_a_learning_rate_scheduler_is_refused_with_the_reason(capsys):
    lines = parse_failure(capsys, "--lr_scheduler", "StepLR")
    assert "--lr_scheduler StepLR" in lines[0] and "step their optimizer by hand" in lines[1]


def wmrl(*args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "WMRL_TRACEBACK"} | env
    return subprocess.run([sys.executable, "-m", "wmrl.cli", *args], capture_output=True, text=True,
                          env=environment, timeout=300)


def test_a_class_that_fails_to_build_is_reported_in_five_lines_naming_the_key():
    done = wmrl("fit", "-c", QUICKSTART, "--model.init_args.model", "/nonexistent")
    lines = [line for line in done.stderr.splitlines() if line.strip() and "Seed set" not in line]
    assert done.returncode == 2 and len(lines) <= 5, lines
    assert lines[0].startswith("error: model.init_args.model: unknown path '/nonexistent'")
    assert "smollm2-135m-instruct" in lines[0]  # wmrl's own message, with the fix
    assert "while building wmrl.autoresearch.module.GRPOModule (FileNotFoundError)" in lines[-1]
    assert "Traceback" not in done.stderr

    done = wmrl("fit", "-c", QUICKSTART, "--model.init_args.temperature", "-1")
    lines = [line for line in done.stderr.splitlines() if line.strip() and "Seed set" not in line]
    assert lines[0] == "error: model: invalid GRPOModule configuration:" and len(lines) <= 5, lines
    assert "model.init_args.temperature must be > 0" in lines[1]

    done = wmrl("fit", "-c", QUICKSTART, "--model.init_args.model", "/nonexistent", WMRL_TRACEBACK="1")
    assert done.returncode == 1 and "Traceback (most recent call last)" in done.stderr  # for a bug report


def test_wmrl_help_lists_the_lightning_subcommands(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    assert all(f"    {name} " in text for name in ("fit", "validate", "test", "tasks", "exec", "report"))
    assert "predict" not in text


def test_the_cli_class_is_importable_and_subclassable(tmp_path):
    from wmrl.cli.trainer import WMRLCli

    class MyCli(WMRLCli):
        def add_arguments_to_parser(self, parser) -> None:
            super().add_arguments_to_parser(parser)
            parser.add_argument("--my_note", default="none")

    assert "predict" not in MyCli.subcommands()
    cli = MyCli(["-c", QUICKSTART, "--my_note", "hello", "--trainer.default_root_dir", str(tmp_path)], run=False)
    assert cli.config["my_note"] == "hello" and cli.model.hparams.group_size == cli.datamodule.group_size == 4


def test_help_of_a_lightning_subcommand_lists_the_model_and_data_keys_without_importing_lightning(capsys):
    assert main(["validate", "--help"]) == 0
    text = capsys.readouterr().out
    for key in ("--ckpt_path", "--model.init_args.eval_temperature", "--model.init_args.max_new_tokens",
                "--data.init_args.eval_tasks", "--data.init_args.eval_samples", "--data.help LeRobotVLADataModule"):
        assert key in text, key
    done = subprocess.run([sys.executable, "-c", "import sys; from wmrl.cli import main; main(['fit', '--help']); "
                           "print('lightning' in sys.modules)"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip().endswith("False")  # no Lightning import: under a second


def test_a_data_class_is_found_by_its_short_name():
    done = wmrl("validate", "--data.help", "AutoResearchDataModule")
    assert done.returncode == 0, done.stderr
    assert "--data.eval_tasks" in done.stdout and "explicit held-out task ids" in done.stdout


def test_an_evaluation_where_no_sample_is_valid_advises_a_foothold_not_a_learning_rate():
    from wmrl.evaluation.report import NO_VALID_ADVICE, held_out_report

    nothing = {"score": 0.0, "mean_position": 0.0, "valid_rate": 0.0, "best_of_k": 0.0}
    report = held_out_report([("start", nothing), ("step 3", nothing)], [{"a": [0.0, 0.0]}, {"a": [0.0, 0.0]}])
    assert report.endswith(NO_VALID_ADVICE) and "starter" in NO_VALID_ADVICE and "samples" in NO_VALID_ADVICE
    assert "will not give it one" in report


def test_a_run_never_replaces_an_earlier_runs_saved_config_unless_asked(tmp_path, tiny_model_dir, capsys):
    """Without loggers a run saves its config in the run dir itself; a second run there is refused with the flag
    that allows it, instead of silently replacing the first run's record."""
    fast = str(ROOT / "configs" / "debug" / "fast.yaml")
    args = ["fit", "-c", QUICKSTART, "-c", fast, "--model.init_args.model", str(tiny_model_dir),
            "--trainer.max_steps", "0", "--model.init_args.eval_at_start", "false", "--trainer.logger", "false",
            "--trainer.enable_checkpointing", "false", "--trainer.enable_progress_bar", "false",
            "--trainer.default_root_dir", str(tmp_path)]
    assert main(args) == 0
    first = (tmp_path / "config.yaml").read_text()
    assert main([*args, "--trainer.max_steps", "1"]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'config.yaml'} holds the config of an earlier run" in err and "--overwrite_config true" in err
    assert (tmp_path / "config.yaml").read_text() == first
    assert main([*args, "--overwrite_config", "true"]) == 0


def test_an_overlay_given_alone_is_refused_naming_its_base_and_the_command(capsys, monkeypatch):
    """An overlay holds only what it changes; alone, jsonargparse would fail on a missing ``model`` with a long
    union error. The first line it declares its base in gives the command to run instead."""
    monkeypatch.chdir(ROOT)
    overlay = "configs/vla/libero_gpu.yaml"
    assert main(["fit", "-c", overlay, "--trainer.max_steps", "1"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines == [f"error: {overlay} is an overlay on configs/vla/pusht_gpu.yaml, not a config of its own "
                     "(its first line says so)",
                     f"  run: wmrl fit -c configs/vla/pusht_gpu.yaml -c {overlay}"]


def test_a_config_written_for_the_old_layout_names_the_line_and_the_new_class_path(tmp_path, capsys):
    old = tmp_path / "old.yaml"
    old.write_text(Path(QUICKSTART).read_text().replace("wmrl.autoresearch.module.GRPOModule",
                                                         "wmrl.modules.grpo.GRPOModule"))
    assert main(["validate", "-c", str(old)]) == 2
    lines = capsys.readouterr().err.splitlines()
    number = next(i for i, line in enumerate(old.read_text().splitlines(), 1) if "wmrl.modules.grpo" in line)
    assert lines[0] == f"error: {old}:{number}: wmrl.modules.grpo.GRPOModule is now wmrl.autoresearch.module.GRPOModule"
    assert main(["fit", "-c", QUICKSTART, "--data", "wmrl.datamodules.autoresearch.AutoResearchDataModule"]) == 2
    assert "is now wmrl.autoresearch.datamodule.AutoResearchDataModule" in capsys.readouterr().err
    # the wings' role folders: a world model's old module, in a flag
    flag = "--trainer.callbacks+=wmrl.autoresearch.environments.learned.LearnedWorldModel"
    assert main(["fit", "-c", QUICKSTART, flag]) == 2
    assert ("wmrl.autoresearch.environments.learned.LearnedWorldModel is now "
            "wmrl.autoresearch.world_models.learned.LearnedWorldModel") in capsys.readouterr().err


@pytest.mark.parametrize("command", ["fit", "validate", "test"])
def test_a_truncated_checkpoint_is_named_before_anything_loads(tmp_path, command):
    """A checkpoint cut short (a copy that did not finish) is refused in one line, before Lightning, transformers or
    a model is imported; Lightning itself would load the model first and end in torch's 22-line traceback."""
    import torch

    whole = tmp_path / "whole.ckpt"
    torch.save({"state_dict": {"w": torch.zeros(1000)}, "global_step": 3}, whole)
    cut = tmp_path / "cut.ckpt"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    code = ("import sys\nfrom wmrl.cli import main\n"
            f"code = main([{command!r}, '-c', {QUICKSTART!r}, '--ckpt_path', {str(cut)!r}])\n"
            "print(code, sorted(m for m in sys.modules if m in ('lightning', 'transformers', 'torch')))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.stdout.split() == ["2", "[]"], run.stdout + run.stderr
    lines = run.stderr.strip().splitlines()
    assert lines[0].startswith(f"error: --ckpt_path {cut}: not a readable checkpoint") and len(lines) == 2
    assert main([command, "-c", QUICKSTART, "--ckpt_path", str(tmp_path / "nope.ckpt")]) == 2


def test_an_unknown_task_is_named_before_the_model_loads(tmp_path):
    """LightningCLI builds the model before the data module; wmrl checks the data module's task ids first, so a
    misspelt task is named (with a did-you-mean) before any model is loaded: here the model cannot load at all (a
    path that does not exist, which the model's build would report first), and the error is the task's."""
    code = ("import sys\nfrom wmrl.cli import main\n"
            f"code = main(['fit', '-c', {QUICKSTART!r}, '--model.init_args.model', {str(tmp_path / 'no-model')!r}, "
            "'--data.init_args.tasks', '[smoke_irs]', '--trainer.default_root_dir', "
            f"{str(tmp_path / 'run')!r}])\n"
            "print(code)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert run.stdout.split() == ["2"], run.stdout + run.stderr
    assert "no-model" not in run.stderr
    lines = run.stderr.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("error:"))
    assert lines[first] == "error: data: invalid AutoResearchDataModule configuration:", run.stderr
    assert "unknown task 'smoke_irs'. Did you mean 'smoke_iris'" in lines[first + 1], run.stderr
