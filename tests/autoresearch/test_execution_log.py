"""The execution log and cache, through the real environment."""

from __future__ import annotations

import json

from wmrl.autoresearch.environments.execution_log import ExecutionLog
from wmrl.autoresearch.environments.real import SandboxEnvironment
from wmrl.types import Outcome, Status

SOLUTION = """
import pandas as pd
pd.read_csv("public/sample_submission.csv").to_csv("submission.csv", index=False)
"""


def test_executions_are_logged_and_served_from_cache(tmp_path, tiny_suite, process_sandbox):
    log_path = tmp_path / "executions.jsonl"
    env = SandboxEnvironment(tiny_suite, process_sandbox, log_path=log_path)
    first, crash, gated = env.execute_many([("tiny_iris", SOLUTION), ("tiny_iris", "1/0"), ("tiny_iris", "x = (")])
    assert first.status is Status.VALID and not first.cached
    assert crash.status is Status.RUNTIME_ERR and crash.error == "ZeroDivisionError"
    assert gated.status is Status.SYNTAX_ERR
    records = [json.loads(line) for line in log_path.read_text().splitlines()]
    assert [r["outcome"]["status"] for r in records] == ["valid", "runtime_err"] or \
        sorted(r["outcome"]["status"] for r in records) == ["runtime_err", "valid"]
    record = next(r for r in records if r["outcome"]["status"] == "valid")
    assert record["task_id"] == "tiny_iris" and record["script"] == SOLUTION
    assert record["packages"]["scikit-learn"] and record["backend"] == "process"

    again = SandboxEnvironment(tiny_suite, process_sandbox, log_path=log_path).execute("tiny_iris", SOLUTION)
    assert again.cached and again.status is Status.VALID
    assert again.score == first.score and again.wall_seconds == first.wall_seconds
    assert len(log_path.read_text().splitlines()) == 2  # a cache hit is not a new execution


def test_infra_errors_are_logged_but_never_cached(tmp_path):
    log = ExecutionLog(tmp_path / "log.jsonl")
    log.append("k1", "t", "print(1)", Outcome(Status.INFRA_ERROR, None, error="infra: boom"), "process", "bwrap")
    log.append("k2", "t", "print(2)", Outcome(Status.RAN_NO_SUB, 0.2), "process", "bwrap")
    fresh = ExecutionLog(tmp_path / "log.jsonl")
    assert fresh.lookup("k1") is None
    assert fresh.lookup("k2").reward == 0.2 and fresh.lookup("k2").cached
    assert len(fresh.records()) == 2
    with open(tmp_path / "log.jsonl", "a") as f:
        f.write("{truncated\n")
    assert ExecutionLog(tmp_path / "log.jsonl").lookup("k2") is not None
