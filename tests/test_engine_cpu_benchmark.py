"""benchmarks/engine_cpu.py without running a fit: its command lines (the documented quickstart, the CPU engine
overlay on vLLM's runs only), the alternation of engines and the summary it writes."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("engine_cpu", ROOT / "benchmarks" / "engine_cpu.py")
engine_cpu = importlib.util.module_from_spec(spec)
sys.modules["engine_cpu"] = engine_cpu
spec.loader.exec_module(engine_cpu)


def fake_run(engine: str, step_s: float, wall_s: float) -> dict:
    steps = [{"time/step": step_s + d, "time/generate": step_s / 2, "time/update": step_s / 3, "time/sync": 0.0}
             for d in (-1.0, 0.0, 1.0)]
    return {"engine": engine, "wall_s": wall_s, "steps": steps, "heldout_evaluations": 2, "load_mean": 1.0,
            "load_max": 2.0, "probe_s": [1.0, 1.1]}


def test_the_engines_differ_only_by_the_cpu_overlay(monkeypatch, tmp_path):
    commands = []

    class Stop(Exception):
        pass

    def popen(command, **kwargs):
        commands.append(command)
        raise Stop

    monkeypatch.setattr(engine_cpu.subprocess, "Popen", popen)
    monkeypatch.setattr(engine_cpu, "cpu_probe", lambda: 1.0)
    for engine in ("hf", "vllm"):
        with pytest.raises(Stop):
            engine_cpu.run(engine, tmp_path / engine, steps=3)
    hf, vllm = commands
    overlay = vllm.index(str(ROOT / "configs/autoresearch/vllm_cpu.yaml"))
    without = vllm[: overlay - 1] + vllm[overlay + 1 :]
    assert [a.replace(str(tmp_path / "vllm"), "RUN") for a in without] == [
        a.replace(str(tmp_path / "hf"), "RUN") for a in hf]
    assert str(ROOT / "benchmarks/no_execution_cache.yaml") in hf and hf[hf.index("--trainer.max_steps") + 1] == "3"


def test_the_summary_gives_each_engine_and_the_difference_an_interval():
    runs = [fake_run("hf", 100.0, 600.0), fake_run("vllm", 80.0, 560.0)]
    result = engine_cpu.summary(runs)
    assert result["hf"]["step_s"]["point"] == pytest.approx(100.0)
    difference = result["step_difference_s"]
    assert difference["point"] == pytest.approx(-20.0) and difference["low"] <= -20.0 <= difference["high"]
    assert result["wall_difference_s"] == pytest.approx(-40.0)
    assert "vLLM - transformers: -20.000" in engine_cpu.table(runs, result)
