"""vLLM's CPU build with a LoRA adapter: its own LoRA ops against wmrl's per-slot ops (``wmrl.generation.vllm_cpu_lora``).

    .venv-vllm/bin/python benchmarks/vllm_cpu_lora.py               # 2 runs per arm, alternating
    .venv-vllm/bin/python benchmarks/vllm_cpu_lora.py --runs 1

Each run is a fresh process (``VLLM_PLUGINS=`` for vLLM's ops, the default for wmrl's): SmolLM2-135M with the
quickstart's LoRA adapter (r 16) moved off zero as a trained one is, the quickstart's CPU engine settings
(``configs/autoresearch/vllm_cpu.yaml``), and one timed generation after a warm-up: two GRPO groups of the quickstart
(``penguin_species`` and ``hmda_mortgage_denial``, the starter's head prefilled: ~1,400 and ~1,600 prompt tokens) x 4
rows, 64 new tokens at temperature 0.7, seeded. Recorded per run: the generation's wall-clock, the load average, the
tokens and the largest difference between the engine's log-probs and the training model's recomputation (the GRPO
ratio's arithmetic, as ``tests/vllm_real/test_vllm_engine.py`` checks it). Writes
``benchmarks/results/vllm-cpu-lora.json`` (or ``--results``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from wmrl.benchmarking import machine

ROOT = Path(__file__).resolve().parents[1]
ARMS = {"vllm_ops": {"VLLM_PLUGINS": ""}, "wmrl_ops": {}}
TASKS = ("penguin_species", "hmda_mortgage_denial")
ROWS, NEW_TOKENS, TEMPERATURE, SEED = 4, 64, 0.7, 0


def one_run() -> dict:
    """The timed generation in this process (the arm is the environment it was started with)."""
    import time

    import torch
    import yaml

    from wmrl.algorithms.grpo import token_logprobs
    from wmrl.autoresearch.agent import AgentLoop, AgentSettings
    from wmrl.autoresearch.tasks.suite import TaskSuite
    from wmrl.generation.engine import SamplingParams
    from wmrl.generation.vllm import VLLMGenerationEngine, VLLMSettings, release_engines
    from wmrl.models import LoraSettings, load_policy, resolve_model
    from wmrl.models.kv import causal_lm_logits

    policy, tokenizer = load_policy(str(resolve_model("smollm2-135m-instruct")), LoraSettings(r=16, alpha=32))
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, parameter in policy.named_parameters():
            if "lora_B" in name:  # zero at init: moved as training moves it, so the adapter changes the output
                parameter.add_(0.01 * torch.randn(parameter.shape, generator=generator))
    overlay = yaml.safe_load((ROOT / "configs/autoresearch/vllm_cpu.yaml").read_text())
    engine = VLLMGenerationEngine(policy, tokenizer,
                                  VLLMSettings(**overlay["model"]["init_args"]["engine"]["init_args"]["settings"]))
    suite = TaskSuite()
    agent = AgentLoop(tokenizer, engine=None, settings=AgentSettings(prefill="starter_head"))

    def prompt(task_id: str) -> list[int]:
        task = suite.get(task_id)
        return agent.start(task_id, 0, task.description, environment=None,
                           starter=task.starter_solution("linear_baseline")).token_ids

    engine.generate([prompt("smoke_iris")], SamplingParams(max_new_tokens=1))  # engine start, adapter synced
    prompts = [prompt(task_id) for task_id in TASKS]
    params = SamplingParams(max_new_tokens=NEW_TOKENS, temperature=TEMPERATURE, seed=SEED, stop_after_code_block=False)
    start = time.perf_counter()
    generations = engine.generate([p for p in prompts for _ in range(ROWS)], params)
    wall = time.perf_counter() - start
    differences = []
    for row, generation in enumerate(generations):
        tokens = torch.tensor([[*prompts[row // ROWS], *generation.token_ids]])
        with torch.no_grad():
            logits = causal_lm_logits(policy, tokens, torch.ones_like(tokens), len(generation.token_ids) + 1)
        recomputed = token_logprobs(logits, tokens[:, -len(generation.token_ids) - 1 :], temperature=TEMPERATURE)
        differences.append(float((recomputed[0, 1:] - torch.tensor(generation.logprobs)).abs().max()))
    release_engines()
    return {"generate_s": wall, "load": os.getloadavg()[0], "prompt_tokens": [len(p) for p in prompts],
            "tokens": [list(g.token_ids) for g in generations], "max_logprob_difference": max(differences)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2, help="runs per arm (alternating)")
    parser.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results" / "vllm-cpu-lora.json")
    parser.add_argument("--one-run", action="store_true", help=argparse.SUPPRESS)  # a child process's own run
    args = parser.parse_args(argv)
    if args.one_run:
        print("RESULT " + json.dumps(one_run()), flush=True)
        return
    order = [arm for i in range(args.runs) for arm in (("vllm_ops", "wmrl_ops") if i % 2 == 0 else ("wmrl_ops", "vllm_ops"))]
    runs = []
    for arm in order:
        env = {**os.environ, **ARMS[arm]}
        done = subprocess.run([sys.executable, __file__, "--one-run"], env=env, capture_output=True, text=True)
        results = [line[len("RESULT "):] for line in done.stdout.splitlines() if line.startswith("RESULT ")]
        if done.returncode != 0 or not results:
            raise RuntimeError(f"{arm} run failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
        runs.append({"arm": arm, **json.loads(results[0])})
        print(f"[vllm_cpu_lora] {arm}: generate {runs[-1]['generate_s']:.1f} s, load {runs[-1]['load']:.1f}, "
              f"max log-prob difference {runs[-1]['max_logprob_difference']:.1e}", flush=True)
    result = {"machine": machine(), "rows": ROWS * len(TASKS), "new_tokens": NEW_TOKENS, **summary(runs)}
    args.results.write_text(json.dumps(result, indent=1) + "\n")
    mean = result["mean_generate_s"]
    print(f"vLLM's LoRA ops {mean['vllm_ops']:.1f} s, wmrl's {mean['wmrl_ops']:.1f} s a generation "
          f"({result['speedup']:.1f}x); rows whose tokens differ from the first run's: {result['differs_from_first']}")


def differences(first: list[list[int]], other: list[list[int]]) -> list[list[int]]:
    """``[row, token index]`` of each row of ``other`` whose tokens differ from ``first``'s, at the first difference."""
    found = []
    for row, (a, b) in enumerate(zip(first, other, strict=True)):
        if a != b:
            found.append([row, next((k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))])
    return found


def summary(runs: list[dict]) -> dict:
    """Each arm's mean generation time, the speed-up, each run's rows that sampled other tokens than the first run
    (vLLM's own ops need not reproduce their tokens from one process to the next: summation order moves with the
    batch), and the largest log-prob difference from the training model's recomputation per arm."""
    mean = {arm: float(np.mean([r["generate_s"] for r in runs if r["arm"] == arm])) for arm in ARMS}
    return {"runs": runs, "mean_generate_s": mean, "speedup": mean["vllm_ops"] / mean["wmrl_ops"],
            "differs_from_first": [differences(runs[0]["tokens"], r["tokens"]) for r in runs],
            "max_logprob_difference": {arm: max(r["max_logprob_difference"] for r in runs if r["arm"] == arm)
                                       for arm in ARMS}}


if __name__ == "__main__":
    main()
