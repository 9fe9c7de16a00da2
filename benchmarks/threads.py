"""Decode speed with wmrl's thread choice against torch's default, beside a busy neighbour.

torch's default gives a process one thread per core the machine has; on a CPU other work shares, OpenMP's threads
then wait for each other. ``wmrl fit`` chooses the threads this process may really use
(:func:`wmrl.threads.choose_threads`). This measures what that is worth where it matters: the default model
(SmolLM2-135M-Instruct) decodes 16 rows through the kit's transformers engine (:class:`HFGenerationEngine`, as the
README's first command does) while a neighbour process computes beside it (numpy matrix products on one thread:
real work, no sleeps). Each arm runs in a fresh process (torch's threads are set once, before its first op):

- ``default``: torch's own choice (``torch.get_num_threads()`` untouched);
- ``wmrl``: :func:`~wmrl.threads.apply_threads` with the neighbour running, as ``wmrl fit`` would choose.

Each arm decodes ``--rounds`` times ``--tokens`` tokens (EOS ignored: every row runs the full length) after one
warm-up round; decode steps/s = tokens / seconds. Arms alternate (default, wmrl, default, wmrl ...) so that a drift
in the machine's load falls on both.

    python benchmarks/threads.py [--repeats 2] [--neighbours 1]

Writes ``benchmarks/results/threads.json`` and prints one line per arm.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NEIGHBOUR = ("import numpy as np, time\n"
             "a = np.random.default_rng(0).standard_normal((512, 512))\n"
             "end = time.monotonic() + float(__import__('sys').argv[1])\n"
             "while time.monotonic() < end:\n    a = np.tanh(a @ a)\n")


def decode(arm: str, rounds: int, tokens: int, rows: int) -> dict:
    """In this process: load the default model, set the arm's threads, decode; returns the arm's figures."""
    import torch

    from wmrl.threads import apply_threads

    choice = apply_threads() if arm == "wmrl" else None
    from wmrl.generation.hf import HFGenerationEngine
    from wmrl.models.resolve import DEFAULT_MODEL, load_policy
    from wmrl.types import SamplingParams

    model, tokenizer = load_policy(DEFAULT_MODEL)
    engine = HFGenerationEngine(model, tokenizer, max_batch_size=rows, eos_token_ids=[-1])
    prompt = tokenizer("Write a Python script that trains a classifier on train.csv.")["input_ids"]
    params = SamplingParams(max_new_tokens=tokens, temperature=1.0, stop_after_code_block=False, seed=0)
    engine.generate([prompt] * rows, params)  # warm-up: allocations, kernels
    rates = []
    for _ in range(rounds):
        start = time.perf_counter()
        engine.generate([prompt] * rows, params)
        rates.append(tokens / (time.perf_counter() - start))
    return {"arm": arm, "threads": torch.get_num_threads(), "why": choice.why if choice else "torch's default",
            "steps_per_s": rates}


def run_arm(arm: str, args: argparse.Namespace) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("WMRL_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    out = subprocess.run([sys.executable, __file__, "--arm", arm, "--rounds", str(args.rounds), "--tokens",
                          str(args.tokens), "--rows", str(args.rows)], env=env, capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arm", choices=("default", "wmrl"), help=argparse.SUPPRESS)
    parser.add_argument("--repeats", type=int, default=2, help="times each arm runs (alternating)")
    parser.add_argument("--rounds", type=int, default=3, help="timed decodes per run")
    parser.add_argument("--tokens", type=int, default=32, help="tokens per decode")
    parser.add_argument("--rows", type=int, default=16, help="rows decoded together")
    parser.add_argument("--neighbours", type=int, default=1, help="busy neighbour processes (one thread each)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "threads.json")
    args = parser.parse_args(argv)
    if args.arm:
        print(json.dumps(decode(args.arm, args.rounds, args.tokens, args.rows)))
        return
    from wmrl.benchmarking import machine

    neighbour_env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    neighbours = [subprocess.Popen([sys.executable, "-c", NEIGHBOUR, "36000"], env=neighbour_env)
                  for _ in range(args.neighbours)]
    started = time.perf_counter()
    try:
        time.sleep(2.0)  # the neighbour is computing before the first arm starts
        runs = [run_arm(arm, args) for _ in range(args.repeats) for arm in ("default", "wmrl")]
    finally:
        for process in neighbours:
            process.kill()
            process.wait()  # reaped: no zombie left behind
    arms = {}
    for arm in ("default", "wmrl"):
        mine = [r for r in runs if r["arm"] == arm]
        rates = [rate for r in mine for rate in r["steps_per_s"]]
        arms[arm] = {"threads": mine[0]["threads"], "why": mine[0]["why"], "steps_per_s": rates,
                     "median_steps_per_s": statistics.median(rates)}
    record = {"date": datetime.date.today().isoformat(), "machine": machine(),
              "command": "python benchmarks/threads.py " + " ".join(argv if argv is not None else sys.argv[1:]),
              "neighbours": args.neighbours, "rows": args.rows, "tokens": args.tokens,
              "seconds": round(time.perf_counter() - started, 1), "arms": arms,
              "ratio_wmrl_to_default": arms["wmrl"]["median_steps_per_s"] / arms["default"]["median_steps_per_s"]}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1))
    for arm, figures in arms.items():
        print(f"{arm:8s} {figures['threads']} threads ({figures['why']}): "
              f"{figures['median_steps_per_s']:.2f} decode steps/s (median of {len(figures['steps_per_s'])})")
    print(f"wmrl / default: {record['ratio_wmrl_to_default']:.2f}x; written to {args.out}")


if __name__ == "__main__":
    main()
