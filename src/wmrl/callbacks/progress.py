"""`StepProgressBar`: Lightning's rich progress bar, labelled with the step budget instead of "Epoch 0/-2".

RL runs are sized in optimizer steps (``trainer.max_steps``); ``max_epochs`` stays at Lightning's -1, which the
stock bar prints as ``Epoch 0/-2``. ``wmrl fit`` adds this bar unless the config lists a progress bar of its own.
"""

from __future__ import annotations

from lightning.pytorch.callbacks import RichProgressBar


class StepProgressBar(RichProgressBar):
    """``Training: 3 steps`` (``Epoch k`` when the run is sized in epochs)."""

    def _get_train_description(self, current_epoch: int) -> str:
        max_steps = self.trainer.max_steps
        if max_steps is not None and max_steps > 0:
            return f"Training: {max_steps} steps" if current_epoch == 0 else f"Training: {max_steps} steps (epoch {current_epoch})"
        return super()._get_train_description(current_epoch)
