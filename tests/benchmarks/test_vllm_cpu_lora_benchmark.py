"""benchmarks/vllm_cpu_lora.py without vLLM: each run is a child process whose environment picks the ops (vLLM's with
``VLLM_PLUGINS=`` empty, wmrl's by default), the arms alternate, a failed child names its arm, and the summary names
the rows whose tokens differ from the first run's and where."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("vllm_cpu_lora_benchmark", ROOT / "benchmarks" / "vllm_cpu_lora.py")
bench = importlib.util.module_from_spec(spec)
sys.modules["vllm_cpu_lora_benchmark"] = bench
spec.loader.exec_module(bench)


def children(monkeypatch, seconds: dict[str, float], tokens: dict[str, list] | None = None, fail: str | None = None):
    """Child runs answered by arm (read from the environment each was started with); the arms in start order."""
    started = []

    def run(command, env, **kwargs):
        arm = "vllm_ops" if env.get("VLLM_PLUGINS") == "" else "wmrl_ops"
        started.append(arm)
        result = {"generate_s": seconds[arm], "load": 1.0, "prompt_tokens": [1400, 1600],
                  "tokens": (tokens or {}).get(arm, [[1, 2]]), "max_logprob_difference": 4e-5}
        out = "" if arm == fail else "engine log\nRESULT " + json.dumps(result) + "\n"
        return subprocess.CompletedProcess(command, 1 if arm == fail else 0, out, "the engine died")

    monkeypatch.setattr(bench.subprocess, "run", run)
    monkeypatch.setattr(bench, "machine", lambda: "this machine")  # (platform's probe starts a process)
    return started


def test_the_arms_alternate_and_the_summary_compares_them(monkeypatch, tmp_path):
    started = children(monkeypatch, {"vllm_ops": 120.0, "wmrl_ops": 40.0})
    bench.main(["--runs", "2", "--results", str(tmp_path / "r.json")])
    assert started == ["vllm_ops", "wmrl_ops", "wmrl_ops", "vllm_ops"]
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["speedup"] == pytest.approx(3.0) and result["differs_from_first"] == [[], [], [], []]


def test_rows_with_other_tokens_are_named_and_a_failed_run_names_its_arm(monkeypatch, tmp_path):
    tokens = {"vllm_ops": [[1, 2], [5, 6, 7]], "wmrl_ops": [[1, 2], [5, 3, 4]]}
    children(monkeypatch, {"vllm_ops": 1.0, "wmrl_ops": 1.0}, tokens=tokens)
    bench.main(["--runs", "1", "--results", str(tmp_path / "r.json")])
    assert json.loads((tmp_path / "r.json").read_text())["differs_from_first"] == [[], [[1, 1]]]
    children(monkeypatch, {"vllm_ops": 1.0, "wmrl_ops": 1.0}, fail="wmrl_ops")
    with pytest.raises(RuntimeError, match="(?s)wmrl_ops run failed.*the engine died"):
        bench.main(["--runs", "1", "--results", str(tmp_path / "r.json")])
