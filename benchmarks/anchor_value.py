"""What can an anchor add to a world model that already knows the task? Measured offline, on tasks it never saw.

In the ``suite-quality`` sitting full WMRL (one anchor group in four executed, the kit's corrections) ends where
the pure world model does: the task-aware world model ranks an unseen task's scripts at a within-task Spearman
of ~0.7 before any anchor, and a run's 24 anchor executions fall on ~6 of 40 training tasks, which seldom come
back within the run. Whatever the anchors add must then come from one of two places, and this benchmark measures
both on real executions of every menu line on tasks the world model was not pretrained on (the menu log of
``benchmarks/model_choice.py --executions``), with the shipped pretrained model:

1. **Transfer**: do a run's anchors make the world model rank *the tasks they did not touch* better? Simulated
   runs (seeded): ``--anchor-tasks`` tasks drawn from the log, ``--per-task`` of each one's executions become
   anchors; every other task of the log is ranked by

   - ``pretrained``: the model as shipped (what the pure world model grades with);
   - ``refit``: the model after learning the anchors as examples (the kit's online learning: the regressor
     refitted on pretraining plus anchors);
   - ``family_residual``: the shipped prediction plus each estimator family's mean residual (real minus
     predicted) over the anchors, shrunk toward 0 by ``--shrink`` pseudo-anchors: a correction that may re-rank
     scripts within a group, which the kit's calibration (monotone by design) never does.

   Reported: the mean within-task Spearman of each, and each one's difference to ``pretrained``, paired by
   (run, task), with a 95% interval that resamples tasks.

2. **Placement**: which group of a step should be the anchor? Steps of four groups (a task each, four executions
   drawn from its menu with replacement, as a policy's group repeats lines); per step one group is graded for real,
   three by the world model. Reported: the cosine between that step's group-normalised advantages and the ones
   real execution of every group would give, for the anchor drawn at random (the kit's routing, ``selection:
   random``), chosen where the world model is most wrong (an oracle: the ceiling of any placement rule), and
   chosen by what the world model's own rewards show before execution (the group with the largest or smallest
   predicted spread), chosen before the rollouts by the task alone (the task whose offered lines the world model
   tells apart least: ``AnchorRouting(selection="least_separated")``, which asks
   ``TaskAwareWorldModel.separation``), beside no anchor at all (the pure world model).

Lines are drawn uniformly from the menu, not as a trained policy writes them; the figures say what the anchors can
carry, not what a run gained.

    python benchmarks/anchor_value.py runs/menu/train.jsonl --out benchmarks/results/anchor-value.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from world_model_fidelity import learnable, within_task_spearman  # noqa: E402

PRETRAINED = Path(__file__).parent / "artefacts" / "task_aware_world_model.pt"


def family_of(rows: np.ndarray) -> np.ndarray:
    """Each feature row's estimator family (the last the changed part names), -1 for none."""
    from wmrl.autoresearch.world_models.task_aware import FAMILY_NAMES, FEATURES

    columns = [FEATURES.index(f"family_{f}") for f in FAMILY_NAMES] + [FEATURES.index("family_unknown")]
    one_hot = rows[:, columns]
    return np.where(one_hot.max(axis=1) > 0, one_hot.argmax(axis=1), -1)


def family_residual(predicted: np.ndarray, real: np.ndarray, families: np.ndarray, shrink: float):
    """family -> the anchors' mean residual (real - predicted), shrunk toward 0 by ``shrink`` pseudo-anchors.

    >>> family_residual(np.array([0.5, 0.5, 0.2]), np.array([0.9, 0.7, 0.2]), np.array([1, 1, 2]), shrink=2.0)
    {1: 0.15, 2: 0.0}
    """
    residual = real - predicted
    return {int(f): round(float(residual[families == f].sum() / ((families == f).sum() + shrink)), 12)
            for f in np.unique(families)}


def paired(differences: dict[str, list[float]], seed: int, resamples: int = 2000) -> dict:
    """Mean of per-(run, task) differences with a 95% interval that resamples tasks (their runs kept together)."""
    tasks = sorted(differences)
    rng = np.random.default_rng(seed)
    means = [np.mean(np.concatenate([differences[tasks[k]] for k in rng.integers(len(tasks), size=len(tasks))]))
             for _ in range(resamples)]
    point = float(np.mean(np.concatenate([differences[t] for t in tasks])))
    return {"point": point, "low": float(np.quantile(means, 0.025)), "high": float(np.quantile(means, 0.975))}


def advantages(rewards: np.ndarray) -> np.ndarray:
    """One group's advantages as the kit computes them (:func:`wmrl.algorithms.grpo.group_advantages`)."""
    import torch

    from wmrl.algorithms.grpo import group_advantages

    values = torch.as_tensor(rewards, dtype=torch.float64)
    n = len(values)
    return group_advantages(values, torch.zeros(n, dtype=torch.long), torch.ones(n, dtype=torch.bool))[0].numpy()


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / np.sqrt((a @ a) * (b @ b)))


def transfer(model, x, real, predicted, tasks, args) -> dict:
    """Part 1: the ranking of untouched tasks before and after a simulated run's anchors."""
    from wmrl.autoresearch.world_models.task_aware import _missing_as_value, _regressor

    rng = np.random.default_rng(args.seed)
    names = sorted(set(tasks.tolist()))
    families = family_of(x)
    base_x, base_y = np.asarray(model.examples)[:, :-1], np.asarray(model.examples)[:, -1]
    scores: dict[str, list[float]] = {"pretrained": [], "refit": [], "family_residual": []}
    differences: dict[str, dict[str, list[float]]] = {"refit": {}, "family_residual": {}}
    for _ in range(args.runs):
        touched = rng.choice(names, size=args.anchor_tasks, replace=False)
        anchors = np.concatenate([rng.permutation(np.flatnonzero(tasks == t))[: args.per_task] for t in touched])
        regressor = _regressor().fit(_missing_as_value(np.vstack([base_x, x[anchors]])),
                                     np.concatenate([base_y, real[anchors]]))
        refit = np.clip(regressor.predict(_missing_as_value(x)), 0.0, 1.0)
        delta = family_residual(predicted[anchors], real[anchors], families[anchors], args.shrink)
        shifted = predicted + np.array([delta.get(int(f), 0.0) for f in families])
        for task in names:
            if task in touched:
                continue
            rows = np.flatnonzero(tasks == task)
            one = [task] * len(rows)
            base, n = within_task_spearman(predicted[rows], real[rows], one)
            if n == 0:
                continue  # every script of the task scored alike: nothing to rank
            scores["pretrained"].append(base)
            for name, values in (("refit", refit), ("family_residual", shifted)):
                rho = within_task_spearman(values[rows], real[rows], one)[0]
                scores[name].append(rho)
                differences[name].setdefault(task, []).append(rho - base)
    return {"runs": args.runs, "anchor_tasks": args.anchor_tasks, "per_task": args.per_task, "shrink": args.shrink,
            "within_task_spearman": {k: float(np.mean(v)) for k, v in scores.items()},
            "difference_to_pretrained": {k: paired(v, args.seed) for k, v in differences.items()}}


def placement(real, predicted, tasks, args) -> dict:
    """Part 2: the step's advantages against all-real ones, by where the one anchor group goes."""
    rng = np.random.default_rng(args.seed + 1)
    names = sorted(set(tasks.tolist()))
    separation = {t: float(predicted[tasks == t].std()) for t in names}  # over the task's offered lines
    steps = [[(t, rng.choice(np.flatnonzero(tasks == t), size=args.group_size, replace=True))
              for t in rng.choice(names, size=args.groups, replace=True)] for _ in range(args.steps)]
    rules = {
        "random": lambda step: int(rng.integers(len(step))),
        "oracle_most_wrong": lambda step: int(np.argmin([advantages(predicted[g]) @ advantages(real[g]) -
                                                         advantages(real[g]) @ advantages(real[g]) for _, g in step])),
        "largest_predicted_spread": lambda step: int(np.argmax([predicted[g].std() for _, g in step])),
        "smallest_predicted_spread": lambda step: int(np.argmin([predicted[g].std() for _, g in step])),
        "least_separated_task": lambda step: int(np.argmin([separation[t] for t, _ in step])),
        "none_pure_world_model": lambda step: -1,
    }
    out = {}
    for name, choose in rules.items():
        used, truth = [], []
        for step in steps:
            anchor = choose(step)
            for k, (_, group) in enumerate(step):
                truth.append(advantages(real[group]))
                used.append(truth[-1] if k == anchor else advantages(predicted[group]))
        out[name] = cosine(np.concatenate(used), np.concatenate(truth))
    return {"steps": args.steps, "groups": args.groups, "group_size": args.group_size,
            "cosine_to_all_real": out}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("logs", nargs="+", type=Path, help="menu execution logs (score view) of unseen tasks")
    parser.add_argument("--pretrained", type=Path, default=PRETRAINED, help="the task-aware world model's file")
    parser.add_argument("--runs", type=int, default=20, help="simulated runs (part 1)")
    parser.add_argument("--anchor-tasks", type=int, default=6, help="tasks a run's anchors fall on")
    parser.add_argument("--per-task", type=int, default=4, help="anchor executions per touched task (a group)")
    parser.add_argument("--shrink", type=float, default=4.0, help="family_residual's pseudo-anchors at 0")
    parser.add_argument("--steps", type=int, default=500, help="simulated steps (part 2)")
    parser.add_argument("--groups", type=int, default=4, help="groups per step (one is the anchor)")
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("runs/bench/anchor-value.json"))
    args = parser.parse_args(argv)

    from pretrain_world_model import score_view_starter

    from wmrl.autoresearch.tasks.suite import TaskSuite
    from wmrl.autoresearch.world_models.learned import read_executions
    from wmrl.autoresearch.world_models.task_aware import TaskAwareWorldModel

    suite = TaskSuite()
    split_of = {spec.id: spec.split for spec in suite.specs()}
    records = learnable([r for path in args.logs for r in read_executions(path)])
    seen = sorted({t for t, _, _ in records if split_of.get(t) == "world_model"})
    if seen:
        raise SystemExit(f"anchor_value: the logs hold tasks the world model was pretrained on ({seen}): not unseen")
    names = sorted({t for t, _, _ in records})
    if len(names) <= args.anchor_tasks:
        raise SystemExit(f"anchor_value: {len(names)} tasks in the logs; --anchor-tasks {args.anchor_tasks} "
                         "leaves none untouched (give more tasks or fewer --anchor-tasks)")
    start = time.perf_counter()
    model = TaskAwareWorldModel(pretrained=str(args.pretrained), suite=suite)
    model.compare_with(score_view_starter(suite))
    model._ensure_ready()  # reads the pretrained file and fits the regressor
    x = np.array([model.features(t, s) for t, s, _ in records])
    real = np.array([o.reward for _, _, o in records])
    tasks = np.array([t for t, _, _ in records])
    predicted = model._predict(x)
    result = {"date": time.strftime("%Y-%m-%d"), "logs": [str(p) for p in args.logs],
              "pretrained": str(args.pretrained), "executions": len(records), "tasks": len(names),
              "transfer": transfer(model, x, real, predicted, tasks, args),
              "placement": placement(real, predicted, tasks, args)}
    result["seconds"] = round(time.perf_counter() - start, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    t = result["transfer"]
    print(f"{len(records)} executions on {len(names)} unseen tasks; {args.runs} runs of {args.anchor_tasks}x"
          f"{args.per_task} anchors")
    for name, rho in t["within_task_spearman"].items():
        d = t["difference_to_pretrained"].get(name)
        tail = f"  vs pretrained {d['point']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]" if d else ""
        print(f"  untouched tasks' Spearman, {name:16} {rho:.3f}{tail}")
    for name, value in result["placement"]["cosine_to_all_real"].items():
        print(f"  step cosine to all-real advantages, anchor {name:26} {value:.3f}")
    print(f"written to {args.out}")
    return result


if __name__ == "__main__":
    main()
