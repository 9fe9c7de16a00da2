"""Step wall-clock with and without overlapping anchor executions with world-model answers, on CPU.

Runs the WMRL quickstart (``configs/autoresearch/quickstart.yaml`` with the ``ablations/cpu/wmrl.yaml`` overlay: the
frozen base model as the world model in ``score`` mode, one anchor group of two per step, real process-sandbox executions) for ``--steps`` steps with
``model.init_args.overlap`` on and off (held-out evaluation off, execution cache off so every anchor really runs),
and prints per step: wall-clock, generation, real execution, world model, update and the execution seconds that
ran hidden behind world-model work (``time/overlapped``).

    python benchmarks/overlap.py --steps 2

On 2 CPU cores the world model's forward passes and the sandboxed scripts compete for the same cores, so the
saving is bounded by the execution time and by contention; on a GPU machine the world model runs on the GPU and
the executions on the CPU.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd

NO_CACHE = Path(__file__).with_name("no_execution_cache.yaml")  # every anchor runs (both sides sample the same scripts)
COLUMNS = ["time/step", "time/generate", "time/env", "time/world_model", "time/update", "time/overlapped"]


def run(overlap: bool, steps: int, root: Path, configs: list[str]) -> pd.DataFrame:
    out = root / ("overlap_on" if overlap else "overlap_off")
    command = [
        sys.executable, "-m", "wmrl.cli", "fit", *[a for c in configs for a in ("-c", c)],
        f"--trainer.max_steps={steps}", f"--trainer.default_root_dir={out}", "--trainer.limit_val_batches=0",
        "--model.init_args.eval_at_start=false", f"--model.init_args.overlap={str(overlap).lower()}",
        "-c", str(NO_CACHE),
    ]
    print("+", " ".join(command), flush=True)
    subprocess.run(command, check=True)
    metrics = sorted(out.glob("csv/version_*/metrics.csv"))[-1]
    frame = pd.read_csv(metrics)
    return frame.dropna(subset=["time/step"]).set_index("step")[[c for c in COLUMNS if c in frame]]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--config", action="append", help="a config (repeat to compose; default: the quickstart "
                        "and the full WMRL overlay)")
    parser.add_argument("--out", type=Path, default=Path("runs/bench/overlap"))
    args = parser.parse_args(argv)
    args.config = args.config or ["configs/autoresearch/quickstart.yaml", "configs/autoresearch/ablations/cpu/wmrl.yaml"]
    results = {}
    for overlap in (True, False):
        results[overlap] = run(overlap, args.steps, args.out, args.config)
    print(f"\n{'overlap':8} {'step':>4} " + " ".join(f"{c.split('/')[1]:>11}" for c in COLUMNS))
    for overlap, frame in results.items():
        for step, row in frame.iterrows():
            print(f"{'on' if overlap else 'off':8} {int(step):>4} " + " ".join(f"{row.get(c, float('nan')):11.1f}"
                                                                            for c in COLUMNS))
    summary = {("on" if k else "off"): v.mean().to_dict() for k, v in results.items()}
    (args.out / "overlap.json").write_text(json.dumps(summary, indent=1))
    on, off = summary["on"]["time/step"], summary["off"]["time/step"]
    print(f"\nmean step: overlap on {on:.1f} s, off {off:.1f} s (ratio {on / off:.2f})")


if __name__ == "__main__":
    main()
