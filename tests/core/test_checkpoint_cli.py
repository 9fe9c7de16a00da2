"""A run's life from the command line, as the README shows it: `wmrl fit` stopped and resumed with `--ckpt_path`
equals an uninterrupted fit; `wmrl validate|test --ckpt_path` evaluate the checkpoint as it was trained; `wmrl
evaluate base CKPT` gives exactly the fit's own held-out samples for the start and the end. Ctrl+C as a user
sends it to the `wmrl` command (a subprocess): `wmrl fit` keeps its last finished step and prints the command that
resumes it, which ends with the uninterrupted fit's held-out table and gain; nothing an earlier command wrote is
replaced without a word; `wmrl evaluate` ends in one line.

The configs are the shipped quickstart with the debug overlay, the policy a tiny random Llama saved as a model
directory (``--model.init_args.model DIR``: the path a user gives for their own model), so each command runs in
seconds; its text is random, so the checks compare the samples' texts (same weights and seed: the same text).
``tests/project/test_docs_commands.py`` runs the same commands with the default model, as the docs show them (slow tier).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from wmrl.cli import main

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = str(ROOT / "configs" / "autoresearch" / "quickstart.yaml")
FAST = str(ROOT / "configs" / "debug" / "fast.yaml")


def fit_command(run_dir: Path, model_dir: Path, max_steps: int = 3) -> list[str]:
    """The quickstart with the debug overlay (after ``wmrl``): 3 steps per epoch, as the quickstart's (held-out
    evaluation at the start and after step 3), a learning rate at which a tiny model's samples move."""
    return ["fit", "-c", QUICKSTART, "-c", FAST, "--model.init_args.model", str(model_dir), "--model.init_args.lr",
            "0.05", "--data.init_args.steps_per_epoch", "3", "--trainer.max_steps", str(max_steps),
            "--trainer.default_root_dir", str(run_dir)]


def fit(run_dir: Path, model_dir: Path, max_steps: int, *extra: str) -> None:
    assert main([*fit_command(run_dir, model_dir, max_steps), "--trainer.enable_progress_bar", "false", *extra]) == 0


def digests(folder: Path, pattern: str = "**/*") -> dict[str, str]:
    """``relative path -> sha256`` of the files under ``folder`` (what a later command must not change silently)."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.glob(pattern)) if p.is_file()}


def responses(folder: Path) -> list[str]:
    """The response texts of the held-out samples saved in ``folder`` (``<task>/<k>.json``), in order."""
    return [json.loads(p.read_text())["turns"][0]["response"] for p in sorted(folder.glob("*/*.json"))]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_model_dir) -> dict[str, Path]:
    """An uninterrupted 3-step fit, and a fit stopped after step 1 then resumed from its last checkpoint."""
    root = tmp_path_factory.mktemp("runs")
    fit(root / "straight", tiny_model_dir, 3)
    fit(root / "resumed", tiny_model_dir, 1)
    (root / "resumed" / "checkpoints" / "last.ckpt").rename(root / "resumed" / "step1.ckpt")
    fit(root / "resumed", tiny_model_dir, 3, "--ckpt_path", str(root / "resumed" / "step1.ckpt"))
    return {"straight": root / "straight", "resumed": root / "resumed", "root": root}


def test_a_fit_stopped_after_step_1_and_resumed_equals_an_uninterrupted_fit(runs):
    straight = torch.load(runs["straight"] / "checkpoints" / "last.ckpt", weights_only=True)
    resumed = torch.load(runs["resumed"] / "checkpoints" / "last.ckpt", weights_only=True)
    step1 = torch.load(runs["resumed"] / "step1.ckpt", weights_only=True)
    assert straight["global_step"] == resumed["global_step"] == 3 and step1["global_step"] == 1
    assert straight["state_dict"].keys() == resumed["state_dict"].keys() and straight["state_dict"]
    for name, value in straight["state_dict"].items():
        assert torch.equal(resumed["state_dict"][name], value), name
        assert not torch.equal(step1["state_dict"][name], value) or not value.any(), name  # steps 2, 3 moved them
    for a, b in zip(straight["optimizer_states"][0]["state"].values(), resumed["optimizer_states"][0]["state"].values(),
                    strict=True):
        assert all(torch.equal(a[k], b[k]) for k in a)
    # the held-out evaluation after step 3 sampled the same texts (same weights, same seed)
    assert responses(runs["straight"] / "samples" / "heldout_step3") == responses(
        runs["resumed"] / "samples" / "heldout_step3")
    steps = [[json.loads(line)["step"] for line in (runs[r] / "heldout.jsonl").read_text().splitlines()]
             for r in ("straight", "resumed")]
    # the resumed epoch ends after step 3, as the uninterrupted one (the stopped fit scored its step 1 at its end)
    assert steps == [[0, 3], [0, 1, 3]]


@pytest.mark.parametrize(("command", "split"), [("validate", "heldout"), ("test", "test")])
def test_validate_and_test_from_a_checkpoint_evaluate_it_as_it_was_trained(runs, tmp_path, capsys, command, split):
    """No model path on the command line: the config's default model is replaced by the checkpoint's (and said so),
    and the trained weights are loaded: the samples are the fit's own after step 3, not its starting policy's."""
    last = runs["straight"] / "checkpoints" / "last.ckpt"
    code = main([command, "-c", QUICKSTART, "-c", FAST, "--ckpt_path", str(last),
                 "--trainer.default_root_dir", str(tmp_path), "--trainer.enable_progress_bar", "false"])
    assert code == 0
    err = capsys.readouterr().err
    assert "was trained with other model settings; the checkpoint's are used" in err
    assert "model.init_args.model: '" in err and "(the config gave 'smollm2-135m-instruct')" in err
    (line,) = [json.loads(line) for line in (tmp_path / "heldout.jsonl").read_text().splitlines()]
    assert line["split"] == split and line["step"] == 3 and line["tasks"][0]["task_id"] == "smoke_iris"
    evaluated = responses(tmp_path / "samples" / f"{command}_step3")  # validate_step3, test_step3: not the fit's
    assert evaluated == responses(runs["straight"] / "samples" / "heldout_step3")
    assert evaluated != responses(runs["straight"] / "samples" / "heldout_step0")
    assert (tmp_path / "samples" / f"{command}_step3" / "smoke_iris" / "0.py").is_file()


def test_a_checkpoint_of_an_earlier_layout_is_read_under_its_class_s_present_path(runs, tmp_path, capsys):
    """A checkpoint saved when ``GRPOModule`` lived in ``wmrl.autoresearch.grpo`` validates as the fit's own does;
    the old path stays refused in a config (the user's to edit), a checkpoint is read under the new one."""
    saved = torch.load(runs["straight"] / "checkpoints" / "last.ckpt", weights_only=True)
    assert saved["hyper_parameters"]["_class_path"] == "wmrl.autoresearch.module.GRPOModule"
    saved["hyper_parameters"]["_class_path"] = "wmrl.autoresearch.grpo.GRPOModule"
    old = tmp_path / "old-layout.ckpt"
    torch.save(saved, old)
    code = main(["validate", "-c", QUICKSTART, "-c", FAST, "--ckpt_path", str(old), "--trainer.default_root_dir",
                 str(tmp_path / "run"), "--trainer.enable_progress_bar", "false"])
    assert code == 0, capsys.readouterr().err[-2000:]
    evaluated = responses(tmp_path / "run" / "samples" / "validate_step3")
    assert evaluated == responses(runs["straight"] / "samples" / "heldout_step3")
    assert "wmrl.autoresearch.grpo" not in sys.modules  # the old path was importable only while the checkpoint was read


def test_the_report_after_a_resume_and_a_validate_in_the_run_dir_shows_the_fits_steps(runs, tmp_path, capsys):
    """The training guide's order (fit, resume, validate, report) in one run dir: the report reads the fit's two
    training logs joined, not the newest log (validate's, which has no training step), and numbers the steps as
    the fit printed them."""
    import shutil

    from wmrl.run_report import load_run

    run_dir = shutil.copytree(runs["resumed"], tmp_path / "run")
    fits_samples = digests(run_dir / "samples")
    assert main(["validate", "-c", QUICKSTART, "-c", FAST, "--ckpt_path", str(run_dir / "checkpoints" / "last.ckpt"),
                 "--trainer.default_root_dir", str(run_dir), "--trainer.enable_progress_bar", "false"]) == 0
    assert (run_dir / "samples" / "validate_step3" / "smoke_iris" / "0.py").is_file()
    assert {k: v for k, v in digests(run_dir / "samples").items() if k in fits_samples} == fits_samples  # kept
    versions = sorted(p.parent.name for p in run_dir.glob("csv/version_*/metrics.csv"))
    assert versions == ["version_0", "version_1", "version_2"]  # fit, its resume, validate
    capsys.readouterr()
    assert main(["report", str(run_dir)]) == 0
    said = " ".join(capsys.readouterr().err.split())
    assert "version_0/metrics.csv" in said and "version_1/metrics.csv" in said and "version_2" not in said
    run = load_run(run_dir)
    assert list(run.steps.index) == [1, 2, 3] and run.steps["time/step"].notna().all()
    page = (run_dir / "report" / "index.html").read_text()
    assert "<th>training steps</th><td>3</td>" in page and "held-out score at step 3" in page
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
    assert trained["tasks"][0]["positions"] == fit_lines[3]["tasks"][0]["positions"]
    assert responses(tmp_path / base["label"]) == responses(runs["straight"] / "samples" / "heldout_step0")
    assert responses(tmp_path / trained["label"]) == responses(runs["straight"] / "samples" / "heldout_step3")
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


# -- Ctrl+C and resume, as a user runs them: the `wmrl` command in a subprocess -----------------------------------
def wmrl(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wmrl.cli", *args], capture_output=True, text=True, timeout=timeout)


def interrupted(pattern: str, *args: str, delay: float = 0.5, timeout: float = 600) -> tuple[int, str]:
    """``wmrl ARGS`` sent SIGINT (Ctrl+C) ``delay`` seconds after ``pattern`` appears in its output; its exit status
    and its output (stdout and stderr)."""
    # unbuffered: the pattern reaches this test when it is printed, not when a pipe buffer fills (on a loaded machine
    # a buffered line arrived after the work it announced had finished, and the signal came too late to interrupt it)
    # and SIGINT at its default in the child: a shell without job control starts background commands (a CI lane,
    # `nohup ... &`) with SIGINT ignored, the child would inherit that and Python would then never raise
    # KeyboardInterrupt
    process = subprocess.Popen([sys.executable, "-m", "wmrl.cli", *args], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    guard = threading.Timer(timeout, process.kill)
    guard.start()
    lines = []
    try:
        for line in process.stdout:
            lines.append(line)
            if pattern and pattern in line:
                time.sleep(delay)
                process.send_signal(signal.SIGINT)
                pattern = ""
        return process.wait(), "".join(lines)
    finally:
        guard.cancel()


def table(out: str) -> list[str]:
    """The labels of the end-of-fit held-out table (``start``, ``step 3``)."""
    rows = out.split("held-out evaluation (real execution):\n", 1)[1].splitlines()
    return [row.split(":")[0].strip() for row in rows if re.match(r"\s+(start|step \d+): score", row)]


@pytest.fixture(scope="module")
def stopped(tmp_path_factory, tiny_model_dir) -> dict:
    """The 3-step fit sent Ctrl+C after its first step, then resumed with the command it printed (the step its
    checkpoint held and the checkpoints there before the resume kept)."""
    run_dir = tmp_path_factory.mktemp("ctrl-c") / "run"
    code, out = interrupted("step 1/3", *fit_command(run_dir, tiny_model_dir))
    saved = re.findall(r"interrupted .*: step (\d+), the last finished step, is saved in (\S+)", out)
    held = [torch.load(path, weights_only=True)["global_step"] for _, path in saved]
    before = digests(run_dir / "checkpoints", "*.ckpt")
    (command,) = [line.removeprefix("  resume with: ") for line in out.splitlines() if line.startswith("  resume with: ")]
    words = shlex.split(command)
    assert words[0] == "wmrl"
    resumed = wmrl(*words[1:])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    return {"run": run_dir, "code": code, "out": out, "saved": saved, "held": held, "before": before,
            "resumed": resumed.stdout + resumed.stderr}


def test_ctrl_c_during_fit_keeps_the_last_finished_step_and_the_command_it_prints_resumes_the_fit(stopped, runs):
    """Exit 130 and no traceback; the checkpoint named holds the finished step; the resumed fit ends with the
    held-out table and the paired gain of an uninterrupted fit: the same evaluations, final samples and weights."""
    out = stopped["out"]
    assert stopped["code"] == 130 and "Traceback" not in out, out[-3000:]
    ((step, _),) = stopped["saved"]
    assert 1 <= int(step) <= 3 and stopped["held"] == [int(step)]
    resumed, straight = stopped["resumed"], runs["straight"]
    assert table(resumed) == ["start", "step 3"] and "gain over the start: " in resumed  # as the straight fit's:
    assert [json.loads(line)["step"] for line in (straight / "heldout.jsonl").read_text().splitlines()] == [0, 3]
    final = max(stopped["run"].glob("samples/heldout_step3*"), key=lambda p: p.stat().st_mtime)
    assert responses(final) == responses(straight / "samples" / "heldout_step3")
    after = torch.load(stopped["run"] / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
    expected = torch.load(straight / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
    assert after.keys() == expected.keys() and all(torch.equal(after[k], expected[k]) for k in expected)


def test_a_resumed_fit_names_every_earlier_checkpoint_it_overwrites_or_deletes(stopped):
    before = stopped["before"]
    after = digests(stopped["run"] / "checkpoints", "*.ckpt")
    replaced = [name for name, digest in before.items() if after.get(name) != digest]
    notes = [line for line in stopped["resumed"].splitlines() if line.startswith("note: this fit saves its checkpoints")]
    assert replaced, (before, after)  # ModelCheckpoint keeps the newest: the resume replaces the earlier ones
    assert len(notes) == 1 and all(name in notes[0] for name in replaced), (replaced, notes)


def test_a_fit_resumed_at_max_steps_evaluates_its_final_policy_and_prints_the_gain(runs, tmp_path, tiny_model_dir):
    """The finished fit resumed from its last checkpoint (what an interrupt during the final evaluation leaves): no
    step left, yet the final evaluation and the gain over the start of the run it continues, sampled exactly as the
    fit's own, into a folder of its own (the fit's samples stay as they were)."""
    import shutil

    run_dir = shutil.copytree(runs["straight"], tmp_path / "run")
    samples = digests(run_dir / "samples")
    done = wmrl(*fit_command(run_dir, tiny_model_dir), "--ckpt_path", str(run_dir / "checkpoints" / "last.ckpt"))
    out = done.stdout + done.stderr
    assert done.returncode == 0 and "nothing left to train" in out, out[-3000:]
    assert table(out) == ["start", "step 3"] and "gain over the start: " in out
    assert responses(run_dir / "samples" / "heldout_step3-2") == responses(run_dir / "samples" / "heldout_step3")
    assert {k: v for k, v in digests(run_dir / "samples").items() if k in samples} == samples


def test_ctrl_c_during_wmrl_evaluate_ends_in_one_line(tiny_model_dir, tmp_path, process_sandbox):
    code, out = interrupted("generating", "evaluate", "base", "--model", str(tiny_model_dir), "--tasks", "smoke_iris",
                            "--samples", "1", "--out", str(tmp_path / "evaluation"), delay=0.2)
    lines = [line for line in out.splitlines() if line.strip()]
    assert code == 130 and "Traceback" not in out, out[-3000:]
    assert lines[-1].startswith("interrupted: wmrl evaluate stopped before it finished: no evaluation.json")
    assert sum("interrupted" in line for line in lines) == 1
