"""Where a real-execution GRPO step's time goes, and the same step with TRL's GRPOTrainer side by side.

Both sides use the same policy (SmolLM2-135M-Instruct with the same LoRA adapter), the same prompts (the task
prompt rendered with the chat template, the turn prefilled with the starter's head as wmrl's quickstart does),
the same batch (``--groups`` tasks x ``--group-size`` completions of up to ``--max-new-tokens`` tokens at the same
temperature), the same KL coefficient and learning rate, and a reward function that executes every completion in
the same process sandbox and grades it with the same grader (TRL gets ``None`` for a missing reward, as wmrl).
Execution caching is off on both sides, so every step pays for real executions.

    pip install -c constraints.txt -e '.[bench]'
    python benchmarks/step_time.py --steps 2            # wmrl then TRL, 2 steps each; the last step is reported

Reported per side: seconds per step and its split (wmrl: generate / env / update; TRL: generate and score / env /
update). The ratio wmrl / TRL is the goal (<= 0.20). Both sides generate the step's rollouts in one pass and run the
loss ``--micro-batch-size`` rows a pass with gradient accumulation, in the precision wmrl's ``update_precision: auto``
chose (TRL's ``bf16`` follows it). Differences that remain: wmrl runs each prompt once per micro-batch (shared
prefix) and reads it once per decoded token; TRL executes rewards in the main process after generation (wmrl too,
concurrently bounded by the sandbox).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from wmrl.autoresearch.agent import SYSTEM_PROMPT, extract_code, response_prefill
from wmrl.autoresearch.datamodule import tasks_for_step
from wmrl.autoresearch.environments.real import SandboxEnvironment
from wmrl.autoresearch.tasks.suite import TaskSuite


def wmrl_steps(args, tasks_per_step: list[list[str]]) -> list[dict]:
    import lightning.pytorch as pl

    from wmrl.autoresearch.module import GRPOModule

    class Timer(pl.Callback):
        def __init__(self) -> None:
            self.steps: list[dict] = []
            self.start = 0.0

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            self.start = time.perf_counter()

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            metrics = {k: float(v) for k, v in trainer.callback_metrics.items()
                       if k.startswith(("time/", "reward", "update/"))}
            self.steps.append({"seconds": time.perf_counter() - self.start, **metrics})

    class Steps(torch.utils.data.IterableDataset):
        def __iter__(self):
            yield from tasks_per_step

    env = SandboxEnvironment(use_cache=False)
    module = GRPOModule(
        environment=env, group_size=args.group_size, max_new_tokens=args.max_new_tokens,
        temperature=args.temperature, lr=args.lr, kl_coef=args.kl_coef, entropy_coef=0.0,
        micro_batch_size=args.micro_batch_size, generation_batch_size=args.group_size * args.groups,
        prefill="starter_head", update_precision=args.update_precision,
    )
    timer = Timer()
    trainer = pl.Trainer(max_steps=len(tasks_per_step), accelerator="cpu", logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, callbacks=[timer])
    trainer.fit(module, torch.utils.data.DataLoader(Steps(), batch_size=None))
    return timer.steps


def trl_steps(args, tasks_per_step: list[list[str]], bf16: bool = False) -> list[dict]:
    """TRL's steps; ``bf16``: its update under bfloat16 autocast (TRL's ``bf16``), as wmrl's probe chose for its own.
    Per step: seconds, the reward function's (``time/env``) and generation with rewards (``time/generate_and_score``,
    TRL's ``_generate_and_score_completions``); the rest of the step is the update."""
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from wmrl.models import LoraSettings, load_policy

    env = SandboxEnvironment(use_cache=False)
    model, tokenizer = load_policy("smollm2-135m-instruct")
    lora = LoraSettings()
    rows = []
    for tasks in tasks_per_step:  # TRL repeats each prompt num_generations times, in dataset order
        for task_id in tasks:
            messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": env.prompt(task_id)}]
            text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            prefill = response_prefill("starter_head", env.starter(task_id))
            rows.append({"prompt": text + prefill, "task_id": task_id, "prefill": prefill})
    executed: list[float] = []

    def sandbox_reward(prompts, completions, task_id, prefill, **kwargs):
        start = time.perf_counter()
        jobs = [(t, extract_code(p + c)) for t, p, c in zip(task_id, prefill, completions, strict=True)]
        outcomes = env.execute_many(jobs)
        executed.append(time.perf_counter() - start)
        return [o.reward for o in outcomes]  # None (missing) for infrastructure failures

    class Timer(TrainerCallback):
        def __init__(self) -> None:
            self.steps: list[dict] = []

        def on_step_begin(self, targs, state, control, **kw):
            self.start = time.perf_counter()
            executed.clear()
            generated.clear()

        def on_step_end(self, targs, state, control, **kw):
            seconds = time.perf_counter() - self.start
            self.steps.append({"seconds": seconds, "time/env": sum(executed),
                               "time/generate_and_score": sum(generated),
                               "time/update": seconds - sum(generated)})

    generated: list[float] = []

    config = GRPOConfig(
        # wmrl's micro-batches: TRL generates the whole batch at once (per-device batch x accumulation steps) and runs
        # its loss micro_batch_size rows a pass (the whole batch in one pass holds [rows, tokens, vocabulary] logits
        # several times over: 8 rows of ~1,500 tokens were killed for memory at 24 GiB)
        output_dir=str(Path(args.out).parent / "trl"), per_device_train_batch_size=args.micro_batch_size,
        gradient_accumulation_steps=args.groups * args.group_size // args.micro_batch_size,
        num_generations=args.group_size, max_completion_length=args.max_new_tokens, temperature=args.temperature,
        learning_rate=args.lr, beta=args.kl_coef, loss_type="dapo", max_steps=len(tasks_per_step),
        use_cpu=True, report_to="none", logging_steps=1, save_strategy="no", shuffle_dataset=False,
        activation_checkpointing=False, bf16=bf16, seed=args.seed,  # wmrl keeps activations too
    )
    timer = Timer()
    trainer = GRPOTrainer(
        model=model, reward_funcs=sandbox_reward, args=config, train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer, callbacks=[timer],
        peft_config=LoraConfig(task_type="CAUSAL_LM", r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                               target_modules=list(lora.target_modules)),
    )
    generate_and_score = trainer._generate_and_score_completions

    def timed(*a, **kw):
        start = time.perf_counter()
        try:
            return generate_and_score(*a, **kw)
        finally:
            generated.append(time.perf_counter() - start)

    trainer._generate_and_score_completions = timed
    trainer.train()
    return timer.steps


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--groups", type=int, default=2)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--micro-batch-size", type=int, default=4)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--lr", type=float, default=2e-5)
    parser.add_argument("--kl-coef", type=float, default=0.04)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sides", nargs="+", default=["wmrl", "trl"], choices=["wmrl", "trl"])
    parser.add_argument("--update-precision", default="auto", choices=["auto", "float32", "bfloat16"],
                        help="wmrl's update precision (the quickstart's: auto); TRL's bf16 follows wmrl's choice")
    parser.add_argument("--out", default="runs/bench/step_time.json")
    args = parser.parse_args(argv)

    train = [s.id for s in TaskSuite().specs("train")]
    tasks_per_step = [tasks_for_step(train, args.groups, args.seed, step) for step in range(args.steps)]
    results = {"args": vars(args), "tasks": tasks_per_step}
    for side in args.sides:
        torch.manual_seed(args.seed)
        start = time.perf_counter()
        if side == "wmrl":
            results[side] = wmrl_steps(args, tasks_per_step)
        else:
            chosen = results["wmrl"][-1].get("update/bfloat16") if "wmrl" in results else None
            bf16 = bool(chosen) if chosen is not None else args.update_precision == "bfloat16"
            results["trl_bf16"] = bf16
            results[side] = trl_steps(args, tasks_per_step, bf16=bf16)
        results[f"{side}_total_seconds"] = time.perf_counter() - start
        print(side, json.dumps(results[side], indent=1), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=1))
    print(f"\n{args.groups} groups x {args.group_size} completions, {args.max_new_tokens} new tokens, "
          f"T={args.temperature}, KL {args.kl_coef}; per step (last step; mean over steps in brackets)")
    for side in args.sides:
        steps = results[side]
        line = f"  {side:5} {steps[-1]['seconds']:7.1f} s  [{statistics.fmean(s['seconds'] for s in steps):.1f}]"
        if side == "wmrl":
            line += "  generate {time/generate:.1f}  env {time/env:.1f}  update {time/update:.1f}".format(**steps[-1])
        else:
            line += ("  generate+score {time/generate_and_score:.1f}  env (reward) {time/env:.1f}  "
                     "update {time/update:.1f}").format(**steps[-1])
        print(line)
    if {"wmrl", "trl"} <= set(args.sides):
        print(f"  ratio wmrl / TRL: {results['wmrl'][-1]['seconds'] / results['trl'][-1]['seconds']:.2f} (goal <= 0.20)")


if __name__ == "__main__":
    main()
