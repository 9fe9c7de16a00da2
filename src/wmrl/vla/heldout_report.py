"""The VLA module's end-of-fit printout (:func:`success_report`): the simulator's success per held-out evaluation, and
the paired gain over the held-out initial states (:func:`wmrl.evaluation.report.start_gain`)."""

from __future__ import annotations

from typing import Any

from wmrl.evaluation.report import start_gain

#: what the report says when the gain is not above 0: a short run on few held-out states is a smoke run
SMOKE_RUN_ADVICE = (
    "  no gain above 0: a few RL steps judged on a few dozen held-out states show the mechanics, not learning (the "
    "CPU quickstart, configs/vla/pusht_quickstart.yaml, is such a smoke run). Where GRPO learns on PushT, with "
    "paired intervals over 400 held-out states after 150 steps: benchmarks/RESULTS-vla.md (benchmarks/vla_arms.py)."
)


def success_report(history: list[tuple[str, Any]], paired: list[dict[str, list[float]]] | None = None) -> str:
    """The VLA module's end-of-fit printout: each held-out evaluation's success rate (one noise-free episode per
    initial state) and, when the run evaluated its starting policy, the last evaluation's paired gain over it
    (:func:`start_gain`), followed by :data:`SMOKE_RUN_ADVICE` when that gain is not above 0. ``paired`` holds per
    evaluation the episodes' successes as one group: the pairs are the held-out initial states (each played from
    the same seed before and after), resampled together.

    >>> print(success_report([("start", 0.25), ("step 4", 0.5)], [{"states": [0.0, 1.0, 0.0, 0.0]},
    ...                                                           {"states": [1.0, 1.0, 0.0, 0.0]}]))
    held-out success (simulator, no exploration noise):
           start: success 0.250
          step 4: success 0.500
      gain over the start: within noise: +0.250, 95% interval [+0.000, +0.750] includes 0, so this run shows no measurable change (paired bootstrap over 4 held-out initial states, same seeds)
      no gain above 0: a few RL steps judged on a few dozen held-out states show the mechanics, not learning (the CPU quickstart, configs/vla/pusht_quickstart.yaml, is such a smoke run). Where GRPO learns on PushT, with paired intervals over 400 held-out states after 150 steps: benchmarks/RESULTS-vla.md (benchmarks/vla_arms.py).
    """
    lines = ["held-out success (simulator, no exploration noise):"]
    lines += [f"  {when:>10}: success {value:.3f}" for when, value in history]
    gain = start_gain(history, paired or [], lambda n, _: f"{n} held-out initial states")
    if gain is not None:
        lines.append(gain[0])
        if not gain[1]:
            lines.append(SMOKE_RUN_ADVICE)
    return "\n".join(lines)
