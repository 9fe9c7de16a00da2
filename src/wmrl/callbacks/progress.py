"""Progress for ``wmrl fit``: a rich bar on a terminal, one plain line per step and per evaluation otherwise.

`StepProgressBar` is Lightning's rich progress bar, labelled with the step budget instead of "Epoch 0/-2" (RL runs
are sized in optimizer steps, ``trainer.max_steps``; ``max_epochs`` stays at Lightning's -1, which the stock bar
prints as ``Epoch 0/-2``).

`PlainProgress` is what a log file, CI or a notebook cell gets: a rich bar redrawn in place shows nothing there
until the end, so each training step prints one line as it ends and each held-out evaluation one line, flushed at
once (``wmrl fit ... > log.txt`` shows the run's progress while it runs). ``wmrl fit`` picks one of the two by
whether stdout is a terminal, unless the config lists a progress bar of its own.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any, Protocol, runtime_checkable

from lightning.pytorch.callbacks import ProgressBar, RichProgressBar


class StepProgressBar(RichProgressBar):
    """``Training: 3 steps`` (``Epoch k`` when the run is sized in epochs)."""

    def _get_train_description(self, current_epoch: int) -> str:
        max_steps = self.trainer.max_steps
        if max_steps is not None and max_steps > 0:
            return f"Training: {max_steps} steps" if current_epoch == 0 else f"Training: {max_steps} steps (epoch {current_epoch})"
        return super()._get_train_description(current_epoch)


@runtime_checkable
class EvaluationHistory(Protocol):
    """A module that keeps its held-out evaluations as ``(when, summary)`` pairs: ``when`` is ``"start"`` or
    ``"step N"``, ``summary`` a dict of named values (score, valid rate...) or one number (a success rate). Both wmrl
    modules do."""

    eval_history: list[tuple[str, Any]]


#: the step line's fields: label, logged metric (a metric the module did not log is left out of the line)
STEP_FIELDS = (("reward", "reward/mean"), ("valid", "rollout/valid_rate"), ("success", "anchor/real_success"),
               ("executions", "anchor/executions"))


#: how an evaluation summary's keys read in a line (as in the end-of-fit held-out table)
LABELS = {"best_of_k": "best-of-k"}


class PlainProgress(ProgressBar):
    """One line per training step as it ends (step, reward, valid rate, real executions, the step's seconds) and one
    per held-out evaluation, for output that is not a terminal.

    ``step 2/3  reward 0.500  valid 0.62  executions 8  41.2 s``
    ``held-out start: score 0.455  mean position 0.610  valid rate 0.67  best-of-k 0.831``
    """

    def __init__(self, stream: Any = None) -> None:
        super().__init__()
        self._stream = stream
        self._enabled = True
        self._evaluations_shown = 0
        self._step_start = time.perf_counter()

    def disable(self) -> None:
        self._enabled = False

    def enable(self) -> None:
        self._enabled = True

    def print(self, *args: Any, **kwargs: Any) -> None:
        if self._enabled:
            print(*args, file=self._stream or sys.stdout, flush=True, **kwargs)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx: int) -> None:
        self._show_new_evaluations(pl_module)  # the starting policy's, scored in the module's on_train_start
        self._step_start = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        self.print(step_line(trainer.global_step, trainer.max_steps, trainer.callback_metrics,
                             time.perf_counter() - self._step_start))

    def on_validation_end(self, trainer, pl_module) -> None:
        self._show_new_evaluations(pl_module)

    def on_test_end(self, trainer, pl_module) -> None:
        self._show_new_evaluations(pl_module)

    def on_fit_end(self, trainer, pl_module) -> None:
        self._show_new_evaluations(pl_module)  # the final policy's, when the module scored it after the last step

    def _show_new_evaluations(self, pl_module) -> None:
        if not isinstance(pl_module, EvaluationHistory) or not pl_module.trainer.is_global_zero:
            return
        for when, summary in pl_module.eval_history[self._evaluations_shown:]:
            self.print(evaluation_line(when, summary))
        self._evaluations_shown = len(pl_module.eval_history)


def step_line(step: int, max_steps: int | None, metrics: dict[str, Any], seconds: float) -> str:
    """A finished training step in one line (``seconds``: wall-clock from the step's start to its end).

    >>> step_line(2, 3, {"reward/mean": 0.5, "rollout/valid_rate": 0.625, "anchor/executions": 8.0}, 41.23)
    'step 2/3  reward 0.500  valid 0.62  executions 8  41.2 s'
    """
    parts = [f"step {step}/{max_steps}" if max_steps is not None and max_steps > 0 else f"step {step}"]
    for label, key in STEP_FIELDS:
        if key not in metrics:
            continue
        value = float(metrics[key])
        if label == "executions":
            parts.append(f"{label} {value:.0f}" if math.isfinite(value) else f"{label} -")
        else:
            parts.append(f"{label} {value:.3f}" if label == "reward" else f"{label} {value:.2f}")
    parts.append(f"{seconds:.1f} s")
    return "  ".join(parts)


def _value(name: str, value: Any) -> str:
    if value is None:
        return "missing"
    return f"{int(value)}" if name == "missing" else f"{float(value):.3f}"


def evaluation_line(when: str, summary: Any) -> str:
    """A held-out evaluation in one line.

    >>> evaluation_line("start", {"valid_rate": 0.667, "best_of_k": 0.831, "score": 0.455})
    'held-out start: score 0.455  valid rate 0.667  best-of-k 0.831'
    >>> evaluation_line("step 3", 0.75)
    'held-out step 3: 0.750'

    Samples lost to the infrastructure are counted, never averaged in (:func:`wmrl.evaluation.mean_summary`); a
    value no sample measured reads ``missing``:

    >>> evaluation_line("start", {"valid_rate": None, "score": None, "missing": 9})
    'held-out start: score missing  valid rate missing  missing 9'
    >>> evaluation_line("start", {"score": 0.455, "missing": 0})
    'held-out start: score 0.455'
    """
    if isinstance(summary, dict):
        shown = [name for name in summary if name != "missing" or summary[name]]
        names = sorted(shown, key=lambda name: name != "score")  # the headline first, the rest as given
        text = "  ".join(f"{LABELS.get(name, name.replace('_', ' '))} {_value(name, summary[name])}" for name in names)
    else:
        text = f"{float(summary):.3f}"
    return f"held-out {when}: {text}"
