"""Task folders and MLE-bench-layout competitions built in a temp dir, from data that ship with the installed
packages (no network): the shipped example folder, variants of it, and two small competitions in MLE-bench's
own layout (one graded by its own grade.py, with a relative import; one by a grader name wmrl computes)."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tasks" / "state_violent_crime"

VALID_SOLUTION = """
import pandas as pd
sub = pd.read_csv("public/sample_submission.csv")
sub.to_csv("submission.csv", index=False)
"""


def copy_example(where: Path, name: str = "state_violent_crime", leaderboard: bool = True) -> Path:
    folder = where / name
    shutil.copytree(EXAMPLE, folder)
    if not leaderboard:
        (folder / "leaderboard.csv").unlink()
    return folder


GRADE_PY = '''
import numpy as np


class InvalidSubmissionError(Exception):
    """MLE-bench's name for a submission the grader refuses (matched by name)."""


def grade(submission, answers):
    merged = submission.merge(answers, on="id")
    if (merged["prediction"] < 0).any():
        raise InvalidSubmissionError("a crime rate cannot be negative")
    return float(np.median(np.abs(merged["prediction"] - merged["violent_rate"])))
'''


def custom_grader_task(where: Path, body: str = GRADE_PY, name: str = "crime_median_error") -> Path:
    """The example with its own grade.py (median absolute error, lower is better) instead of a built-in metric."""
    folder = copy_example(where, name)
    (folder / "grade.py").write_text(textwrap.dedent(body))
    card = (folder / "task.yaml").read_text().replace("metric: rmse", "higher_is_better: false")
    (folder / "task.yaml").write_text(card.replace("id: state_violent_crime", f"id: {name}"))
    (folder / "leaderboard.csv").write_text("score\n40\n60\n80\n120\n")
    return folder


def _competition(competitions: Path, data: Path, cid: str, frame: pd.DataFrame, id_col: str, target: str,
                 grader: str, leaderboard: list[float], grade_py: str | None, helpers: dict[str, str]) -> None:
    from sklearn.model_selection import train_test_split

    comp = competitions / cid
    comp.mkdir(parents=True)
    frame = frame.reset_index(drop=True)
    frame.insert(0, id_col, [f"r{i:04d}" for i in range(len(frame))])
    train, test = train_test_split(frame, test_size=0.3, random_state=0)
    public, private = data / cid / "prepared" / "public", data / cid / "prepared" / "private"
    public.mkdir(parents=True)
    private.mkdir(parents=True)
    train.to_csv(public / "train.csv", index=False)
    test.drop(columns=target).to_csv(public / "test.csv", index=False)
    placeholder = train[target].mode().iloc[0]
    test[[id_col]].assign(**{target: placeholder}).to_csv(public / "sample_submission.csv", index=False)
    test.to_csv(private / "test.csv", index=False)  # MLE-bench often keeps every column in the answers
    (comp / "config.yaml").write_text(textwrap.dedent(f"""\
        id: {cid}
        name: {cid.replace('-', ' ').title()}
        competition_type: simple
        awards_medals: false
        prizes: null
        description: mlebench/competitions/{cid}/description.md
        dataset:
          answers: {cid}/prepared/private/test.csv
          sample_submission: {cid}/prepared/public/sample_submission.csv
        grader:
          name: {grader}
          grade_fn: mlebench.competitions.{cid}.grade:grade
        preparer: mlebench.competitions.{cid}.prepare:prepare
        """))
    (comp / "description.md").write_text(f"# {cid}\n\n## Description\n\nPredict `{target}` for every row of test.csv.\n"
                                         + "Long competition text. " * 400 + "\n")
    rows = [f"{s},{1000 + i},True,2025-01-01 00:00:00,{s},True" for i, s in enumerate(leaderboard)]
    (comp / "leaderboard.csv").write_text("scoreNullable,teamId,hasTeamName,submissionDate,score,hasScore\n"
                                          + "\n".join(rows) + "\n")
    if grade_py is not None:
        (comp / "grade.py").write_text(textwrap.dedent(grade_py))
    for name, body in helpers.items():
        (comp / name).write_text(textwrap.dedent(body))


def mlebench_layout(where: Path) -> tuple[Path, Path]:
    """``(competitions dir, data dir)`` holding ``iris-species`` (grader name ``accuracy``, no grade.py) and
    ``tumour-diagnosis`` (its own grade.py: AUC, with a relative import and MLE-bench's InvalidSubmissionError)."""
    from sklearn.datasets import load_breast_cancer, load_iris

    competitions, data = where / "competitions", where / "data"
    iris = load_iris(as_frame=True)
    frame = iris.frame.rename(columns=lambda c: c.replace(" (cm)", "").replace(" ", "_"))
    frame["species"] = frame.pop("target").map(dict(enumerate(iris.target_names)))
    _competition(competitions, data, "iris-species", frame, "Id", "species", "accuracy",
                 [1.0, 0.98, 0.96, 0.93, 0.9, 0.8, 0.6, 0.33], None, {})
    cancer = load_breast_cancer(as_frame=True).frame.iloc[:, [0, 1, 2, 3, 30]]
    cancer.columns = ["radius", "texture", "perimeter", "area", "benign"]
    grade_py = '''
        import pandas as pd
        from sklearn.metrics import roc_auc_score

        from .checks import InvalidSubmissionError, check_probabilities


        def grade(submission: pd.DataFrame, answers: pd.DataFrame) -> float:
            if len(submission) != len(answers):
                raise InvalidSubmissionError("submission and answers differ in length")
            merged = answers[["PatientId", "benign"]].merge(submission, on="PatientId", suffixes=("", "_p"))
            check_probabilities(merged["benign_p"])
            return roc_auc_score(merged["benign"], merged["benign_p"])
        '''
    checks = {"checks.py": '''
        class InvalidSubmissionError(Exception):
            pass


        def check_probabilities(values):
            if ((values < 0) | (values > 1)).any():
                raise InvalidSubmissionError("probabilities must lie in [0, 1]")
        '''}
    _competition(competitions, data, "tumour-diagnosis", cancer, "PatientId", "benign", "auc-roc",
                 [0.999, 0.99, 0.98, 0.95, 0.9, 0.75, 0.5], grade_py, checks)
    return competitions, data


INVALID_SUBMISSION = '''
class InvalidSubmissionError(Exception):
    """MLE-bench's name for a submission the grader refuses (matched by name)."""
'''
AUC_GRADE = INVALID_SUBMISSION + '''

def grade(submission, answers):
    from sklearn.metrics import roc_auc_score

    if len(submission) != len(answers):
        raise InvalidSubmissionError("submission and answers differ in length")
    merged = answers[[ID, TARGET]].merge(submission, on=ID, suffixes=("", "_p"))
    if merged[TARGET + "_p"].isna().any() or ((merged[TARGET + "_p"] < 0) | (merged[TARGET + "_p"] > 1)).any():
        raise InvalidSubmissionError("probabilities must lie in [0, 1]")
    return roc_auc_score(merged[TARGET], merged[TARGET + "_p"])
'''
RMSE_GRADE = INVALID_SUBMISSION + '''

def grade(submission, answers):
    import numpy as np

    if len(submission) != len(answers):
        raise InvalidSubmissionError("submission and answers differ in length")
    merged = answers[[ID, TARGET]].merge(submission, on=ID, suffixes=("", "_p"))
    if merged[TARGET + "_p"].isna().any():
        raise InvalidSubmissionError("a prediction is missing")
    return float(np.sqrt(np.mean((merged[TARGET] - merged[TARGET + "_p"]) ** 2)))
'''


def _graded_by(template: str, id_col: str, target: str) -> str:
    return f"ID = {id_col!r}\nTARGET = {target!r}\n" + template


def tabular_competitions(where: Path) -> tuple[Path, Path, list[str]]:
    """``(competitions dir, data dir, ids)``: five tabular competitions in MLE-bench's layout with no starter.py,
    from data that ship with scikit-learn, statsmodels and vega_datasets. Two are graded by a grader name wmrl
    computes (accuracy, root-mean-squared-error), three by their own grade.py (AUC twice, RMSE); string labels,
    0/1 targets, categorical text columns, missing values and an id column not named ``id`` all occur."""
    import statsmodels.datasets
    from sklearn.datasets import load_breast_cancer, load_diabetes, load_wine
    from vega_datasets import local_data

    competitions, data = where / "competitions", where / "data"
    wine = load_wine(as_frame=True)
    frame = wine.frame.rename(columns=lambda c: c.replace("/", "_"))
    frame["cultivar"] = frame.pop("target").map({0: "barolo", 1: "grignolino", 2: "barbera"})
    _competition(competitions, data, "wine-cultivar", frame, "Id", "cultivar", "accuracy",
                 [1.0, 0.98, 0.96, 0.94, 0.9, 0.85, 0.7, 0.4], None, {})
    cancer = load_breast_cancer(as_frame=True).frame.rename(columns=lambda c: c.replace(" ", "_"))
    cancer = cancer.rename(columns={"target": "benign"})
    _competition(competitions, data, "tumour-malignancy", cancer, "PatientId", "benign", "auc-roc",
                 [0.999, 0.995, 0.99, 0.98, 0.96, 0.9, 0.75, 0.5], _graded_by(AUC_GRADE, "PatientId", "benign"), {})
    diabetes = load_diabetes(as_frame=True, scaled=False).frame.rename(columns={"target": "progression"})
    _competition(competitions, data, "diabetes-progression", diabetes, "id", "progression",
                 "root-mean-squared-error", [50.0, 52.0, 54.0, 56.0, 58.0, 62.0, 70.0, 78.0], None, {})
    fair = statsmodels.datasets.fair.load_pandas().data
    fair["had_affair"] = (fair.pop("affairs") > 0).astype(int)
    fair["religious"] = fair["religious"].map({1: "not", 2: "mildly", 3: "fairly", 4: "strongly"})
    _competition(competitions, data, "affair-survey", fair, "respondent", "had_affair", "auc-roc",
                 [0.8, 0.78, 0.76, 0.74, 0.72, 0.7, 0.65, 0.5], _graded_by(AUC_GRADE, "respondent", "had_affair"), {})
    cars = local_data.cars().drop(columns=["Name", "Year"]).rename(columns={"Miles_per_Gallon": "mpg"})
    cars = cars.dropna(subset=["mpg"])  # horsepower keeps its missing values
    _competition(competitions, data, "car-fuel-economy", cars, "car", "mpg", "rmse-of-mpg",
                 [2.5, 2.7, 2.9, 3.1, 3.3, 3.6, 4.5, 7.8], _graded_by(RMSE_GRADE, "car", "mpg"), {})
    return competitions, data, ["wine-cultivar", "tumour-malignancy", "diabetes-progression", "affair-survey",
                                "car-fuel-economy"]


# -- one small task per type the kit grades (tests/autoresearch/test_starters.py runs their generic starters) -----------------
SURVIVAL_GRADE = INVALID_SUBMISSION + '''

def grade(submission, answers):
    import pandas as pd

    from wmrl.autoresearch.tasks.metrics import concordance_index

    merged = answers.merge(submission, on="ID")
    if len(merged) != len(answers) or merged["prediction"].isna().any():
        raise InvalidSubmissionError("one risk score per test row")
    timed = pd.DataFrame({"id": merged["ID"], "time": merged["efs_time"], "event": merged["efs"]})
    return concordance_index(timed, merged["prediction"].to_numpy(dtype=float))
'''
AVERAGE_PRECISION_GRADE = INVALID_SUBMISSION + '''

def grade(submission, answers):
    from sklearn.metrics import average_precision_score

    merged = answers.merge(submission, on="id", suffixes=("", "_p"))
    if len(merged) != len(answers) or merged["fraud_p"].isna().any():
        raise InvalidSubmissionError("one score per test row")
    return average_precision_score(merged["fraud"], merged["fraud_p"])
'''
CLASS_LOG_LOSS_GRADE = INVALID_SUBMISSION + '''

def grade(submission, answers):
    import numpy as np

    classes = ["low", "mid", "high"]
    merged = answers.merge(submission, on="id")
    if len(merged) != len(answers) or merged[classes].isna().any().any():
        raise InvalidSubmissionError("one probability per class and test row")
    p = np.clip(merged[classes].to_numpy(dtype=float), 1e-15, 1)
    p = p / p.sum(axis=1, keepdims=True)
    truth = merged["grade"].map({c: i for i, c in enumerate(classes)}).to_numpy()
    return float(-np.mean(np.log(p[np.arange(len(p)), truth])))
'''


def _features(rng, n: int) -> pd.DataFrame:
    import numpy as np

    frame = pd.DataFrame(rng.normal(size=(n, 4)), columns=["x1", "x2", "x3", "x4"]).round(4)
    frame["colour"] = rng.choice(["red", "green", "blue"], size=n)
    frame.loc[rng.random(n) < 0.05, "x4"] = np.nan  # a few missing values
    return frame


def _write_task(root: Path, kind: str, task_id: str, train: pd.DataFrame, test: pd.DataFrame, answers: pd.DataFrame,
                sample: pd.DataFrame, leaderboard: list[float], card: str = "", grader: str = "",
                grade_py: str | None = None) -> None:
    """A task folder (``kind="folder"``, ``card`` its task.yaml) or a competition in MLE-bench's layout
    (``root`` holds ``competitions/`` and ``data/``; ``grader`` its grader.name)."""
    if kind == "folder":
        folder = public = root / task_id
        public, private = folder / "public", folder / "private"
        answers_file = private / "answers.csv"
        (folder / "leaderboard.csv").parent.mkdir(parents=True)
        leaderboard_text = "score\n" + "\n".join(map(str, leaderboard)) + "\n"
    else:
        folder = root / "competitions" / task_id
        public, private = (root / "data" / task_id / "prepared" / p for p in ("public", "private"))
        answers_file = private / "test.csv"
        folder.mkdir(parents=True)
        rows = [f"{s},{1000 + i},True,2025-01-01 00:00:00,{s},True" for i, s in enumerate(leaderboard)]
        leaderboard_text = ("scoreNullable,teamId,hasTeamName,submissionDate,score,hasScore\n" + "\n".join(rows)
                            + "\n")
        card = textwrap.dedent(f"""\
            id: {task_id}
            name: {task_id}
            dataset:
              answers: {task_id}/prepared/private/test.csv
              sample_submission: {task_id}/prepared/public/sample_submission.csv
            grader:
              name: {grader}
              grade_fn: mlebench.competitions.{task_id}.grade:grade
            """)
    public.mkdir(parents=True)
    private.mkdir(parents=True)
    train.to_csv(public / "train.csv", index=False)
    test.to_csv(public / "test.csv", index=False)
    sample.to_csv(public / "sample_submission.csv", index=False)
    answers.to_csv(answers_file, index=False)
    (folder / ("task.yaml" if kind == "folder" else "config.yaml")).write_text(card)
    (folder / "description.md").write_text(f"# {task_id}\n\nPredict the target of every row of test.csv.\n")
    (folder / "leaderboard.csv").write_text(leaderboard_text)
    if grade_py is not None:
        (folder / "grade.py").write_text(grade_py)


def typed_tasks(where: Path, rows: int = 400) -> tuple[Path, Path, Path, dict[str, str]]:
    """``(task folders, competitions dir, data dir, {type: task id})``: one small synthetic task, with no
    starter.py, per type the kit grades: a binary label (accuracy), multiclass labels (macro F1), class
    probabilities (a multi-class log loss in grade.py), a regression (RMSE), a count (Poisson deviance), a
    survival risk graded by the built-in concordance index (``time``, ``event``) and by a grade.py named
    ``concordance-index`` (``efs_time``, ``efs``), a ranking metric (average precision in grade.py) and a binary
    log loss. Every task has four numeric features (one with missing values) and a categorical one."""
    import numpy as np

    rng = np.random.default_rng(0)
    folders, mlebench = where / "folders", where / "mlebench"
    split = int(rows * 0.7)

    def task(kind, task_id, frame, targets, sample_columns, placeholder, leaderboard, id_col="id", **kw):
        frame = frame.copy()
        frame.insert(0, id_col, range(len(frame)))
        train, test = frame.iloc[:split], frame.iloc[split:]
        sample = test[[id_col]].assign(**dict.fromkeys(sample_columns, placeholder))
        _write_task(folders if kind == "folder" else mlebench, kind, task_id, train, test.drop(columns=targets),
                    test[[id_col, *targets]], sample, leaderboard, **kw)

    def signal(frame):
        return frame["x1"] - 0.8 * frame["x2"] + 0.5 * frame["colour"].map({"red": 1.0, "green": 0.0, "blue": -1.0})

    ids = {}
    frame = _features(rng, rows)
    frame["approved"] = (signal(frame) + rng.normal(scale=0.7, size=rows) > 0).astype(int)
    task("folder", "binary-label", frame, ["approved"], ["prediction"], 0, [0.95, 0.9, 0.8, 0.6, 0.5],
         card="metric: accuracy\ntarget: approved\n")
    ids["binary label"] = "binary-label"
    frame = _features(rng, rows)
    frame["grade"] = pd.cut(signal(frame) + rng.normal(scale=0.5, size=rows), [-np.inf, -0.7, 0.7, np.inf],
                            labels=["low", "mid", "high"]).astype(str)
    task("mlebench", "multiclass-label", frame, ["grade"], ["grade"], "mid", [0.9, 0.8, 0.7, 0.5, 0.2],
         grader="macro-f1-score")
    ids["multiclass"] = "multiclass-label"
    task("mlebench", "class-probabilities", frame, ["grade"], ["low", "mid", "high"], 1 / 3,
         [0.3, 0.5, 0.7, 0.9, 1.1], grader="multi-class-log-loss", grade_py=CLASS_LOG_LOSS_GRADE)
    ids["class probabilities"] = "class-probabilities"
    frame = _features(rng, rows)
    frame["price"] = (10 + 3 * signal(frame) + rng.normal(size=rows)).round(3)
    task("folder", "regression", frame, ["price"], ["prediction"], 10.0, [1.0, 1.5, 2.0, 3.0, 4.0],
         card="metric: rmse\ntarget: price\n")
    ids["regression"] = "regression"
    frame = _features(rng, rows)
    frame["visits"] = rng.poisson(np.exp(0.5 + 0.5 * signal(frame)))
    task("folder", "count", frame, ["visits"], ["prediction"], 1.0, [0.9, 1.0, 1.2, 1.5, 2.0],
         card="metric: poisson_deviance\ntarget: visits\n")
    ids["count"] = "count"
    frame = _features(rng, rows)
    hazard = np.exp(0.8 * signal(frame))
    onset, censor = rng.exponential(10 / hazard), rng.exponential(15, size=rows)
    frame["event"], frame["time"] = (onset <= censor).astype(int), np.minimum(onset, censor).round(3)
    task("folder", "survival-builtin", frame, ["event", "time"], ["prediction"], 0.0, [0.8, 0.75, 0.7, 0.6, 0.5],
         card="metric: concordance_index\n")  # the answers hold the event before the time
    ids["survival (built-in concordance)"] = "survival-builtin"
    frame = frame.rename(columns={"event": "efs", "time": "efs_time"})
    task("mlebench", "survival", frame, ["efs", "efs_time"], ["prediction"], 0.5, [0.8, 0.75, 0.7, 0.6, 0.5],
         id_col="ID", grader="concordance-index", grade_py=SURVIVAL_GRADE)
    ids["survival"] = "survival"
    frame = _features(rng, rows)
    frame["fraud"] = (signal(frame) + rng.normal(scale=0.8, size=rows) > 1.6).astype(int)
    task("mlebench", "average-precision", frame, ["fraud"], ["fraud"], 0, [0.9, 0.8, 0.6, 0.4, 0.2],
         grader="average-precision", grade_py=AVERAGE_PRECISION_GRADE)
    ids["ranking metric"] = "average-precision"
    frame = _features(rng, rows)
    frame["churned"] = (signal(frame) + rng.normal(scale=1.0, size=rows) > 0).astype(int)
    task("mlebench", "log-loss", frame, ["churned"], ["churned"], 0, [0.3, 0.4, 0.5, 0.6, 0.7], grader="log-loss")
    ids["log loss"] = "log-loss"
    return folders, mlebench / "competitions", mlebench / "data", ids
