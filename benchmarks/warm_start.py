"""A warm start for the ``cpu-quality`` preset: supervised fine-tuning on the menu's model lines, train split only.

The ``score`` view leaves one line to write (``model = make_pipeline(preprocess, <estimator>)``, then
``finish(model)``) and SmolLM2-135M cannot write it: 0 valid in 30 samples, and after the ``starter_estimator``
prefill 23 of 32 first lines name the starter's own estimator (RESULTS-quality.md). The VLA path starts RL from a
supervised policy; this is the AutoResearch counterpart, kept as small as the gap it closes:

* **what it teaches**: the *form* of the turn, never which estimator wins. For every training task
  (the quickstart's 13, never a held-out one) the demonstrations are the task's ``score`` prompt with the
  ``starter_estimator`` prefill, completed by **every** runnable model line the prompt offers, once each, and
  ``finish(model)`` with the closing fence. The same prompt is completed by each line equally often, so the loss
  is lowest when the policy spreads its choice evenly over the menu: no line is preferred, whatever it scores.
  Nothing is executed, and no score is read.
* **how**: a LoRA adapter (r 16, as the quickstart's) trained with the loss on the completion's tokens only,
  then merged into the weights and saved as a transformers checkpoint directory, which ``--model`` of
  ``speedup.py``, ``base_policy.py`` and ``pretrain_world_model.py`` accept (a fresh adapter is trained on top).

    python benchmarks/warm_start.py --out runs/warm-start            # ~10 min on 2 cores
    python benchmarks/base_policy.py --model runs/warm-start --tasks wine_cultivar cars_mpg --samples 8 \\
        --starter-view score --prefill starter_estimator --temperature 0.7 --max-new-tokens 48

``<out>/warm_start.json`` records the demonstrations, the settings, the loss per epoch and what the run cost.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from pretrain_world_model import check_train_split, cpu_seconds, train_tasks  # noqa: E402

from wmrl.autoresearch.agent import AgentLoop, AgentSettings  # noqa: E402
from wmrl.autoresearch.environments.real import SandboxEnvironment  # noqa: E402
from wmrl.autoresearch.tasks.model_choice import candidate_lines  # noqa: E402
from wmrl.autoresearch.tasks.suite import TaskSuite  # noqa: E402
from wmrl.models import LoraSettings, load_policy  # noqa: E402


@dataclass(frozen=True)
class Demonstration:
    """One training example: a task's prompt (prefill included) and one menu line's completion, as token ids."""

    task_id: str
    line: str
    prompt_ids: list[int]
    completion_ids: list[int]


def completion(line: str) -> str:
    """What the policy writes after the ``starter_estimator`` prefill for one of the menu's ``line``\\ s.

    >>> completion("model = make_pipeline(preprocess, Ridge())")
    ' Ridge())\\nfinish(model)\\n```'
    """
    _, sep, rest = line.partition("make_pipeline(preprocess,")
    if not sep:
        raise ValueError(f"not a menu line: {line!r}")
    return f"{rest}\nfinish(model)\n```"


def demonstrations(env: SandboxEnvironment, tokenizer, tasks: list[str]) -> list[Demonstration]:
    """Every menu line of every task in ``tasks``, each completing that task's ``score`` prompt once."""
    agent = AgentLoop(tokenizer, engine=None, settings=AgentSettings(prefill="starter_estimator"))
    found = []
    for task_id in tasks:
        starter = env.starter(task_id)
        prompt_ids = agent.start(task_id, 0, env.prompt(task_id), env, starter).token_ids
        for line in candidate_lines(starter):
            ids = tokenizer(completion(line), add_special_tokens=False)["input_ids"]
            found.append(Demonstration(task_id, line, list(prompt_ids), list(ids)))
    return found


def task_loss(model, examples: list[Demonstration], pad_id: int) -> torch.Tensor:
    """Mean next-token cross-entropy over the completions' tokens of one task's demonstrations (the prompt and
    prefill carry no loss). They share their prompt, so it runs once (:func:`wmrl.models.kv.causal_lm_logits`,
    exact gradients through it) and each completion attends to its KV cache."""
    from wmrl.models.kv import causal_lm_logits

    width = max(len(e.completion_ids) for e in examples)
    ids = torch.full((len(examples), len(examples[0].prompt_ids) + width), pad_id)
    mask = torch.zeros_like(ids)
    labels = torch.full((len(examples), width), -100)
    for row, e in enumerate(examples):
        n = len(e.prompt_ids) + len(e.completion_ids)
        ids[row, :n] = torch.tensor(e.prompt_ids + e.completion_ids)
        mask[row, :n] = 1
        labels[row, : len(e.completion_ids)] = torch.tensor(e.completion_ids)
    # the logits of the last prompt token and of every completion token but the last predict the completion
    logits = causal_lm_logits(model, ids, mask, logits_to_keep=width + 1)[:, :-1]
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)


def train(model, examples: list[Demonstration], epochs: int, lr: float, pad_id: int, seed: int) -> list[float]:
    """AdamW on the adapter's parameters, one step per task (all its menu lines); the mean loss of each epoch."""
    from tqdm.auto import tqdm

    by_task: dict[str, list[Demonstration]] = {}
    for e in examples:
        by_task.setdefault(e.task_id, []).append(e)
        if e.prompt_ids != by_task[e.task_id][0].prompt_ids:
            raise ValueError(f"task {e.task_id}: its demonstrations must share one prompt")
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    order = sorted(by_task)
    rng = random.Random(seed)
    losses = []
    for epoch in range(epochs):
        rng.shuffle(order)
        total = 0.0
        bar = tqdm(order, desc=f"epoch {epoch + 1}/{epochs}", unit="task", file=sys.stdout)
        for n, task_id in enumerate(bar, start=1):
            loss = task_loss(model, by_task[task_id], pad_id)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            total += loss.item()
            bar.set_postfix(loss=f"{total / n:.3f}")
        losses.append(total / len(order))
    return losses


def save_merged(model, tokenizer, out: Path) -> None:
    """The adapter merged into the weights, written as a transformers checkpoint directory (with the tokenizer)."""
    out.mkdir(parents=True, exist_ok=True)
    model.merge_and_unload().save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m-instruct", help="the policy to start from")
    parser.add_argument("--tasks", nargs="*", help="training tasks (default: the quickstart's 13)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=3e-4, help="AdamW on the adapter, one step per task and epoch")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True, help="the checkpoint directory to write")
    args = parser.parse_args(argv)

    torch.manual_seed(args.seed)
    wall0, cpu0 = time.perf_counter(), cpu_seconds()
    suite = TaskSuite()
    tasks = args.tasks or train_tasks()
    check_train_split([(task, "", None) for task in tasks], suite, "warm_start: --tasks names",
                      "A policy fine-tuned on held-out tasks would have seen their prompts before the evaluation; "
                      "pass --tasks from the train split")
    env = SandboxEnvironment(suite, starter_view="score")
    model, tokenizer = load_policy(args.model, LoraSettings(r=16, alpha=32))
    examples = demonstrations(env, tokenizer, tasks)  # measures each starter's validation score once (the prompt)
    print(f"{len(examples)} demonstrations from {len(tasks)} training tasks "
          f"({min(len(e.prompt_ids) for e in examples)}-{max(len(e.prompt_ids) for e in examples)} prompt tokens)")
    losses = train(model, examples, args.epochs, args.lr, tokenizer.pad_token_id, args.seed)
    save_merged(model, tokenizer, args.out)
    manifest = {
        "what": "supervised warm start on every menu line of the score view, train split only (benchmarks/warm_start.py)",
        "model": args.model, "tasks": tasks, "demonstrations": len(examples),
        "lines_per_task": {t: sum(e.task_id == t for e in examples) for t in tasks},
        "epochs": args.epochs, "lr": args.lr, "lora": {"r": 16, "alpha": 32},
        "seed": args.seed, "loss_per_epoch": [round(v, 4) for v in losses],
        "wall_s": round(time.perf_counter() - wall0, 1), "cpu_s": round(cpu_seconds() - cpu0, 1),
        "built": time.strftime("%Y-%m-%d"),
    }
    (args.out / "warm_start.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(json.dumps(manifest, indent=1))
    print(f"wrote {args.out}")
    return manifest


if __name__ == "__main__":
    main()
