"""A run's life from the command line, as the README shows it: `wmrl fit` stopped and resumed with `--ckpt_path`
equals an uninterrupted fit; `wmrl validate|test --ckpt_path` evaluate the checkpoint as it was trained; `wmrl
evaluate base CKPT` gives exactly the fit's own held-out samples for the start and the end.

The configs are the shipped quickstart with the debug overlay, the policy a tiny random Llama saved as a model
directory (``--model.init_args.model DIR``: the path a user gives for their own model), so each command runs in
seconds; its text is random, so the checks compare the samples' texts (same weights and seed: the same text).
``tests/test_docs_commands.py`` runs the same commands with the default model, as the docs show them (slow tier).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from wmrl.cli import main

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = str(ROOT / "configs" / "autoresearch" / "quickstart.yaml")
FAST = str(ROOT / "configs" / "debug" / "fast.yaml")


def fit(run_dir: Path, model_dir: Path, max_steps: int, *extra: str) -> None:
    """The quickstart with the debug overlay: 2 steps per epoch (held-out evaluation at the start and after step
    2), a learning rate at which a tiny model's samples move."""
    code = main(["fit", "-c", QUICKSTART, "-c", FAST, "--model.init_args.model", str(model_dir),
                 "--model.init_args.lr", "0.05", "--data.init_args.steps_per_epoch", "2",
                 "--trainer.max_steps", str(max_steps), "--trainer.default_root_dir", str(run_dir),
                 "--trainer.enable_progress_bar", "false", *extra])
    assert code == 0


def responses(folder: Path) -> list[str]:
    """The response texts of the held-out samples saved in ``folder`` (``<task>/<k>.json``), in order."""
    return [json.loads(p.read_text())["turns"][0]["response"] for p in sorted(folder.glob("*/*.json"))]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_model_dir) -> dict[str, Path]:
    """An uninterrupted 2-step fit, and a fit stopped after step 1 then resumed from its last checkpoint."""
    root = tmp_path_factory.mktemp("runs")
    fit(root / "straight", tiny_model_dir, 2)
    fit(root / "resumed", tiny_model_dir, 1)
    (root / "resumed" / "checkpoints" / "last.ckpt").rename(root / "resumed" / "step1.ckpt")
    fit(root / "resumed", tiny_model_dir, 2, "--ckpt_path", str(root / "resumed" / "step1.ckpt"))
    return {"straight": root / "straight", "resumed": root / "resumed", "root": root}


def test_a_fit_stopped_after_step_1_and_resumed_equals_an_uninterrupted_fit(runs):
    straight = torch.load(runs["straight"] / "checkpoints" / "last.ckpt", weights_only=True)
    resumed = torch.load(runs["resumed"] / "checkpoints" / "last.ckpt", weights_only=True)
    step1 = torch.load(runs["resumed"] / "step1.ckpt", weights_only=True)
    assert straight["global_step"] == resumed["global_step"] == 2 and step1["global_step"] == 1
    assert straight["state_dict"].keys() == resumed["state_dict"].keys() and straight["state_dict"]
    for name, value in straight["state_dict"].items():
        assert torch.equal(resumed["state_dict"][name], value), name
        assert not torch.equal(step1["state_dict"][name], value) or not value.any(), name  # step 2 moved them
    for a, b in zip(straight["optimizer_states"][0]["state"].values(), resumed["optimizer_states"][0]["state"].values(),
                    strict=True):
        assert all(torch.equal(a[k], b[k]) for k in a)
    # the held-out evaluation after step 2 sampled the same texts (same weights, same seed)
    assert responses(runs["straight"] / "samples" / "heldout_step2") == responses(
        runs["resumed"] / "samples" / "heldout_step2")
    lines = [json.loads(line) for line in (runs["straight"] / "heldout.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [0, 2]


@pytest.mark.parametrize(("command", "split"), [("validate", "heldout"), ("test", "test")])
def test_validate_and_test_from_a_checkpoint_evaluate_it_as_it_was_trained(runs, tmp_path, capsys, command, split):
    """No model path on the command line: the config's default model is replaced by the checkpoint's (and said so),
    and the trained weights are loaded: the samples are the fit's own after step 2, not its starting policy's."""
    last = runs["straight"] / "checkpoints" / "last.ckpt"
    code = main([command, "-c", QUICKSTART, "-c", FAST, "--ckpt_path", str(last),
                 "--trainer.default_root_dir", str(tmp_path), "--trainer.enable_progress_bar", "false"])
    assert code == 0
    err = capsys.readouterr().err
    assert "was trained with other model settings; the checkpoint's are used" in err
    assert "model.init_args.model: '" in err and "(the config gave 'smollm2-135m-instruct')" in err
    (line,) = [json.loads(line) for line in (tmp_path / "heldout.jsonl").read_text().splitlines()]
    assert line["split"] == split and line["step"] == 2 and line["tasks"][0]["task_id"] == "smoke_iris"
    evaluated = responses(tmp_path / "samples" / f"{split}_step2")
    assert evaluated == responses(runs["straight"] / "samples" / "heldout_step2")
    assert evaluated != responses(runs["straight"] / "samples" / "heldout_step0")
    assert (tmp_path / "samples" / f"{split}_step2" / "smoke_iris" / "0.py").is_file()


def test_the_report_after_a_resume_and_a_validate_in_the_run_dir_shows_the_fits_steps(runs, tmp_path, capsys):
    """The training guide's order (fit, resume, validate, report) in one run dir: the report reads the fit's two
    training logs joined, not the newest log (validate's, which has no training step), and numbers the steps as
    the fit printed them."""
    import shutil

    from wmrl.report import load_run

    run_dir = shutil.copytree(runs["resumed"], tmp_path / "run")
    assert main(["validate", "-c", QUICKSTART, "-c", FAST, "--ckpt_path", str(run_dir / "checkpoints" / "last.ckpt"),
                 "--trainer.default_root_dir", str(run_dir), "--trainer.enable_progress_bar", "false"]) == 0
    versions = sorted(p.parent.name for p in run_dir.glob("csv/version_*/metrics.csv"))
    assert versions == ["version_0", "version_1", "version_2"]  # fit, its resume, validate
    capsys.readouterr()
    assert main(["report", str(run_dir)]) == 0
    said = " ".join(capsys.readouterr().err.split())
    assert "version_0/metrics.csv" in said and "version_1/metrics.csv" in said and "version_2" not in said
    run = load_run(run_dir)
    assert list(run.steps.index) == [1, 2] and run.steps["time/step"].notna().all()
    page = (run_dir / "report" / "index.html").read_text()
    assert "<th>training steps</th><td>2</td>" in page and "held-out score at step 2" in page
    assert "held-out score at the start" in page


def test_wmrl_evaluate_reproduces_the_fits_own_start_and_end_samples(runs, tmp_path, capsys, process_sandbox):
    """`wmrl evaluate base CKPT` on the fit's held-out task, K and seed: the base policy samples exactly what the
    fit's starting policy did, the checkpoint what the fit's last evaluation did; both written with their outcomes."""
    last = runs["straight"] / "checkpoints" / "last.ckpt"
    code = main(["evaluate", "base", str(last), "--tasks", "smoke_iris", "--samples", "1", "--out", str(tmp_path)])
    assert code == 0
    out = capsys.readouterr().out
    assert "smoke_iris" in out and f"{last} - base: mean position" in out and "evaluation.json" in out
    report = json.loads((tmp_path / "evaluation.json").read_text())
    base, trained = report["policies"]
    assert (base["name"], base["checkpoint"], trained["checkpoint"]) == ("base", None, str(last))
    assert base["settings"] == trained["settings"] and Path(base["settings"]["model"]).is_dir()  # the checkpoint's
    fit_lines = {line["step"]: line for line in map(json.loads, (runs["straight"] / "heldout.jsonl").read_text().splitlines())}
    assert base["tasks"][0]["positions"] == fit_lines[0]["tasks"][0]["positions"]
    assert trained["tasks"][0]["positions"] == fit_lines[2]["tasks"][0]["positions"]
    assert responses(tmp_path / base["label"]) == responses(runs["straight"] / "samples" / "heldout_step0")
    assert responses(tmp_path / trained["label"]) == responses(runs["straight"] / "samples" / "heldout_step2")
    (difference,) = report["differences"]
    assert difference["policy"] == str(last) and difference["reference"] == "base"
    assert set(difference["mean_position"]["overall"]) == {"point", "low", "high"}
    assert report["seed"] == 10_000 and report["machine"]["cpus"] >= 1


@pytest.mark.parametrize(("argv", "message"), [
    (["evaluate", "bsae"], "policy 'bsae': no such checkpoint (did you mean base?)"),
    (["evaluate", "base", "--tasks", "smoke_irs"], "unknown task 'smoke_irs'. Did you mean 'smoke_iris'"),
    (["evaluate", "base", "--samples", "0", "--tasks", "smoke_iris"], "--samples must be >= 1"),
])
def test_evaluate_names_a_mistake_and_its_fix(argv, message, capsys):
    assert main(argv) == 2
    assert message in " ".join(capsys.readouterr().err.split())
