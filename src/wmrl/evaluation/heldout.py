"""`HeldOutLog`: what an RL module keeps of its held-out evaluations, the same for both domains.

An RL module (:class:`wmrl.modules.base.RLModule`) evaluates its policy on held-out tasks (LLM agents: scripts
executed for real; VLA policies: simulator episodes) before the first step (``eval_at_start``), at every
validation and under ``wmrl test``. What it does with each evaluation does not depend on the domain, and lives
here once:

- the history, ``(when, summary)`` pairs (``when`` is ``"start"`` or ``"step N"``), which the progress callback
  prints as they come and the end-of-fit report prints at the end;
- one line per evaluation in ``<run dir>/heldout.jsonl`` (:data:`EVAL_FILE`): ``{"split", "step", ...}`` with the
  per-sample or per-episode values, since paired confidence intervals (``benchmarks/``) need samples, not means;
  only a logging run has a run dir, and only rank 0 writes;
- the evaluation of the starting policy, logged as ``heldout/<key>`` at step 0;
- the end-of-fit report (:mod:`wmrl.evaluation.report`), on rank 0.

The domain says how to evaluate and what a summary holds; this class says where it goes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import lightning.pytorch as pl

#: under the run dir (``trainer.default_root_dir``): the held-out samples (LLM) or episodes (VLA), one line
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
        metrics = evaluate()
        for logger in module.loggers:
            logger.log_metrics({f"heldout/{k}": v for k, v in metrics.items() if v is not None}, step=0)

    def report(self) -> str:
        """The end-of-fit text ("" when nothing was evaluated)."""
        return self._report(self.history, self.paired) if self.history else ""
