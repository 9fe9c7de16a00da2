"""The leak scan (issue 30): it finds a task's answers wherever a sandboxed script could read them, and CI runs
it over every task."""

from __future__ import annotations

import gzip
import json
import os
import secrets
import shutil
import sysconfig
from pathlib import Path

import pytest

from wmrl.autoresearch.environments.leak_scan import fingerprints, leak_scan
from wmrl.autoresearch.environments.real import SandboxEnvironment
from wmrl.autoresearch.environments.sandbox import leak_scanner
from wmrl.cli import commands as cli
from wmrl.cli import common

SITE = Path(sysconfig.get_paths()["purelib"])


def _scan(task, path: Path):
    return leak_scanner.scan_file(leak_scanner.Matcher([fingerprints(task)]), str(path))


# -- the scanner, on files of the host --------------------------------------------------------------------------
def test_a_copy_of_the_answers_is_found_plain_compressed_or_inside_a_binary(tiny_suite, tmp_path):
    task = tiny_suite.get("tiny_iris")
    answers = task.answers_path.read_bytes()
    (tmp_path / "copy.csv").write_bytes(answers)
    (tmp_path / "copy.csv.gz").write_bytes(gzip.compress(answers))
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01" + os.urandom(5000) + answers + os.urandom(5000))
    labels = [line.split(",")[1] for line in task.answers_path.read_text().split()[1:]]
    (tmp_path / "values.py").write_text(f"ANSWERS = {labels}\n")
    for name in ("copy.csv", "copy.csv.gz", "blob.bin", "values.py"):
        hits = _scan(task, tmp_path / name)
        assert hits and hits[0][0] == "tiny_iris" and "target values in test order" in hits[0][1], (name, hits)


def test_the_source_dataset_in_any_row_order_is_found(tmp_path):
    """Where the rows are the dataset's own, matched by their feature values: scikit-learn's iris.csv, and the
    copies in other packages' test folders that the runtime view leaves out (outside any sandbox, on the host),
    for the suite's own smoke_iris (species names; the copies write names or class codes)."""
    import sklearn

    from wmrl.autoresearch.tasks.catalog import TASKS
    from wmrl.autoresearch.tasks.suite import TaskSuite

    task = TaskSuite(cache_dir=tmp_path / "cache", specs=tuple(s for s in TASKS if s.id == "smoke_iris")).get("smoke_iris")
    original = Path(sklearn.__file__).parent / "datasets" / "data" / "iris.csv"
    for path in (original, SITE / "statsmodels" / "genmod" / "tests" / "results" / "iris.csv",
                 SITE / "scipy" / "io" / "arff" / "tests" / "data" / "iris.arff",
                 SITE / "sklearn" / "datasets" / "tests" / "data" / "openml" / "id_61" / "data-v1-dl-61.arff.gz"):
        hits = _scan(task, path)
        assert hits and "test rows" in hits[0][1], (path, hits)
    shuffled = original.read_text().splitlines()[1:]
    shuffled.reverse()
    (tmp_path / "reversed.csv").write_text("\n".join(shuffled))
    assert _scan(task, tmp_path / "reversed.csv"), "rows in another order"
    assert hits[0][0] == "smoke_iris"


def test_code_and_the_tasks_own_public_files_are_clean(tiny_suite):
    """Code holds no rows; the task's public files hold no copy of the answers (they are searched for those only:
    iris repeats some of its test rows in its training rows, which is the dataset, not a leak)."""
    import pandas

    task = tiny_suite.get("tiny_iris")
    assert _scan(task, Path(pandas.__file__)) == []
    answers_only = leak_scanner.Matcher([{**fingerprints(task), "rows": []}])
    for name in ("train.csv", "test.csv", "sample_submission.csv"):
        assert leak_scanner.scan_file(answers_only, str(task.public_dir / name)) == [], name


def test_fingerprints_carry_no_more_than_the_scan_needs(tiny_suite):
    prints = fingerprints(tiny_suite.get("tiny_diabetes"))
    assert prints["rows"] and prints["k"] >= 8 and prints["kgrams"]
    assert 3 <= prints["min_rows"] <= 20 and prints["max_line_tokens"] >= 2 * 11


# -- the scan in a sandbox, and a planted copy inside a package's tests/ folder ------------------------------------
@pytest.fixture
def planted(tiny_suite):
    """A copy of tiny_iris's answers inside a package's tests/ folder, in the venv's site-packages."""
    if not os.access(SITE, os.W_OK):
        pytest.skip(f"{SITE} is not writable (the test plants a package there)")
    package = SITE / f"wmrl_planted_{secrets.token_hex(4)}"
    (package / "tests").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "tests" / "__init__.py").write_text("")
    copy = package / "tests" / "expected_labels.csv"
    shutil.copy(tiny_suite.get("tiny_iris").answers_path, copy)
    yield package, copy
    shutil.rmtree(package, ignore_errors=True)


def _permissive_plan(sandbox, tmp_path):
    """The sandbox's mount plan with a view that keeps every file and every tests/ folder (the allowlist switched
    off): what the scan must catch if the allowlist ever lets data through."""
    from wmrl.autoresearch.environments.sandbox.mounts import MountPlan
    from wmrl.autoresearch.environments.sandbox.runtime_view import (
        RuntimeView,
        build_tree,
        layout,
        probe_interpreter,
    )

    interpreter = probe_interpreter(sandbox.python)
    view_layout = layout(interpreter)
    tree = tmp_path / "permissive" / "tree"
    files = build_tree(view_layout, interpreter.sys_path, tree, keep=lambda relative, in_bin: True,
                       skip_dirs=frozenset())
    return MountPlan.for_view(RuntimeView(tree, view_layout.roots, view_layout.hidden, files))


def test_the_scan_fails_on_a_planted_copy_and_the_allowlist_hides_it(tiny_suite, planted, tmp_path):
    from support.sandbox_probe import bwrap_missing

    if bwrap_missing():
        pytest.skip(f"no bubblewrap: {bwrap_missing()}")
    from wmrl.autoresearch.environments.sandbox import ProcessSandbox

    package, copy = planted
    sandbox = ProcessSandbox(isolation="bwrap", max_concurrency=1)  # its view: built after the plant
    hidden = SandboxEnvironment(tiny_suite, sandbox, use_log=False).hidden_paths()
    report = leak_scan(tiny_suite, sandbox, ["tiny_iris"], roots=(str(package),), hidden=hidden)
    assert report.clean and str(copy) not in report.files, report.hits
    assert str(package / "__init__.py") in report.files  # the package's code is there, its tests/ are not
    sandbox.plan = _permissive_plan(sandbox, tmp_path)
    report = leak_scan(tiny_suite, sandbox, ["tiny_iris"], roots=(str(package),), hidden=hidden)
    assert [(task, path) for task, path, _ in report.hits] == [("tiny_iris", str(copy))], report.hits
    # again: the contents cleared before are hashed, not searched; the copy is searched and found again
    again = leak_scan(tiny_suite, sandbox, ["tiny_iris"], roots=(str(package),), hidden=hidden)
    assert again.hits == report.hits and again.files == report.files
    assert again.known_clean == len(again.files) - 1, (again.known_clean, len(again.files))
    fresh = leak_scan(tiny_suite, sandbox, ["tiny_iris"], roots=(str(package),), hidden=hidden, fresh=True)
    contents = [leak_scanner.digest(path) for path in fresh.files if path != str(copy)]
    assert fresh.known_clean == len(contents) - len(set(contents))  # only a content met twice in this scan


def test_the_scanner_hashes_what_an_earlier_scan_cleared_and_searches_the_rest(tiny_suite, tmp_path, monkeypatch):
    """leak_scanner.main(), as a sandboxed run calls it, over a folder: a content listed as cleared is read and
    hashed but not searched (the same bytes elsewhere too); a new content is searched, and a copy of the answers
    found, however many scans cleared other files."""
    task = tiny_suite.get("tiny_iris")
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.txt").write_text("nothing to see\n")
    (root / "b.txt").write_text("more of nothing\n")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)

    def scan(cleared):
        config = {"tasks": [fingerprints(task)], "roots": [str(root)], "clean": sorted(cleared)}
        (work / "fingerprints.json").write_text(json.dumps(config))
        leak_scanner.main()
        return json.loads((work / "leak_scan.json").read_text())

    first = scan(set())
    assert first["known_clean"] == 0 and first["hits"] == [] and len(first["clean"]) == 2
    (root / "a-again.txt").write_text("nothing to see\n")  # a cleared content at another path
    shutil.copy(task.answers_path, root / "copy.csv")
    second = scan(set(first["clean"]))
    assert second["known_clean"] == 3 and len(second["files"]) == 4
    assert [(path, task_id) for path, task_id, _ in second["hits"]] == [(str(root / "copy.csv"), "tiny_iris")]
    assert leak_scanner.digest(str(root / "copy.csv")) not in second["clean"]  # a hit is never cleared


def test_the_command_names_the_file_and_fails(tiny_suite, planted, tmp_path, monkeypatch, capsys):
    from support.sandbox_probe import bwrap_missing

    if bwrap_missing():
        pytest.skip(f"no bubblewrap: {bwrap_missing()}")
    from wmrl.autoresearch.environments.sandbox import ProcessSandbox

    package, copy = planted
    sandbox = ProcessSandbox(isolation="bwrap", max_concurrency=1)
    monkeypatch.setattr(common, "suite", lambda args: tiny_suite)
    monkeypatch.setattr(common, "sandbox", lambda args: sandbox)
    report = tmp_path / "scan.json"
    assert cli.main(["leak-scan", "tiny_iris", "--root", str(package), "--report", str(report)]) == 0
    assert "no answers of the 1 tasks" in " ".join(capsys.readouterr().out.split())
    sandbox.plan = _permissive_plan(sandbox, tmp_path)
    assert cli.main(["leak-scan", "tiny_iris", "--root", str(package)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert str(copy) in err and "tiny_iris" in err, err


# -- every task, every file (CI) --------------------------------------------------------------------------------------
def _documented_commands() -> list[str]:
    """The leak-scan commands docs/security.md shows (its block marked ``<!-- run: leak-scan -->``)."""
    from support.docs_blocks import docs_block

    return [line for line in docs_block("docs/security.md", "leak-scan").strip().splitlines()
            if line.startswith("wmrl leak-scan")]


@pytest.mark.slow
def test_no_task_has_answers_in_any_file_a_run_can_read(tmp_path, request):
    """The commands of docs/security.md, exactly as written (``wmrl`` on PATH), over the whole suite: every task
    listed with the files searched (the same thousands of files a run can read, plus its public files) and zero
    hits. The two backends' scans run one after the other: their views hold the same files, so the second hashes
    what the first cleared instead of searching it again (the cache of `wmrl leak-scan`)."""
    import subprocess
    import sys

    from wmrl.autoresearch.tasks.suite import TaskSuite

    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    # every task built once before the scans read the cache
    subprocess.run(["wmrl", "tasks", "build"], env=env, check=True, capture_output=True, timeout=1800)
    suite = TaskSuite()
    shutil.rmtree(suite.cache_dir / "leak-scan", ignore_errors=True)  # the first scan searches every file
    tasks = {s.id for s in suite.specs()}
    scanned, missing = [], []
    for command in _documented_commands():
        backend = "docker" if "--sandbox docker" in command else "process"
        try:
            request.getfixturevalue(f"{backend}_sandbox")
        except pytest.skip.Exception as exc:  # scan on the backends there are; say which one is missing at the end
            missing.append(f"{command}: {exc}")
            continue
        where = tmp_path / backend
        where.mkdir()
        run = subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=where, env=env, capture_output=True,
                             text=True, timeout=3600)
        assert run.returncode == 0, f"{command}\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
        found = json.loads((where / "leak-scan.json").read_text())
        assert set(found["tasks"]) == tasks, command
        assert found["clean"] and len(found["files"]) > 10_000, (command, found["clean"], len(found["files"]))
        for task in found["tasks"].values():
            assert task["hits"] == [] and task["files_scanned"] >= len(found["files"]), command
        scanned.append((command, found["known_clean"], len(found["files"])))
    assert scanned, missing
    assert scanned[0][1] < 0.25 * scanned[0][2], scanned  # the first cleared only contents it met twice
    for command, known, files in scanned[1:]:  # the same view: nearly every content was cleared by the first
        assert known > 0.9 * files, (command, known, files)
    if missing:
        pytest.skip("; ".join(missing))
