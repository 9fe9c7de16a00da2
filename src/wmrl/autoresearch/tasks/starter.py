"""A generic starter for a task that ships none, written from its public files alone.

A small policy needs a foothold: a working script in the prompt that it continues (with only an opened code
block, SmolLM2-135M filled its tokens with unrelated code and wrote 0 valid submissions of 40 on five
MLE-bench-layout competitions). A task folder or competition may ship its own ``starter.py``; when it does not,
:func:`generic_starter` writes one from what a solution would see:

- the id column and the prediction columns from ``sample_submission.csv``;
- the target: the task's target when its metric is built in, else the prediction column(s) found in
  ``train.csv``, else the one column of ``train.csv`` that ``test.csv`` lacks; per-class probability columns
  (``id,class_a,class_b,...``) when a ``train.csv`` column holds exactly those classes; a survival pair
  ``(time, event)`` for one risk column when the columns ``test.csv`` lacks are a 0/1 event and a non-negative
  time (``efs``, ``efs_time``), or hold one of each beside other columns when the grader's name says survival;
- the target's kind (:func:`infer_prediction`): the built-in metric's; else the grader's name (MLE-bench's
  ``grader.name``, :data:`NAME_HINTS`: a ranking metric such as ``auc-roc``, ``average-precision`` or
  ``normalized-gini`` and a log loss read a probability of a 0/1 target, ``accuracy`` and ``map@3`` a label,
  ``root-mean-squared-error`` a value, ``concordance-index`` a risk), else the target's values and the sample's
  placeholder;
- a default model over the numeric columns (median-imputed, scaled) and the categorical ones with at most
  :data:`MAX_CATEGORIES` distinct values (one-hot), the same shape as the built-in tasks' linear baseline, so the
  ``starter_head`` prefill (everything before ``model = ...``) works unchanged. Each kind gets what its metric
  reads: a ``label``, logistic regression's class (accuracy, F1, kappa, MAP@k); a ``probability``, its
  probability of the positive class (AUC, average precision, Gini, log loss: a score, never a hard label);
  ``class_probabilities``, its probability of each class, a column each; a ``real`` value, ridge regression's
  (RMSE, MAE, a ranking metric of a numeric target); a ``positive`` count, ridge regression's floored at 0.001
  (Poisson deviance); a survival ``risk``, minus ridge regression's time fitted on every row, censored ones too
  (higher risk, earlier event; the concordance index, which is also its validation score);
- one helper, ``finish(model)``, defined in the prefill: it fits on the training split, prints the validation
  score, refits on all of ``train.csv`` and writes the submission, so the script ends with two lines
  (``model = ...`` and ``finish(model)``). With the fit, score and write spelled out after the model line, as the
  built-in starters do, SmolLM2-135M wrote 1 valid of 10 on five starterless competitions (slips in the lines it
  rewrote: ``accuracy_score(val[target], predict)``, refitting on the test file); with the helper, 9 of 10.

When none of this applies (no ``train.csv`` or ``test.csv``, no target found, a format it cannot fill) the starter
copies the sample submission, and says why in its first line. ``wmrl tasks check`` runs it like any reference.
The scripts are ``tasks/solutions/generic_starter.py`` and ``generic_copy.py`` (:mod:`wmrl.autoresearch.tasks.script_files`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from wmrl.autoresearch.tasks.script_files import fill

MAX_CATEGORIES = 30  # a categorical column with more distinct values is left out (names, free text, ids)
ROWS_READ = 200_000  # rows of train.csv read to choose columns and the kind
#: MLE-bench grader names (``config.yaml`` ``grader.name``, lowercased, ``_`` and spaces read as ``-``) -> the kind
#: of prediction they score, by substring, the first match winning. A ranking metric (AUC, average precision,
#: Gini, NDCG) reads a score and a log loss a probability, so they come before the label metrics whose words they
#: contain (``average-precision`` before ``precision``); a ``probability`` hint gives a probability for a 0/1
#: target, a value for another numeric one and a label for text (:func:`_single_kind`). MAP@k reads a ranked
#: list of labels (one label is a list).
NAME_HINTS = (
    ("concordance-correlation", "real"), ("concordance", "risk"), ("c-index", "risk"), ("cindex", "risk"),
    ("survival", "risk"),
    ("map@", "label"), ("mapk", "label"),
    ("auc", "probability"), ("roc", "probability"), ("average-precision", "probability"),
    ("averageprecision", "probability"), ("ndcg", "probability"), ("gini", "probability"),
    ("log-loss", "probability"), ("logloss", "probability"), ("cross-entropy", "probability"),
    ("brier", "probability"),
    ("spearman", "real"), ("pearson", "real"),
    ("accuracy", "label"), ("f1", "label"), ("kappa", "label"), ("precision", "label"), ("recall", "label"),
    ("error", "real"), ("rmse", "real"), ("mae", "real"), ("mape", "real"), ("mse", "real"), ("msle", "real"),
    ("squared", "real"), ("absolute", "real"), ("r2", "real"), ("deviance", "positive"),
)
#: the type a card shows for each kind
TASK_TYPES = {"label": "multiclass", "probability": "binary", "class_probabilities": "multiclass",
              "real": "regression", "positive": "count", "risk": "survival", "copy": "custom"}


@dataclass(frozen=True)
class Prediction:
    """What a task's submission predicts, as its public files say.

    Attributes:
        kind: ``label``, ``probability`` (of the positive class), ``class_probabilities`` (one column per class),
            ``real``, ``positive`` (a count's expected value), ``risk`` (survival), or ``copy`` (nothing to fit).
        targets: the ``train.csv`` column(s) a model learns.
        columns: the submission's prediction columns (``sample_submission.csv`` less its id column).
        task_type: the card's type (``binary`` when a label has two classes).
        reason: why ``copy`` (empty otherwise).
    """

    kind: str
    targets: tuple[str, ...]
    columns: tuple[str, ...]
    task_type: str
    reason: str = ""


def _copy(columns: tuple[str, ...], reason: str) -> Prediction:
    return Prediction("copy", (), columns, "custom", reason)


def _kind_from_name(name: str | None) -> str | None:
    """The kind an MLE-bench grader name implies (``None``: it says nothing).

    >>> _kind_from_name("auc-roc"), _kind_from_name("macro-f1-score"), _kind_from_name("jaccard")
    ('probability', 'label', None)
    >>> _kind_from_name("average_precision"), _kind_from_name("map@3"), _kind_from_name("c-index")
    ('probability', 'label', 'risk')
    """
    text = re.sub(r"[\s_]+", "-", (name or "").strip().lower())
    return next((kind for hint, kind in NAME_HINTS if hint in text), None)


def infer_prediction(
    public_dir: Path, id_column: str, submission_columns: tuple[str, ...], metric_kind: str | None = None,
    targets: tuple[str, ...] = (), grader_name: str | None = None,
) -> Prediction:
    """What the task predicts (module docstring). ``metric_kind`` is a built-in metric's prediction kind and
    ``targets`` the task's targets when it has one; ``grader_name`` is the name of its own grader (a hint)."""
    import pandas as pd

    columns = tuple(c for c in submission_columns if c != id_column)
    train_path, test_path = public_dir / "train.csv", public_dir / "test.csv"
    if not train_path.is_file() or not test_path.is_file():
        return _copy(columns, "the public files hold no train.csv and test.csv to learn from")
    train = pd.read_csv(train_path, nrows=ROWS_READ)
    test_columns = list(pd.read_csv(test_path, nrows=0).columns)
    candidates = [c for c in train.columns if c not in test_columns and c != id_column]
    if targets and all(t in train.columns for t in targets):
        chosen = tuple(targets)
    elif columns and all(c in train.columns for c in columns):
        chosen = columns
    elif len(columns) >= 2 and (classes := _class_column(train, candidates, columns)) is not None:
        return Prediction("class_probabilities", (classes,), columns, "multiclass")
    elif len(columns) == 1 and metric_kind is None and (pair := _survival_pair(train, candidates, grader_name)):
        return Prediction("risk", pair, columns, "survival")
    elif len(candidates) == 1 and len(columns) == 1:
        chosen = (candidates[0],)
    else:
        return _copy(columns, f"no column of train.csv is the target of {list(columns)[:4]}")
    if metric_kind is not None:
        kind = metric_kind
    elif len(chosen) > 1:
        numeric = all(pd.api.types.is_numeric_dtype(train[c]) for c in chosen)
        if not numeric:
            return _copy(columns, f"several non-numeric targets {list(chosen)[:4]}")
        kind = "real"
    else:
        kind = _single_kind(train[chosen[0]], grader_name, _placeholder(public_dir, columns))
    if kind == "risk":
        pair = _time_event(train, chosen) if len(chosen) == 2 else None
        if pair is None:
            return _copy(columns, "a survival target needs [time, event] columns in train.csv (a non-negative "
                                  "time and a 0/1 event)")
        chosen = pair
    if kind in ("label", "probability") and train[chosen[0]].nunique() < 2:
        return _copy(columns, f"the target {chosen[0]!r} has one value in train.csv")
    task_type = TASK_TYPES[kind]
    if kind == "label" and train[chosen[0]].nunique() == 2:
        task_type = "binary"
    return Prediction(kind, chosen, columns, task_type)


def _class_column(train, candidates: list[str], columns: tuple[str, ...]) -> str | None:
    """The candidate column whose values are exactly the submission's class columns."""
    wanted = set(columns)
    for c in candidates:
        values = set(train[c].dropna().astype(str).unique()[: len(wanted) + 1])
        if values == wanted:
            return c
    return None


def _time_event(train, columns) -> tuple[str, str] | None:
    """``(time, event)`` among ``columns``: the event holds only 0 and 1, the time is another non-negative number
    (``None`` unless exactly one of each); two columns named ``time`` and ``event`` are those.

    >>> import pandas as pd
    >>> _time_event(pd.DataFrame({"efs": [1, 0, 1], "efs_time": [3.5, 9.0, 1.25]}), ["efs", "efs_time"])
    ('efs_time', 'efs')
    """
    import pandas as pd

    numeric = [c for c in columns if pd.api.types.is_numeric_dtype(train[c])]
    events = [c for c in numeric if set(train[c].dropna().unique()) <= {0, 1}]
    times = [c for c in numeric if c not in events and bool((train[c].dropna() >= 0).all())]
    if len(events) == 1 and len(times) == 1:
        return times[0], events[0]
    return ("time", "event") if set(columns) == {"time", "event"} else None


def _survival_pair(train, candidates: list[str], grader_name: str | None) -> tuple[str, str] | None:
    """The ``(time, event)`` targets of a survival task whose submission is one risk column: the ``train.csv``
    columns that ``test.csv`` lacks are exactly a time and an event, or, when the grader's name says survival
    (``concordance-index``, ``c-index``), hold exactly one of each."""
    hinted = _kind_from_name(grader_name)
    if hinted not in (None, "risk") or (hinted is None and len(candidates) != 2):
        return None
    return _time_event(train, candidates)


def _placeholder(public_dir: Path, columns: tuple[str, ...]):
    import pandas as pd

    if len(columns) != 1:
        return None
    values = pd.read_csv(public_dir / "sample_submission.csv", nrows=100)[columns[0]]
    return values.iloc[0] if len(values) else None


def _single_kind(y, grader_name: str | None, placeholder) -> str:
    """The kind of one target column: the grader's name first, then its values and the sample's placeholder.

    >>> import pandas as pd
    >>> _single_kind(pd.Series([0, 1, 1]), None, 0.5), _single_kind(pd.Series(["a", "b"]), None, "a")
    ('probability', 'label')
    >>> _single_kind(pd.Series([0, 1, 1]), "accuracy", 0), _single_kind(pd.Series([1.5, 2.25, 3.0]), None, 0.0)
    ('label', 'real')
    """
    import pandas as pd

    hinted = _kind_from_name(grader_name)
    values = y.dropna()
    binary = set(values.unique()) <= {0, 1} and values.nunique() == 2
    if hinted == "probability":
        return "probability" if binary else "label" if not pd.api.types.is_numeric_dtype(values) else "real"
    if hinted is not None:
        if hinted == "label" and pd.api.types.is_float_dtype(values) and values.nunique() > 50:
            return "real"
        return hinted
    if not pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
        return "label"
    if binary:
        fraction = isinstance(placeholder, float) and 0 < placeholder < 1 and placeholder not in (0.0, 1.0)
        return "probability" if fraction else "label"
    integers = bool((values == values.round()).all())
    return "label" if integers and values.nunique() <= 20 else "real"


# -- the script --------------------------------------------------------------------------------------------------
_PREDICT = {
    "label": "model.predict(features(frame))",
    "probability": "model.predict_proba(features(frame))[:, 1]",
    "class_probabilities": "model.predict_proba(features(frame))",
    "real": "model.predict(features(frame))",
    "positive": "np.maximum(model.predict(features(frame)), 1e-3)",
    "risk": "-model.predict(features(frame))",
}
_SCORES = {  # the validation estimate a kind gets (the task's own metric is named in the prompt)
    "label": ("from sklearn.metrics import accuracy_score", "accuracy_score(val[target], predict(val))"),
    "probability": ("from sklearn.metrics import roc_auc_score", "roc_auc_score(val[target], predict(val))"),
    "class_probabilities": ("from sklearn.metrics import log_loss",
                            "log_loss(val[target], predict(val), labels=model.classes_)"),
    "real": ("from sklearn.metrics import root_mean_squared_error",
             "root_mean_squared_error(val[target], predict(val))"),
    "positive": ("from sklearn.metrics import mean_poisson_deviance",
                 "mean_poisson_deviance(val[target], predict(val))"),
    "risk": ("from lifelines.utils import concordance_index",  # it reads a survival time: the negated risk
             "concordance_index(val[target], -predict(val), val[event])"),
}


def generic_starter(public_dir: Path, id_column: str, prediction: Prediction) -> str:
    """The starter script for ``prediction`` (module docstring); always one that writes a submission."""
    import pandas as pd

    if prediction.kind == "copy":
        return fill("generic_copy", reason=prediction.reason)
    train = pd.read_csv(public_dir / "train.csv", nrows=ROWS_READ)
    test = pd.read_csv(public_dir / "test.csv", nrows=ROWS_READ)
    sample_ids = pd.read_csv(public_dir / "sample_submission.csv", usecols=[id_column])[id_column]
    shared = [c for c in test.columns if c in train.columns and c != id_column and c not in prediction.targets]
    numeric = [c for c in shared if pd.api.types.is_numeric_dtype(train[c]) and not pd.api.types.is_bool_dtype(train[c])]
    categorical = [c for c in shared if c not in numeric and train[c].nunique() <= MAX_CATEGORIES]
    dropped = [c for c in shared if c not in numeric and c not in categorical]
    if not numeric and not categorical:
        return fill("generic_copy", reason="train.csv and test.csv share no usable feature column")
    if id_column not in test.columns and len(test) != len(sample_ids):
        return fill("generic_copy",
                    reason=f"test.csv has no {id_column!r} column and not one row per submission row")
    kind = prediction.kind
    target = prediction.targets[0] if len(prediction.targets) == 1 else list(prediction.targets)
    score_import, score = _SCORES[kind]
    classify = kind in ("label", "probability", "class_probabilities")
    lines, strata = [], target if classify else None  # the split keeps each class's share
    if kind == "risk":
        # A ridge regression of the time on every row, censored ones too; its negation is the risk. On the built-in
        # rossi and gbsg2 (5 x 5-fold concordance) it ranked as well as a logistic regression of the event (0.61,
        # 0.67) and better than a fit on the rows with an event only (0.53, 0.66).
        target, strata = prediction.targets  # the split keeps the share of events
        lines.append(f"event = {json.dumps(strata)}  # 1: the event happened at the time; 0: censored (later, if at all)")
    counts = train[strata].value_counts() if strata is not None else None
    if train[list(prediction.targets)].isna().any().any():
        lines.append(f"train = train.dropna(subset={list(prediction.targets)!r})")
    predictions, columns = _submission(id_column, prediction, id_column in test.columns)
    return fill(
        "generic_starter",
        estimator="LogisticRegression" if classify else "Ridge",
        score_import="\n" + score_import,
        target_lines="".join(f"\n{line}" for line in lines),
        target=json.dumps(target),
        numeric=_listed(numeric),
        categorical=_listed(categorical),
        dropped=f"  # left out, too many distinct values: {', '.join(dropped[:8])}" if dropped else "",
        predict=_PREDICT[kind],
        predictions=predictions,
        key=json.dumps(id_column),
        columns=columns,
        stratify=f", stratify=train[{'event' if kind == 'risk' else 'target'}]"
        if counts is not None and counts.min() >= 2 else "",
        model="LogisticRegression(max_iter=1000)" if classify else "Ridge(alpha=1.0)",
        score=score,
    )


def _listed(names: list[str]) -> str:
    """A Python list literal, wrapped to stay readable in a prompt."""
    text = json.dumps(names)
    if len(text) <= 100:
        return text
    lines, line = [], "["
    for name in names:
        item = json.dumps(name) + ", "
        if len(line) + len(item) > 100:
            lines.append(line.rstrip())
            line = "    "
        line += item
    return "\n".join([*lines, line.rstrip(", ") + "]"])


def _submission(id_column: str, prediction: Prediction, test_has_ids: bool) -> tuple[str, str]:
    """What ``write_submission`` builds: the ``predictions`` frame (with the ids) and the columns it keeps, to
    merge into the sample's rows by id so that they keep its order."""
    key = json.dumps(id_column)
    ids = f"test[{key}]" if test_has_ids else f"sample[{key}]"
    if prediction.kind == "class_probabilities":
        build = (f"pd.DataFrame(values, columns=[str(c) for c in model.classes_])\n"
                 f"    predictions.insert(0, {key}, {ids}.to_numpy())")
    elif len(prediction.columns) > 1:
        build = (f"pd.DataFrame(values, columns={json.dumps(list(prediction.columns))})\n"
                 f"    predictions.insert(0, {key}, {ids}.to_numpy())")
    else:
        build = f"pd.DataFrame({{{key}: {ids}, {json.dumps(prediction.columns[0])}: values}})"
    return build, json.dumps([id_column, *prediction.columns])
