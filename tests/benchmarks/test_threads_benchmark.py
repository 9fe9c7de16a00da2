"""benchmarks/threads.py without the default model: a neighbour computes while the arms run and is gone after,
the arms alternate, and the record holds each arm's threads, rates and the ratio."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("threads_benchmark", ROOT / "benchmarks" / "threads.py")
threads = importlib.util.module_from_spec(spec)
spec.loader.exec_module(threads)


def test_the_arms_alternate_beside_a_running_neighbour(tmp_path, monkeypatch):
    import psutil

    seen = []

    def fake_arm(arm, args):
        busy = [p for p in psutil.Process().children() if p.cpu_percent(interval=0.2) > 20]
        seen.append((arm, len(busy)))
        rate = {"default": 0.5, "wmrl": 2.0}[arm]
        return {"arm": arm, "threads": 2 if arm == "default" else 1, "why": "test", "steps_per_s": [rate, rate]}

    monkeypatch.setattr(threads, "run_arm", fake_arm)
    out = tmp_path / "threads.json"
    threads.main(["--repeats", "2", "--out", str(out)])
    assert [arm for arm, _ in seen] == ["default", "wmrl", "default", "wmrl"]
    assert all(busy == 1 for _, busy in seen), seen  # the neighbour computes during every arm
    assert psutil.Process().children() == []  # and is gone after
    record = json.loads(out.read_text())
    assert record["arms"]["wmrl"]["threads"] == 1 and record["ratio_wmrl_to_default"] == 4.0
    assert len(record["arms"]["default"]["steps_per_s"]) == 4
