"""Ctrl+C (SIGINT) during ``wmrl fit``: the last finished step kept, and the command that resumes it.

Lightning catches the ``KeyboardInterrupt``, calls every callback's ``on_exception``, tears the trainer down and
exits; by itself it says only "attempting graceful shutdown". :class:`InterruptCheckpoint` is the callback that
says what is kept:

- the checkpoint of the last *finished* step: one that ``ModelCheckpoint`` wrote already (every step by default),
  else one written now when the interrupt came between steps (during a held-out evaluation: the policy, the
  optimizer and the callbacks are those of the finished step). An interrupt inside a step finds the policy or the
  callbacks half-updated, so nothing is written then; a config that checkpoints every K steps is then told which
  earlier step its newest checkpoint holds;
- the exact command that resumes it: the command line as typed, with ``--ckpt_path <that checkpoint>``.

A fit that continues a run (``--ckpt_path``) says first which of the run's earlier checkpoints its
``ModelCheckpoint`` overwrites or deletes as it saves (``last.ckpt`` and the kept top-k file), so that nothing an
earlier command wrote is lost without a word. The ``wmrl`` command then exits with :data:`INTERRUPTED`.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

import lightning.pytorch as pl
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from lightning.pytorch.trainer.states import TrainerFn

from wmrl.cli.quick_help import INTERRUPTED

__all__ = ["INTERRUPTED", "InterruptCheckpoint", "Interrupted", "resume_command"]


class Interrupted(Exception):
    """A ``wmrl`` command stopped by Ctrl+C after it said what it kept (the CLI exits with :data:`INTERRUPTED`)."""


def resume_command(words: Sequence[str], checkpoint: str) -> str:
    """The command line ``words`` (after ``wmrl``) with ``--ckpt_path checkpoint`` instead of any it had.

    >>> resume_command(["fit", "-c", "a b.yaml", "--ckpt_path", "old.ckpt", "--trainer.max_steps=5"], "run/last.ckpt")
    "wmrl fit -c 'a b.yaml' --trainer.max_steps=5 --ckpt_path run/last.ckpt"
    """
    kept, skip = [], False
    for word in words:
        if skip or word.startswith("--ckpt_path="):
            skip = False
            continue
        if word == "--ckpt_path":
            skip = True
            continue
        kept.append(word)
    return "wmrl " + shlex.join([*kept, "--ckpt_path", checkpoint])


def shown_path(path: str | os.PathLike) -> str:
    """``path`` relative to the working directory when it lies under it (what a user types), else absolute."""
    relative = os.path.relpath(path)
    return relative if not relative.startswith("..") else os.path.abspath(path)


def saved_step(path: str) -> int | None:
    """The ``global_step`` a checkpoint file holds (``None``: no file, or one cut short by the interrupt)."""
    import torch

    try:
        return int(torch.load(path, map_location="cpu", mmap=True, weights_only=True)["global_step"])
    except Exception:  # noqa: BLE001 - any unreadable file is simply not a checkpoint to offer
        return None


def _model_checkpoints(trainer: pl.Trainer) -> list[ModelCheckpoint]:
    return [c for c in trainer.checkpoint_callbacks if isinstance(c, ModelCheckpoint)]


def known_checkpoints(trainer: pl.Trainer) -> dict[str, int]:
    """``path -> step`` of the checkpoints this fit knows of: its ``ModelCheckpoint`` files (``last.ckpt`` first)
    and the one it resumed from."""
    paths: list[str] = []
    for callback in _model_checkpoints(trainer):
        paths += [callback.last_model_path, callback.best_model_path, *callback.best_k_models]
    paths.append(trainer.ckpt_path or "")
    found = {}
    for path in dict.fromkeys(p for p in paths if p and os.path.isfile(p)):
        step = saved_step(path)
        if step is not None:
            found[path] = step
    return found


class InterruptCheckpoint(Callback):
    """On Ctrl+C during ``wmrl fit``: keep the last finished step and print the command that resumes it (see the
    module docstring).

    Args:
        command: the command line after ``wmrl`` (``["fit", "-c", ...]``), repeated in the resume command.
        dirpath: where a checkpoint written at the interrupt goes when no ``ModelCheckpoint`` names a folder (the
            run's ``checkpoints``).
        checkpointing: ``trainer.enable_checkpointing``: when false, nothing is written.
    """

    def __init__(self, command: Sequence[str], dirpath: str, checkpointing: bool = True) -> None:
        self.command, self.dirpath, self.checkpointing = list(command), dirpath, checkpointing
        self.finished: int | None = None  # optimizer steps finished (None: the training loop has not started)
        self.in_step = False

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.finished = trainer.global_step
        if trainer.ckpt_path and trainer.is_global_zero:
            for line in replaced_checkpoints(trainer):
                sys.stderr.write(line + "\n")

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch, batch_idx: int) -> None:
        self.in_step = True

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs, batch,
                           batch_idx: int) -> None:
        self.in_step, self.finished = False, trainer.global_step

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        if not isinstance(exception, KeyboardInterrupt) or trainer.state.fn != TrainerFn.FITTING:
            return
        lines = self.interrupt_lines(trainer)
        if trainer.is_global_zero:
            sys.stderr.write("\n".join(lines) + "\n")
            sys.stderr.flush()

    def interrupt_lines(self, trainer: pl.Trainer) -> list[str]:
        """What the interrupt kept, and the command that resumes it (writing the checkpoint when it must)."""
        resumed = trainer.ckpt_path
        if self.finished is None and resumed:  # a resumed fit, before its training loop (its final evaluation)
            return ["interrupted before the resumed fit trained: its checkpoint is unchanged",
                    f"  resume with: {resume_command(self.command, shown_path(resumed))}"]
        if not self.finished:
            return ["interrupted before the first training step finished: nothing to save; run the command again"]
        where = (f"during the held-out evaluation after step {self.finished}" if trainer.validating
                 else f"in step {self.finished + 1}" if self.in_step else f"after step {self.finished}")
        known = known_checkpoints(trainer)
        # during an evaluation, a checkpoint written now brings it back on resume (Lightning reruns an evaluation
        # a checkpoint interrupted); ModelCheckpoint's, written before it, would skip it
        path = None if trainer.validating else next((p for p, step in known.items() if step == self.finished), None)
        if path is None and not self.in_step and self.checkpointing and trainer.world_size == 1:
            folder = next((c.dirpath for c in _model_checkpoints(trainer) if c.dirpath), self.dirpath)
            path = os.path.join(folder, f"interrupted-step{self.finished}.ckpt")
            trainer.save_checkpoint(path, weights_only=False)
        if path is not None:
            return [f"interrupted {where}: step {self.finished}, the last finished step, is saved in "
                    f"{shown_path(path)}", f"  resume with: {resume_command(self.command, shown_path(path))}"]
        return self._older_lines(where, known, trainer.world_size)

    def _older_lines(self, where: str, known: dict[str, int], world_size: int) -> list[str]:
        """No checkpoint holds the last finished step, and none could be written: the newest one, said as such."""
        why = ("trainer.enable_checkpointing is false" if not self.checkpointing else
               "the checkpoint is saved less often than every step (checkpoint_every), and a step cut short is "
               "never saved"
               + (f"; with {world_size} processes none is written at an interrupt" if world_size > 1 else ""))
        if not known:
            return [f"interrupted {where}: no checkpoint was saved ({why}); run the command again"]
        path, step = max(known.items(), key=lambda item: item[1])
        return [f"interrupted {where}: step {self.finished} was not saved ({why}); the newest checkpoint is of step "
                f"{step}: {shown_path(path)}", f"  resume with: {resume_command(self.command, shown_path(path))}"]


def replaced_checkpoints(trainer: pl.Trainer) -> list[str]:
    """The note a resumed fit prints first: which of the run's earlier checkpoint files its ``ModelCheckpoint``
    overwrites (``last.ckpt``) or deletes (its kept top-k files, except the one resumed from) as it saves."""
    resumed = os.path.abspath(trainer.ckpt_path or "")
    lines = []
    for callback in _model_checkpoints(trainer):
        doomed = [callback.last_model_path] if callback.save_last else []
        if callback.save_top_k != -1:
            doomed += [p for p in [callback.best_model_path, *callback.best_k_models] if os.path.abspath(p) != resumed]
        names = [Path(p).name for p in dict.fromkeys(doomed) if p and os.path.isfile(p)]
        if names:
            lines.append(f"note: this fit saves its checkpoints into {shown_path(callback.dirpath)}, where its "
                         f"ModelCheckpoint (save_top_k={callback.save_top_k}, save_last={callback.save_last}) "
                         f"overwrites or deletes the earlier fit's {', '.join(names)} as it saves; copy them "
                         "elsewhere to keep them")
    return lines
