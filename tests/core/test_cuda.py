"""GRPO training on a CUDA GPU (the transformers engine; vLLM is tests/core/test_vllm.py): the policy, rollouts, reference
log-probs and update all live on the GPU, in full and in bf16 mixed precision, with and without LoRA. Skips without
a CUDA device; run on a GPU machine with ``pytest tests/core/test_cuda.py``."""

from __future__ import annotations

import lightning.pytorch as pl
import pytest
import torch
from support.fakes import LowTokenEnvironment, byte_tokenizer

from wmrl.autoresearch.module import GRPOModule
from wmrl.callbacks.base import RLCallback
from wmrl.models import LoraSettings, tiny_llama

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")


class Steps(torch.utils.data.IterableDataset):
    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self):
        for _ in range(self.n):
            yield ["task_a", "task_b"]


class Watch(RLCallback):
    def __init__(self) -> None:
        self.rewards: list[float] = []
        self.devices: set[str] = set()

    def on_rollout_end(self, trainer, pl_module, batch):
        assert torch.isfinite(batch.old_logprobs[batch.response_mask.bool()]).all()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.rewards.append(float(trainer.callback_metrics["reward/mean"]))
        self.devices.add(next(pl_module.policy.parameters()).device.type)
        assert torch.isfinite(trainer.callback_metrics["loss/total"])


@pytest.mark.parametrize(("precision", "lora"), [("32-true", False), ("bf16-mixed", False), ("bf16-mixed", True),
                                                ("bf16-true", True)])  # bf16-true: the paper configs
def test_grpo_learns_on_a_cuda_gpu(precision, lora):
    model, tokenizer = tiny_llama(byte_tokenizer(), seed=0)
    module = GRPOModule(
        policy=(model, tokenizer), lora=LoraSettings(r=8, alpha=16) if lora else None,
        environment=LowTokenEnvironment(tokenizer), group_size=8, max_new_tokens=16, lr=3e-2 if lora else 3e-3,
        kl_coef=0.0, entropy_coef=0.0, micro_batch_size=8,
    )
    before = {n: p.detach().clone() for n, p in module.policy.named_parameters() if p.requires_grad}
    watch = Watch()
    trainer = pl.Trainer(max_steps=24, accelerator="gpu", devices=1, precision=precision, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                         callbacks=[watch])
    trainer.fit(module, torch.utils.data.DataLoader(Steps(24), batch_size=None))
    assert watch.devices == {"cuda"}  # while training (Lightning moves the module back to the CPU at the end)
    changed = [n for n, p in module.policy.named_parameters() if p.requires_grad and not torch.equal(p, before[n])]
    assert changed and len(changed) == len(before)
    first, last = watch.rewards[:6], watch.rewards[-6:]
    assert sum(last) / 6 > sum(first) / 6 + 0.03, watch.rewards

    from wmrl.autoresearch.datamodule import AutoResearchDataModule  # held-out evaluation on the GPU too

    data = AutoResearchDataModule(split="smoke", eval_tasks=["smoke_iris", "smoke_diabetes"], eval_samples=2,
                                  group_size=8)
    results = trainer.validate(module, datamodule=data, verbose=False)[0]
    assert results["heldout/valid_rate"] == 1.0  # LowTokenEnvironment: every answer is valid


def test_fsdp_on_one_gpu_trains_the_policy():
    """The FSDP strategy's code path (configs/strategy/fsdp.yaml: full shard, full state dict) on one GPU: the
    rollouts, the sharded update and the gradient clipping through the sharded root run, and the weights move."""
    from lightning.pytorch.strategies import FSDPStrategy

    model, tokenizer = tiny_llama(byte_tokenizer(), seed=0)
    module = GRPOModule(policy=(model, tokenizer), lora=None, environment=LowTokenEnvironment(tokenizer),
                        group_size=8, max_new_tokens=16, lr=3e-3, kl_coef=0.0, entropy_coef=0.0, micro_batch_size=8)
    before = {n: p.detach().clone() for n, p in module.policy.named_parameters()}
    watch = Watch()
    strategy = FSDPStrategy(sharding_strategy="FULL_SHARD", state_dict_type="full")
    trainer = pl.Trainer(max_steps=4, accelerator="gpu", devices=1, strategy=strategy, precision="32-true",
                         logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, callbacks=[watch], use_distributed_sampler=False)
    trainer.fit(module, torch.utils.data.DataLoader(Steps(4), batch_size=None))
    assert watch.devices == {"cuda"} and len(watch.rewards) == 4
    after = dict(module.policy.named_parameters())
    assert any(not torch.equal(after[n].detach().cpu(), before[n].cpu()) for n in before if n in after)
