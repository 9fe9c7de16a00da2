"""Held-out evaluation records: each sample's script and outcome on disk, per-task summaries, paired comparisons.

Shared by the fit's own held-out evaluation (``GRPOModule``: ``<run dir>/samples/<split>_step<N>/``) and by
``wmrl evaluate`` (:mod:`wmrl.cli.evaluate`, one folder per policy), so a user can read what the policy wrote, not only its mean.

A task's summary over its ``K`` samples (the numbers ``GRPOModule`` logs):

- ``valid_rate``: the share of samples with a valid submission;
- ``mean_position``: the mean over samples of the best valid turn's leaderboard position (0 for none);
- ``best_of_k``: the best position of any sample;
- ``score``: valid rate x mean position of the valid samples (the paper's per-task value).

Two policies evaluated with the same seed on the same tasks sample with shared randomness (the generation
engine's seeded stream), so their sample ``i`` of a task are paired; :func:`paired_differences` resamples those
pairs (:func:`wmrl.algorithms.stats.paired_gain`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from wmrl.types import Status, Trajectory

#: the summary keys of one task (and, averaged over tasks, of one evaluation)
SUMMARY_KEYS = ("valid_rate", "mean_position", "best_of_k", "score")


def sample_record(trajectory: Trajectory) -> dict[str, Any]:
    """One sample as plain data: its position (the best valid turn's, ``None`` for none) and every turn's text,
    code and outcome."""
    position = max((t.outcome.position for t in trajectory.turns if t.outcome.status is Status.VALID
                    and t.outcome.position is not None), default=None)
    turns = [{"response": t.response, "code": t.code, "finish_reason": t.finish_reason,
              "response_tokens": t.response_tokens, "outcome": t.outcome.to_dict()} for t in trajectory.turns]
    return {"task_id": trajectory.task_id, "position": position, "reward": trajectory.reward, "turns": turns}


def task_summary(task_id: str, samples: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The summary of one task's samples (module docstring), with the per-sample positions (0: no valid one).

    >>> s = task_summary("t", [{"position": 0.5}, {"position": None}, {"position": 1.0}])
    >>> s["valid_rate"], s["mean_position"], s["best_of_k"], s["score"], s["positions"], s["valid"]
    (0.6666666666666666, 0.5, 1.0, 0.5, [0.5, 0.0, 1.0], [True, False, True])
    """
    positions = [s["position"] for s in samples]
    valid = [p for p in positions if p is not None]
    valid_rate = len(valid) / len(positions) if positions else 0.0
    return {
        "task_id": task_id,
        "valid_rate": valid_rate,
        "mean_position": sum(valid) / len(positions) if positions else 0.0,
        "best_of_k": max(valid, default=0.0),
        "score": valid_rate * (sum(valid) / len(valid) if valid else 0.0),
        "positions": [p if p is not None else 0.0 for p in positions],
        "valid": [p is not None for p in positions],
    }


def mean_summary(results: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The summary keys averaged over tasks (every task weighs the same)."""
    return {key: sum(r[key] for r in results) / len(results) for key in SUMMARY_KEYS} if results else {}


def write_samples(directory: str | Path, samples: Mapping[str, Sequence[Mapping[str, Any]]]) -> Path:
    """``<directory>/<task>/<k>.py`` (the best turn's script, else the last turn's code or response) and
    ``<k>.json`` (every turn's text and outcome) for each task's samples; returns ``directory``."""
    root = Path(directory)
    for task_id, records in samples.items():
        folder = root / task_id
        folder.mkdir(parents=True, exist_ok=True)
        for k, record in enumerate(records):
            (folder / f"{k}.json").write_text(json.dumps(record, indent=1) + "\n")
            (folder / f"{k}.py").write_text(_shown_script(record))
    return root


def _shown_script(record: Mapping[str, Any]) -> str:
    turns = record["turns"]
    valid = [t for t in turns if t["outcome"]["status"] == Status.VALID.value and t["code"] is not None]
    best = max(valid, key=lambda t: t["outcome"]["reward"]) if valid else None
    coded = [t for t in turns if t["code"] is not None]
    if best is not None:
        return best["code"]
    if coded:
        return coded[-1]["code"]
    last = turns[-1]["response"] if turns else ""
    return "# no complete ```python block in the response (a malformed turn); the response was:\n" + "".join(
        f"# {line}\n" for line in last.splitlines())


def paired_differences(
    before: Mapping[str, Sequence[float]], after: Mapping[str, Sequence[float]]
) -> dict[str, Any]:
    """``after - before`` over paired samples: overall and per task, each with a 95% bootstrap interval.

    >>> d = paired_differences({"a": [0.0, 0.5], "b": [0.2, 0.2]}, {"a": [0.5, 0.5], "b": [0.2, 0.6]})
    >>> round(d["overall"]["point"], 3), d["per_task"]["a"]["point"]
    (0.225, 0.25)
    """
    from wmrl.algorithms.stats import interval, paired_gain

    overall = interval(paired_gain(before, after))
    per_task = {t: interval(paired_gain({t: before[t]}, {t: after[t]})) for t in sorted(before)}
    unchanged = all(list(before[t]) == list(after[t]) for t in before)
    return {"overall": overall, "per_task": per_task, "unchanged": unchanged}
