"""benchmarks/vla_arms.py end to end with real LeRobot pieces, shortened: two arms through `wmrl fit`, two steps each,
then the report from what the runs wrote (the same SFT start in both, paired statistics, the JSON)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.lerobot

ROOT = Path(__file__).resolve().parents[2]


def test_two_arms_run_shortened_and_report(tmp_path):
    command = [sys.executable, str(ROOT / "benchmarks" / "vla_arms.py"), "--out", str(tmp_path / "runs"),
               "--results", str(tmp_path / "results"), "--arms", "sparse_grpo", "wmrl", "--jobs", "2",
               "--trainer.max_steps=2", "--data.init_args.steps_per_epoch=2", "--data.init_args.demonstrations=16",
               "--data.init_args.heldout_states=6", "--data.init_args.groups_per_step=2"]
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    report = json.loads((tmp_path / "results" / "results" / "vla-arms.json").read_text())
    arms = report["arms"]
    assert set(arms) == {"sft", "sparse_grpo", "wmrl"} and report["seeds"] == [0]
    assert arms["sft"]["episodes"] == arms["wmrl"]["episodes"] == 6 and arms["sft"]["simulator_steps"] > 0
    assert arms["sparse_grpo"]["real_graded_episodes"] == 2 * 2 * 8  # 2 steps x 2 groups x 8 rollouts, all real
    assert arms["wmrl"]["real_graded_episodes"] == 2 * 8  # one anchor group per step
    assert arms["wmrl"]["difference_to_sparse_grpo"] is not None and arms["wmrl"]["held_out_noisy"] is not None
    assert arms["wmrl"]["corrections"]["anchor_pairs"] == 16
    assert list(arms["sparse_grpo"]["curve"]) == ["0", "2"]
    lines = (tmp_path / "runs" / "pusht" / "seed0" / "wmrl" / "heldout.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    assert first["step"] == 0 and {"task_id", "success", "coverage", "steps", "noisy_success"} <= set(first["episodes"][0])
    assert (tmp_path / "results" / "RESULTS-vla.md").read_text().startswith("# The paper's VLA table at CPU scale")
