"""The checks a task folder and an MLE-bench competition share (``wmrl.autoresearch.tasks.folder_checks``): written once, so
both formats report the same problem the same way, each naming its file and the fix."""

from __future__ import annotations

import pytest
from support.task_fixtures import copy_example, mlebench_layout

from wmrl.autoresearch.tasks.folder import load_folder
from wmrl.autoresearch.tasks.folder_checks import (
    TaskFolderError,
    existing,
    identity_problems,
    leaderboard_checks,
)
from wmrl.autoresearch.tasks.mlebench import load_competition

ID_RULE = "must be lowercase letters, digits, '_' or '-' (at most 64), starting with a letter or digit"


def test_a_bad_id_reads_the_same_in_a_folder_and_a_competition(tmp_path):
    folder = copy_example(tmp_path)
    (folder / "task.yaml").write_text((folder / "task.yaml").read_text() + "id: Bad Id\n")
    with pytest.raises(TaskFolderError) as folder_error:
        load_folder(folder)
    competitions, data = mlebench_layout(tmp_path)
    config = competitions / "iris-species" / "config.yaml"
    config.write_text(config.read_text().replace("id: iris-species", "id: Bad Id"))
    with pytest.raises(TaskFolderError) as competition_error:
        load_competition(competitions / "iris-species", data)
    assert f"{folder / 'task.yaml'}: id 'Bad Id' {ID_RULE}; set `id:`" in str(folder_error.value)
    assert f"{config}: id 'Bad Id' {ID_RULE}; correct `id:`" in str(competition_error.value)


def test_a_competition_without_its_sample_and_answers_names_both(tmp_path):
    competitions, data = mlebench_layout(tmp_path)
    prepared = data / "iris-species" / "prepared"
    (prepared / "public" / "sample_submission.csv").unlink()
    answers = next((prepared / "private").glob("*.csv"))
    answers.unlink()
    (competitions / "iris-species" / "description.md").write_text("  \n")
    with pytest.raises(TaskFolderError) as info:
        load_competition(competitions / "iris-species", data, split="training")
    text = str(info.value)
    assert "sample_submission.csv: missing (config.yaml dataset.sample_submission" in text
    assert f"{answers}: the hidden answers are missing" in text
    assert "description.md: missing or empty; MLE-bench competitions ship their overview there" in text
    assert "--split: split 'training' must be one of train, heldout, smoke" in text
    assert len(info.value.problems) == 4, info.value.problems


def test_the_small_checks(tmp_path):
    assert existing(tmp_path / "grade.py") is None
    (tmp_path / "grade.py").write_text("")
    assert existing(tmp_path / "grade.py") == tmp_path / "grade.py"
    assert leaderboard_checks(None, None) == [] and leaderboard_checks(None, "x: missing") == ["x: missing"]
    assert identity_problems("ok-id", "train", tmp_path, "fix", "--split") == []
