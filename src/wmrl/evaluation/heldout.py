"""`HeldOutLog`: what an RL module keeps of its held-out evaluations, the same for both domains.

An RL module (:class:`wmrl.modules.base.RLModule`) evaluates its policy on held-out tasks (language agents:
scripts executed for real; robot policies: simulator episodes) before the first step (``eval_at_start``), at every
validation and under ``wmrl test``. What it does with each evaluation does not depend on the domain, and lives
here once:

- the history, ``(when, summary)`` pairs (``when`` is ``"start"`` or ``"step N"``), which the progress callback
  prints as they come and the end-of-fit report prints at the end;
- one line per evaluation in ``<run dir>/heldout.jsonl`` (:data:`EVAL_FILE`): ``{"split", "step", ...}`` with the
  per-sample or per-episode values, since paired confidence intervals (``benchmarks/``) need samples, not means;
  only a logging run has a run dir, and only rank 0 writes;
- the evaluation of the starting policy, logged as ``heldout/<key>`` at step 0, and of the final policy when no
  evaluation followed the fit's last step (:meth:`HeldOutLog.at_end`), so that every fit that scored its start
  ends with the paired gain of its final policy;
- its state in the module's checkpoints (:meth:`HeldOutLog.state_dict`): a resumed fit pairs its end with the
  start evaluation of the run it continues, never with a new sampling;
- the end-of-fit report (:mod:`wmrl.evaluation.report`), on rank 0.

The domain says how to evaluate and what a summary holds; this class says where it goes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lightning.pytorch.utilities import rank_zero_info

if TYPE_CHECKING:
    import lightning.pytorch as pl

#: under the run dir (``trainer.default_root_dir``): the held-out samples (scripts) or episodes, one line
#: per evaluation
EVAL_FILE = "heldout.jsonl"

#: ``(history, paired)`` -> the end-of-fit text (:func:`wmrl.evaluation.report.held_out_report` and the like)
Report = Callable[[list[tuple[str, Any]], list[dict[str, list[float]]]], str]


def run_dir(trainer: pl.Trainer) -> Path | None:
    """The run dir this process writes evaluation records into: ``trainer.default_root_dir`` on rank 0 of a run
    with a logger, else ``None`` (a run without a logger keeps nothing on disk)."""
    if not trainer.loggers or not trainer.is_global_zero:
        return None
    root = Path(trainer.default_root_dir)
    root.mkdir(parents=True, exist_ok=True)
    return root


def when(step: int) -> str:
    """How an evaluation after ``step`` optimizer steps is labelled.

    >>> when(0), when(3)
    ('start', 'step 3')
    """
    return "start" if step == 0 else f"step {step}"


class HeldOutLog:
    """The held-out evaluations of one module (see the module docstring).

    Args:
        report: the end-of-fit text from the history and the paired values.
    """

    def __init__(self, report: Report) -> None:
        self.history: list[tuple[str, Any]] = []
        #: per evaluation that has them: task -> per-sample values, paired across evaluations (same seeds)
        self.paired: list[dict[str, list[float]]] = []
        self._report = report

    def keep(self, module: pl.LightningModule, split: str, summary: Any, line: Mapping[str, Any],
             paired: dict[str, list[float]] | None = None) -> None:
        """Record one evaluation of ``split`` after ``module.trained_steps`` steps: ``summary`` in the history,
        ``paired`` for the report's paired gain, and ``{"split", "step", **line}`` in ``heldout.jsonl``."""
        step = module.trained_steps
        self.history.append((when(step), summary))
        if paired is not None:
            self.paired.append(paired)
        root = run_dir(module.trainer)
        if root is not None:
            with (root / EVAL_FILE).open("a") as f:
                f.write(json.dumps({"split": split, "step": step, **line}) + "\n")

    def at_start(self, module: pl.LightningModule, evaluate: Callable[[], Mapping[str, float]]) -> None:
        """The starting policy's evaluation (``model.init_args.eval_at_start``), once, before the first step of a
        fresh fit; ``evaluate`` keeps it and returns the values logged as ``heldout/<key>`` at step 0."""
        if not module.hparams.eval_at_start or module.global_step > 0:
            return
        _log(module, evaluate(), step=0)

    def at_end(self, module: pl.LightningModule, evaluate: Callable[[], Mapping[str, float]]) -> None:
        """The final policy's evaluation, when the fit scored its start and its last evaluation came before its
        last step: ``trainer.max_steps`` inside an epoch (validation runs at epoch ends), or a fit resumed from a
        checkpoint of its last step (an interrupt during the final evaluation) that has no step left to run.
        ``evaluate`` keeps it and returns the values logged as ``heldout/<key>`` at the final step."""
        step = module.trained_steps
        if not self.history or self.history[0][0] != "start" or self.history[-1][0] == when(step):
            return
        rank_zero_info(f"held-out evaluation of the final policy (step {step}), for the paired gain: the latest "
                       f"evaluation was at {self.history[-1][0]}")
        _log(module, evaluate(), step=step)

    def state_dict(self) -> dict[str, Any]:
        """The evaluations so far, as plain data for a checkpoint (loadable with ``weights_only``)."""
        return {"history": [[label, summary] for label, summary in self.history], "paired": list(self.paired)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from a checkpoint's evaluations (a resumed fit): its start is the paired gain's reference."""
        self.history = [(label, summary) for label, summary in state["history"]]
        self.paired = [dict(values) for values in state["paired"]]

    def report(self) -> str:
        """The end-of-fit text ("" when nothing was evaluated)."""
        return self._report(self.history, self.paired) if self.history else ""


def _log(module: pl.LightningModule, metrics: Mapping[str, float | None], step: int) -> None:
    """``heldout/<key>`` for an evaluation outside Lightning's validation (which logs its own)."""
    for logger in module.loggers:
        logger.log_metrics({f"heldout/{k}": v for k, v in metrics.items() if v is not None}, step=step)
