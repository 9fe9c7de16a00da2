"""Held-out evaluation records: each sample's script and outcome on disk, per-task summaries, paired comparisons.

Shared by the fit's own held-out evaluation (``GRPOModule``: ``<run dir>/samples/heldout_step<N>/``, and
``validate_step<N>/`` or ``test_step<N>/`` under ``wmrl validate|test``) and by
``wmrl evaluate`` (:mod:`wmrl.cli.evaluate`, one folder per policy), so a user can read what the policy wrote, not only its mean.

A task's summary over its ``K`` samples (the numbers ``GRPOModule`` logs):

- ``valid_rate``: the share of samples with a valid submission;
- ``mean_position``: the mean over samples of the best valid turn's leaderboard position (0 for none);
- ``best_of_k``: the best position of any sample;
- ``score``: valid rate x mean position of the valid samples (the paper's per-task value).

A sample whose execution failed for infrastructure reasons (the sandbox did not start the script, an engine went
away: ``Outcome.missing``) is *missing*: it counts in none of these and is no 0. Its entry in ``positions`` and
``valid`` is ``None``, the task's ``missing`` counts it, and a task with nothing but missing samples has ``None``
for every summary value. Paired comparisons drop the pairs with a missing side.

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

#: the held-out evaluation's sampling seed (a fit's start and every validation, ``wmrl validate|test``, and
#: ``wmrl evaluate``'s default): a checkpoint evaluated on the fit's tasks (same order) and samples gives exactly
#: the fit's own numbers
EVAL_SEED = 10_000
#: the summary keys of one task (and, averaged over tasks, of one evaluation)
SUMMARY_KEYS = ("valid_rate", "mean_position", "best_of_k", "score")


def sample_record(trajectory: Trajectory) -> dict[str, Any]:
    """One sample as plain data: its position (the best valid turn's, ``None`` for none), whether it is missing
    (no valid turn, and its last turn's execution failed for infrastructure reasons) and every turn's text, code
    and outcome."""
    position = max((t.outcome.position for t in trajectory.turns if t.outcome.status is Status.VALID
                    and t.outcome.position is not None), default=None)
    missing = position is None and bool(trajectory.turns) and trajectory.turns[-1].outcome.missing
    turns = [{"response": t.response, "code": t.code, "finish_reason": t.finish_reason,
              "response_tokens": t.response_tokens, "outcome": t.outcome.to_dict()} for t in trajectory.turns]
    return {"task_id": trajectory.task_id, "position": position, "missing": missing, "reward": trajectory.reward,
            "turns": turns}


def task_summary(task_id: str, samples: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The summary of one task's samples (module docstring), with the per-sample positions (0: no valid one,
    ``None``: missing).

    >>> s = task_summary("t", [{"position": 0.5}, {"position": None}, {"position": 1.0}])
    >>> s["valid_rate"], s["mean_position"], s["best_of_k"], s["score"], s["positions"], s["valid"]
    (0.6666666666666666, 0.5, 1.0, 0.5, [0.5, 0.0, 1.0], [True, False, True])
    >>> s = task_summary("t", [{"position": 0.5}, {"position": None, "missing": True}])  # counts one sample
    >>> s["valid_rate"], s["mean_position"], s["positions"], s["valid"], s["missing"]
    (1.0, 0.5, [0.5, None], [True, None], 1)
    >>> task_summary("t", [{"position": None, "missing": True}])["score"] is None  # nothing measured
    True
    """
    missing = [bool(s.get("missing")) for s in samples]
    counted = [s["position"] for s, gone in zip(samples, missing, strict=True) if not gone]
    valid = [p for p in counted if p is not None]
    measured = bool(counted)
    valid_rate = len(valid) / len(counted) if measured else None
    return {
        "task_id": task_id,
        "valid_rate": valid_rate,
        "mean_position": sum(valid) / len(counted) if measured else None,
        "best_of_k": max(valid, default=0.0) if measured else None,
        "score": valid_rate * (sum(valid) / len(valid) if valid else 0.0) if measured else None,
        "positions": [None if gone else (s["position"] if s["position"] is not None else 0.0)
                      for s, gone in zip(samples, missing, strict=True)],
        "valid": [None if gone else s["position"] is not None for s, gone in zip(samples, missing, strict=True)],
        "missing": sum(missing),
    }


def task_line(result: Mapping[str, Any]) -> str:
    """One task's evaluation as a fit prints it: valid samples, each sample's position (``-``: not valid, ``?``:
    missing) and, when samples are missing, how many and the first one's infrastructure error.

    >>> print(task_line({"task_id": "t", "valid": [True, False, None], "positions": [0.5, 0.0, None], "missing": 1,
    ...                  "samples": [{}, {}, {"missing": True, "turns": [{"outcome": {"error": "infra: no engine"}}]}]}))
    t: 1/2 valid, positions 0.50 - ?; 1 missing (infra: no engine)
    """
    valid = result["valid"]
    shown = " ".join("?" if v is None else f"{p:.2f}" if v else "-"
                     for v, p in zip(valid, result["positions"], strict=True))
    line = f"{result['task_id']}: {sum(v is True for v in valid)}/{sum(v is not None for v in valid)} valid, positions {shown}"
    if result.get("missing"):
        first = next((s["turns"][-1]["outcome"].get("error") for s in result.get("samples", ()) if s.get("missing")),
                     None)
        line += f"; {result['missing']} missing" + (f" ({first})" if first else "")
    return line


def mean_summary(results: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """The summary keys averaged over the tasks that measured them (every task weighs the same; ``None`` where no
    task did), and ``missing``: how many samples were missing in all.

    >>> mean_summary([{"score": 0.5, "valid_rate": 1.0, "mean_position": 0.5, "best_of_k": 0.5, "missing": 0},
    ...               {"score": None, "valid_rate": None, "mean_position": None, "best_of_k": None, "missing": 3}])
    {'valid_rate': 1.0, 'mean_position': 0.5, 'best_of_k': 0.5, 'score': 0.5, 'missing': 3}
    """
    if not results:
        return {}
    summary: dict[str, float | None] = {}
    for key in SUMMARY_KEYS:
        values = [r[key] for r in results if r[key] is not None]
        summary[key] = sum(values) / len(values) if values else None
    summary["missing"] = sum(r.get("missing", 0) for r in results)
    return summary


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


def unused_folder(directory: str | Path) -> Path:
    """``directory`` when nothing is there yet, else the first free ``<directory>-2``, ``-3``...: an evaluation
    never writes into the samples of an earlier one (a resumed fit's final evaluation, a second ``wmrl validate``).

    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> (root / "heldout_step3").mkdir()
    >>> unused_folder(root / "heldout_step3").name, unused_folder(root / "heldout_step4").name
    ('heldout_step3-2', 'heldout_step4')
    """
    path = Path(directory)
    n = 2
    while path.exists():
        path = Path(f"{directory}-{n}")
        n += 1
    return path


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
