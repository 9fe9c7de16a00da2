"""A test folder run by another interpreter: the VLA suite in ``.venv312`` and the real-vLLM suite in ``.venv-vllm``
(each environment holds what the main one cannot: LeRobot on Python 3.12, vLLM with its transformers pin)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def assert_suite_passes(python: Path, folder: str, timeout_s: int) -> None:
    """``python -m pytest tests/<folder>`` on this tree's wmrl (``PYTHONPATH``; ``WMRL_CACHE`` and the rest of this
    session's environment inherited) passes, and no test in it skipped.

    ``--confcutdir`` keeps ``tests/conftest.py`` (the 3.11 suite's) out, so ``tests/`` itself goes on ``PYTHONPATH``
    for the helpers the folders share with the main suite (``config_overlays``). With ``WMRL_CI_LOGS`` set (.ci/run),
    the run's whole output, its ten slowest tests included, is kept there as ``nested-<folder>.log``."""
    path = ROOT / "tests" / folder
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")])}
    where = python.parents[1].name
    try:
        run = subprocess.run(
            [str(python), "-m", "pytest", "-v" if os.environ.get("WMRL_CI_LOGS") else "-q", "-p", "no:cacheprovider",
             "--durations=10", "--confcutdir", str(path), str(path)],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s,
        )
    except subprocess.TimeoutExpired as exc:  # what it had printed says which test it was in
        partial = "".join(b.decode(errors="replace") if isinstance(b, bytes) else b or ""
                          for b in (exc.stdout, exc.stderr))
        if logs := os.environ.get("WMRL_CI_LOGS"):
            Path(logs, f"nested-{folder}.log").write_text(partial)
        pytest.fail(f"tests/{folder} in {where} ran past {timeout_s} s; its output so far:\n{partial[-6000:]}")
    if logs := os.environ.get("WMRL_CI_LOGS"):
        Path(logs, f"nested-{folder}.log").write_text(run.stdout + run.stderr)
    tail = (run.stdout + run.stderr)[-6000:]
    assert run.returncode == 0, f"tests/{folder} failed in {where}:\n{tail}"
    last = run.stdout.strip().splitlines()[-1]
    assert " passed" in last and "skipped" not in last, f"tests/{folder} in {where} skipped tests:\n{tail}"
