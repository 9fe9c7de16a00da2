"""Asynchronous rollouts (``max_staleness: 1``): the next step's rollout is played while this step's update runs, from
the weights one update older, through the vLLM engine's interface (tests/support/fake_vllm.py: an in-process stand-in with
weights of its own, backed by a real tiny model). What is checked: which weights each step's rollouts came from, the
hooks' order per batch, the off-policy ratio logged, an exact resume with a rollout in flight, and the refusals."""

from __future__ import annotations

import lightning.pytorch as pl
import pytest
import torch
from support import fake_vllm
from support.fakes import LowTokenEnvironment

from wmrl.autoresearch.module import GRPOModule
from wmrl.callbacks import RLCallback
from wmrl.generation.vllm import VLLMGenerationEngine, release_engines
from wmrl.models import LoraSettings, load_policy

TASKS = ["task_a", "task_b", "task_c"]


class StepsData(pl.LightningDataModule):
    """Two tasks a step, rotating, said ahead (``tasks_of_step``) as the AutoResearch data module does."""

    def __init__(self, steps: int) -> None:
        super().__init__()
        self.steps = steps

    def tasks_of_step(self, step: int) -> list[str]:
        return [TASKS[step % 3], TASKS[(step + 1) % 3]]

    def train_dataloader(self):
        start = self.trainer.global_step

        class Steps(torch.utils.data.IterableDataset):
            def __iter__(inner):
                for step in range(start, self.steps):
                    yield self.tasks_of_step(step)

        return torch.utils.data.DataLoader(Steps(), batch_size=None)


class Order(RLCallback):
    """The hooks as they ran, with the step and the batch's tasks."""

    def __init__(self) -> None:
        self.events = []

    def on_rollout_plan(self, trainer, pl_module, plan):
        self.events.append(("plan", tuple(plan.task_ids)))

    def on_rollout_end(self, trainer, pl_module, batch):
        self.events.append(("end", tuple(dict.fromkeys(t.task_id for t in batch.trajectories))))

    def on_advantages(self, trainer, pl_module, batch):
        self.events.append(("advantages", tuple(dict.fromkeys(t.task_id for t in batch.trajectories))))


def module_for(checkpoint, staleness: int, engine=VLLMGenerationEngine) -> GRPOModule:
    model, tokenizer = load_policy(str(checkpoint), LoraSettings(r=8, alpha=16))
    return GRPOModule(policy=(model, tokenizer), engine=engine, environment=LowTokenEnvironment(tokenizer),
                      group_size=4, max_new_tokens=8, lr=5e-2, kl_coef=0.04, entropy_coef=0.0, micro_batch_size=8,
                      max_staleness=staleness)


def trainer_for(steps: int, callbacks=(), **kw) -> pl.Trainer:
    defaults = dict(logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                    accelerator="cpu")
    return pl.Trainer(max_steps=steps, callbacks=list(callbacks), **{**defaults, **kw})


def adapters_of_rollouts(llm) -> list[int]:
    return [c["lora_request"].lora_int_id for c in llm.calls if c["params"][0].prompt_logprobs is None]


def test_the_next_steps_rollout_comes_from_the_weights_one_update_older(fake, checkpoint):
    module, order = module_for(checkpoint, staleness=1), Order()
    metrics = []

    class Metrics(RLCallback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            metrics.append({k: float(v) for k, v in trainer.callback_metrics.items()})

    trainer_for(3, [order, Metrics()]).fit(module, datamodule=StepsData(3))
    (llm,) = fake_vllm.ENGINES
    first, second, third = adapters_of_rollouts(llm)
    # step 1: the initial adapter; step 2 was played during update 1, from the same adapter (one update stale);
    # step 3 during update 2, from the adapter after update 1
    assert second == first and third == first + 1
    # per batch the synchronous order; the next plan only after this batch's advantages, before its update
    assert order.events == [("plan", ("task_a", "task_b")), ("end", ("task_a", "task_b")),
                            ("advantages", ("task_a", "task_b")), ("plan", ("task_b", "task_c")),
                            ("end", ("task_b", "task_c")), ("advantages", ("task_b", "task_c")),
                            ("plan", ("task_c", "task_a")), ("end", ("task_c", "task_a")),
                            ("advantages", ("task_c", "task_a"))]
    assert metrics[0]["offpolicy/ratio_mean"] == pytest.approx(1.0, abs=1e-4)  # played by the weights it trains
    assert abs(metrics[1]["offpolicy/ratio_mean"] - 1.0) > 1e-4  # one update stale: corrected by the ratio
    assert "time/rollout_wait" in metrics[1] and "time/rollout_wait" not in metrics[0]
    assert metrics[1]["tokens/generate"] > 0 and "canary/engine_change" in metrics[1]


def test_synchronous_steps_sync_after_every_update_and_play_nothing_ahead(fake, checkpoint):
    module, order = module_for(checkpoint, staleness=0), Order()
    trainer_for(3, [order]).fit(module, datamodule=StepsData(3))
    (llm,) = fake_vllm.ENGINES
    first, second, third = adapters_of_rollouts(llm)
    assert (second, third) == (first + 1, first + 2) and module._background is None
    assert [e[0] for e in order.events] == ["plan", "end", "advantages"] * 3


def weights(module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.policy.named_parameters() if v.requires_grad}


class Rewards(RLCallback):
    def __init__(self) -> None:
        self.rewards = []

    def on_rewards(self, trainer, pl_module, batch):
        self.rewards.append(torch.nan_to_num(batch.rewards, -1.0).clone())


def test_a_fit_resumed_with_a_rollout_in_flight_continues_exactly(fake, checkpoint, tmp_path):
    straight, seen = module_for(checkpoint, staleness=1), Rewards()
    save = pl.callbacks.ModelCheckpoint(dirpath=tmp_path, every_n_train_steps=2, save_top_k=-1)
    trainer_for(4, [seen, save], enable_checkpointing=True).fit(straight, datamodule=StepsData(4))
    (path,) = tmp_path.glob("*step=2.ckpt")
    saved = torch.load(path, map_location="cpu", weights_only=True)
    assert saved["wmrl_pending_rollout"]["step"] == 2  # the third step's rollout, played during the second update
    release_engines()
    resumed, seen_again = module_for(checkpoint, staleness=1), Rewards()
    trainer_for(4, [seen_again]).fit(resumed, datamodule=StepsData(4), ckpt_path=path)
    assert len(seen_again.rewards) == 2
    for a, b in zip(seen.rewards[2:], seen_again.rewards, strict=True):
        assert torch.equal(a, b)
    for name, value in weights(straight).items():
        assert torch.equal(value, weights(resumed)[name]), name


def test_staleness_needs_an_engine_with_weights_of_its_own(checkpoint):
    module = module_for(checkpoint, staleness=1, engine=None)
    with pytest.raises(ValueError, match=r"max_staleness 1 needs an engine with weights of its own"):
        trainer_for(1).fit(module, datamodule=StepsData(1))


def test_staleness_is_0_or_1(checkpoint):
    with pytest.raises(ValueError, match=r"model.init_args.max_staleness must be 0 \(synchronous\) or 1"):
        module_for(checkpoint, staleness=2)


def test_staleness_needs_a_data_module_that_plans_steps(fake, checkpoint):
    class Loader(torch.utils.data.IterableDataset):
        def __iter__(self):
            yield from (["task_a", "task_b"] for _ in range(2))

    module = module_for(checkpoint, staleness=1)
    with pytest.raises(TypeError, match=r"max_staleness 1 needs a data module that says the tasks of a step ahead"):
        trainer_for(2).fit(module, torch.utils.data.DataLoader(Loader(), batch_size=None))
