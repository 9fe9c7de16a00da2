"""Build the pretrained learned world model: real executions of base-policy scripts on the *train* split only.

The paper's world model is a pretrained LLM that knows code before RL starts; the 135M CPU policy's base has no
such knowledge (Spearman -0.15 against real rewards, ``benchmarks/world_model_fidelity.py``). Its CPU
counterpart is :class:`~wmrl.autoresearch.world_models.learned.LearnedWorldModel` fit, before training, on real executions of
scripts the *starting* policy wrote for the training tasks. This script builds it:

1. (``--sample``) samples ``--samples`` one-turn rollouts per training task from the base policy and executes
   every script in the process sandbox (``benchmarks/base_policy.py``), writing the execution log;
   or ``--log`` names logs made earlier (``benchmarks/base_policy.py --out``);
2. refuses any record of a task outside the train split (held-out tasks are never seen before evaluation);
3. fits the head on every learnable execution, measures its ranking signal out of sample (5 folds by
   distinct script: Spearman of the predicted against the real reward), and writes the model
   (``LearnedWorldModel.save``) and a manifest with what building it cost (executions, execution seconds,
   sampling wall-clock and CPU-seconds) next to it (``<out>.json``).

    python benchmarks/pretrain_world_model.py --sample --samples 6     # ~7 min on 2 cores, then fit (~30 s)
    python benchmarks/pretrain_world_model.py --log runs/pretrain/train_executions.jsonl \\
        --sampling-wall-s 461 --sampling-cpu-s 659                       # fit on a log sampled earlier

``--task-aware --log LOG`` builds the task-aware world model instead
(:class:`~wmrl.autoresearch.world_models.task_aware.TaskAwareWorldModel`) from executions of the ``world_model``
split only (records of any other split are refused), to ``benchmarks/artefacts/task_aware_world_model.pt``:

    python benchmarks/model_choice.py --split world_model --executions runs/menu/world_model.jsonl
    python benchmarks/pretrain_world_model.py --task-aware --log runs/menu/world_model.jsonl

Use it with ``LearnedWorldModel(pretrained=benchmarks/artefacts/learned_world_model_train.pt)`` (the
``cpu-learn`` preset of ``benchmarks/speedup.py`` does); every result that uses it reports the manifest's cost.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "benchmarks" / "artefacts" / "learned_world_model_train.pt"
TASK_AWARE_OUT = ROOT / "benchmarks" / "artefacts" / "task_aware_world_model.pt"
QUICKSTART = ROOT / "configs" / "autoresearch" / "quickstart.yaml"


def train_tasks() -> list[str]:
    """The quickstart's training tasks (the 13 tabular tasks of the train split)."""
    return list(yaml.safe_load(QUICKSTART.read_text())["data"]["init_args"]["tasks"])


def cpu_seconds() -> float:
    """CPU-seconds of this process and its finished children (the sandboxed scripts)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def relative(path: Path) -> str:
    """``path`` relative to the repository when it lies inside it (a manifest that reads the same everywhere)."""
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def check_train_split(records: list[tuple[str, str, object]], suite,
                      what: str = "pretrain_world_model: the execution log holds",
                      why: str = "A world model built on held-out tasks would leak them into the evaluation; drop "
                                 "those records or pass --tasks from the train split", split: str = "train") -> None:
    """Raise on a record of a task that is not in ``split`` (named, with where it is)."""
    inside = {spec.id for spec in suite.specs(split)}
    known = {spec.id: spec.split for spec in suite.specs()}
    bad = sorted({task for task, _, _ in records if task not in inside})
    if bad:
        where = ", ".join(f"{t} ({known.get(t, 'not in the suite')})" for t in bad)
        raise ValueError(f"{what} tasks outside the {split} split: {where}. {why}")


def out_of_fold_spearman(model, records, folds: int = 5, seed: int = 0) -> float | None:
    """Spearman of out-of-fold predicted rewards against real rewards, folds drawn by distinct script."""
    from scipy.stats import spearmanr

    from wmrl.autoresearch.world_models.learned import outcome_label
    from wmrl.types import StepRequest

    records = [r for r in records if outcome_label(r[2]) is not None]
    scripts = sorted({r[1] for r in records})
    if len(scripts) < 2 * folds:
        return None
    fold_of = dict(zip(scripts, np.random.default_rng(seed).permutation(len(scripts)) % folds, strict=True))
    predicted, real = [], []
    for k in range(folds):
        fit = [r for r in records if fold_of[r[1]] != k]
        test = [r for r in records if fold_of[r[1]] == k]
        copy = model.untrained_copy()
        copy.learn([r[0] for r in fit], [r[1] for r in fit], [r[2] for r in fit])
        if copy.head is None:
            continue
        requests = [StepRequest(task_id=r[0], code=r[1], response="") for r in test]
        predicted += [o.reward for o in copy.step_many(requests)]
        real += [r[2].reward for r in test]
    if len(set(real)) < 2:
        return None
    return float(spearmanr(predicted, real).statistic)


def score_view_starter(suite):
    """``starter(task_id)``: the starter a ``score``-view prompt shows (the linear baseline as a choice starter)."""
    from wmrl.autoresearch.tasks.model_choice import choice_starter

    return lambda task_id: choice_starter(suite.get(task_id).starter_solution("linear_baseline"))


def build(logs: list[Path], out: Path, sampling: dict, min_examples: int = 16, suite=None,
          starter_view: str = "script") -> dict:
    """Fit a :class:`LearnedWorldModel` on ``logs``, save it to ``out`` and its manifest to ``<out>.json``.

    Each script is embedded by what it changes against the starter its prompt showed (``starter_view``: the
    ``score`` view's starter is the choice starter, whose first lines already differ from the linear baseline's),
    as :class:`~wmrl.callbacks.WorldModelReward` has the world model compare during training."""
    from wmrl.autoresearch.tasks.suite import TaskSuite
    from wmrl.autoresearch.world_models.learned import LearnedWorldModel, outcome_label, read_executions

    suite = suite or TaskSuite()
    records = [r for path in logs for r in read_executions(path)]
    if not records:
        raise ValueError(f"pretrain_world_model: no execution records in {', '.join(map(str, logs))}")
    check_train_split(records, suite)
    start = time.perf_counter()
    model = LearnedWorldModel(suite=suite, min_examples=min_examples)
    if starter_view == "score":
        model.compare_with(score_view_starter(suite))
    model.learn([r[0] for r in records], [r[1] for r in records], [r[2] for r in records])
    if model.head is None:
        raise ValueError(f"pretrain_world_model: the log's learnable executions did not fit a head (it needs "
                         f"{min_examples} of at least two outcome classes); sample more (--samples)")
    fit_s = time.perf_counter() - start
    spearman = out_of_fold_spearman(model, records)
    learnable = [r for r in records if outcome_label(r[2]) is not None]
    statuses: dict[str, int] = {}
    for _, _, outcome in records:
        statuses[outcome.status.value] = statuses.get(outcome.status.value, 0) + 1
    manifest = {
        "built": time.strftime("%Y-%m-%d"),
        "logs": [relative(p) for p in logs],
        "tasks": sorted({r[0] for r in records}),
        "executions": len(records),
        "learnable_examples": len(learnable),
        "distinct_scripts": len({r[1] for r in records}),
        "statuses": statuses,
        "execution_seconds": round(sum(r[2].wall_seconds for r in records), 1),
        "sampling": sampling,
        "fit_seconds": round(fit_s, 1),
        "out_of_fold_spearman": spearman,
        "encoder": model.encoder_name,
        "starter_view": starter_view,
    }
    model.save(out, meta=manifest)
    Path(f"{out}.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def build_task_aware(logs: list[Path], out: Path, sampling: dict, suite=None) -> dict:
    """Fit a :class:`TaskAwareWorldModel` on ``logs`` (executions of the ``world_model`` split only: the score
    view's menu, ``benchmarks/model_choice.py --split world_model --executions LOG``), save it to ``out`` and its
    manifest, with what it cost (executions, their seconds, the task cards' seconds, the fit), to ``<out>.json``."""
    from wmrl.autoresearch.tasks.suite import TaskSuite
    from wmrl.autoresearch.world_models.learned import read_executions
    from wmrl.autoresearch.world_models.task_aware import TaskAwareWorldModel

    suite = suite or TaskSuite()
    records = [r for path in logs for r in read_executions(path)]
    if not records:
        raise ValueError(f"pretrain_world_model: no execution records in {', '.join(map(str, logs))}")
    check_train_split(records, suite, why="The task-aware world model is pretrained on the world_model split only, "
                      "so that every training and held-out task is one it never saw", split="world_model")
    start = time.perf_counter()
    model = TaskAwareWorldModel(suite=suite, cache_cards=False)
    model.compare_with(score_view_starter(suite))
    model.learn([r[0] for r in records], [r[1] for r in records], [r[2] for r in records])
    if model.regressor is None:
        raise ValueError(f"pretrain_world_model: {len(model.examples)} learnable executions, the model needs "
                         f"{model.min_examples}")
    statuses: dict[str, int] = {}
    for _, _, outcome in records:
        statuses[outcome.status.value] = statuses.get(outcome.status.value, 0) + 1
    manifest = {
        "built": time.strftime("%Y-%m-%d"),
        "model": "TaskAwareWorldModel",
        "logs": [relative(p) for p in logs],
        "tasks": sorted({r[0] for r in records}),
        "executions": len(records),
        "learnable_examples": len(model.examples),
        "statuses": statuses,
        "execution_seconds": round(sum(r[2].wall_seconds for r in records), 1),
        "card_seconds": round(model.card_seconds, 1),
        "fit_seconds": round(time.perf_counter() - start - model.card_seconds, 1),
        "out_of_task_error_variance": round(model.error_variance, 5),
        "sampling": sampling,
        "starter_view": "score",
    }
    model.save(out, meta=manifest)
    Path(f"{out}.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sample", action="store_true", help="sample and execute base-policy scripts first")
    parser.add_argument("--log", type=Path, nargs="*", default=[], help="execution logs (JSONL) to fit on")
    parser.add_argument("--tasks", nargs="*", help="training tasks to sample (default: the quickstart's 13)")
    parser.add_argument("--samples", type=int, default=6, help="rollouts per task with --sample")
    parser.add_argument("--model", default="smollm2-135m-instruct", help="the starting policy with --sample")
    parser.add_argument("--temperature", type=float, default=0.7, help="the training temperature of the preset")
    parser.add_argument("--seed", type=int, default=1, help="sampling seed (the benchmark's training uses 0)")
    parser.add_argument("--starter-view", default="script", choices=["script", "score"],
                        help="the prompt's view of the starter with --sample (the preset's; cpu-quality: score)")
    parser.add_argument("--prefill", default="starter_head", choices=["starter_head", "starter_estimator"],
                        help="how each sampled turn starts with --sample (the preset's; cpu-quality: starter_estimator)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--sampling-wall-s", type=float, help="what sampling --log cost, when it ran elsewhere")
    parser.add_argument("--sampling-cpu-s", type=float)
    parser.add_argument("--sampling-note", default="the caller", help="how --sampling-*-s were measured")
    parser.add_argument("--task-aware", action="store_true", help="build a TaskAwareWorldModel from --log (the "
                        "world_model split's menu executions) instead of the embedding model")
    args = parser.parse_args(argv)
    if args.task_aware:
        if args.sample or not args.log:
            parser.error("--task-aware fits on --log (benchmarks/model_choice.py --split world_model --executions LOG)")
        out = args.out if args.out != DEFAULT_OUT else TASK_AWARE_OUT
        sampling = {"measured_by": "benchmarks/model_choice.py: the execution seconds of its log"}
        manifest = build_task_aware(list(args.log), out, sampling)
        print(json.dumps(manifest, indent=1))
        print(f"wrote {out} and {out}.json")
        return manifest

    logs = list(args.log)
    sampling = {"wall_s": args.sampling_wall_s, "cpu_s": args.sampling_cpu_s, "measured_by": args.sampling_note}
    if args.sample:
        sys.path.insert(0, str(Path(__file__).parent))
        import base_policy

        target = args.out.parent / f"{args.out.stem}_executions.jsonl"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.unlink(missing_ok=True)
        tasks = args.tasks or train_tasks()
        cpu0, wall0 = cpu_seconds(), time.perf_counter()
        base_policy.main(["--model", args.model, "--tasks", *tasks, "--samples", str(args.samples),
                          "--prefill", args.prefill, "--starter-view", args.starter_view,
                          "--temperature", str(args.temperature),
                          "--seed", str(args.seed), "--out", str(target)])
        sampling = {"wall_s": round(time.perf_counter() - wall0, 1), "cpu_s": round(cpu_seconds() - cpu0, 1),
                    "measured_by": "pretrain_world_model.py --sample", "samples_per_task": args.samples,
                    "temperature": args.temperature, "seed": args.seed, "model": args.model,
                    "starter_view": args.starter_view, "prefill": args.prefill}
        logs.append(target)
    if not logs:
        parser.error("nothing to fit: pass --sample or --log PATH")
    manifest = build(logs, args.out, sampling, starter_view=args.starter_view)
    print(json.dumps(manifest, indent=1))
    print(f"wrote {args.out} and {args.out}.json")
    return manifest


if __name__ == "__main__":
    main()
