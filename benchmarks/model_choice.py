"""What choosing the model can buy: every estimator of the ``score`` view's menu, executed on each task.

The ``score`` starter view (``SandboxEnvironment(starter_view="score")``, :mod:`wmrl.autoresearch.tasks.model_choice`) leaves the
policy one choice: the estimator of ``model = make_pipeline(preprocess, <estimator>)``. This benchmark writes that
line with each estimator the prompt offers (``candidate_lines``: the starter's own, then the menu's), runs the script for real in the process sandbox and
prints, per task, the leaderboard position of each, the starter's own and the best. Where the best is the starter's,
no choice can raise the score; where estimators differ, a group of valid samples has rewards that differ and GRPO
has something to learn. Run it on the train split to choose tasks and settings (``cpu-quality`` in
``benchmarks/speedup.py``); a held-out run only says how much room its tasks leave, after the choice.

    python benchmarks/model_choice.py --split train --out benchmarks/results/model-choice-train.json

``--executions PATH`` also writes every execution as an execution-log record (task, script, outcome: the JSONL that
``LearnedWorldModel(warm_start=...)``, ``TaskAwareWorldModel`` and ``benchmarks/pretrain_world_model.py`` read).
On the ``world_model`` split that log is what a world model is pretrained on (its executions and seconds are the
pretraining's cost); on the train and held-out splits it is what ``benchmarks/world_model_fidelity.py --menu``
measures a world model against on tasks it never saw.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from wmrl.autoresearch.environments.real import SandboxEnvironment
from wmrl.autoresearch.tasks.model_choice import candidate_lines, with_model_line
from wmrl.types import Status


def _position(position: float | None) -> str:
    return "-" if position is None else f"{position:.2f}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", default="train")
    parser.add_argument("--tasks", nargs="*", help="task ids (override --split)")
    parser.add_argument("--out", type=Path, help="JSON of every execution")
    parser.add_argument("--executions", type=Path, help="JSONL execution log of every execution (script and outcome)")
    args = parser.parse_args(argv)
    if args.executions:
        args.executions.parent.mkdir(parents=True, exist_ok=True)
        args.executions.write_text("")

    env = SandboxEnvironment(starter_view="score", use_cache=False)
    tasks = args.tasks or [s.id for s in env.suite.specs(args.split) if s.type not in ("forecast", "survival")]
    started, rows = time.perf_counter(), []
    for task_id in tasks:
        starter = env.starter(task_id)
        scripts = [(line.partition("preprocess, ")[2][:-1], with_model_line(starter, line))
                   for line in candidate_lines(starter)]
        outcomes = env.execute_many([(task_id, s) for _, s in scripts])
        runs = [{"estimator": e, "status": o.status.value, "position": o.position, "validation": o.validation_score,
                 "seconds": round(o.wall_seconds, 1)} for (e, _), o in zip(scripts, outcomes, strict=True)]
        if args.executions:
            with args.executions.open("a") as log:
                for (_, script), outcome in zip(scripts, outcomes, strict=True):
                    log.write(json.dumps({"task": task_id, "code": script, "outcome": outcome.to_dict()}) + "\n")
        own = runs[0]["position"]
        valid = [r for r in runs if r["status"] == Status.VALID.value]
        best = max(valid, key=lambda r: r["position"], default=None)
        rows.append({"task": task_id, "starter_position": own, "best": best, "runs": runs,
                     "better_than_starter": sum(r["position"] > (own or 0) for r in valid),
                     "distinct_positions": len({r["position"] for r in valid})})
        shown = "  ".join(f"{r['estimator'].split('(')[0][:12]}={_position(r['position'])}" for r in runs)
        print(f"{task_id:26} starter {_position(own)}  {shown}", flush=True)
    print(f"({time.perf_counter() - started:.0f} s)")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"split": args.split, "tasks": rows, "date": time.strftime("%Y-%m-%d")},
                                       indent=1) + "\n")


if __name__ == "__main__":
    main()
