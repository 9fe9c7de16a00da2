"""Building tasks: determinism, the public/private split, corruption detection and the lock."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from conftest import TINY_SPECS

from wmrl.autoresearch.tasks.build import TaskCacheError, verify
from wmrl.autoresearch.tasks.suite import TaskSuite, UnknownTaskError


def test_public_files_hold_no_answers(tiny_suite):
    task = tiny_suite.get("tiny_iris")
    train = pd.read_csv(task.public_dir / "train.csv")
    test = pd.read_csv(task.public_dir / "test.csv")
    answers = pd.read_csv(task.answers_path)
    assert "species" in train.columns and "species" not in test.columns
    assert list(answers.columns) == ["id", "species"]
    assert set(test["id"]) == set(answers["id"]) and not set(test["id"]) & set(train["id"])
    sample = pd.read_csv(task.public_dir / "sample_submission.csv")
    assert list(sample.columns) == ["id", "prediction"] and len(sample) == len(test)
    assert not (task.public_dir / "answers.csv").exists()
    card = task.card
    assert card["labels"] == ["0", "1", "2"] and card["rows"]["test"] == len(test)
    assert "## Starter solution" in task.description and "submission.csv" in task.description


def test_builds_are_deterministic(tmp_path, tiny_suite):
    other = TaskSuite(cache_dir=tmp_path / "c2", lock_path=tmp_path / "l.json", specs=TINY_SPECS)
    assert other.get("tiny_iris").data_sha256 == tiny_suite.get("tiny_iris").data_sha256


def test_corrupted_cache_is_rebuilt_never_used(tmp_path, caplog):
    suite = TaskSuite(cache_dir=tmp_path / "c", lock_path=tmp_path / "l.json", specs=TINY_SPECS)
    task = suite.get("tiny_iris")
    good = task.data_sha256
    answers = task.answers_path
    answers.write_text(answers.read_text().replace(",0\n", ",2\n", 1))
    with pytest.raises(TaskCacheError, match="answers.csv"):
        verify(task.root)
    rebuilt = suite.get("tiny_iris")
    assert rebuilt.data_sha256 == good
    assert "corrupted" in caplog.text
    (task.root / "manifest.json").write_text("{not json")
    assert suite.get("tiny_iris").data_sha256 == good
    (task.public_dir / "train.csv").unlink()
    assert suite.get("tiny_iris").data_sha256 == good


def test_data_that_differ_from_the_lock_are_an_error(tmp_path):
    lock = tmp_path / "l.json"
    suite = TaskSuite(cache_dir=tmp_path / "c", lock_path=lock, specs=TINY_SPECS)
    suite.record(suite.get("tiny_iris"), {"a": 0.5}, {})
    payload = json.loads(lock.read_text())
    payload["tasks"]["tiny_iris"]["data_sha256"]["public/train.csv"] = "0" * 64
    lock.write_text(json.dumps(payload))
    with pytest.raises(TaskCacheError, match="other data than recorded"):
        TaskSuite(cache_dir=tmp_path / "c", lock_path=lock, specs=TINY_SPECS).get("tiny_iris")


def test_unknown_task_names_the_fix(tiny_suite):
    with pytest.raises(UnknownTaskError, match="Did you mean 'tiny_iris'.*wmrl tasks list"):
        tiny_suite.get("tiny_irsi")
    with pytest.raises(ValueError, match="unknown split"):
        tiny_suite.specs("validation")
