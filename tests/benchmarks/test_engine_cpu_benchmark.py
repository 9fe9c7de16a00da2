"""benchmarks/engine_cpu.py without running a fit: its command lines (the documented quickstart, the CPU engine
overlay on vLLM's runs only), the alternation of engines and the summary it writes."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("engine_cpu", ROOT / "benchmarks" / "engine_cpu.py")
engine_cpu = importlib.util.module_from_spec(spec)
sys.modules["engine_cpu"] = engine_cpu
spec.loader.exec_module(engine_cpu)


def fake_run(engine: str, step_s: float, wall_s: float, gain: float = 0.1) -> dict:
    steps = [{"time/step": step_s + d, "time/generate": step_s / 2, "time/update": step_s / 3, "time/sync": 0.0}
             for d in (-1.0, 0.0, 1.0)]
    start = {"a": [0.2, 0.4, 0.0], "b": [0.5, 0.5, 0.1]}
    return {"engine": engine, "wall_s": wall_s, "steps": steps, "heldout_evaluations": 2, "load_mean": 1.0,
            "load_max": 2.0, "probe_s": [1.0, 1.1], "heldout_start": start,
            "heldout_final": {task: [v + gain for v in values] for task, values in start.items()}}


def commands_of(arms, monkeypatch, tmp_path) -> list[list[str]]:
    """The command line each arm's run would start (stopped at the start)."""
    commands = []

    class Stop(Exception):
        pass

    def popen(command, **kwargs):
        commands.append(command)
        raise Stop

    monkeypatch.setattr(engine_cpu.subprocess, "Popen", popen)
    monkeypatch.setattr(engine_cpu, "cpu_probe", lambda: 1.0)
    for arm in arms:
        with pytest.raises(Stop):
            engine_cpu.run(arm, tmp_path / arm, steps=3)
    return [[a.replace(str(tmp_path / arm), "RUN") for a in command] for arm, command in zip(arms, commands, strict=True)]


def test_the_engines_differ_only_by_the_cpu_overlay(monkeypatch, tmp_path):
    hf, vllm = commands_of(("hf", "vllm"), monkeypatch, tmp_path)
    overlay = vllm.index(str(ROOT / "configs/autoresearch/vllm_cpu.yaml"))
    without = vllm[: overlay - 1] + vllm[overlay + 1 :]
    assert without == hf
    assert str(ROOT / "benchmarks/no_execution_cache.yaml") in hf and hf[hf.index("--trainer.max_steps") + 1] == "3"


def test_the_summary_gives_each_engine_and_the_difference_an_interval():
    runs = [fake_run("hf", 100.0, 600.0), fake_run("vllm", 80.0, 560.0)]
    result = engine_cpu.summary(runs)
    assert result["hf"]["step_s"]["point"] == pytest.approx(100.0)
    difference = result["step_difference_s"]
    assert difference["point"] == pytest.approx(-20.0) and difference["low"] <= -20.0 <= difference["high"]
    assert result["wall_difference_s"] == pytest.approx(-40.0)
    assert "vllm - hf: -20.000" in engine_cpu.table(runs, result)


def test_the_asynchronous_arm_is_the_vllm_arm_with_staleness_1(monkeypatch, tmp_path):
    synchronous, asynchronous = commands_of(("vllm", "vllm_async"), monkeypatch, tmp_path)
    at = asynchronous.index("--model.init_args.max_staleness")
    assert asynchronous[at + 1] == "1" and asynchronous[:at] + asynchronous[at + 2:] == synchronous


def test_the_summary_compares_the_held_out_gains_of_two_arms():
    runs = [fake_run("vllm", 90.0, 500.0, gain=0.1), fake_run("vllm_async", 60.0, 400.0, gain=0.2)]
    result = engine_cpu.summary(runs, ("vllm", "vllm_async"))
    assert result["vllm"]["heldout_gain"]["point"] == pytest.approx(0.1)
    assert result["vllm_async"]["heldout_gain"]["point"] == pytest.approx(0.2)
    assert result["heldout_final_difference"]["point"] == pytest.approx(0.1)
    assert result["step_difference_s"]["point"] == pytest.approx(-30.0)
    text = engine_cpu.table(runs, result)
    assert "vllm_async - vllm: -30.000" in text and "Final held-out positions, vllm_async - vllm" in text


def test_a_seeded_repeat_of_a_held_out_evaluation_counts_once_and_timings_count_every_run(tmp_path):
    """An arm's runs are seeded alike: two runs with the same held-out positions are one evaluation for the quality
    intervals (the same samples again), while their step times are two measurements."""
    once = [fake_run("vllm", 90.0, 500.0, gain=0.1), fake_run("vllm_async", 60.0, 400.0, gain=0.2)]
    twice = [*once, fake_run("vllm_async", 70.0, 420.0, gain=0.2), fake_run("vllm", 80.0, 480.0, gain=0.1)]
    single, repeated = engine_cpu.summary(once, ("vllm", "vllm_async")), engine_cpu.summary(twice, ("vllm", "vllm_async"))
    assert repeated["vllm_async"]["heldout_evaluations"] == 1
    assert repeated["vllm_async"]["heldout_gain"] == single["vllm_async"]["heldout_gain"]
    assert repeated["heldout_final_difference"] == single["heldout_final_difference"]
    assert len(repeated["vllm"]["wall_s"]) == 2 and repeated["vllm"]["step_s"]["point"] == pytest.approx(85.0)
    different = [*twice[:2], fake_run("vllm_async", 70.0, 420.0, gain=0.3), twice[3]]
    assert engine_cpu.summary(different, ("vllm", "vllm_async"))["vllm_async"]["heldout_evaluations"] == 2

    results = tmp_path / "async.json"  # --summarize recomputes a saved sitting's summary without running
    results.write_text(json.dumps({"runs": twice, "summary": {"arms": ["vllm", "vllm_async"]}}))
    engine_cpu.main(["--results", str(results), "--summarize"])
    assert json.loads(results.read_text())["summary"]["vllm_async"]["heldout_evaluations"] == 1
