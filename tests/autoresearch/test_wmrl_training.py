"""WMRL callbacks inside real GRPO training (tiny in-process policy, test-double world models)."""

from __future__ import annotations

import json
import math

import lightning.pytorch as pl
import pytest
import torch
from support.fakes import DistortedWorldModel, LowTokenEnvironment, byte_tokenizer

from wmrl.autoresearch.module import GRPOModule
from wmrl.callbacks import (
    AnchorRouting,
    InverseVarianceDenoising,
    OnlineDebiasing,
    RLCallback,
    WorldModelReward,
)
from wmrl.models import tiny_llama
from wmrl.types import LearnsFromAnchors, Outcome, ReportsMetrics, Source, Status


class Steps(torch.utils.data.IterableDataset):
    def __init__(self, n: int, start: int = 0) -> None:
        self.n, self.start = n, start

    def __iter__(self):
        for _ in range(self.start, self.n):
            yield ["task_a", "task_b", "task_c", "task_d"]


class Probe(RLCallback):
    """Records what the loss will see, after every other callback."""

    def __init__(self) -> None:
        self.batches = []
        self.metrics = []

    def on_advantages(self, trainer, pl_module, batch):
        self.batches.append(batch)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.metrics.append({k: float(v) for k, v in trainer.callback_metrics.items()})


def make(distortion=lambda r: (r - 0.5) ** 2 * 4, **overrides):
    model, tokenizer = tiny_llama(byte_tokenizer(), seed=0)
    module = GRPOModule(policy=(model, tokenizer), lora=None, environment=LowTokenEnvironment(tokenizer),
                        group_size=4, max_new_tokens=12, lr=3e-3, kl_coef=0.04, entropy_coef=0.0,
                        micro_batch_size=8, prefill="none", **overrides)
    world_model = DistortedWorldModel(tokenizer, distortion)
    return module, world_model


def wmrl_callbacks(world_model, min_pairs=8, refit_every=4, warmup=2):
    return [
        AnchorRouting(fraction=0.5, floor=1, seed=0),
        WorldModelReward(world_model),
        OnlineDebiasing(min_pairs=min_pairs, refit_every=refit_every),
        InverseVarianceDenoising(warmup=warmup),
    ]


def trainer(steps: int, callbacks, **kw) -> pl.Trainer:
    defaults = dict(logger=False, enable_checkpointing=False, enable_progress_bar=False,
                    enable_model_summary=False, accelerator="cpu")
    return pl.Trainer(max_steps=steps, callbacks=callbacks, **{**defaults, **kw})


def test_full_wmrl_routes_calibrates_and_weights():
    module, world_model = make()
    probe = Probe()
    callbacks = [*wmrl_callbacks(world_model), probe]
    trainer(4, callbacks).fit(module, torch.utils.data.DataLoader(Steps(4), batch_size=None))
    routing, _, debias, denoise = callbacks[:4]
    for batch in probe.batches:  # group-pure routing, half the groups anchors
        assert int(batch.is_real.sum()) == 8
        for g in batch.group_ids.unique():
            assert batch.is_real[batch.group_ids == g].unique().numel() == 1
        assert not torch.isnan(batch.wm_rewards).any()  # anchors side-graded, world-model rows raw
    assert world_model.calls == 8  # per step: serve two groups + side-grade the anchors
    assert len(debias.pairs) == 32 and debias.refits == 4 and debias.fitted  # 8 anchor pairs per step
    assert debias.rank_corr > 0.9
    last = probe.batches[-1]
    simulated = ~last.is_real
    expected = torch.as_tensor(debias.calibration(last.wm_rewards[simulated].numpy()), dtype=torch.float32)
    assert torch.allclose(last.rewards[simulated], expected)
    assert denoise.state.observations >= 2 and 1.0 <= denoise.weight <= 4.0
    logged = probe.metrics[-1]
    for key in ("anchor/fraction", "anchor/executions", "debias/pairs", "debias/refits", "debias/bias_reduction",
                "denoise/weight", "time/world_model", "env/seconds_saved", "reward/world_model_raw_mean",
                "reward/world_model_calibrated_mean", "fidelity/spearman_raw", "fidelity/mae_calibrated"):
        assert key in logged, key
    assert logged["anchor/fraction"] == 0.5 and logged["debias/pairs"] == 32
    assert logged["fidelity/mae_calibrated"] < logged["fidelity/mae_raw"]


def test_refit_snapshots_go_to_the_run_dir_of_a_logging_run_and_nowhere_without_a_logger(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a trainer without default_root_dir would write into the working directory
    module, world_model = make()
    trainer(4, wmrl_callbacks(world_model)).fit(module, torch.utils.data.DataLoader(Steps(4), batch_size=None))
    assert not (tmp_path / "calibration.jsonl").exists()

    run_dir = tmp_path / "run"
    module, world_model = make()
    logged = trainer(4, wmrl_callbacks(world_model), default_root_dir=run_dir,
                     logger=pl.loggers.CSVLogger(run_dir, name="csv"))
    logged.fit(module, torch.utils.data.DataLoader(Steps(4), batch_size=None))
    lines = (run_dir / "calibration.jsonl").read_text().splitlines()
    assert [json.loads(line)["refit"] for line in lines] == [1, 2, 3, 4]


def test_anti_correlated_world_model_is_detected_and_carries_no_gradient(caplog):
    module, world_model = make(distortion=lambda r: 1.5 - r)
    probe = Probe()
    callbacks = [*wmrl_callbacks(world_model), probe]
    with caplog.at_level("WARNING"):
        trainer(3, callbacks).fit(module, torch.utils.data.DataLoader(Steps(3), batch_size=None))
    debias = callbacks[2]
    assert debias.rank_corr <= 0
    assert debias.calibration.is_flat
    assert "rank correlation" in caplog.text and "carry no gradient" in caplog.text
    last = probe.batches[-1]
    assert torch.all(last.advantages[~last.is_real] == 0)  # flat map: world-model groups are constant
    assert last.advantages[last.is_real].abs().sum() > 0
    assert probe.metrics[-1]["wm_rank_corr"] <= 0


def test_pure_world_model_and_real_only_ablations_run():
    module, world_model = make()
    probe = Probe()
    callbacks = [AnchorRouting(fraction=0.0, floor=0), WorldModelReward(world_model, side_grade=False), probe]
    trainer(1, callbacks).fit(module, torch.utils.data.DataLoader(Steps(1), batch_size=None))
    assert not probe.batches[0].is_real.any() and probe.metrics[0]["anchor/fraction"] == 0.0


class GoneWorldModel(DistortedWorldModel, ReportsMetrics):
    """A world model whose backend stops answering after its first call (a world-model server killed mid-run): every
    later outcome is missing (``infra_error``, no reward), as LMWorldModel reports an unanswered question."""

    def __init__(self, tokenizer) -> None:
        super().__init__(tokenizer)
        self.unanswered = 0

    def step_many(self, requests):
        answers = super().step_many(requests)
        if self.calls == 1:
            return answers
        self.unanswered += len(answers)
        return [Outcome(Status.INFRA_ERROR, None, source=Source.WORLD_MODEL, error="world_model: unanswered")
                for _ in answers]

    def metrics(self):
        return {"parse_failures": 0.0, "unanswered": float(self.unanswered)}


def test_a_world_model_that_stops_answering_leaves_rewards_missing_never_zero():
    module, _ = make()
    world_model = GoneWorldModel(module.tokenizer)
    probe = Probe()
    callbacks = [AnchorRouting(fraction=0.5, floor=1, seed=0), WorldModelReward(world_model), probe]
    trainer(2, callbacks).fit(module, torch.utils.data.DataLoader(Steps(2), batch_size=None))
    first, second = probe.batches
    assert first.graded.all() and not torch.isnan(first.wm_rewards[~first.is_real]).any()
    # the second step: simulated rows ungraded (NaN: left out of their groups), anchors graded for real but with no
    # world-model reward to pair with; nothing was scored 0 in place of a missing answer
    assert not second.graded[~second.is_real].any() and torch.isnan(second.rewards[~second.is_real]).all()
    assert second.graded[second.is_real].all() and torch.isnan(second.wm_rewards).all()
    assert torch.isnan(first.wm_rewards[first.is_real]).all()  # its side-grades (the second call) went unanswered
    assert world_model.unanswered == 8 + 8 + 8  # step 1's side-grades, step 2's simulated rows and side-grades
    assert probe.metrics[-1]["world_model/unanswered"] == 16  # logged as the step's increase


def test_resume_restores_calibrator_ewma_c_and_routing_exactly(tmp_path):
    def run(steps, ckpt=None, start=0, save=None):
        module, world_model = make()
        probe = Probe()
        callbacks = [*wmrl_callbacks(world_model, min_pairs=8, refit_every=4, warmup=1), probe]
        t = trainer(steps, callbacks, enable_checkpointing=save is not None, default_root_dir=tmp_path)
        t.fit(module, torch.utils.data.DataLoader(Steps(steps, start), batch_size=None), ckpt_path=ckpt)
        if save:
            t.save_checkpoint(save)
        return callbacks, probe

    full, full_probe = run(4)
    run(2, save=tmp_path / "half.ckpt")
    resumed, resumed_probe = run(4, ckpt=tmp_path / "half.ckpt", start=2)
    for a, b in zip(full[:4], resumed[:4], strict=True):
        state_a, state_b = a.state_dict() if hasattr(a, "state_dict") else {}, b.state_dict()
        assert state_a.keys() == state_b.keys()
    assert resumed[0].rng.getstate() == full[0].rng.getstate()
    assert resumed[2].calibration == full[2].calibration and list(resumed[2].pairs) == list(full[2].pairs)
    assert (resumed[3].state.ewma, resumed[3].state.c) == pytest.approx((full[3].state.ewma, full[3].state.c))
    assert resumed_probe.metrics[-1]["loss/total"] == pytest.approx(full_probe.metrics[-1]["loss/total"], rel=1e-5)
    assert not math.isnan(resumed_probe.metrics[-1]["denoise/weight"])


def fit_and_save(tmp_path, steps, extra=(), ckpt=None, save=None):
    """A WMRL fit with a learning world model (so every WMRL callback keeps state); its callbacks."""
    module, _ = make()
    callbacks = [*wmrl_callbacks(LearningWorldModel(module.tokenizer), min_pairs=8, refit_every=4, warmup=1), *extra]
    t = trainer(steps, callbacks, default_root_dir=tmp_path)
    t.fit(module, torch.utils.data.DataLoader(Steps(steps), batch_size=None), ckpt_path=ckpt)
    if save:
        t.save_checkpoint(save)
    return callbacks


def saved_state(callback) -> str:
    return json.dumps(callback.state_dict(), sort_keys=True)  # NaN-safe equality


def test_two_instances_with_different_settings_keep_their_own_state(tmp_path):
    second = OnlineDebiasing(min_pairs=1000, refit_every=4)  # buffers the same pairs, never fits
    saved = fit_and_save(tmp_path, 2, extra=[second], save=tmp_path / "two.ckpt")
    keys = torch.load(tmp_path / "two.ckpt", weights_only=False)["callbacks"].keys()
    assert {k for k in keys if k.startswith("OnlineDebiasing")} == {saved[2].state_key, second.state_key}
    assert saved[2].refits > 0 and second.refits == 0
    resumed = fit_and_save(tmp_path, 2, extra=[OnlineDebiasing(min_pairs=1000, refit_every=4)],
                           ckpt=tmp_path / "two.ckpt")
    assert [saved_state(c) for c in resumed] == [saved_state(c) for c in saved]
    assert resumed[2].refits > 0 and resumed[4].refits == 0


def test_a_checkpoint_keyed_by_class_name_still_resumes(tmp_path, monkeypatch, recwarn):
    """Checkpoints written before the callbacks had a ``state_key`` keyed each state by the class name (Lightning's
    default): the callbacks take their state from it, and Lightning does not call them missing."""
    from lightning.pytorch import Callback

    with monkeypatch.context() as old:
        for cls in (AnchorRouting, WorldModelReward, OnlineDebiasing, InverseVarianceDenoising):
            old.setattr(cls, "state_key", Callback.state_key)
        saved = fit_and_save(tmp_path, 2, save=tmp_path / "old.ckpt")
    keys = set(torch.load(tmp_path / "old.ckpt", weights_only=False)["callbacks"])
    assert {"AnchorRouting", "WorldModelReward", "OnlineDebiasing", "InverseVarianceDenoising"} <= keys
    resumed = fit_and_save(tmp_path, 2, ckpt=tmp_path / "old.ckpt")  # restored at step 2: no further step
    assert [saved_state(c) for c in resumed] == [saved_state(c) for c in saved]
    assert resumed[2].refits > 0 and resumed[3].state.observations > 0 and resumed[1].world_model.examples
    assert not [w for w in recwarn if "Please add the following callbacks" in str(w.message)]


def test_a_saved_state_under_another_key_goes_only_to_a_lone_callback_of_its_class():
    from wmrl.callbacks.base import claim_saved_states

    lone, key = OnlineDebiasing(min_pairs=8), "OnlineDebiasing{'min_pairs': 200}"  # resumed with other settings
    states = {key: {"steps": 3}, "ModelCheckpoint{'monitor': None}": {}}
    claim_saved_states(states, [lone, AnchorRouting()])
    assert states == {lone.state_key: {"steps": 3}, "ModelCheckpoint{'monitor': None}": {}}
    pair = [OnlineDebiasing(min_pairs=8), OnlineDebiasing(min_pairs=9)]
    states = {"OnlineDebiasing": {"steps": 3}}
    claim_saved_states(states, pair)  # whose is it? neither takes it
    assert states == {"OnlineDebiasing": {"steps": 3}}
    assert OnlineDebiasing(min_pairs=8).state_key == lone.state_key != pair[1].state_key
    module, _ = make()
    module.on_load_checkpoint({"global_step": 3, "callbacks": {}})  # load_from_checkpoint: no trainer, no callbacks
    assert module.trained_steps == 3


class LearningWorldModel(DistortedWorldModel, LearnsFromAnchors, ReportsMetrics):
    """A world-model double that also learns (the ``observe`` protocol of ``LearnedWorldModel``)."""

    def __init__(self, tokenizer) -> None:
        super().__init__(tokenizer)
        self.events = []  # ("predict", n) / ("observe", n, sources)
        self.examples = []
        self.refits = 0

    def step_many(self, requests):
        self.events.append(("predict", len(requests)))
        return super().step_many(requests)

    def observe(self, requests, outcomes, gather=None):
        rows = gather(torch.tensor([[o.reward] for o in outcomes], dtype=torch.float64).reshape(-1, 1))
        self.events.append(("observe", len(requests), {o.source for o in outcomes}))
        self.examples.extend(rows[:, 0].tolist())
        self.refits += 1

    def metrics(self):  # the ReportsMetrics contract: logged as world_model/<name>
        return {"examples": float(len(self.examples)), "refits": float(self.refits)}

    def state_dict(self):
        return {"examples": list(self.examples), "refits": self.refits}

    def load_state_dict(self, state):
        self.examples, self.refits = list(state["examples"]), state["refits"]


def test_a_learning_world_model_learns_from_anchors_after_grading_them_and_is_checkpointed(tmp_path):
    module, world_model = make()
    world_model = LearningWorldModel(module.tokenizer)
    probe = Probe()
    callbacks = [*wmrl_callbacks(world_model), probe]
    t = trainer(2, callbacks, default_root_dir=tmp_path)
    t.fit(module, torch.utils.data.DataLoader(Steps(2), batch_size=None))
    # per step: the world model serves its groups, side-grades the 8 anchor rows, then learns from them
    kinds = [e[0] for e in world_model.events]
    assert kinds == ["predict", "predict", "observe"] * 2
    observed = [e for e in world_model.events if e[0] == "observe"]
    assert all(n == 8 and sources == {Source.REAL} for _, n, sources in observed)
    assert len(world_model.examples) == 16 and probe.metrics[-1]["world_model/examples"] == 16
    assert probe.metrics[-1]["world_model/refits"] == 2
    t.save_checkpoint(tmp_path / "wm.ckpt")
    state = torch.load(tmp_path / "wm.ckpt", weights_only=False)["callbacks"]
    saved = next(v for k, v in state.items() if k.startswith("WorldModelReward"))
    assert saved["world_model"] == {"examples": world_model.examples, "refits": 2}
    restored = WorldModelReward(LearningWorldModel(module.tokenizer))
    restored.load_state_dict(saved)
    assert restored.world_model.examples == world_model.examples


def test_the_rl_hooks_are_timed_by_lightnings_profiler_like_its_own_hooks():
    from lightning.pytorch.profilers import SimpleProfiler

    module, world_model = make()
    profiler = SimpleProfiler()
    trainer(1, wmrl_callbacks(world_model), profiler=profiler).fit(
        module, torch.utils.data.DataLoader(Steps(1), batch_size=None))
    timed = set(profiler.recorded_durations)
    for callback, hook in (("AnchorRouting", "on_rollout_plan"), ("WorldModelReward", "on_rollout_end"),
                           ("OnlineDebiasing", "on_calibrate"), ("InverseVarianceDenoising", "on_advantages")):
        assert any(k.startswith(f"[Callback]{callback}") and k.endswith(f".{hook}") for k in timed), (callback, hook)
    assert any(k.startswith("[Callback]") and k.endswith(".on_train_batch_end") for k in timed)  # Lightning's own
