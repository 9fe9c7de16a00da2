"""benchmarks/sandbox_startup.py runs end to end (its figures are in docs/security.md, measured separately)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_startup_benchmark_pairs_two_trees(tmp_path, process_sandbox):
    out = tmp_path / "startup.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "sandbox_startup.py"), "--before", str(ROOT / "src"),
         "--backends", "process", "--runs", "2", "--out", str(out)],
        capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads(out.read_text())
    scripts = record["backends"]["process"]["scripts"]
    assert set(scripts) == {"pass", "import numpy, pandas, sklearn"}
    for s in scripts.values():
        assert len(s["before_runs"]) == len(s["after_runs"]) == 2 and all(x > 0 for x in s["after_runs"])
    assert "| process | `pass` |" in done.stdout and record["load_average_before"]
