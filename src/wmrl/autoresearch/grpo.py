"""`GRPOModule`: GRPO for AutoResearch agents; with no WMRL callbacks it is real-execution GRPO (the baseline).

``training_step`` reads like the method::

    plan = route(groups)                     # on_rollout_plan: which environment serves each group
    batch = rollout(plan)                    # on_rollout_end
    rewards                                  # on_rewards: e.g. calibrate world-model rewards
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
import functools
import json
import logging
import math
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import torch
from lightning.pytorch.utilities import rank_zero_info

from wmrl.algorithms.grpo import (
    aggregation_normaliser,
    entropy_from_logits,
    grpo_loss,
    token_logprobs,
)
from wmrl.evaluation import mean_summary, sample_record, task_summary, write_samples
from wmrl.models import LoraSettings, is_peft_model
from wmrl.models.kv import causal_lm_logits, positions_run, prompt_micro_batches
from wmrl.modules.base import EVAL_FILE, RLModule
from wmrl.rollout.agent import AgentLoop, AgentSettings, Prefill, RolloutState
from wmrl.types import (
    GenerationEngine,
    RolloutBatch,
    RolloutPlan,
    ShowsStarter,
    Source,
    Status,
    TaskEnvironment,
    missing_members,
)

log = logging.getLogger(__name__)

SAMPLES_DIR = "samples"  # under the run dir: each held-out sample's script and outcome, per evaluation

# Lightning warns at every checkpoint of a manually optimised module that the state saved is the one after the
# optimizer step. That is the state wmrl means to save (a resumed run continues from it, exactly), so the
# 15-line warning per checkpoint says nothing here.
warnings.filterwarnings("ignore", message="Using ModelCheckpoint with manual optimization")


LossAggregation = Literal["token_mean", "seq_mean_token_mean", "dr_grpo"]
#: how the module builds its generation engine from the policy and its tokenizer (a ``class_path`` whose first two
#: arguments are those, e.g. :class:`wmrl.generation.vllm.VLLMGenerationEngine`)
EngineFactory = Callable[[Any, Any], GenerationEngine]


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
            :class:`~wmrl.rollout.agent.AgentSettings`); ``starter_head`` is the foothold a small CPU policy
            needs to write valid submissions at all (docs/findings.md).
        share_prefix: in the update, put rows with the same prompt (a group, or groups of one task) in the same
            micro-batches (:func:`wmrl.models.kv.prompt_micro_batches`), run that prompt once and repeat its KV
            cache per row (:func:`wmrl.models.kv.causal_lm_logits`; same loss and gradients, ~2.5x fewer tokens
            for a CPU quickstart group); ``false`` runs every row in full, micro-batches in rollout order.
        overlap: anchor executions run in a background thread while the world model answers the other groups
            (``time/overlapped``: execution seconds hidden behind world-model work).
        engine: who samples rollouts, by ``class_path`` (the module passes the policy and its tokenizer): ``null``,
            the default, is :class:`~wmrl.generation.hf.HFGenerationEngine` (transformers, sharing the policy's
            weights, ``generation_batch_size`` prompts a pass); :class:`wmrl.generation.vllm.VLLMGenerationEngine`
            (GPU machines, ``pip install 'wmrl[vllm]'``; on CPU ``configs/autoresearch/vllm_cpu.yaml`` in
            ``.venv-vllm``: a colocated vLLM engine that gets the LoRA adapter after every optimizer step, checked by
            a log-prob canary; its ``settings`` say how the engine is built) needs ``lora`` and ``top_p: 1.0``; the
            module shuts it down at the end of ``fit``, ``validate`` and ``test`` (its processes and memory).
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
        engine: EngineFactory | None = None,
        policy: tuple | None = None,
    ) -> None:
        super().__init__()
        _validate(locals())
        settings = {k: v for k, v in locals().items() if k not in ("self", "__class__", "environment", "policy")}
        settings["engine"] = _engine_name(engine)  # a factory is no hyperparameter a checkpoint can hold
        self.save_settings(settings, ignore=("environment", "policy", "engine"))
        self.strict_loading = False  # checkpoints hold the trainable parameters only
        if policy is not None:
            self.policy, self.tokenizer = policy
        else:
            from wmrl.models import load_policy

            self.policy, self.tokenizer = load_policy(model, lora, dtype=dtype)
        self.uses_lora = is_peft_model(self.policy)
        self._frozen_reference = None
        if kl_coef > 0 and not self.uses_lora:
            from wmrl.models import frozen_copy

            self._frozen_reference = [frozen_copy(self.policy)]  # a list: not a submodule, not in checkpoints
        if environment is None:
            from wmrl.autoresearch.environments.real import SandboxEnvironment

            environment = SandboxEnvironment()
        if not isinstance(environment, TaskEnvironment):
            raise TypeError(f"model.init_args.environment must be a wmrl.types.TaskEnvironment (source, step_many, "
                            f"prompt); {type(environment).__name__} lacks "
                            f"{missing_members(environment, TaskEnvironment)}")
        self.environments = {"real": environment}
        self.engine = self._build_engine(engine, generation_batch_size)
        if not self.engine.exact_with_top_p and top_p != 1:
            raise ValueError(f"model.init_args.top_p must be 1.0 with {type(self.engine).__name__} (its log-probs are "
                             f"taken after top-p truncation; got {top_p})")
        self.agent = AgentLoop(
            self.tokenizer,
            self.engine,
            AgentSettings(max_turns, max_new_tokens, observation_tokens, temperature, top_p, prefill=prefill,
                          overlap=overlap),
        )
        self.eval_agent = AgentLoop(
            self.tokenizer,
            self.engine,
            AgentSettings(max_turns, max_new_tokens, observation_tokens, eval_temperature, top_p, prefill=prefill,
                          overlap=overlap),
        )
        self._eval_results: list[dict] = []
        self.eval_history: list[tuple[str, dict]] = []
        self._eval_samples: list[dict[str, list[float]]] = []  # per evaluation: task -> per-sample positions
        self.train_history: list[dict[str, float]] = []  # per step of this fit: real reward, valid rate, ...
        self._real_seconds = (0.0, 0)  # total wall seconds and count of real executions (not cached)
        self._generated_positions = 0  # token positions the engine computed in the last rollout
        self._parameter_count = sum(p.numel() for p in self.policy.parameters())

    def _build_engine(self, engine: EngineFactory | None, batch_size: int) -> GenerationEngine:
        if engine is None:
            from wmrl.generation.hf import HFGenerationEngine

            return HFGenerationEngine(self.policy, self.tokenizer, max_batch_size=batch_size)
        built = engine(self.policy, self.tokenizer)
        if not isinstance(built, GenerationEngine):
            raise TypeError(f"model.init_args.engine must build a wmrl.types.GenerationEngine subclass "
                            f"(got {type(built).__name__})")
        return built

    def on_fit_start(self) -> None:
        if not self.engine.runs_under_fsdp and "FSDP" in type(self.trainer.strategy).__name__:
            raise ValueError(f"model.init_args.engine {type(self.engine).__name__} does not run under FSDP (the "
                             "LoRA adapter it syncs is sharded there): use the DDP strategy "
                             "(configs/strategy/ddp.yaml) or the transformers engine (engine: null)")

    # -- the method (the step itself is RLModule.training_step) -----------------------------------------
    def after_step(self, metrics: dict[str, float], batch: RolloutBatch, step: int) -> None:
        self.log("reward", metrics["reward/mean"], prog_bar=True, on_step=True, batch_size=len(batch))
        real = [tr for tr in batch.trajectories if tr.source is Source.REAL and tr.best is not None]
        self.train_history.append({
            "step": step,
            "real_reward": metrics["reward/real_mean"],
            "real_valid_rate": sum(tr.best.status is Status.VALID for tr in real) / len(real) if real else math.nan,
            "truncated_rate": metrics["rollout/truncated_rate"],
            "kl": metrics.get("loss/kl", math.nan),
        })

    # -- rollouts --------------------------------------------------------------------------------------
    def rollout(self, plan: RolloutPlan, seed: int, agent: AgentLoop | None = None) -> RolloutBatch:
        """Play ``plan``: ``group_size`` rollouts per group, each group in its planned environment."""
        agent = agent or self.agent
        states: list[RolloutState] = []
        for group, (task_id, env_name) in enumerate(zip(plan.task_ids, plan.environments, strict=True)):
            if env_name not in self.environments:
                raise KeyError(
                    f"the rollout plan routes group {group} to {env_name!r}, but the module has only "
                    f"{sorted(self.environments)}; add the callback that provides it"
                )
            env = self.environments[env_name]
            real = self.environments["real"]
            prompt = real.prompt(task_id)
            starter = real.starter(task_id) if isinstance(real, ShowsStarter) else None
            states += [agent.start(task_id, group, prompt, env, starter) for _ in range(plan.group_size)]
        before = self.engine.tokens_run
        for key, seconds in agent.run(states, seed=seed).items():
            self.add_time(key, seconds)
        self._generated_positions = self.engine.tokens_run - before
        return collate(states, self.tokenizer.pad_token_id)

    def rollout_metrics(self, batch: RolloutBatch, plan: RolloutPlan) -> dict[str, float]:
        trajectories = batch.trajectories
        turns = [t for tr in trajectories for t in tr.turns]
        graded = batch.rewards[batch.graded]
        real = batch.rewards[batch.graded & batch.is_real]
        statuses = [tr.best.status for tr in trajectories if tr.best is not None]
        executed = [t.outcome for tr in trajectories if tr.source is Source.REAL for t in tr.turns
                    if t.code is not None and not t.outcome.cached and t.outcome.wall_seconds > 0]
        total, count = self._real_seconds
        self._real_seconds = (total + sum(o.wall_seconds for o in executed), count + len(executed))
        total, count = self._real_seconds
        simulated = sum(1 for tr in trajectories if tr.source is Source.WORLD_MODEL for t in tr.turns
                        if t.code is not None)
        wm_raw = batch.wm_rewards[~batch.is_real & batch.graded & ~torch.isnan(batch.wm_rewards)]
        metrics = {
            "reward/mean": float(graded.mean()) if len(graded) else math.nan,
            "reward/real_mean": float(real.mean()) if len(real) else math.nan,
            "reward/world_model_raw_mean": float(wm_raw.mean()) if len(wm_raw) else math.nan,
            "anchor/fraction": sum(plan.anchor_mask) / max(len(plan.anchor_mask), 1),
            "env/execution_seconds": sum(o.wall_seconds for o in executed),
            "env/seconds_saved": simulated * (total / count) if count else 0.0,
            "rollout/valid_rate": sum(s is Status.VALID for s in statuses) / max(len(trajectories), 1),
            "rollout/code_block_rate": sum(t.code is not None for t in turns) / max(len(turns), 1),
            "rollout/truncated_rate": sum(t.finish_reason == "length" for t in turns) / max(len(turns), 1),
            "rollout/response_tokens": sum(t.response_tokens for t in turns) / max(len(turns), 1),
            "rollout/missing": float((~batch.graded).sum()),
            "rollout/used_fraction": float(batch.used.float().mean()),
            "anchor/executions": float(sum(tr.source is Source.REAL for tr in trajectories for _ in tr.turns)),
        }
        metrics.update(super().rollout_metrics(batch, plan))  # time/* of this step
        return metrics

    # -- the update ------------------------------------------------------------------------------------
    def update(self, batch: RolloutBatch) -> dict[str, float]:
        """One optimizer step over the batch, micro-batched with globally normalised losses."""
        hp = self.hparams
        optimizer = self.optimizers()
        mask = batch.response_mask & batch.used[:, None]
        rows = batch.used.nonzero().flatten().tolist()
        totals = {"loss/total": 0.0, "loss/pg": 0.0, "loss/kl": 0.0, "loss/entropy": 0.0, "loss/clip_fraction": 0.0}
        if not rows or not bool(mask.any()):
            totals["train/skipped_step"] = 1.0
            return totals
        max_tokens = hp.max_new_tokens * hp.max_turns
        normaliser = aggregation_normaliser(mask[rows], hp.loss_aggregation, max_tokens=max_tokens)
        optimizer.zero_grad(set_to_none=True)
        if hp.share_prefix:  # each micro-batch runs its prompt once
            chunks = prompt_micro_batches(batch.input_ids, batch.response_mask, rows, hp.micro_batch_size)
        else:
            chunks = [rows[start : start + hp.micro_batch_size] for start in range(0, len(rows), hp.micro_batch_size)]
        # Ranks may hold different numbers of micro-batches (their prompts differ), and DDP and FSDP reduce
        # gradients in every synchronised backward: all but the last accumulate locally, so each rank reduces once.
        no_sync = getattr(self.trainer.strategy.model, "no_sync", None)
        # what the update's forward passes compute (per pass: the policy's, its backward, the reference's), logged
        # with the generation's and the parameter count so that a benchmark can set G against its compute floor
        totals["tokens/generate"] = float(self._generated_positions)
        totals["tokens/update"] = 0.0
        totals["model/parameters"] = float(self._parameter_count)
        for index, chunk in enumerate(chunks):
            out, positions = self._micro_batch_loss(batch, chunk, mask, normaliser, max_tokens)
            totals["tokens/update"] += float(positions)
            last = index == len(chunks) - 1
            with contextlib.nullcontext() if last or no_sync is None else no_sync():
                self.manual_backward(out.loss)
            totals["loss/total"] += float(out.loss.detach())
            for key, value in (("pg", out.pg_loss), ("kl", out.kl), ("entropy", out.entropy),
                               ("clip_fraction", out.clip_fraction)):
                totals[f"loss/{key}"] += 0.0 if math.isnan(float(value)) else float(value)
        if hasattr(self.trainer.strategy.model, "clip_grad_norm_"):  # FSDP: the sharded root clips the global norm
            self.trainer.strategy.model.clip_grad_norm_(hp.max_grad_norm)  # (its precision plugin refuses "norm")
        else:
            self.clip_gradients(optimizer, gradient_clip_val=hp.max_grad_norm, gradient_clip_algorithm="norm")
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        start = time.perf_counter()
        self.engine.sync_weights()  # a no-op for the hf engine; vLLM gets the new adapter and checks it moved
        totals["time/sync"] = time.perf_counter() - start
        totals.update(self.engine.metrics())  # vLLM: canary/engine_change, canary/policy_change
        totals["train/skipped_step"] = 0.0
        return totals

    def _micro_batch_loss(self, batch: RolloutBatch, rows: list[int], mask, normaliser: float, max_tokens: int):
        hp = self.hparams
        device = self.device  # rollouts stay on the CPU for the callbacks; each micro-batch goes to the policy's device
        ids = batch.input_ids[rows].to(device)
        attention = batch.attention_mask[rows].to(device)
        length = int(attention.sum(1).max())
        ids, attention = ids[:, :length], attention[:, :length]
        window_mask = mask[rows][:, :length].to(device)
        first = int(window_mask.float().argmax(1)[window_mask.any(1)].min())
        window = slice(first - 1, length)  # logits at p-1 predict the token at p
        keep = length - first + 1
        positions = positions_run(ids, attention, keep, hp.share_prefix)  # what this pass computes (the floor's)
        logits = causal_lm_logits(self.policy, ids, attention, keep, share_prefix=hp.share_prefix)
        logprobs = token_logprobs(logits, ids[:, window], temperature=hp.temperature)
        entropy = entropy_from_logits(logits, temperature=hp.temperature) if hp.entropy_coef > 0 else None
        ref = self._reference_logprobs(ids, attention, window, keep) if hp.kl_coef > 0 else None
        out = grpo_loss(
            logprobs,
            batch.old_logprobs[rows][:, window].to(device),
            ref,
            batch.advantages[rows].to(device),
            window_mask[:, window],
            entropy,
            clip_eps=hp.clip_eps,
            kl_coef=hp.kl_coef,
            entropy_coef=hp.entropy_coef,
            mode=hp.loss_aggregation,
            normaliser=normaliser,
            max_tokens=max_tokens,
        )
        return out, positions

    @torch.no_grad()
    def _reference_logprobs(self, ids, attention, window: slice, keep: int) -> torch.Tensor:
        if self.uses_lora:
            from wmrl.models import reference_mode

            with reference_mode(self.policy) as reference:
                logits = causal_lm_logits(reference, ids, attention, keep, share_prefix=self.hparams.share_prefix)
        else:
            reference = self._frozen_reference[0]
            logits = causal_lm_logits(reference, ids, attention, keep, share_prefix=self.hparams.share_prefix)
        return token_logprobs(logits, ids[:, window], temperature=self.hparams.temperature)

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
        self._eval_results.extend(self._held_out([t for t, _ in items], samples.pop(), seed=10_000 + batch_idx))

    def _held_out(self, task_ids: list[str], samples: int, seed: int) -> list[dict]:
        """:meth:`evaluate`, saying what it does meanwhile: one batched rollout shows as a single progress step
        for minutes, so a line before it and one per task after it."""
        rank_zero_info(f"held-out evaluation: {len(task_ids)} task(s) x {samples} sample(s), generated in one batch, "
                       f"then executed for real (step {self.trained_steps})")
        start = time.perf_counter()
        results = self.evaluate(task_ids, samples, seed)
        for r in results:
            shown = " ".join("-" if s["position"] is None else f"{s['position']:.2f}" for s in r["samples"])
            rank_zero_info(f"  {r['task_id']}: {round(r['valid_rate'] * samples)}/{samples} valid, positions {shown}")
        rank_zero_info(f"  ({time.perf_counter() - start:.0f} s)")
        return results

    def on_validation_epoch_start(self) -> None:
        self._eval_results = []

    def on_validation_epoch_end(self) -> None:
        self._log_eval("heldout")

    def test_step(self, items: list[tuple[str, int]], batch_idx: int) -> None:
        self.validation_step(items, batch_idx)

    def on_test_epoch_start(self) -> None:
        self._eval_results = []

    def on_test_epoch_end(self) -> None:
        self._log_eval("test")

    def on_train_start(self) -> None:
        datamodule = getattr(self.trainer, "datamodule", None)
        if not self.hparams.eval_at_start or self.global_step > 0 or datamodule is None:
            return
        self._eval_results = self._held_out(datamodule.eval_task_ids, datamodule.eval_samples, seed=10_000)
        summary = self._summarise(self._eval_results)
        self._write_eval("heldout", self._eval_results)
        for logger in self.loggers:
            logger.log_metrics({f"heldout/{k}": v for k, v in summary.items()}, step=0)

    def on_fit_end(self) -> None:
        if not self.trainer.is_global_zero:
            return
        if self.train_history:
            print(training_report(self.train_history))
        if self.eval_history:
            print(held_out_report(self.eval_history, self._eval_samples))

    def teardown(self, stage: str) -> None:
        self.engine.close()  # vLLM: its engine processes exit with the fit (or validate/test) that started them

    def _summarise(self, results: list[dict]) -> dict[str, float]:
        summary = mean_summary(results)
        step = self.trained_steps
        self.eval_history.append(("start" if step == 0 else f"step {step}", summary))
        self._eval_samples.append({r["task_id"]: list(r["positions"]) for r in results})
        log.info("held-out at step %d: %s", step, summary)
        return summary

    def _log_eval(self, prefix: str) -> None:
        results = self._eval_results
        if not results or self.trainer.sanity_checking:
            return
        summary = self._summarise(results)
        self._write_eval(prefix, results)
        self.log_dict({f"{prefix}/{k}": v for k, v in summary.items()}, batch_size=len(results))
        for r in results:
            self.log(f"{prefix}_task/{r['task_id']}/score", r["score"], batch_size=1)

    def _write_eval(self, prefix: str, results: list[dict]) -> None:
        """Append the evaluation's per-sample positions to ``<run dir>/heldout.jsonl`` (one line per evaluation:
        the confidence intervals of ``benchmarks/speedup.py`` need samples, not means) and write each sample's
        script and outcome under ``<run dir>/samples/<split>_step<N>/<task>/`` (:func:`wmrl.evaluation.write_samples`).
        Only a logging run has a run dir, and only rank 0 writes."""
        if not self.trainer.loggers or not self.trainer.is_global_zero:
            return
        line = {"split": prefix, "step": self.trained_steps,
                "tasks": [{k: v for k, v in r.items() if k != "samples"} for r in results]}
        root = Path(self.trainer.default_root_dir)
        root.mkdir(parents=True, exist_ok=True)
        with (root / EVAL_FILE).open("a") as f:
            f.write(json.dumps(line) + "\n")
        folder = write_samples(root / SAMPLES_DIR / f"{prefix}_step{self.trained_steps}",
                               {r["task_id"]: r["samples"] for r in results if "samples" in r})
        rank_zero_info(f"held-out samples (scripts and outcomes): {folder}")

    # -- checkpoints -----------------------------------------------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict) -> None:
        trainable = {f"policy.{n}" for n, p in self.policy.named_parameters() if p.requires_grad}
        checkpoint["state_dict"] = {k: v for k, v in checkpoint["state_dict"].items() if k in trainable}


def training_report(history: list[dict[str, float]], window: int = 3) -> str:
    """The end-of-fit training curve: per step the real rollouts' mean reward and valid rate (executed and graded,
    never a world model's opinion), each with its moving average over ``window`` steps, the truncation rate and
    the KL to the reference (how far the policy has moved).

    >>> rows = [{"step": k, "real_reward": r, "real_valid_rate": v, "truncated_rate": 0.0, "kl": 1e-3}
    ...         for k, r, v in ((1, 0.2, 0.25), (2, 0.4, 0.5), (3, 0.6, 0.75))]
    >>> print(training_report(rows).splitlines()[-1])
             3   0.600  (0.400)   0.75  (0.50)       0.00  1.0e-03
    """
    def moving(key: str, k: int) -> float:
        values = [r[key] for r in history[max(0, k - window + 1) : k + 1] if not math.isnan(r[key])]
        return sum(values) / len(values) if values else math.nan

    lines = [f"training (real execution; moving average over {window} steps in brackets):",
             "      step  reward  (avg)    valid  (avg)  truncated       KL"]
    for k, r in enumerate(history):
        lines.append(f"  {r['step']:>8}   {r['real_reward']:.3f}  ({moving('real_reward', k):.3f})   "
                     f"{r['real_valid_rate']:.2f}  ({moving('real_valid_rate', k):.2f})       "
                     f"{r['truncated_rate']:.2f}  {r['kl']:.1e}")
    return "\n".join(lines)


def held_out_report(history: list[tuple[str, dict]], samples: list[dict[str, list[float]]]) -> str:
    """The end-of-fit printout: each held-out evaluation's summary, then, when the run evaluated its starting
    policy, the last evaluation's paired gain over it with a 95% bootstrap interval and what that means (an
    unchanged score is said to be one, not printed as two equal numbers).

    >>> history = [("start", {"score": 0.4, "mean_position": 0.4, "valid_rate": 0.5, "best_of_k": 0.8}),
    ...            ("step 3", {"score": 0.4, "mean_position": 0.4, "valid_rate": 0.5, "best_of_k": 0.8})]
    >>> print(held_out_report(history, [{"a": [0.8, 0.0]}, {"a": [0.8, 0.0]}]).splitlines()[-1][:53])
      gain over the start: no change: every sample scored
    """
    from wmrl.algorithms.stats import describe_gain, paired_gain

    lines = ["held-out evaluation (real execution):"]
    lines += [f"  {when:>10}: score {s['score']:.3f}  mean position {s['mean_position']:.3f}  "
              f"valid rate {s['valid_rate']:.2f}  best-of-k {s['best_of_k']:.3f}" for when, s in history]
    if len(history) >= 2 and history[0][0] == "start" and len(samples) == len(history):
        before, after = samples[0], samples[-1]
        if sorted(before) == sorted(after) and all(len(before[t]) == len(after[t]) for t in before):
            gain, low, high = paired_gain(before, after)
            unchanged = all(before[t] == after[t] for t in before)
            n = sum(len(v) for v in before.values())
            lines.append(f"  gain over the start: {describe_gain(gain, low, high, unchanged)} "
                         f"(paired bootstrap over {n} samples of {len(before)} tasks, same seeds)")
            if history[0][1]["valid_rate"] == 0 and history[-1][1]["valid_rate"] == 0:
                lines.append(NO_VALID_ADVICE)
    return "\n".join(lines)


#: what the end-of-fit report says when no held-out sample was valid before or after (a learning rate is not it)
NO_VALID_ADVICE = (
    "  no held-out sample wrote a valid submission, before or after: the policy has no foothold on these tasks, and "
    "a higher learning rate or more steps will not give it one. What helps: read its samples (<run dir>/samples/); "
    "check the prompt and the starter a task shows (`wmrl tasks show ID`) and that the starter runs "
    "(`wmrl tasks check ID`); keep model.init_args.prefill: starter_head; raise max_new_tokens when most turns end "
    "truncated; compare policies with `wmrl evaluate`."
)


def collate(states: list[RolloutState], pad_token_id: int) -> RolloutBatch:
    """Right-pad finished rollouts into a :class:`RolloutBatch`."""
    n = len(states)
    length = max(len(s.token_ids) for s in states)
    input_ids = torch.full((n, length), pad_token_id, dtype=torch.long)
    attention = torch.zeros((n, length), dtype=torch.bool)
    response = torch.zeros((n, length), dtype=torch.bool)
    old = torch.zeros((n, length), dtype=torch.float32)
    for i, s in enumerate(states):
        k = len(s.token_ids)
        input_ids[i, :k] = torch.tensor(s.token_ids)
        attention[i, :k] = True
        response[i, :k] = torch.tensor(s.response_mask)
        old[i, :k] = torch.tensor(s.logprobs)
    trajectories = tuple(s.trajectory() for s in states)
    rewards = torch.tensor([math.nan if t.reward is None else t.reward for t in trajectories], dtype=torch.float32)
    is_real = torch.tensor([t.source is Source.REAL for t in trajectories], dtype=torch.bool)
    # world-model rows whose every turn was decided by the deterministic gate hold exact rewards, not predictions
    predicted = torch.tensor([any("gate" not in turn.outcome.flags for turn in t.turns) for t in trajectories],
                             dtype=torch.bool)
    return RolloutBatch(
        trajectories=trajectories,
        group_ids=torch.tensor([s.group for s in states], dtype=torch.long),
        input_ids=input_ids,
        attention_mask=attention,
        response_mask=response,
        old_logprobs=old,
        rewards=rewards,
        graded=~torch.isnan(rewards),
        is_real=is_real,
        advantages=torch.zeros(n, dtype=torch.float32),
        used=torch.zeros(n, dtype=torch.bool),
        wm_rewards=torch.where(is_real | predicted.logical_not(), torch.full_like(rewards, math.nan), rewards),
        wm_calibrated=torch.full_like(rewards, math.nan),
    )


def _engine_name(engine: EngineFactory | None) -> str:
    """The engine's class as a dotted path, for the hyperparameters (``None``: the transformers engine)."""
    if engine is None:
        return "wmrl.generation.hf.HFGenerationEngine"
    target: Any = engine
    while isinstance(target, functools.partial):  # a class_path factory: a partial that holds the class
        classes = [a for a in target.args if isinstance(a, type)]
        target = classes[-1] if classes else target.func
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', type(target).__name__)}"


def _validate(args: dict) -> None:
    """Report every bad constructor value at once, naming the config key."""
    key = "model.init_args."
    checks = [
        (args["group_size"] >= 2, f"{key}group_size must be >= 2 for group-relative advantages "
                                  f"(got {args['group_size']}); it is linked from data.group_size: set that"),
        (args["max_turns"] >= 1, f"{key}max_turns must be >= 1 (got {args['max_turns']})"),
        (args["max_new_tokens"] >= 1, f"{key}max_new_tokens must be >= 1 (got {args['max_new_tokens']})"),
        (args["clip_eps"] > 0, f"{key}clip_eps must be > 0, e.g. 0.2 (got {args['clip_eps']})"),
        (args["kl_coef"] >= 0, f"{key}kl_coef must be >= 0 (got {args['kl_coef']})"),
        (args["entropy_coef"] >= 0, f"{key}entropy_coef must be >= 0 (got {args['entropy_coef']})"),
        (args["lr"] > 0, f"{key}lr must be > 0 (got {args['lr']})"),
        (args["temperature"] > 0, f"{key}temperature must be > 0 for training rollouts (got {args['temperature']})"),
        (args["eval_temperature"] >= 0, f"{key}eval_temperature must be >= 0 (got {args['eval_temperature']})"),
        (0 < args["top_p"] <= 1, f"{key}top_p must be in (0, 1] (got {args['top_p']})"),
        (args["micro_batch_size"] >= 1, f"{key}micro_batch_size must be >= 1 (got {args['micro_batch_size']})"),
        (args["loss_aggregation"] in ("token_mean", "seq_mean_token_mean", "dr_grpo"),
         f"{key}loss_aggregation must be token_mean, seq_mean_token_mean or dr_grpo (got {args['loss_aggregation']!r})"),
    ]
    problems = [message for ok, message in checks if not ok]
    if problems:
        raise ValueError("invalid GRPOModule configuration:\n  - " + "\n  - ".join(problems))
