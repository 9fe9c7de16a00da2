"""`GRPOModule`: GRPO for AutoResearch agents; with no WMRL callbacks it is real-execution GRPO (the baseline).

``training_step`` reads like the method::

    plan = route(groups)                     # on_rollout_plan: which environment serves each group
    batch = rollout(plan)                    # on_rollout_end
    rewards                                  # on_calibrate: calibrate world-model rewards; on_rewards: terms
    advantages = group_normalise(batch)      # on_advantages: e.g. weight anchor groups
    loss = clipped surrogate + KL - entropy  # micro-batched, one optimizer step per training step

Differences from the paper's verl setup: one optimizer step per rollout batch (so the behaviour log-probs
of the rollout engine are the old log-probs, as in the paper), rollouts and training share one process and
the policy's weights (no weight sync with the transformers engine; the vLLM engine gets the LoRA adapter after
every optimizer step, checked by a canary), and only trainable parameters (the LoRA adapter) are stored in
checkpoints.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from typing import Any, Literal

import torch
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities import rank_zero_info

from wmrl.algorithms.grpo import aggregation_normaliser
from wmrl.autoresearch.agent import AgentLoop, Prefill, RolloutState, collate
from wmrl.autoresearch.contracts import ShowsStarter
from wmrl.autoresearch.grpo_build import (
    EngineFactory,
    agent_loops,
    engine_name,
    generation_engine,
    policy_pair,
    real_environment,
    validate,
)
from wmrl.autoresearch.grpo_loss import LossSettings, Reference, micro_batch_loss, micro_batches
from wmrl.autoresearch.grpo_metrics import rollout_metrics, training_row
from wmrl.evaluation import mean_summary, sample_record, task_line, task_summary, write_samples
from wmrl.evaluation.heldout import run_dir
from wmrl.evaluation.records import EVAL_SEED, unused_folder
from wmrl.evaluation.report import training_report
from wmrl.models import LoraSettings, is_peft_model, precision
from wmrl.models.precision import Precision
from wmrl.modules.base import RLModule
from wmrl.types import RolloutBatch, RolloutPlan, declares

log = logging.getLogger(__name__)

SAMPLES_DIR = "samples"  # under the run dir: each held-out sample's script and outcome, per evaluation
PRECISION_KEY = "wmrl_update_bfloat16"  # update_precision auto's measured choice, for a resumed fit
TRAIN_HISTORY_KEY = "wmrl_train_history"  # the checkpoint's training curve (per step: reward, valid rate, ...)

LossAggregation = Literal["token_mean", "seq_mean_token_mean", "dr_grpo"]


class GRPOModule(RLModule):
    """GRPO over multi-turn AutoResearch rollouts.

    Args:
        model: the policy: the built-in ``smollm2-135m-instruct``, a local checkpoint dir or an offline HF id.
        lora: LoRA adapter settings (``null`` trains the full model and keeps a frozen copy as reference).
        dtype: ``float32`` (CPU) or ``bfloat16``.
        environment: the real environment (default: the process sandbox over the shipped task suite).
        group_size: rollouts per task per step (linked from ``data.group_size``).
        max_turns: turns per rollout (paper 4; CPU default 1).
        max_new_tokens: policy tokens per turn.
        observation_tokens: cap on each feedback turn (head + tail kept).
        temperature: training sampling temperature (paper 1.0).
        top_p: training nucleus sampling (1.0: off).
        eval_temperature: sampling temperature of the held-out evaluation (paper 0.8).
        lr: AdamW learning rate over the trainable parameters.
        weight_decay: AdamW weight decay.
        clip_eps: PPO clip range (paper 0.2).
        kl_coef: KL loss to the reference (paper 0.04, k3).
        entropy_coef: entropy bonus (paper 0.002).
        loss_aggregation: how token losses are averaged (``token_mean``, ``seq_mean_token_mean``, ``dr_grpo``).
        micro_batch_size: trajectories per forward/backward pass (gradient accumulation inside a step).
        generation_batch_size: prompts per generation pass.
        max_grad_norm: gradient clipping.
        seed: seeds rollouts (step ``s`` samples with seed ``seed + s``, plus ``100003 x rank`` under DDP so ranks
            sample different rollouts: a resumed run continues exactly).
        eval_at_start: evaluate the held-out tasks before the first step (the starting policy's score).
        prefill: how each assistant turn starts (``none`` | ``fence`` | ``starter_head``, see
            :class:`~wmrl.autoresearch.agent.AgentSettings`); ``starter_head`` is the foothold a small CPU policy
            needs to write valid submissions at all (docs/findings.md).
        share_prefix: in the update, put rows with the same prompt (a group, or groups of one task) in the same
            micro-batches (:func:`wmrl.models.kv.prompt_micro_batches`), run that prompt once and repeat its KV
            cache per row (:func:`wmrl.models.kv.causal_lm_logits`; same loss and gradients, ~2.5x fewer tokens
            for a CPU quickstart group); ``false`` runs every row in full, micro-batches in rollout order.
        overlap: anchor executions run in a background thread while the world model answers the other groups
            (``time/overlapped``: execution seconds hidden behind world-model work).
        max_staleness: ``0`` (the default): each step's rollouts come from the weights its update starts from.
            ``1``: asynchronous rollouts (:mod:`wmrl.modules.base`): the next step's rollouts (generation and
            executions) are played while this step's update runs, from the weights one update older, with the
            clipped ratio to their behaviour log-probs as the correction (``offpolicy/ratio_mean``,
            ``loss/clip_fraction``). Needs an engine with weights of its own (the vLLM engine).
        engine: who samples rollouts, by ``class_path`` (the module passes the policy and its tokenizer): ``null``,
            the default, is :class:`~wmrl.generation.hf.HFGenerationEngine` (transformers, sharing the policy's
            weights, ``generation_batch_size`` prompts a pass); :class:`wmrl.generation.vllm.VLLMGenerationEngine`
            (GPU machines, ``pip install 'wmrl[vllm]'``; on CPU ``configs/autoresearch/vllm_cpu.yaml`` in
            ``.venv-vllm``: a colocated vLLM engine that gets the LoRA adapter after every optimizer step, checked by
            a log-prob canary; its ``settings`` say how the engine is built) needs ``lora`` and ``top_p: 1.0``; the
            module shuts it down at the end of ``fit``, ``validate`` and ``test`` (its processes and memory).
        update_precision: the update's forward and backward passes: ``float32``; ``bfloat16`` (autocast, the output
            head in float32: :mod:`wmrl.models.precision`); ``auto``: a forward and backward pass of the policy
            timed both ways before the first update, bfloat16 only where it is faster by 1.15x and its gradient
            agrees with float32's (printed, logged as ``update/bfloat16``, kept in the checkpoint). Needs ``dtype:
            float32``.
        policy: an in-process ``(model, tokenizer)`` pair instead of ``model`` (tests, notebooks).
    """

    def __init__(
        self,
        model: str = "smollm2-135m-instruct",
        lora: LoraSettings | None = LoraSettings(),  # noqa: B008 - frozen, immutable default
        dtype: str = "float32",
        environment: Any = None,
        group_size: int = 4,
        max_turns: int = 1,
        max_new_tokens: int = 512,
        observation_tokens: int = 1024,
        temperature: float = 1.0,
        top_p: float = 1.0,
        eval_temperature: float = 0.8,
        lr: float = 1e-5,
        weight_decay: float = 0.0,
        clip_eps: float = 0.2,
        kl_coef: float = 0.04,
        entropy_coef: float = 0.002,
        loss_aggregation: LossAggregation = "token_mean",
        micro_batch_size: int = 4,
        generation_batch_size: int = 8,
        max_grad_norm: float = 1.0,
        seed: int = 0,
        eval_at_start: bool = False,
        prefill: Prefill = "starter_head",
        share_prefix: bool = True,
        overlap: bool = True,
        max_staleness: int = 0,
        engine: EngineFactory | None = None,
        update_precision: Precision = "float32",
        policy: tuple | None = None,
    ) -> None:
        super().__init__()
        validate(locals())
        settings = {k: v for k, v in locals().items() if k not in ("self", "__class__", "environment", "policy")}
        settings["engine"] = engine_name(engine)  # a factory is no hyperparameter a checkpoint can hold
        self.save_settings(settings, ignore=("environment", "policy", "engine"))
        self.strict_loading = False  # checkpoints hold the trainable parameters only
        self.policy, self.tokenizer = policy_pair(model, lora, dtype, policy)
        self.uses_lora = is_peft_model(self.policy)
        # the KL reference: the adapter disabled, or a frozen copy of a fully trained policy (None: no KL term)
        self._reference = Reference(self.policy, self.uses_lora) if kl_coef > 0 else None
        self.environments = {"real": real_environment(environment)}
        self.engine = generation_engine(engine, self.policy, self.tokenizer, generation_batch_size, top_p)
        self.agent, self.eval_agent = agent_loops(self.tokenizer, self.engine, settings)
        self._eval_results: list[dict] = []
        self.train_history: list[dict[str, float]] = []  # per step of this fit: real reward, valid rate, ...
        self._real_seconds = (0.0, 0)  # total wall seconds and count of real executions (not cached)
        self._parameter_count = sum(p.numel() for p in self.policy.parameters())
        self._parameter_bytes = sum(p.numel() * p.element_size() for p in self.policy.parameters())
        #: whether the update runs under bfloat16 autocast (None: ``auto``, not measured yet)
        self._bfloat16: bool | None = {"float32": False, "bfloat16": True, "auto": None}[update_precision]

    def on_fit_start(self) -> None:
        if not self.engine.runs_under_fsdp and "FSDP" in type(self.trainer.strategy).__name__:
            raise ValueError(f"model.init_args.engine {type(self.engine).__name__} does not run under FSDP (the "
                             "LoRA adapter it syncs is sharded there): use the DDP strategy "
                             "(configs/strategy/ddp.yaml) or the transformers engine (engine: null)")
        if self.max_staleness > 0 and not self.engine.holds_own_weights:
            raise ValueError(f"model.init_args.max_staleness {self.max_staleness} needs an engine with weights of its "
                             f"own (the next step's rollouts are played while the update changes the policy); "
                             f"{type(self.engine).__name__} samples the policy itself: use the vLLM engine "
                             "(configs/autoresearch/vllm_cpu.yaml) or max_staleness 0")
        if self.no_step_left:  # resumed at max_steps: no training loop follows, so the final evaluation is now
            rank_zero_info(f"the checkpoint is at step {self.trained_steps}, trainer.max_steps: nothing left to train")
            self.heldout.at_end(self, self._evaluate_now)

    # -- the method (the step itself is RLModule.training_step) -----------------------------------------
    def after_step(self, metrics: dict[str, float], batch: RolloutBatch, step: int) -> None:
        self.log("reward", metrics["reward/mean"], prog_bar=True, on_step=True, batch_size=len(batch))
        self.train_history.append(training_row(metrics, batch, step))

    # -- rollouts --------------------------------------------------------------------------------------
    def rollout(self, plan: RolloutPlan, seed: int, agent: AgentLoop | None = None) -> RolloutBatch:
        """Play ``plan``: ``group_size`` rollouts per group, each group in its planned environment."""
        agent = agent or self.agent
        states: list[RolloutState] = []
        for group, (task_id, env_name) in enumerate(zip(plan.task_ids, plan.environments, strict=True)):
            env = self.environments[env_name]  # RLModule.check_plan has refused a plan naming an unknown one
            real = self.environments["real"]
            prompt = real.prompt(task_id)
            starter = real.starter(task_id) if declares(real, ShowsStarter) else None
            states += [agent.start(task_id, group, prompt, env, starter) for _ in range(plan.group_size)]
        before, passes = self.engine.tokens_run, self.engine.passes_run
        for key, seconds in agent.run(states, seed=seed).items():
            self.add_time(key, seconds)
        self.add_count("tokens/generate", float(self.engine.tokens_run - before))
        self.add_count("passes/generate", float(self.engine.passes_run - passes))
        return collate(states, self.tokenizer.pad_token_id)

    def rollout_metrics(self, batch: RolloutBatch, plan: RolloutPlan) -> dict[str, float]:
        metrics, self._real_seconds = rollout_metrics(batch, plan, self._real_seconds)
        metrics.update(super().rollout_metrics(batch, plan))  # time/* of this step
        return metrics

    # -- the update ------------------------------------------------------------------------------------
    def update(self, batch: RolloutBatch) -> dict[str, float]:
        """One optimizer step over the batch, micro-batched with globally normalised losses."""
        hp = self.hparams
        optimizer = self.optimizers()
        mask = batch.response_mask & batch.used[:, None]
        rows = batch.used.nonzero().flatten().tolist()
        totals = {"loss/total": 0.0, "loss/pg": 0.0, "loss/kl": 0.0, "loss/entropy": 0.0, "loss/clip_fraction": 0.0,
                  "offpolicy/ratio_mean": 1.0}
        if not rows or not bool(mask.any()):
            return {**totals, **self.empty_step()}
        settings = LossSettings.of(hp)
        normaliser = aggregation_normaliser(mask[rows], settings.aggregation, max_tokens=settings.max_tokens)
        totals["offpolicy/ratio_mean"] = 0.0  # the micro-batches' aggregated ratios sum to the step's
        optimizer.zero_grad(set_to_none=True)
        chunks = micro_batches(batch, rows, hp.micro_batch_size, settings.share_prefix)
        # Ranks may hold different numbers of micro-batches (their prompts differ), and DDP and FSDP reduce
        # gradients in every synchronised backward: all but the last accumulate locally, so each rank reduces once.
        no_sync = getattr(self.trainer.strategy.model, "no_sync", None)
        # what the update's passes compute (the policy's forward, and its backward over the same positions; the
        # reference's forward counted apart, as it runs only while the policy differs from it), logged with the
        # generation's and the parameter count so that a benchmark can set G against its compute floor
        totals["tokens/update"] = totals["tokens/reference"] = 0.0
        totals["model/parameters"] = float(self._parameter_count)
        totals["model/bytes"] = float(self._parameter_bytes)
        # the reference's pass is the policy's own while the adapter adds exact zeros (a LoRA fit's first step)
        reference_is_policy = self._reference is not None and self._reference.equals_policy()
        if self._bfloat16 is None:  # update_precision: auto, before the fit's first update
            totals.update(self._choose_precision())
        autocast = torch.bfloat16 if self._bfloat16 else None
        for index, chunk in enumerate(chunks):
            out, positions = micro_batch_loss(self.policy, self._reference, batch, chunk, mask, normaliser, settings,
                                              self.device, autocast=autocast, reference_is_policy=reference_is_policy)
            totals["tokens/update"] += float(positions)
            if self._reference is not None and not reference_is_policy:
                totals["tokens/reference"] += float(positions)
            last = index == len(chunks) - 1
            with contextlib.nullcontext() if last or no_sync is None else no_sync():
                self.manual_backward(out.loss)
            totals["loss/total"] += float(out.loss.detach())
            for key, value in (("pg", out.pg_loss), ("kl", out.kl), ("entropy", out.entropy),
                               ("clip_fraction", out.clip_fraction)):
                totals[f"loss/{key}"] += 0.0 if math.isnan(float(value)) else float(value)
            totals["offpolicy/ratio_mean"] += float(out.ratio)
        if hasattr(self.trainer.strategy.model, "clip_grad_norm_"):  # FSDP: the sharded root clips the global norm
            self.trainer.strategy.model.clip_grad_norm_(hp.max_grad_norm)  # (its precision plugin refuses "norm")
        else:
            self.clip_gradients(optimizer, gradient_clip_val=hp.max_grad_norm, gradient_clip_algorithm="norm")
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if not self.rollout_in_flight:  # else the engine is playing the next step: synced when that ends
            totals.update(self.sync_engine())
        totals["train/skipped_step"] = 0.0
        totals["update/bfloat16"] = float(bool(self._bfloat16))
        return totals

    def _choose_precision(self) -> dict[str, float]:
        """``update_precision: auto``, before the first update: the precision :func:`wmrl.models.precision.measure`
        chooses on this machine. On several processes rank 0's choice holds for all (each rank's timing differs)."""
        probe = precision.measure(self.policy)
        self._bfloat16 = bool(self.trainer.strategy.broadcast(probe.bfloat16, src=0))
        rank_zero_info(probe.line())
        return probe.metrics()

    def sync_engine(self) -> dict[str, float]:
        start = time.perf_counter()
        self.engine.sync_weights()  # a no-op for the hf engine; vLLM gets the new adapter and checks it moved
        return {"time/sync": time.perf_counter() - start, **self.engine.metrics()}  # vLLM: canary/*

    def configure_optimizers(self):
        params = [p for p in self.policy.parameters() if p.requires_grad]
        if not params:
            raise ValueError("the policy has no trainable parameters (check model.init_args.lora)")
        return torch.optim.AdamW(params, lr=self.hparams.lr, weight_decay=self.hparams.weight_decay)

    # -- held-out evaluation (real execution only) -----------------------------------------------------
    def evaluate(self, task_ids: list[str], samples: int, seed: int) -> list[dict]:
        """``samples`` rollouts of each held-out task at the evaluation temperature, executed for real.

        All tasks are sampled in one rollout (the engine batches their prompts, each task's samples sharing one
        prefill), which on CPU costs about a third of evaluating the tasks one after the other.
        """
        plan = RolloutPlan(list(task_ids), samples, ["real"] * len(task_ids))
        batch = self.rollout(plan, seed=seed, agent=self.eval_agent)
        results = []
        for group, task_id in enumerate(task_ids):
            records = [sample_record(t) for t in batch.trajectories[group * samples : (group + 1) * samples]]
            results.append({**task_summary(task_id, records), "samples": records})  # the texts, for the run dir
        return results

    def validation_step(self, items: list[tuple[str, int]], batch_idx: int) -> None:
        """A batch of ``(task_id, samples)`` items (the data module's held-out tasks on this rank)."""
        samples = {k for _, k in items}
        if len(samples) != 1:
            raise ValueError(f"one evaluation batch needs one sample count per task (got {sorted(samples)})")
        self._eval_results.extend(self._held_out([t for t, _ in items], samples.pop(), seed=EVAL_SEED + batch_idx))

    def _held_out(self, task_ids: list[str], samples: int, seed: int) -> list[dict]:
        """:meth:`evaluate`, saying what it does meanwhile: one batched rollout shows as a single progress step
        for minutes, so a line before it and one per task after it."""
        rank_zero_info(f"held-out evaluation: {len(task_ids)} task(s) x {samples} sample(s), generated in one batch, "
                       f"then executed for real (step {self.trained_steps})")
        start = time.perf_counter()
        results = self.evaluate(task_ids, samples, seed)
        for r in results:
            rank_zero_info(f"  {task_line(r)}")
        rank_zero_info(f"  ({time.perf_counter() - start:.0f} s)")
        return results

    def on_validation_epoch_start(self) -> None:
        self._eval_results = []

    def on_validation_epoch_end(self) -> None:
        self._log_eval("heldout")

    test_step = validation_step
    on_test_epoch_start = on_validation_epoch_start

    def on_test_epoch_end(self) -> None:
        self._log_eval("test")

    def on_train_start(self) -> None:
        if getattr(self.trainer, "datamodule", None) is not None:
            self.heldout.at_start(self, self._evaluate_now)

    def on_train_end(self) -> None:
        super().on_train_end()  # a rollout played ahead ends first
        if getattr(self.trainer, "datamodule", None) is not None:
            self.heldout.at_end(self, self._evaluate_now)

    def _evaluate_now(self) -> dict[str, float]:
        """The held-out evaluation of the current policy outside Lightning's validation (the start, the end),
        with the validation's tasks, samples and seed; kept, and its summary returned."""
        datamodule = self.trainer.datamodule
        return self._keep("heldout", self._held_out(datamodule.eval_task_ids, datamodule.eval_samples, seed=EVAL_SEED))

    def fit_reports(self) -> list[str]:
        return [training_report(self.train_history) if self.train_history else "", self.heldout.report()]

    def teardown(self, stage: str) -> None:
        self.engine.close()  # vLLM: its engine processes exit with the fit (or validate/test) that started them

    def _log_eval(self, prefix: str) -> None:
        results = self._eval_results
        if not results or self.trainer.sanity_checking:
            return
        summary = self._keep(prefix, results)
        self.log_dict({f"{prefix}/{k}": v for k, v in summary.items() if v is not None}, batch_size=len(results))
        for r in results:
            if r["score"] is not None:  # None: every sample of the task missing
                self.log(f"{prefix}_task/{r['task_id']}/score", r["score"], batch_size=1)

    def _keep(self, split: str, results: list[dict]) -> dict[str, float]:
        """Keep one evaluation (:class:`~wmrl.evaluation.heldout.HeldOutLog`: the per-sample positions in
        ``heldout.jsonl``, paired by task for the end-of-fit gain) and write each sample's script and outcome under
        ``<run dir>/samples/<name>_step<N>/<task>/`` (:func:`wmrl.evaluation.write_samples`; ``<name>`` is
        ``heldout`` in a fit, ``validate`` under ``wmrl validate``, ``test`` under ``wmrl test``); a folder an earlier
        evaluation wrote is kept and this one gets the next free name (``heldout_step3-2``). Returns the summary."""
        summary = mean_summary(results)
        line = {"tasks": [{k: v for k, v in r.items() if k != "samples"} for r in results]}
        self.heldout.keep(self, split, summary, line, paired={r["task_id"]: list(r["positions"]) for r in results})
        log.info("held-out at step %d: %s", self.trained_steps, summary)
        root = run_dir(self.trainer)
        if root is not None:
            name = f"{'validate' if self.trainer.state.fn == TrainerFn.VALIDATING else split}_step{self.trained_steps}"
            folder = write_samples(unused_folder(root / SAMPLES_DIR / name),
                                   {r["task_id"]: r["samples"] for r in results if "samples" in r})
            rank_zero_info(f"held-out samples (scripts and outcomes): {folder}")
        return summary

    # -- checkpoints -----------------------------------------------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict) -> None:
        """The trainable parameters only, the held-out evaluations so far (:class:`RLModule`) and the training
        curve: a resumed fit ends with the report an uninterrupted one prints; and the update's precision as
        ``update_precision: auto`` measured it."""
        super().on_save_checkpoint(checkpoint)
        trainable = {f"policy.{n}" for n, p in self.policy.named_parameters() if p.requires_grad}
        checkpoint["state_dict"] = {k: v for k, v in checkpoint["state_dict"].items() if k in trainable}
        checkpoint[TRAIN_HISTORY_KEY] = list(self.train_history)
        checkpoint[PRECISION_KEY] = self._bfloat16

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        super().on_load_checkpoint(checkpoint)
        if TRAIN_HISTORY_KEY in checkpoint and self.resuming_fit():
            self.train_history = list(checkpoint[TRAIN_HISTORY_KEY])
        if self.hparams.update_precision == "auto" and checkpoint.get(PRECISION_KEY) is not None:
            self._bfloat16 = bool(checkpoint[PRECISION_KEY])  # update_precision auto: the fit goes on as it started
