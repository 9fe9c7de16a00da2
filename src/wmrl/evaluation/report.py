"""The end-of-fit reports: the training curve and the held-out evaluations, as the fit prints them.

The held-out reports read a :class:`~wmrl.evaluation.heldout.HeldOutLog`'s history: the language-agent module's
(:func:`held_out_report`: score, valid rate, and the paired gain over the start with its 95% interval; a wing may
give its module another, built on the same one-line gain, :func:`start_gain`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any


def training_report(history: list[dict[str, float]], window: int = 3) -> str:
    """The end-of-fit training curve: per step the real rollouts' mean reward and valid rate (executed and graded,
    never a world model's opinion), each with its moving average over ``window`` steps, the truncation rate and
    the KL to the reference (how far the policy has moved).

    >>> rows = [{"step": k, "real_reward": r, "real_valid_rate": v, "truncated_rate": 0.0, "kl": 1e-3}
    ...         for k, r, v in ((1, 0.2, 0.25), (2, 0.4, 0.5), (3, 0.6, 0.75))]
    >>> print(training_report(rows).splitlines()[-1])
             3   0.600  (0.400)   0.75  (0.50)       0.00  1.0e-03
    """
    def moving(key: str, k: int) -> float:
        values = [r[key] for r in history[max(0, k - window + 1) : k + 1] if not math.isnan(r[key])]
        return sum(values) / len(values) if values else math.nan

    lines = [f"training (real execution; moving average over {window} steps in brackets):",
             "      step  reward  (avg)    valid  (avg)  truncated       KL"]
    for k, r in enumerate(history):
        lines.append(f"  {r['step']:>8}   {r['real_reward']:.3f}  ({moving('real_reward', k):.3f})   "
                     f"{r['real_valid_rate']:.2f}  ({moving('real_valid_rate', k):.2f})       "
                     f"{r['truncated_rate']:.2f}  {r['kl']:.1e}")
    return "\n".join(lines)


def held_out_report(history: list[tuple[str, dict]], samples: list[dict[str, list[float]]]) -> str:
    """The end-of-fit printout: each held-out evaluation's summary, then, when the run evaluated its starting
    policy, the last evaluation's paired gain over it with a 95% bootstrap interval and what that means (an
    unchanged score is said to be one, not printed as two equal numbers).

    >>> history = [("start", {"score": 0.4, "mean_position": 0.4, "valid_rate": 0.5, "best_of_k": 0.8}),
    ...            ("step 3", {"score": 0.4, "mean_position": 0.4, "valid_rate": 0.5, "best_of_k": 0.8})]
    >>> print(held_out_report(history, [{"a": [0.8, 0.0]}, {"a": [0.8, 0.0]}]).splitlines()[-1][:53])
      gain over the start: no change: every sample scored
    """
    lines = ["held-out evaluation (real execution):"]
    lines += [f"  {when:>10}: score {shown(s['score'], '.3f')}  mean position {shown(s['mean_position'], '.3f')}  "
              f"valid rate {shown(s['valid_rate'], '.2f')}  best-of-k {shown(s['best_of_k'], '.3f')}"
              + (f"  ({s['missing']} samples missing)" if s.get("missing") else "") for when, s in history]
    gain = start_gain(history, samples, lambda n, tasks: f"{n} samples of {tasks} tasks")
    if gain is not None:
        lines.append(gain[0])
        if history[0][1]["valid_rate"] == 0 and history[-1][1]["valid_rate"] == 0:
            lines.append(NO_VALID_ADVICE)
    if any(s.get("missing") for _, s in history):
        lines.append(MISSING_ADVICE)
    return "\n".join(lines)


def start_gain(history: list[tuple[str, Any]], samples: list[dict[str, list[float | None]]],
               counted: Callable[[int, int], str]) -> tuple[str, bool] | None:
    """The line ``  gain over the start: ...``: the last evaluation's paired gain over the starting one with its 95%
    bootstrap interval (:func:`wmrl.algorithms.stats.paired_gain`, pairs resampled within each task) and what it
    means; ``counted(pairs, tasks)`` says what was paired. Returned with whether the interval lies above 0;
    ``None`` when the run did not evaluate its starting policy or the two evaluations are not paired (other tasks,
    other sample counts).

    >>> before, after = {"a": [0.0, 0.0, 1.0, 0.0]}, {"a": [1.0, 1.0, 1.0, 1.0]}
    >>> line, above = start_gain([("start", 0.25), ("step 8", 1.0)], [before, after], lambda n, t: f"{n} states")
    >>> print(line); above
      gain over the start: improved: +0.750, 95% interval [+0.250, +1.000] (above 0) (paired bootstrap over 4 states, same seeds)
    True
    """
    from wmrl.algorithms.stats import describe_gain, paired_gain

    if len(history) < 2 or history[0][0] != "start" or len(samples) != len(history):
        return None
    before, after = samples[0], samples[-1]
    if sorted(before) != sorted(after) or any(len(before[t]) != len(after[t]) for t in before):
        return None
    n = sum(b is not None and a is not None for t in before for b, a in zip(before[t], after[t], strict=True))
    if not n:
        return "  gain over the start: not measured (every pair of samples has a missing side)", False
    gain, low, high = paired_gain(before, after)
    unchanged = all(before[t] == after[t] for t in before)
    return (f"  gain over the start: {describe_gain(gain, low, high, unchanged)} "
            f"(paired bootstrap over {counted(n, len(before))}, same seeds)"), low > 0


def shown(value: float | None, spec: str) -> str:
    """``value`` formatted, or ``missing`` (every sample behind it was lost to the infrastructure)."""
    return "missing" if value is None else format(value, spec)


#: what the end-of-fit report says when no held-out sample was valid before or after (a learning rate is not it)
NO_VALID_ADVICE = (
    "  no held-out sample wrote a valid submission, before or after: the policy has no foothold on these tasks, and "
    "a higher learning rate or more steps will not give it one. What helps: read its samples (<run dir>/samples/); "
    "check the prompt and the starter a task shows (`wmrl tasks show ID`) and that the starter runs "
    "(`wmrl tasks check ID`); keep model.init_args.prefill: starter_head; raise max_new_tokens when most turns end "
    "truncated; compare policies with `wmrl evaluate`."
)


#: what the end-of-fit report says when held-out samples were missing (an infrastructure failure, not the policy)
MISSING_ADVICE = (
    "  missing samples: their execution failed for infrastructure reasons (the sandbox or its engine, not the "
    "policy), so they count in no score and in no gain. The first error of each task is printed with its "
    "evaluation and kept in <run dir>/samples/; `wmrl exec TASK_ID <run dir>/samples/.../0.py` runs one again."
)
