"""The pieces of a task's prompt and card that built-in tasks (:mod:`wmrl.autoresearch.tasks.build`) and task folders
(:mod:`wmrl.autoresearch.tasks.folder_task`) share: the data dictionary, the target summary, what a prediction is, column kinds."""

from __future__ import annotations

from typing import TYPE_CHECKING

from wmrl.autoresearch.tasks.spec import TaskSpec

if TYPE_CHECKING:
    import pandas as pd

CLASSIFICATION = ("binary", "multiclass", "ordinal")


def column_kinds(frame: pd.DataFrame, exclude: tuple[str, ...]) -> dict[str, str]:
    """``column -> numeric | categorical`` for the card (booleans count as categorical), ``exclude`` left out."""
    import pandas as pd

    return {
        c: "numeric" if pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c]) else "categorical"
        for c in frame.columns
        if c not in exclude
    }


DICTIONARY_ROWS = 12  # a compact prompt: long data dictionaries cost every rollout their tokens


def data_dictionary(train: pd.DataFrame, spec: TaskSpec) -> str:
    """The prompt's table of columns (dtype, distinct values, examples): the id and targets first, at most
    :data:`DICTIONARY_ROWS` rows, the rest summarised in one line."""
    lines = ["| column | dtype | #unique | examples |", "|---|---|---|---|"]
    shown = [c for c in train.columns if c in spec.target or c == "id"]
    shown += [c for c in train.columns if c not in shown][: max(0, DICTIONARY_ROWS - len(shown))]
    hidden = [c for c in train.columns if c not in shown]
    for c in [c for c in train.columns if c in shown]:
        values = train[c].dropna().unique()[:3]
        examples = ", ".join(str(v)[:24] for v in values)
        role = " (target)" if c in spec.target else " (row id)" if c == "id" else ""
        lines.append(f"| {c}{role} | {train[c].dtype} | {train[c].nunique()} | {examples} |")
    if hidden:
        kinds = sorted({str(train[c].dtype) for c in hidden})
        lines.append(f"| ... {len(hidden)} more columns ({', '.join(kinds)}): {', '.join(hidden[:6])}, ... | | | |")
    return "\n".join(lines)


def target_summary(train: pd.DataFrame, spec: TaskSpec) -> str:
    """One bullet per target: its class shares in train, or its mean, spread and range."""
    parts = []
    for t in spec.target:
        y = train[t]
        if spec.type in CLASSIFICATION or y.nunique() <= 10:
            shares = y.astype(str).value_counts(normalize=True).round(3).to_dict()
            parts.append(f"`{t}` class shares in train: {shares}")
        else:
            d = y.describe()
            parts.append(
                f"`{t}` in train: mean {d['mean']:.4g}, std {d['std']:.4g}, min {d['min']:.4g}, "
                f"median {d['50%']:.4g}, max {d['max']:.4g}"
            )
    return "\n".join(f"- {p}" for p in parts)


def prediction_text(spec: TaskSpec, kind: str, labels: list[str] | None) -> str:
    """What the submission's prediction column holds, in words, for a metric's prediction ``kind``."""
    target = spec.target[0]
    if kind == "label":
        shown = ", ".join(labels[:12]) + (", ..." if len(labels) > 12 else "") if labels else ""
        return f"the predicted class of `{target}`" + (f", one of: {shown}." if shown else ".")
    if kind == "probability":
        return f"the predicted probability that `{target}` is 1 (a number in [0, 1])."
    if kind == "positive":
        return f"the predicted expected value of `{target}` (a number > 0)."
    if kind == "risk":
        return (f"a risk score: higher means the event (`{spec.target[1]}` = 1) is expected sooner "
                f"(only the ordering matters).")
    return f"the predicted value of `{target}`."
