"""Progress without a terminal: ``wmrl fit ... > log.txt`` writes one line per training step as the step ends and one
per held-out evaluation (`wmrl.callbacks.progress.PlainProgress`), so a log shows a run's progress while it runs."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.fakes import byte_tokenizer

from wmrl.callbacks.progress import PlainProgress, StepProgressBar, evaluation_line, step_line
from wmrl.cli.trainer import default_callbacks
from wmrl.models import tiny_llama

ROOT = Path(__file__).resolve().parents[2]
WMRL = Path(sys.executable).parent / "wmrl"
STEP = re.compile(r"^step (\d)/3  reward \d\.\d{3}  valid \d\.\d{2}  executions \d+  \d+\.\d s$")


@pytest.fixture
def tiny_model_dir(tmp_path):
    """A 2-layer Llama with a byte tokenizer, saved as a checkpoint directory ``--model.init_args.model`` accepts."""
    model, tokenizer = tiny_llama(byte_tokenizer(), seed=0)
    path = tmp_path / "tiny-model"
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def test_a_log_file_gets_a_line_per_step_while_the_run_runs(tmp_path, tiny_model_dir):
    log = tmp_path / "log.txt"
    command = (f"{WMRL} fit -c {ROOT}/configs/autoresearch/quickstart.yaml -c {ROOT}/configs/debug/fast.yaml "
               f"--model.init_args.model {tiny_model_dir} --model.init_args.max_new_tokens 24 "
               f"--trainer.max_steps 3 --data.init_args.steps_per_epoch 3 "
               f"--trainer.default_root_dir {tmp_path}/run > {log}")
    process = subprocess.Popen(["bash", "-c", command], cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    seen: dict[str, bool] = {}  # line -> whether the process was still running when the line was first read
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        running = process.poll() is None
        for line in log.read_text().splitlines() if log.exists() else []:
            seen.setdefault(line, running)
        if not running:
            break
        time.sleep(0.05)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr[-3000:]
    lines = log.read_text().splitlines()
    steps = [line for line in lines if line.startswith("step ")]
    assert [STEP.match(line).group(1) for line in steps] == ["1", "2", "3"], lines
    # each step's line was in the file while the process still ran (written as the step ended, not at exit)
    assert seen[steps[0]] and seen[steps[1]], seen
    evaluations = [line for line in lines if re.match(r"held-out (start|step \d+): ", line)]
    assert evaluations[0].startswith("held-out start: score ") and evaluations[-1].startswith("held-out step 3: ")
    assert lines.index(evaluations[0]) < lines.index(steps[0]) < lines.index(evaluations[-1])
    assert "held-out evaluation (real execution):" in lines  # the end-of-fit report follows, as on a terminal


def test_the_lines_say_the_step_and_the_evaluation():
    metrics = {"reward/mean": 0.5, "rollout/valid_rate": 0.625, "anchor/executions": 8.0, "loss/kl": 0.1}
    assert step_line(2, 3, metrics, 41.23) == "step 2/3  reward 0.500  valid 0.62  executions 8  41.2 s"
    assert step_line(7, -1, {"reward/mean": 0.25, "anchor/real_success": 0.5}, 1.0) == \
        "step 7  reward 0.250  success 0.50  1.0 s"  # an epoch-sized run; the VLA module's metrics
    assert evaluation_line("step 3", {"score": 0.831, "valid_rate": 0.889}) == \
        "held-out step 3: score 0.831  valid rate 0.889"


def test_wmrl_fit_picks_the_bar_on_a_terminal_and_lines_otherwise(monkeypatch):
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    assert isinstance(default_callbacks([], "run", checkpointing=False)[0], StepProgressBar)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False, raising=False)
    assert isinstance(default_callbacks([], "run", checkpointing=False)[0], PlainProgress)
