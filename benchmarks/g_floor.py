"""G (generation + update per training step) against its floors, before and after a preset's batching.

Every second of G divides the world model's speedup (R = (G + E) / (G + W + a E)), so this measures where G stands
against what the machine's arithmetic allows. It runs one training step of a preset's pure-world-model arm (the same
rollouts and update as every arm, no execution to wait for) under two batchings:

- ``before``: the quickstart's (8 prompts a generation pass, micro-batches of 4 rows);
- ``after``: the preset's own (``cpu-heavy``: all 20 rollouts in one generation pass, where a task's identical
  prompts share one prefill; micro-batches of 8 rows of one task, each running its prompt once).

Both keep the loss and its gradients (the loss is normalised over the whole batch, whatever the micro-batches;
``tests/core/test_kv.py`` checks the shared-prefix passes); the sampled tokens differ, since the seeded sampler draws
them in another order. Per setting it reports the token positions the passes computed (``tokens/generate``,
``tokens/update``), the measured seconds, the compute floor at the float32 matmul throughput measured just before and
after, generation's memory floor (its forward passes, ``passes/generate``, each reading the policy's weights once, at
the memory bandwidth measured just before and after; the larger of the two is its floor), measured / floor
(:func:`speedup.compute_floor`), and writes ``results/g-floor.json``.

    python benchmarks/g_floor.py --preset cpu-heavy
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import speedup  # noqa: E402

BEFORE = {"micro_batch_size": 4, "generation_batch_size": 8}  # the quickstart's


def floor_config(preset: speedup.Preset, model: dict, run_dir: Path) -> dict:
    """One step of the preset's pure-world-model arm with ``model`` init_args on top, without held-out evaluation."""
    setting = replace(preset, steps=1, model={**preset.model, **model})
    config = speedup.arm_config(setting, "pure_world_model", run_dir, eval_at_start=False)
    config["trainer"]["limit_val_batches"] = 0  # G only: no held-out evaluation
    return config


def measure(preset: speedup.Preset, name: str, model: dict, out: Path) -> dict:
    run_dir = out / name
    if run_dir.exists():
        shutil.rmtree(run_dir)
    config = floor_config(preset, model, run_dir)
    path = out / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    command = [sys.executable, "-m", "wmrl.cli", "fit", "-c", str(speedup.ROOT / preset.base), "-c", str(path)]
    print(f"[g_floor] {name}: {' '.join(command)}", flush=True)
    gflops, bandwidth = [speedup.matmul_gflops()], [speedup.memory_gbps()]
    run_dir.mkdir(parents=True, exist_ok=True)
    with (run_dir / "fit.log").open("w") as log:
        import subprocess

        subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, cwd=speedup.ROOT, check=True)
    gflops.append(speedup.matmul_gflops())
    bandwidth.append(speedup.memory_gbps())
    import pandas as pd

    from wmrl.run_report import find_metrics

    frame = pd.read_csv(find_metrics(run_dir))
    steps = frame.dropna(subset=["time/step"]).groupby("step").last().sort_index()
    arm = speedup.ArmResult("pure_world_model", steps, {}, None, 0.0, {"matmul_gflops": gflops, "memory_gbps": bandwidth})
    floor = speedup.compute_floor(arm)
    if floor is None:
        raise RuntimeError(f"{run_dir}: no token counts were logged (tokens/generate, model/parameters)")
    return {"setting": model, **floor}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=sorted(speedup.PRESETS), default="cpu-heavy")
    parser.add_argument("--out", type=Path, default=Path("runs/g_floor"))
    parser.add_argument("--results", type=Path, default=speedup.ROOT / "benchmarks" / "results")
    args = parser.parse_args(argv)
    preset = speedup.PRESETS[args.preset]
    rows = {"before": measure(preset, "before", BEFORE, args.out / args.preset),
            "after": measure(preset, "after", {}, args.out / args.preset)}
    print(f"\n{'batching':9} {'part':9} {'tokens':>8} {'measured s':>11} {'compute s':>10} {'memory s':>9} "
          f"{'x floor':>8}")
    for name, row in rows.items():
        for part in ("generate", "update"):
            r = row[part]
            memory = r.get("memory_floor_s")
            print(f"{name:9} {part:9} {r['tokens']:8.0f} {r['measured_s']:11.1f} "
                  f"{r.get('compute_floor_s', r['floor_s']):10.1f} {'-' if memory is None else f'{memory:.1f}':>9} "
                  f"{r['over_floor']:8.1f}")
    args.results.mkdir(parents=True, exist_ok=True)
    record = {"preset": args.preset, "date": time.strftime("%Y-%m-%d"), "machine": speedup.machine(),
              "command": "python benchmarks/g_floor.py " + " ".join(argv if argv is not None else sys.argv[1:]),
              **rows}
    (args.results / "g-floor.json").write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
