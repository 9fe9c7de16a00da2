"""torch's thread count from what the process may really use (wmrl.threads)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from wmrl.threads import cgroup_cpus, choose_threads

ROOT = Path(__file__).resolve().parents[2]


def test_other_processes_on_the_cores_leave_fewer_threads():
    assert choose_threads({}, affinity=2, quota=None, others=0.1).threads == 2
    assert choose_threads({}, affinity=2, quota=None, others=1.2).threads == 1
    assert choose_threads({}, affinity=2, quota=None, others=3.0).threads == 1  # never below one
    choice = choose_threads({}, affinity=16, quota=4.0, others=1.0)
    assert choice.threads == 3 and "a cgroup quota of 4 CPUs" in choice.why and "1.0 held by other" in choice.why


def test_the_environment_sets_it_and_a_bad_value_names_the_key():
    assert choose_threads({"WMRL_THREADS": "3"}, affinity=2, others=2.0).threads == 3
    assert choose_threads({"OMP_NUM_THREADS": "1"}, affinity=8, others=0.0).why == "OMP_NUM_THREADS=1"
    with pytest.raises(ValueError, match="WMRL_THREADS='two' is not a whole number"):
        choose_threads({"WMRL_THREADS": "two"})


def test_a_cgroup_quota_is_read_from_cpu_max(tmp_path):
    (tmp_path / "proc").write_text("0::/job\n")
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "cpu.max").write_text("150000 100000\n")
    assert cgroup_cpus(tmp_path, tmp_path / "proc") == 1.5
    (tmp_path / "job" / "cpu.max").write_text("max 100000\n")
    assert cgroup_cpus(tmp_path, tmp_path / "proc") is None


def test_wmrl_fit_says_its_choice_from_the_real_readings(tmp_path, tiny_model_dir, monkeypatch, capsys):
    """A real fit (the tiny model, one step) chooses from this machine's readings, sets torch and says so on stderr."""
    import torch

    from wmrl.cli import main

    monkeypatch.delenv("WMRL_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    try:
        code = main(["fit", "-c", str(ROOT / "configs/autoresearch/quickstart.yaml"), "-c", str(ROOT / "configs/debug/fast.yaml"),
                     "--model.init_args.model", str(tiny_model_dir), "--trainer.default_root_dir", str(tmp_path),
                     "--trainer.enable_progress_bar", "false"])
        chosen = torch.get_num_threads()
    finally:
        torch.set_num_threads(before)
    assert code == 0
    (line,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("torch threads: ")]
    assert int(line.split()[2]) == chosen and 1 <= chosen <= len(os.sched_getaffinity(0))
    assert "CPUs this process may run on" in line and "held by other processes" in line


def test_a_bad_thread_count_exits_naming_the_key(tmp_path):
    env = {**os.environ, "WMRL_THREADS": "0"}
    bad = subprocess.run([sys.executable, "-m", "wmrl.cli", "fit", "-c", str(ROOT / "configs/autoresearch/quickstart.yaml")],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert bad.returncode == 2 and "WMRL_THREADS=0: at least 1 thread" in bad.stderr
