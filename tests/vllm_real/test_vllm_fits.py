"""Real ``wmrl fit`` runs with vLLM on CPU, as docs/scale-out.md shows them (with configs/debug/fast.yaml on top:
one step, one held-out sample): the quickstart with the vLLM engine logs what the transformers fit logs and runs its
held-out evaluation; the paper's WMRL overlay puts the world model on the same engine. Between the two fits the
first one's engine shuts down (its processes exit) and the second starts its own."""

from __future__ import annotations

import csv
import shlex
from pathlib import Path

import pytest

from wmrl.cli import main

ROOT = Path(__file__).resolve().parents[2]
FAST = ["-c", str(ROOT / "configs/debug/fast.yaml")]
CANARY = {"canary/engine_change", "canary/policy_change"}  # what only the vLLM engine logs: its weight-sync check


def documented_fits() -> list[list[str]]:
    """The arguments of each ``.venv-vllm/bin/wmrl fit`` command in docs/scale-out.md's block of CPU fits (the code
    block after the comment naming this file), config paths made absolute."""
    lines = (ROOT / "docs" / "scale-out.md").read_text().splitlines()
    (marker,) = [i for i, line in enumerate(lines) if line.startswith("<!--") and "test_vllm_fits.py" in line]
    assert lines[marker + 1].startswith("```"), "the comment naming this file sits right above its code block"
    block = lines[marker + 2 : lines.index("```", marker + 2)]
    fits = []
    for line in block:
        if line.startswith(".venv-vllm/bin/wmrl fit "):
            args = shlex.split(line.split("  #")[0])[1:]
            fits.append([str(ROOT / a) if a.startswith("configs/") else a for a in args])
    return fits


def fit(run_dir: Path, args: list[str], capsys) -> tuple[str, list[dict]]:
    """``wmrl fit ARGS`` in this process with its run files under ``run_dir``; its output and metrics rows."""
    code = main([*args, "--trainer.default_root_dir", str(run_dir)])
    assert code == 0
    (metrics,) = run_dir.rglob("metrics.csv")
    with open(metrics) as f:
        return capsys.readouterr().out, list(csv.DictReader(f))


def columns(rows: list[dict]) -> set[str]:
    return {key for row in rows for key, value in row.items() if value not in ("", None)}


def test_the_docs_show_the_two_cpu_fits():
    quickstart, wmrl = documented_fits()
    assert [Path(a).name for a in quickstart if a.endswith(".yaml")] == ["quickstart.yaml", "vllm_cpu.yaml"]
    assert [Path(a).name for a in wmrl if a.endswith(".yaml")] == ["quickstart.yaml", "paper_4b_vllm.yaml",
                                                                   "vllm_cpu.yaml"]


def test_the_quickstart_on_vllm_logs_what_the_transformers_fit_logs(tmp_path, capsys, vllm_processes):
    quickstart, _ = documented_fits()
    overlay = quickstart.index(str(ROOT / "configs/autoresearch/vllm_cpu.yaml"))
    transformers = quickstart[: overlay - 1] + quickstart[overlay + 1 :]  # the same fit without the engine overlay
    on_hf, hf_rows = fit(tmp_path / "hf", [*transformers, *FAST], capsys)
    on_vllm, vllm_rows = fit(tmp_path / "vllm", [*quickstart, *FAST], capsys)
    assert columns(vllm_rows) - columns(hf_rows) == CANARY and columns(hf_rows) - columns(vllm_rows) == set()
    for out in (on_hf, on_vllm):  # the held-out evaluation ran before and after the step, on real execution
        assert "held-out evaluation (real execution)" in out and "start:" in out and "step 1:" in out
    heldout = [r for r in vllm_rows if r.get("heldout/score")]
    assert len(heldout) == 2, "the held-out evaluation at the start and after the step"
    (step,) = [r for r in vllm_rows if r.get("time/generate")]
    assert float(step["rollout/response_tokens"]) > 0 and float(step["tokens/generate"]) > 0
    assert float(step["canary/policy_change"]) > 0 and float(step["canary/engine_change"]) > 0  # the sync reached it
    assert vllm_processes() == []  # the fit's end shut its engine down


@pytest.mark.usefixtures("checkpoint")
def test_wmrl_with_the_world_model_on_vllm_starts_a_new_engine_after_the_last_fit(tmp_path, capsys, vllm_processes):
    _, wmrl = documented_fits()
    assert vllm_processes() == []  # nothing left running by the fit before
    out, rows = fit(tmp_path / "wmrl", [*wmrl, *FAST, "--data.init_args.groups_per_step=3"], capsys)
    (step,) = [r for r in rows if r.get("time/generate")]
    assert float(step["anchor/fraction"]) == pytest.approx(2 / 3)  # the paper overlay's floor of two anchor groups
    assert float(step["time/world_model"]) > 0 and float(step["world_model/parse_failures"]) == 0  # guided JSON
    assert float(step["canary/engine_change"]) > 0
    assert "held-out evaluation (real execution)" in out
    assert vllm_processes() == []
