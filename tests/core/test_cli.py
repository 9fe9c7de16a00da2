"""`wmrl tasks ...` and `wmrl exec ...`: output and the errors a user meets first."""

from __future__ import annotations

import json

import pytest

from wmrl.cli import commands as cli
from wmrl.cli import common


@pytest.fixture
def run_cli(tiny_suite, monkeypatch, capsys):
    monkeypatch.setattr(common, "suite", lambda args: tiny_suite)

    def run(*argv):
        code = cli.main(list(argv))
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


def test_tasks_list_and_show(run_cli):
    code, out, _ = run_cli("tasks", "list", "--json")
    assert code == 0
    assert {t["id"] for t in json.loads(out)} == {"tiny_iris", "tiny_diabetes"}
    code, out, _ = run_cli("tasks", "show", "tiny_iris", "--json")
    assert code == 0 and json.loads(out)["metric"] == "accuracy"
    code, out, _ = run_cli("tasks", "list")  # the table's title counts the splits a new user will meet
    assert code == 0 and "2 tasks: 1 train, 1 smoke" in out
    code, out, _ = run_cli("tasks", "list", "--split", "train")
    assert code == 0 and "1 task" in out and "1 tasks" not in out and "1 train," not in out


def test_exec_prints_the_outcome(run_cli, tmp_path, process_sandbox):
    script = tmp_path / "solution.py"
    script.write_text("import pandas as pd\npd.read_csv('public/sample_submission.csv').to_csv('submission.csv', index=False)\n")
    code, out, err = run_cli("exec", "tiny_iris", str(script), "--json", "--no-cache")
    assert code == 0, err
    outcome = json.loads(out)
    assert outcome["status"] == "valid" and 0.5 <= outcome["reward"] <= 1.0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("exec", "tiny_irsi", "SCRIPT"), "unknown task 'tiny_irsi'"),
        (("exec", "tiny_iris", "/nonexistent/solution.py"), "does not exist"),
        (("exec", "tiny_iris", "LATIN1"), "not UTF-8"),
        (("tasks", "show", "nope"), "wmrl tasks list"),
        (("tasks", "build", "tiny_iris", "--split", "smoke"), "not both"),
    ],
)
def test_bad_input_gets_a_clear_error(run_cli, tmp_path, argv, message):
    good = tmp_path / "ok.py"
    good.write_text("print(1)\n")
    latin = tmp_path / "latin.py"
    latin.write_bytes("print('caf\xe9')\n".encode("latin-1"))
    argv = [str(good) if a == "SCRIPT" else str(latin) if a == "LATIN1" else a for a in argv]
    code, _, err = run_cli(*argv)
    assert code == 2
    assert message in " ".join(err.split())
