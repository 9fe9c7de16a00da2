"""Task metrics and submission validation.

A metric scores one submission against the hidden answers; it is deterministic and never sees the training
data, so forecasting uses sMAPE (scale-free, needs no in-sample naive errors) rather than MASE. Each metric
declares the kind of prediction it reads, and :func:`validate_prediction` turns a submission's ``prediction``
column into that kind or says exactly why it cannot: a malformed submission is the agent's fault (status
"no valid submission"), never a grader crash.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from wmrl.autoresearch.tasks.spec import PredictionKind

_PROBABILITY_EPS = 1e-15


@dataclass(frozen=True)
class Metric:
    """One scoring rule.

    Attributes:
        name: key in :data:`METRICS`.
        fn: ``fn(answers, prediction) -> float``. ``answers`` holds ``id`` and the task's target columns, row
            aligned with ``prediction`` (a 1-D array already checked by :func:`validate_prediction`). Finite
            but huge predictions can overflow it to ``inf`` or ``nan`` (``rmse`` of 1e200): the grader scores
            that as an invalid submission, the agent's doing, never as a grader failure.
        higher_is_better: direction of the score.
        prediction: what the ``prediction`` column must hold: ``label``, ``probability`` of the positive
            class, ``real``, ``positive`` real, or a survival ``risk`` score (higher = earlier event).
        description: one line for the task card.
    """

    name: str
    fn: Callable[[pd.DataFrame, np.ndarray], float]
    higher_is_better: bool
    prediction: PredictionKind
    description: str


def _target(answers: pd.DataFrame) -> pd.Series:
    columns = [c for c in answers.columns if c != "id"]
    if len(columns) != 1:
        raise ValueError(f"expected exactly one target column besides 'id', got {columns}")
    return answers[columns[0]]


def _labels(values: pd.Series | np.ndarray) -> np.ndarray:
    return np.asarray([_label_text(v) for v in values], dtype=object)


def _label_text(value: object) -> str:
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value)


def accuracy(answers: pd.DataFrame, prediction: np.ndarray) -> float:
    """Share of exactly matching labels (compared as text).

    >>> accuracy(pd.DataFrame({"id": [0, 1], "y": ["a", "b"]}), np.array(["a", "a"], dtype=object))
    0.5
    """
    return float(np.mean(_labels(_target(answers)) == _labels(prediction)))


def macro_f1(answers: pd.DataFrame, prediction: np.ndarray) -> float:
    """Unweighted mean of per-class F1 over the classes present in the answers or the prediction.

    >>> macro_f1(pd.DataFrame({"id": [0, 1], "y": [1, 2]}), np.array(["1", "2"], dtype=object))
    1.0
    """
    from sklearn.metrics import f1_score

    return float(f1_score(_labels(_target(answers)), _labels(prediction), average="macro", zero_division=0))


def roc_auc(answers: pd.DataFrame, prediction: np.ndarray) -> float:
    """Area under the ROC curve of the positive-class probability (answers in {0, 1}).

    >>> roc_auc(pd.DataFrame({"id": [0, 1, 2], "y": [0, 1, 1]}), np.array([0.1, 0.8, 0.4]))
    1.0
    """
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(_target(answers).astype(int), prediction))


def log_loss(answers: pd.DataFrame, prediction: np.ndarray) -> float:
    """Mean binary cross-entropy; probabilities are clipped to [1e-15, 1 - 1e-15].

    >>> round(log_loss(pd.DataFrame({"id": [0, 1], "y": [0, 1]}), np.array([0.5, 0.5])), 4)
    0.6931
    """
    truth = _target(answers).to_numpy(dtype=float)
    p = np.clip(prediction.astype(float), _PROBABILITY_EPS, 1 - _PROBABILITY_EPS)
    return float(-np.mean(truth * np.log(p) + (1 - truth) * np.log(1 - p)))


def rmse(answers: pd.DataFrame, prediction: np.ndarray) -> float:
    """Root mean squared error.

    >>> rmse(pd.DataFrame({"id": [0, 1], "y": [1.0, 3.0]}), np.array([2.0, 2.0]))
    1.0
    """
    error = _target(answers).to_numpy(dtype=float) - prediction.astype(float)
    return float(np.sqrt(np.mean(error**2)))


def mae(answers: pd.DataFrame, prediction: np.ndarray) -> float:
    """Mean absolute error.

    >>> mae(pd.DataFrame({"id": [0, 1], "y": [1.0, 3.0]}), np.array([2.0, 2.0]))
    1.0
    """
    return float(np.mean(np.abs(_target(answers).to_numpy(dtype=float) - prediction.astype(float))))


def poisson_deviance(answers: pd.DataFrame, prediction: np.ndarray) -> float:
    """Mean Poisson deviance ``2 * (y log(y / mu) - (y - mu))``; predictions must be > 0.

    >>> poisson_deviance(pd.DataFrame({"id": [0, 1], "y": [0, 2]}), np.array([1.0, 2.0]))
    1.0
    """
    y = _target(answers).to_numpy(dtype=float)
    mu = prediction.astype(float)
    ratio_term = np.where(y > 0, y * np.log(np.where(y > 0, y, 1.0) / mu), 0.0)
    return float(np.mean(2.0 * (ratio_term - (y - mu))))


def smape(answers: pd.DataFrame, prediction: np.ndarray) -> float:
    """Symmetric mean absolute percentage error in percent, 0 to 200 (a 0/0 term counts as 0).

    >>> smape(pd.DataFrame({"id": [0, 1], "y": [100.0, 0.0]}), np.array([100.0, 0.0]))
    0.0
    >>> round(smape(pd.DataFrame({"id": [0], "y": [100.0]}), np.array([50.0])), 4)
    66.6667
    """
    y = _target(answers).to_numpy(dtype=float)
    f = prediction.astype(float)
    denominator = np.abs(y) + np.abs(f)
    safe = np.where(denominator > 0, denominator, 1.0)
    return float(np.mean(np.where(denominator > 0, 2.0 * np.abs(f - y) / safe, 0.0)) * 100.0)


def concordance_index(answers: pd.DataFrame, prediction: np.ndarray) -> float:
    """Harrell's C for right-censored data: share of comparable pairs whose risk order matches event order.

    A pair (i, j) is comparable when ``event_i == 1`` and either ``time_i < time_j`` or the times tie and
    ``j`` is censored (as lifelines counts them); it is concordant when ``risk_i > risk_j`` and counts one
    half on a risk tie. Answers hold ``time`` and ``event``.

    >>> a = pd.DataFrame({"id": [0, 1, 2], "time": [1.0, 2.0, 3.0], "event": [1, 1, 0]})
    >>> concordance_index(a, np.array([3.0, 2.0, 1.0]))
    1.0
    >>> concordance_index(a, np.zeros(3))
    0.5
    """
    time = answers["time"].to_numpy(dtype=float)
    event = answers["event"].to_numpy(dtype=float) > 0
    risk = prediction.astype(float)
    censored_tie = (time[:, None] == time[None, :]) & ~event[None, :]
    earlier = ((time[:, None] < time[None, :]) | censored_tie) & event[:, None]
    n_pairs = int(earlier.sum())
    if n_pairs == 0:
        raise ValueError("no comparable pairs: the answers hold no event before another time")
    concordant = (risk[:, None] > risk[None, :]) & earlier
    tied = (risk[:, None] == risk[None, :]) & earlier
    return float((concordant.sum() + 0.5 * tied.sum()) / n_pairs)


METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric(
            "accuracy", accuracy, True, "label", "share of test rows whose predicted label is exactly right"
        ),
        Metric("macro_f1", macro_f1, True, "label", "F1 score averaged over classes with equal weight"),
        Metric("roc_auc", roc_auc, True, "probability", "area under the ROC curve of P(target = 1)"),
        Metric("log_loss", log_loss, False, "probability", "binary cross-entropy of P(target = 1)"),
        Metric("rmse", rmse, False, "real", "root mean squared error"),
        Metric("mae", mae, False, "real", "mean absolute error"),
        Metric(
            "poisson_deviance",
            poisson_deviance,
            False,
            "positive",
            "mean Poisson deviance of the predicted expected count (must be > 0)",
        ),
        Metric("smape", smape, False, "real", "symmetric mean absolute percentage error, in percent (0-200)"),
        Metric(
            "concordance_index",
            concordance_index,
            True,
            "risk",
            "Harrell's concordance index of a risk score (higher risk = earlier event)",
        ),
    )
}


def validate_prediction(
    metric: Metric | str, values: pd.Series, labels: set[str] | None = None
) -> tuple[np.ndarray | None, str | None]:
    """Convert a submission's ``prediction`` column to what ``metric`` reads.

    Args:
        metric: a :class:`Metric` or its key in :data:`METRICS`.
        values: the ``prediction`` column as read from ``submission.csv``.
        labels: for label metrics, the labels seen in the training target (as text); ``None`` skips the check.

    Returns:
        ``(array, None)`` when valid, else ``(None, message)`` with a message fit to show the agent.

    >>> validate_prediction("roc_auc", pd.Series([0.2, 1.3]))
    (None, 'prediction must be a probability in [0, 1]; 1 value(s) outside, e.g. 1.3')
    >>> validate_prediction("accuracy", pd.Series([1.0, 2.0]), labels={"1", "2"})[0].tolist()
    ['1', '2']
    """
    metric = METRICS[metric] if isinstance(metric, str) else metric
    if values.isna().any():
        return None, f"prediction has {int(values.isna().sum())} missing value(s); every test row needs one"
    if metric.prediction == "label":
        text = _labels(values)
        if labels is not None:
            unknown = sorted(set(text) - set(labels))
            if unknown:
                shown = ", ".join(repr(u) for u in unknown[:5])
                return None, f"prediction holds label(s) never seen in the training target: {shown}"
        return text, None
    numeric = pd.to_numeric(values, errors="coerce")
    if numeric.isna().any():
        bad = values[numeric.isna()].iloc[0]
        return None, f"prediction must be numeric; {int(numeric.isna().sum())} value(s) are not, e.g. {bad!r}"
    array = numeric.to_numpy(dtype=float)
    finite = np.isfinite(array)
    if not finite.all():
        return None, f"prediction must be finite; {int((~finite).sum())} value(s) are inf"
    if metric.prediction == "probability":
        outside = (array < 0) | (array > 1)
        if outside.any():
            return None, (
                f"prediction must be a probability in [0, 1]; {int(outside.sum())} value(s) outside, "
                f"e.g. {array[outside][0]:g}"
            )
    if metric.prediction == "positive":
        nonpositive = array <= 0
        if nonpositive.any():
            return None, (
                f"prediction must be an expected count > 0; {int(nonpositive.sum())} value(s) are <= 0, "
                f"e.g. {array[nonpositive][0]:g}"
            )
    return array, None
