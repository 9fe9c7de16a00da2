"""Run WMRL training on a tiny policy under Lightning DDP (gloo, CPU) and dump each rank's callback state.

Used by ``tests/core/test_distributed.py``:  python tests/support/ddp_wmrl.py OUT_DIR DEVICES STEPS [CKPT_IN]
Lightning re-launches this script once per extra rank (with the same environment). With ``UNEVEN_PROMPTS=1`` rank 0
draws one task four times and the others four tasks, so the ranks' updates hold different numbers of micro-batches.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import lightning.pytorch as pl
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the support package
from support.fakes import DistortedWorldModel, LowTokenEnvironment, byte_tokenizer  # noqa: E402
from wmrl.autoresearch.module import GRPOModule  # noqa: E402
from wmrl.callbacks import AnchorRouting, InverseVarianceDenoising, OnlineDebiasing, WorldModelReward  # noqa: E402
from wmrl.models import tiny_llama  # noqa: E402


class Steps(torch.utils.data.IterableDataset):
    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self):
        uneven = os.environ.get("UNEVEN_PROMPTS") == "1" and os.environ.get("LOCAL_RANK", "0") == "0"
        for _ in range(self.n):
            yield ["task_a"] * 4 if uneven else ["task_a", "task_b", "task_c", "task_d"]

    def __len__(self) -> int:
        return self.n


class Dump(pl.Callback):
    def __init__(self, out: Path, debias: OnlineDebiasing, denoise: InverseVarianceDenoising) -> None:
        self.out, self.debias, self.denoise = out, debias, denoise

    def on_train_end(self, trainer, pl_module):
        state = {"rank": trainer.global_rank, "world_size": trainer.world_size, "pairs": [list(p) for p in self.debias.pairs],
                 "calibration": self.debias.calibration.to_dict(), "weight": self.denoise.weight,
                 "denoise": self.denoise.state.state_dict(), "global_step": trainer.global_step,
                 "parameters": [float(p.double().sum()) for p in pl_module.policy.parameters()]}
        (self.out / f"rank{trainer.global_rank}.json").write_text(json.dumps(state))


def main() -> None:
    out, devices, steps = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    ckpt = sys.argv[4] if len(sys.argv) > 4 else None
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model, tokenizer = tiny_llama(byte_tokenizer(), seed=0)
    module = GRPOModule(policy=(model, tokenizer), lora=None, environment=LowTokenEnvironment(tokenizer), group_size=4,
                        max_new_tokens=12, lr=3e-3, kl_coef=0.0, entropy_coef=0.0, micro_batch_size=8, prefill="none")
    debias, denoise = OnlineDebiasing(min_pairs=8, refit_every=4), InverseVarianceDenoising(warmup=2)
    callbacks = [AnchorRouting(fraction=0.5, floor=1, seed=0), WorldModelReward(DistortedWorldModel(tokenizer)),
                 debias, denoise, Dump(out, debias, denoise)]
    trainer = pl.Trainer(max_steps=steps, accelerator="cpu", devices=devices, strategy="ddp" if devices > 1 else "auto",
                         logger=False, enable_progress_bar=False, enable_model_summary=False,
                         enable_checkpointing=False, callbacks=callbacks, use_distributed_sampler=False)
    trainer.fit(module, torch.utils.data.DataLoader(Steps(steps), batch_size=None), ckpt_path=ckpt)
    trainer.save_checkpoint(out / "last.ckpt")  # collective: every rank calls it, rank 0 writes


if __name__ == "__main__":
    main()
