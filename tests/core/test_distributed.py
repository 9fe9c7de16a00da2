"""WMRL under DDP (2 CPU processes, gloo): every rank holds the same calibration map and weight."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from wmrl.algorithms.debias import CalibrationMap, fit_calibration

SCRIPT = Path(__file__).resolve().parents[1] / "support" / "ddp_wmrl.py"


def run(out: Path, devices: int, steps: int, ckpt: Path | None = None, uneven: bool = False) -> list[dict]:
    args = [sys.executable, str(SCRIPT), str(out), str(devices), str(steps), *([str(ckpt)] if ckpt else [])]
    env = {**os.environ, "UNEVEN_PROMPTS": "1" if uneven else "0"}
    done = subprocess.run(args, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(devices)]


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp")
    return out, run(out, devices=2, steps=3)


def test_ranks_share_one_map_and_weight_equal_to_a_single_process_fit(two_ranks):
    _, (rank0, rank1) = two_ranks
    assert rank0["world_size"] == 2
    assert rank0["pairs"] == rank1["pairs"] and len(rank0["pairs"]) == 3 * 2 * 8  # 3 steps x 2 ranks x 8 anchors
    assert rank0["calibration"] == rank1["calibration"]
    assert rank0["denoise"] == rank1["denoise"] and rank0["weight"] == rank1["weight"]
    keys = {p[2] for p in rank0["pairs"]}
    assert len(keys) == 3 * 2 * 2  # anchor groups stay distinct across ranks and steps
    wm, real = np.array([p[0] for p in rank0["pairs"]]), np.array([p[1] for p in rank0["pairs"]])
    assert CalibrationMap.from_dict(rank0["calibration"]) == fit_calibration(wm, real)  # the last refit saw them all


def test_a_two_process_checkpoint_resumes_on_one_process(two_ranks, tmp_path):
    out, (rank0, _) = two_ranks
    (resumed,) = run(tmp_path, devices=1, steps=4, ckpt=out / "last.ckpt")
    assert resumed["global_step"] == 4
    assert resumed["pairs"][: len(rank0["pairs"])] == rank0["pairs"]  # the gathered buffer came back whole
    assert len(resumed["pairs"]) == len(rank0["pairs"]) + 8
    assert resumed["denoise"]["observations"] >= rank0["denoise"]["observations"]


def test_ranks_with_different_numbers_of_micro_batches_step_together(tmp_path):
    """Rank 0's 16 rollouts share one prompt (2 micro-batches of 8), rank 1's hold four (4 micro-batches): the
    update reduces gradients once per rank, so neither waits for a reduction the other never starts, and both apply
    the same step."""
    rank0, rank1 = run(tmp_path, devices=2, steps=2, uneven=True)
    assert rank0["global_step"] == rank1["global_step"] == 2
    assert rank0["parameters"] == rank1["parameters"]
