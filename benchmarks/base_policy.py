"""How well does the starting policy do? Code-block rate, valid-submission rate and reward per task.

Samples ``--samples`` one-turn rollouts per task from the policy, executes every script for real (process
sandbox) and prints a per-task table. ``--out`` keeps every rollout (task, response, code, real outcome) as
JSONL: the real executions the world-model fidelity study (``benchmarks/world_model_fidelity.py``) reads.

    python benchmarks/base_policy.py --split smoke --samples 8 --prefill starter_head
    python benchmarks/base_policy.py --split train --samples 16 --out runs/bench/base_train.jsonl
    python benchmarks/base_policy.py --tasks wine_cultivar cars_mpg --samples 8 --temperature 0.7 --starter-view score

With ``--starter-view score`` (the policy writes only the model line, :mod:`wmrl.autoresearch.tasks.model_choice`) it also prints
how many distinct positions the valid samples reached and their best and worst: the spread GRPO can learn from.
``--first-lines`` executes nothing: it samples each turn's first ``--max-new-tokens`` tokens and counts the
first lines written (after the ``starter_estimator`` prefill, the estimator the policy chooses):

    python benchmarks/base_policy.py --tasks wine_cultivar cars_mpg --samples 16 --starter-view score \
        --prefill starter_estimator --max-new-tokens 24 --first-lines
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from wmrl.autoresearch.agent import AgentLoop, AgentSettings
from wmrl.autoresearch.environments.real import SandboxEnvironment
from wmrl.generation.hf import HFGenerationEngine
from wmrl.models import load_policy
from wmrl.types import Status


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--split", default="smoke")
    parser.add_argument("--tasks", nargs="*", help="task ids (override --split)")
    parser.add_argument("--samples", type=int, default=8, help="rollouts per task")
    parser.add_argument("--prefill", default="starter_head", choices=["none", "fence", "starter_head", "starter_estimator"])
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="JSONL of every rollout and its real outcome")
    parser.add_argument("--starter", default="linear_baseline",
                        help="reference solution shown as the starter (gradient_boosting_bagged: the heavy tier)")
    parser.add_argument("--starter-view", default="script", choices=["script", "score"],
                        help="how the prompt shows the starter (SandboxEnvironment's starter_view)")
    parser.add_argument("--first-lines", action="store_true",
                        help="execute nothing: count the first line of each sampled turn per task")
    args = parser.parse_args(argv)

    torch.manual_seed(args.seed)
    env = SandboxEnvironment(starter_solution=args.starter, starter_view=args.starter_view)
    tasks = args.tasks or [s.id for s in env.suite.specs(args.split)]
    policy, tokenizer = load_policy(args.model)
    engine = HFGenerationEngine(policy, tokenizer, max_batch_size=args.batch_size)
    agent = AgentLoop(tokenizer, engine, AgentSettings(1, args.max_new_tokens, 1024, args.temperature,
                                                       args.top_p, prefill=args.prefill))
    if args.first_lines:
        first_lines(agent, env, tasks, args)
        return
    out = args.out.open("a") if args.out else None
    rows = []
    started = time.perf_counter()
    for n, task_id in enumerate(tasks):
        states = [agent.start(task_id, 0, env.prompt(task_id), env, env.starter(task_id))
                  for _ in range(args.samples)]
        timings = agent.run(states, seed=args.seed * 10_000 + n)
        turns = [s.turns[0] for s in states]
        rewards = [t.outcome.reward for t in turns if t.outcome.reward is not None]
        positions = [t.outcome.position for t in turns if t.outcome.status is Status.VALID]
        statuses = [t.outcome.status for t in turns]
        rows.append({
            "task": task_id,
            "code_block": sum(t.code is not None for t in turns) / len(turns),
            "valid": sum(s is Status.VALID for s in statuses) / len(turns),
            "truncated": sum(t.finish_reason == "length" for t in turns) / len(turns),
            "reward": statistics.fmean(rewards) if rewards else float("nan"),
            "tokens": statistics.fmean(t.response_tokens for t in turns),
            "generate_s": timings["generate"],
            "env_s": timings["env"],
            "statuses": {s.value: statuses.count(s) for s in set(statuses)},
            "distinct_positions": len(set(positions)),
            "positions": [min(positions, default=None), max(positions, default=None)],
        })
        print(json.dumps(rows[-1]), flush=True)
        if out:
            for t in turns:
                out.write(json.dumps({"task": task_id, "prefill": args.prefill, "response": t.response,
                                      "code": t.code, "outcome": t.outcome.to_dict()}) + "\n")
            out.flush()
    total = len(rows)
    print(f"\n{args.model}, prefill={args.prefill}, {args.samples} samples/task, {args.max_new_tokens} new tokens, "
          f"T={args.temperature}, top_p={args.top_p}, {time.perf_counter() - started:.0f} s")
    print(f"{'task':28} {'code':>5} {'valid':>5} {'trunc':>5} {'reward':>6} {'tokens':>6}")
    for r in rows:
        print(f"{r['task']:28} {r['code_block']:5.2f} {r['valid']:5.2f} {r['truncated']:5.2f} {r['reward']:6.3f} "
              f"{r['tokens']:6.0f}")
    print(f"{'mean':28} {sum(r['code_block'] for r in rows) / total:5.2f} {sum(r['valid'] for r in rows) / total:5.2f} "
          f"{sum(r['truncated'] for r in rows) / total:5.2f}")


def first_lines(agent: AgentLoop, env: SandboxEnvironment, tasks: list[str], args: argparse.Namespace) -> None:
    """Per task, the first lines of ``--samples`` sampled turns and how often each was written (nothing runs)."""
    from collections import Counter

    from wmrl.types import SamplingParams

    for n, task_id in enumerate(tasks):
        states = [agent.start(task_id, 0, env.prompt(task_id), env, env.starter(task_id)) for _ in range(args.samples)]
        params = SamplingParams(args.max_new_tokens, args.temperature, args.top_p, seed=args.seed * 10_000 + n,
                                code_block_open=args.prefill != "none")
        lines = Counter(g.text.partition("\n")[0] for g in agent.engine.generate([s.token_ids for s in states], params))
        print(json.dumps({"task": task_id, "prefill_ends": states[0].prefill[-40:], "first_lines": lines.most_common()}),
              flush=True)


if __name__ == "__main__":
    main()
