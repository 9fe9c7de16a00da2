"""The GRPO LightningModule on a tiny in-process model: learning happens, hooks run in order, resume is exact,
bad configuration is reported with the key to fix."""

from __future__ import annotations

import lightning.pytorch as pl
import pytest
import torch
from support.fakes import LowTokenEnvironment, byte_tokenizer

from wmrl.autoresearch.module import GRPOModule
from wmrl.callbacks.base import RLCallback
from wmrl.models import tiny_llama
from wmrl.types import Outcome, Status


class Steps(torch.utils.data.IterableDataset):
    def __init__(self, n: int, start: int = 0) -> None:
        self.n, self.start = n, start

    def __iter__(self):
        for _ in range(self.start, self.n):
            yield ["task_a", "task_b"]


def make_module(**overrides) -> GRPOModule:
    model, tokenizer = tiny_llama(byte_tokenizer(), seed=0)
    settings = dict(
        policy=(model, tokenizer), lora=None, environment=LowTokenEnvironment(tokenizer), group_size=8,
        max_new_tokens=16, lr=3e-3, kl_coef=0.0, entropy_coef=0.0, micro_batch_size=8,
    )
    return GRPOModule(**{**settings, **overrides})


def trainer(steps: int, **kw) -> pl.Trainer:
    defaults = dict(logger=False, enable_checkpointing=False, enable_progress_bar=False,
                    enable_model_summary=False, accelerator="cpu")
    return pl.Trainer(max_steps=steps, **{**defaults, **kw})


class Recorder(RLCallback):
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.rewards: list[float] = []
        self.losses: list[float] = []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.calls.append("on_train_batch_start")

    def on_rollout_plan(self, trainer, pl_module, plan):
        assert plan.environments == ["real", "real"] and plan.group_size == 8
        self.calls.append("on_rollout_plan")

    def on_rollout_end(self, trainer, pl_module, batch):
        self.calls.append("on_rollout_end")

    def on_calibrate(self, trainer, pl_module, batch):
        assert torch.all(batch.advantages == 0), "advantages must not exist before on_calibrate"
        assert batch.corrections.calibrating  # this callback implements the hook: the module says so first
        self.calls.append("on_calibrate")

    def on_rewards(self, trainer, pl_module, batch):
        assert torch.all(batch.advantages == 0), "advantages must not exist before on_rewards"
        self.calls.append("on_rewards")

    def on_advantages(self, trainer, pl_module, batch):
        assert batch.used.any() and batch.advantages.abs().sum() > 0
        self.calls.append("on_advantages")

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.calls.append("on_train_batch_end")
        self.rewards.append(float(trainer.callback_metrics["reward/mean"]))
        self.losses.append(float(trainer.callback_metrics["loss/total"]))


def test_hooks_run_in_the_documented_order():
    recorder = Recorder()
    t = trainer(2, callbacks=[recorder])
    t.fit(make_module(), torch.utils.data.DataLoader(Steps(2), batch_size=None))
    step = ["on_train_batch_start", "on_rollout_plan", "on_rollout_end", "on_calibrate", "on_rewards",
            "on_advantages", "on_train_batch_end"]  # written out: the documented order, not the constant under test
    assert recorder.calls == step * 2


def test_every_trainable_parameter_changes():
    module = make_module(entropy_coef=0.002)
    before = {n: p.detach().clone() for n, p in module.policy.named_parameters() if p.requires_grad}
    trainer(2).fit(module, torch.utils.data.DataLoader(Steps(2), batch_size=None))
    unchanged = [n for n, p in module.policy.named_parameters() if p.requires_grad and torch.equal(p, before[n])]
    assert unchanged == []


def test_mean_reward_rises():
    recorder = Recorder()
    trainer(24, callbacks=[recorder]).fit(make_module(), torch.utils.data.DataLoader(Steps(24), batch_size=None))
    first, last = recorder.rewards[:6], recorder.rewards[-6:]
    assert sum(last) / 6 > sum(first) / 6 + 0.03, recorder.rewards


def test_resume_gives_the_same_next_step_loss(tmp_path):
    uninterrupted = Recorder()
    trainer(3, callbacks=[uninterrupted]).fit(make_module(kl_coef=0.04), torch.utils.data.DataLoader(Steps(3), batch_size=None))

    first = trainer(2, enable_checkpointing=True, default_root_dir=tmp_path)
    first.fit(make_module(kl_coef=0.04), torch.utils.data.DataLoader(Steps(2), batch_size=None))
    checkpoint = tmp_path / "resume.ckpt"
    first.save_checkpoint(checkpoint)

    resumed = Recorder()
    trainer(3, callbacks=[resumed]).fit(
        make_module(kl_coef=0.04), torch.utils.data.DataLoader(Steps(3, start=2), batch_size=None),
        ckpt_path=checkpoint,
    )
    assert len(resumed.losses) == 1
    assert resumed.losses[0] == pytest.approx(uninterrupted.losses[2], rel=1e-5, abs=1e-7)
    assert resumed.rewards[0] == uninterrupted.rewards[2]


class Tasks(torch.utils.data.IterableDataset):
    def __init__(self, *task_ids: str) -> None:
        self.task_ids = list(task_ids)

    def __iter__(self):
        yield self.task_ids


def test_micro_batches_run_one_prompt_each_and_leave_the_update_unchanged(monkeypatch):
    """Groups of one task share a micro-batch (its prompt then runs once), whatever their order in the step."""
    seen: list[list[int]] = []
    batches = []
    import wmrl.autoresearch.module as grpo

    original = grpo.micro_batch_loss

    def recording(policy, frozen, batch, rows, *args, **kwargs):
        seen.append(list(rows))
        batches.append(batch)
        return original(policy, frozen, batch, rows, *args, **kwargs)

    monkeypatch.setattr(grpo, "micro_batch_loss", recording)
    # plain SGD: the step is the gradient itself (Adam's first step is about lr * sign(g), which turns float noise
    # in a near-zero gradient into a full step)
    monkeypatch.setattr(GRPOModule, "configure_optimizers",
                        lambda self: torch.optim.SGD([p for p in self.policy.parameters() if p.requires_grad], lr=1.0))
    before = {n: p.detach().clone() for n, p in make_module().policy.named_parameters() if p.requires_grad}
    after = {}
    for share in (True, False):
        seen.clear()
        module = make_module(group_size=2, micro_batch_size=4, share_prefix=share, kl_coef=0.04)
        trainer(1).fit(module, torch.utils.data.DataLoader(Tasks("task_a", "task_b", "task_a"), batch_size=None))
        after[share] = {n: p.detach().clone() for n, p in module.policy.named_parameters() if p.requires_grad}
        chunks = list(seen)
        batch = batches[-1]
        assert sorted(r for chunk in chunks for r in chunk) == batch.used.nonzero().flatten().tolist()
        prompts = [batch.input_ids[r, : int(batch.response_mask[r].nonzero()[0])].tolist() for r in range(6)]
        mixed = [chunk for chunk in chunks if len({tuple(prompts[r]) for r in chunk}) > 1]
        if share:
            assert not mixed, chunks
        else:
            assert mixed, chunks  # plain order: task_a's first group and task_b's group in one micro-batch
    moved = 0
    for name, value in after[True].items():
        torch.testing.assert_close(value - before[name], after[False][name] - before[name], rtol=1e-4, atol=1e-7)
        moved += int(not torch.equal(value, before[name]))
    assert moved > 0


def test_bad_configuration_names_every_key():
    with pytest.raises(ValueError) as error:
        make_module(group_size=1, clip_eps=-0.2, loss_aggregation="mean")
    message = str(error.value)
    assert "model.init_args.group_size must be >= 2" in message
    assert "model.init_args.clip_eps must be > 0" in message
    assert "model.init_args.loss_aggregation" in message


def test_heldout_evaluation_samples_every_task_in_one_rollout():
    from wmrl.autoresearch.datamodule import AutoResearchDataModule

    module = make_module(max_new_tokens=8, eval_temperature=0.5)
    env = module.environments["real"]
    tasks = ["smoke_iris", "smoke_diabetes", "smoke_breast_cancer"]
    data = AutoResearchDataModule(split="smoke", eval_tasks=tasks, eval_samples=3, group_size=8)
    results = trainer(1).validate(module, datamodule=data, verbose=False)[0]
    assert env.calls == 1  # the three tasks x 3 samples were answered in one batched rollout
    per_task = {t: results[f"heldout_task/{t}/score"] for t in tasks}
    assert all(0 < s <= 1 for s in per_task.values())  # LowTokenEnvironment: every answer is valid
    assert results["heldout/valid_rate"] == 1.0
    assert results["heldout/score"] == pytest.approx(sum(per_task.values()) / 3, abs=1e-6)
    assert [r["task_id"] for r in module._eval_results] == tasks


def test_heldout_samples_are_written_per_evaluation_for_confidence_intervals(tmp_path):
    import json

    from lightning.pytorch.loggers import CSVLogger

    from wmrl.autoresearch.datamodule import AutoResearchDataModule
    from wmrl.evaluation.heldout import EVAL_FILE

    module = make_module(max_new_tokens=8, eval_temperature=0.5)
    tasks = ["smoke_iris", "smoke_diabetes"]
    data = AutoResearchDataModule(split="smoke", eval_tasks=tasks, eval_samples=3, group_size=8)
    trainer(1, logger=CSVLogger(tmp_path), default_root_dir=tmp_path).validate(module, datamodule=data, verbose=False)
    trainer(1, logger=False, default_root_dir=tmp_path / "quiet").validate(module, datamodule=data, verbose=False)
    lines = [json.loads(line) for line in (tmp_path / EVAL_FILE).read_text().splitlines()]
    assert len(lines) == 1 and lines[0]["split"] == "heldout" and lines[0]["step"] == 0
    assert [t["task_id"] for t in lines[0]["tasks"]] == tasks
    for task in lines[0]["tasks"]:
        assert len(task["positions"]) == 3 and all(0 < p <= 1 for p in task["positions"])
        assert task["mean_position"] == pytest.approx(sum(task["positions"]) / 3)
    assert not (tmp_path / "quiet").exists()  # a run without a logger has no run dir to write into


class BrokenEnvironment(LowTokenEnvironment):
    """A sandbox that cannot start anything: every outcome is an infrastructure error."""

    def step_many(self, requests):
        from wmrl.types import Outcome, Status

        return [Outcome(Status.INFRA_ERROR, None, error="infra: setpriv: failed to execute python") for _ in requests]


def test_a_step_with_every_rollout_missing_is_loud_and_two_stop_training(caplog):
    model, tokenizer = tiny_llama(byte_tokenizer(), seed=0)
    module = make_module(policy=(model, tokenizer), environment=BrokenEnvironment(tokenizer))
    with pytest.raises(RuntimeError, match=r"two training steps in a row where every rollout is missing"):
        trainer(3).fit(module, torch.utils.data.DataLoader(Steps(3), batch_size=None))
    logged = [r for r in caplog.records if "every rollout of this training step is missing" in r.message]
    assert len(logged) == 2 and all(r.levelname == "ERROR" and "setpriv" in r.getMessage() for r in logged)
    assert module.global_step == 1  # the first empty step counted (an optimizer step without gradients)


def test_time_a_callback_reports_while_planning_counts_into_its_step():
    class Planner(RLCallback):
        def on_rollout_plan(self, trainer, pl_module, plan):
            pl_module.add_time("planning", 0.25)

    t = trainer(2, callbacks=[Planner()])
    t.fit(make_module(), torch.utils.data.DataLoader(Steps(2), batch_size=None))
    assert float(t.callback_metrics["time/planning"]) == pytest.approx(0.25)  # once per step, not lost or doubled


def test_both_domains_share_one_training_step_whose_seed_has_the_rank_term():
    """One definition (wmrl.modules.base.RLModule.training_step; the VLA module's identity is asserted in
    tests/vla), and rank r plays seed + step + 100003 r: DDP ranks never sample the same noise."""
    from types import SimpleNamespace

    from wmrl.modules.base import RLModule, rollout_seed

    assert GRPOModule.training_step is RLModule.training_step
    assert "training_step" not in vars(GRPOModule)

    class Planted(Exception):
        pass

    class Echo(RLModule):
        def __init__(self) -> None:
            super().__init__()
            self.save_hyperparameters({"seed": 7, "group_size": 2})
            self.environments = {"real": None}

        def rollout(self, plan, seed):
            raise Planted(seed)

    seeds = []
    for rank in (0, 1, 2):
        module = Echo()
        module._trainer = SimpleNamespace(callbacks=[], global_rank=rank, global_step=0)
        with pytest.raises(Planted) as planted:
            module.training_step(["task_a"], 0)
        seeds.append(planted.value.args[0])
    assert seeds == [rollout_seed(7, 0, r) for r in (0, 1, 2)] == [7, 100_010, 200_013]


def test_a_step_logs_the_positions_its_passes_computed_for_the_compute_floor():
    """tokens/update counts what the policy's forward passes computed (a shared prompt once per micro-batch), so it
    falls when rows share their prompt; tokens/generate what the engine computed; model/parameters the policy's."""
    logged = {}
    for share in (True, False):
        module = make_module(group_size=2, micro_batch_size=4, share_prefix=share)
        t = trainer(1)
        t.fit(module, torch.utils.data.DataLoader(Tasks("task_a", "task_a"), batch_size=None))
        logged[share] = {k: float(t.callback_metrics[k]) for k in ("tokens/update", "tokens/generate",
                                                                    "model/parameters")}
        assert logged[share]["model/parameters"] == sum(p.numel() for p in module.policy.parameters())
        assert logged[share]["tokens/generate"] > 0
    assert 0 < logged[True]["tokens/update"] < logged[False]["tokens/update"]


class MissingFirst(LowTokenEnvironment):
    """Its first step's executions all fail (infrastructure errors: missing rewards); later ones score."""

    def step_many(self, requests):
        if self.calls == 0:
            self.calls += 1
            return [Outcome(Status.INFRA_ERROR, None, error="infra: planted") for _ in requests]
        return super().step_many(requests)


def test_a_step_with_nothing_to_train_on_still_counts_so_seeds_and_data_move_on():
    """The step rule RLModule owns for both domains (tests/vla checks the VLA module's): with no row to train on,
    the optimizer still steps (without gradients), so global_step counts rollout steps and each step plays its own
    seed and its own tasks."""
    model, tokenizer = tiny_llama(byte_tokenizer(), seed=0)
    module = make_module(policy=(model, tokenizer), environment=MissingFirst(tokenizer))
    seeds, skipped, rollout = [], [], module.rollout

    def recording(plan, seed, agent=None):
        seeds.append(seed)
        return rollout(plan, seed, agent)

    class Skipped(RLCallback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            skipped.append(float(trainer.callback_metrics["train/skipped_step"]))

    module.rollout = recording
    trainer(3, callbacks=[Skipped()]).fit(module, torch.utils.data.DataLoader(Steps(3), batch_size=None))
    assert module.global_step == 3 and seeds == [0, 1, 2] and skipped == [1.0, 0.0, 0.0]


def test_a_plan_routed_to_an_environment_the_module_lacks_names_it():
    class Elsewhere(RLCallback):
        def on_rollout_plan(self, trainer, pl_module, plan):
            plan.environments[1] = "world_model"

    with pytest.raises(KeyError, match=r"routes group 1 to 'world_model', but the module has only \['real'\]"):
        trainer(1, callbacks=[Elsewhere()]).fit(make_module(), torch.utils.data.DataLoader(Steps(1), batch_size=None))


def test_a_lora_fits_first_update_takes_the_policys_logprobs_as_the_reference_and_steps_as_with_its_pass(
        monkeypatch):
    """While every ``lora_B`` is still zero the adapter adds exact zeros, so the first update skips the reference's
    pass and steps exactly as with it; once the adapter moved, the pass runs again."""
    from peft import LoraConfig, get_peft_model

    from wmrl.autoresearch.grpo_loss import Reference

    monkeypatch.setattr(GRPOModule, "configure_optimizers",
                        lambda self: torch.optim.SGD([p for p in self.policy.parameters() if p.requires_grad], lr=1.0))
    passes: list[int] = []
    original = Reference.logprobs
    monkeypatch.setattr(Reference, "logprobs", lambda self, *a, **k: passes.append(1) or original(self, *a, **k))

    def fit(steps: int) -> tuple[GRPOModule, int]:
        model, tokenizer = tiny_llama(byte_tokenizer(), seed=0)
        torch.manual_seed(0)  # the adapter's lora_A initialisation
        model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
        module = make_module(policy=(model, tokenizer), group_size=4, kl_coef=0.5)
        passes.clear()
        trainer(steps).fit(module, torch.utils.data.DataLoader(Tasks("task_a", "task_b"), batch_size=None))
        return module, len(passes)

    skipped, calls = fit(1)
    assert calls == 0
    monkeypatch.setattr(Reference, "equals_policy", lambda self: False)
    with_pass, calls = fit(1)
    assert calls > 0
    trained = [(n, p) for n, p in skipped.policy.named_parameters() if p.requires_grad]
    assert any(bool(p.any()) for n, p in trained if "lora_B" in n)  # the step moved the adapter
    theirs = dict(with_pass.policy.named_parameters())
    for name, parameter in trained:
        torch.testing.assert_close(parameter, theirs[name], rtol=0, atol=1e-6)
    monkeypatch.undo()
    monkeypatch.setattr(Reference, "logprobs", lambda self, *a, **k: passes.append(1) or original(self, *a, **k))
    monkeypatch.setattr(GRPOModule, "configure_optimizers",
                        lambda self: torch.optim.SGD([p for p in self.policy.parameters() if p.requires_grad], lr=1.0))
    _, calls = fit(2)
    assert calls > 0  # the second step's adapter differs from the reference
