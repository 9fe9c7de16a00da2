"""How faithful is the world model, raw and calibrated, against real execution?

Reads real executions of policy-written scripts (the JSONL of ``benchmarks/base_policy.py --out``), asks the
world model about every script in both modes, fits the Online Debiasing map on a seeded share of the
executions and measures on the rest: Spearman and MAE of the raw and of the calibrated world-model reward
against the real reward, plus the pairwise ranking accuracy within tasks and reliability tables; a reliability
diagram per mode (raw and calibrated, on the held-out share) is written beside ``--out``
(``reliability_<mode>.png``).

    python benchmarks/base_policy.py --split train --samples 16 --prefill starter_head \
        --temperature 0.7 --out runs/bench/train_executions.jsonl
    python benchmarks/world_model_fidelity.py runs/bench/train_executions.jsonl --modes score generate learned

Modes: ``score`` and ``generate`` ask :class:`LMWorldModel` (the frozen base LLM, as in the paper);
``learned`` is :class:`LearnedWorldModel` (a frozen encoder and a head learned from real executions). The
split is by distinct script (the policy often writes the same script twice): a script is in the fit share or
the test share, never both, so the learned model cannot score a test script by remembering it. The learned
model's head is trained on the fit share; its calibration pairs are its out-of-fold predictions there (5
folds), as online, where an anchor is side-graded before the model learns from it. ``--reuse`` takes the
``score``/``generate`` predictions of an earlier output instead of asking the LLM again (the LLM is memoryless,
so only the split matters).

``--unseen PRETRAIN_LOG`` measures instead what a world model knows about tasks it never saw: the task-aware
model (:class:`~wmrl.autoresearch.world_models.task_aware.TaskAwareWorldModel`), the same without its landmarks
(the card's statistics and the code only) and today's embedding model are all fitted on the pretraining log (executions of the ``world_model`` split only: ``benchmarks/model_choice.py
--split world_model --executions ...``), then rank the executions of each ``VIEW=LOG`` given (tasks of the train
and held-out splits, refused if any is in the pretraining split), beside a task-blind baseline (each estimator
family's mean reward on the pretraining tasks). Reported per view and split: the mean within-task Spearman of
predicted against real reward (tasks whose real rewards are not all equal; a prediction constant within a task
counts 0, chance), the share of same-task pairs ordered right, the same once ``--anchors`` executions of the
task were learned as anchors (the others ranked: what the model knows a few anchors into a run), and what
pretraining cost (executions, execution
seconds, the task cards' seconds, the fit's seconds):

    python benchmarks/world_model_fidelity.py --unseen runs/menu/world_model.jsonl \
        score=runs/menu/train.jsonl score=runs/menu/heldout.jsonl \
        score=benchmarks/artefacts/learned_world_model_quality_executions.jsonl \
        script=benchmarks/artefacts/learned_world_model_train_executions.jsonl \
        --out benchmarks/results/world-model-fidelity.json

Executions whose real outcome is missing (infra errors) are left out, never scored 0. Gated scripts (no code,
syntax errors) are answered by the deterministic gate in both worlds and would inflate agreement, so the
figures are reported on the scripts that compile (``--include-gated`` adds them back).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from wmrl.algorithms.debias import fit_calibration
from wmrl.autoresearch.world_models.lm import LMWorldModel
from wmrl.callbacks.world_model_reward import fidelity
from wmrl.types import StepRequest


def load(path: Path, include_gated: bool) -> list[dict]:
    rows = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        outcome = row["outcome"]
        if outcome["reward"] is None:
            continue  # missing, never 0
        if not include_gated and outcome["status"] in ("malformed", "syntax_err"):
            continue
        rows.append(row)
    return rows


def learnable(records: list) -> list:
    """What a world model learns from and is measured on: real outcomes, neither missing (infra errors) nor gated."""
    return [r for r in records if r[2].reward is not None and r[2].status.value not in
            ("malformed", "syntax_err", "infra_error")]


def pairwise_accuracy(pred: np.ndarray, real: np.ndarray, tasks: list[str]) -> float:
    """Share of same-task pairs with different real rewards that the prediction orders correctly."""
    right = total = 0
    for i in range(len(real)):
        for j in range(i + 1, len(real)):
            if tasks[i] != tasks[j] or real[i] == real[j]:
                continue
            total += 1
            right += (pred[i] - pred[j]) * (real[i] - real[j]) > 0
    return right / total if total else float("nan")


def split(scripts: list[str], fit_share: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the fit and test shares, split by distinct script (copies of a script stay together)."""
    distinct = sorted(set(scripts))
    order = np.random.default_rng(seed).permutation(len(distinct))
    fit_scripts = {distinct[k] for k in order[: int(fit_share * len(distinct))]}
    inside = np.array([s in fit_scripts for s in scripts])
    return np.flatnonzero(inside), np.flatnonzero(~inside)


def evaluate(name: str, predicted: np.ndarray, real: np.ndarray, tasks: list[str], fit: np.ndarray,
             test: np.ndarray, pairs: np.ndarray | None = None) -> dict:
    """Fit the map on the fit share's (prediction, real) pairs and measure on the test share.

    ``pairs``: the fit share's predictions to calibrate on, when they are not ``predicted[fit]`` (a learned
    model's out-of-fold predictions).
    """
    calibration = fit_calibration(predicted[fit] if pairs is None else pairs, real[fit])
    calibrated = calibration(predicted[test])
    test_tasks = [tasks[i] for i in test]
    import torch

    raw = fidelity(torch.tensor(predicted[test]), torch.tensor(real[test]))
    cal = fidelity(torch.tensor(calibrated), torch.tensor(real[test]))
    return {
        "mode": name, "fit": len(fit), "test": len(test),
        "spearman_raw": raw["spearman"], "spearman_calibrated": cal["spearman"],
        "mae_raw": raw["mae"], "mae_calibrated": cal["mae"],
        # what the isotonic fit minimises (squared error); MAE favours the median, the fit the mean
        "mse_raw": float(np.mean((predicted[test] - real[test]) ** 2)),
        "mse_calibrated": float(np.mean((calibrated - real[test]) ** 2)),
        "pairwise_raw": pairwise_accuracy(predicted[test], real[test], test_tasks),
        "pairwise_calibrated": pairwise_accuracy(calibrated, real[test], test_tasks),
        "map": calibration.to_dict(),
        "reliability_test_raw": reliability(predicted[test], real[test]),
        "reliability_test_calibrated": reliability(calibrated, real[test]),
    }


def learned_predictions(rows: list[dict], fit: np.ndarray, test: np.ndarray,
                        args: argparse.Namespace) -> tuple[np.ndarray, np.ndarray]:
    """The learned world model's predictions: on the test share from a head trained on the whole fit share,
    and on the fit share out-of-fold (5 folds by distinct script), which is what it calibrates on."""
    from wmrl.autoresearch.world_models.learned import LearnedWorldModel
    from wmrl.types import Outcome

    def trained(indices) -> LearnedWorldModel:
        wm = base.untrained_copy()
        wm.learn([rows[i]["task"] for i in indices], [rows[i]["code"] for i in indices],
                 [Outcome.from_dict(rows[i]["outcome"]) for i in indices])
        wm.refit()
        return wm

    def predict(wm: LearnedWorldModel, indices) -> list[float]:
        return [o.reward for o in wm.step_many([StepRequest(rows[i]["task"], rows[i]["code"], rows[i]["response"])
                                                 for i in indices])]

    base = LearnedWorldModel(encoder=args.encoder, min_examples=2)
    start = time.perf_counter()
    base.embed([r["task"] for r in rows], [r["code"] for r in rows])  # once: the copies share the cache
    print(f"  learned: {len(rows)} scripts embedded in {time.perf_counter() - start:.0f} s", flush=True)
    predicted = np.full(len(rows), np.nan)
    predicted[test] = predict(trained(fit), test)
    pairs = np.full(len(fit), np.nan)
    distinct = sorted({rows[i]["code"] for i in fit})
    order = np.random.default_rng(args.seed + 1).permutation(len(distinct))
    fold_of = {distinct[k]: n % 5 for n, k in enumerate(order)}
    for fold in range(5):
        inside = np.array([fold_of[rows[i]["code"]] == fold for i in fit])
        pairs[inside] = predict(trained(fit[~inside]), fit[inside])
    predicted[fit] = pairs
    return predicted, pairs


def plot_reliability(result: dict, path: Path) -> None:
    """Reliability diagram on the held-out share: mean real reward per bin of predicted reward, raw and calibrated."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 5), dpi=110)
    for key, label, marker in (("reliability_test_raw", "raw", "s--"), ("reliability_test_calibrated", "calibrated", "o-")):
        table = result[key]
        ax.plot([t[2] for t in table], [t[3] for t in table], marker, label=f"{label} (MAE {result['mae_' + label]:.3f})")
        for _, n, x, y in table:
            ax.annotate(str(n), (x, y), fontsize=7, textcoords="offset points", xytext=(4, 4))
    ax.plot([0, 1], [0, 1], ":", color="0.5", label="perfect")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("predicted reward (bin mean)")
    ax.set_ylabel("real reward (bin mean)")
    ax.set_title(f"world model, {result['mode']} mode: {result['test']} held-out scripts")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def reliability(predicted: np.ndarray, real: np.ndarray, bins: int = 5) -> list[tuple[str, int, float, float]]:
    edges = np.linspace(0, 1, bins + 1)
    table = []
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        inside = (predicted >= lo) & ((predicted < hi) | (hi == 1.0))
        if inside.any():
            table.append((f"[{lo:.1f},{hi:.1f})", int(inside.sum()), float(predicted[inside].mean()),
                          float(real[inside].mean())))
    return table


def within_task_spearman(predicted: np.ndarray, real: np.ndarray, tasks: list[str]) -> tuple[float, int]:
    """Mean over tasks (whose real rewards differ) of the Spearman of predicted against real reward; a prediction
    constant within a task counts 0 (chance). Returns the mean and the number of tasks."""
    from scipy.stats import spearmanr

    values = []
    for task in sorted(set(tasks)):
        mine = [i for i, t in enumerate(tasks) if t == task]
        if len(mine) < 3 or len(set(real[mine].tolist())) < 2:
            continue
        rho = spearmanr(predicted[mine], real[mine]).statistic if len(set(predicted[mine].tolist())) > 1 else 0.0
        values.append(float(rho))
    return (float(np.mean(values)) if values else float("nan")), len(values)


def family_baseline(pretrain, suite, starter):
    """Task-blind: each estimator family's mean real reward on the pretraining tasks (the overall mean for a
    script that names none)."""
    from wmrl.autoresearch.environments.executed_form import executed_form
    from wmrl.autoresearch.world_models.learned import changed_part
    from wmrl.autoresearch.world_models.task_aware import FAMILIES, estimator_classes

    def family(task_id: str, script: str) -> str:
        changed = changed_part(executed_form(script), executed_form(starter(task_id)))
        names = [FAMILIES.get(c, "unknown") for c in estimator_classes(changed)]
        return names[-1] if names else "none"

    sums: dict[str, list[float]] = {}
    for task, script, outcome in pretrain:
        sums.setdefault(family(task, script), []).append(outcome.reward)
    overall = float(np.mean([o.reward for _, _, o in pretrain]))
    means = {k: float(np.mean(v)) for k, v in sums.items()}
    return lambda task_id, script: means.get(family(task_id, script), overall)


def after_anchors(records, anchors: int, seed: int, fresh) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Per task: ``anchors`` of its executions (seeded) become real examples of a fresh copy of the model
    (``fresh()``: pretrained, nothing of this task), which then predicts the task's other executions."""
    rng = np.random.default_rng(seed)
    predicted, real, tasks = [], [], []
    for task in sorted({r[0] for r in records}):
        mine = [r for r in records if r[0] == task]
        if len(mine) <= anchors + 2:
            continue
        order = rng.permutation(len(mine))
        shown, rest = [mine[k] for k in order[:anchors]], [mine[k] for k in order[anchors:]]
        model = fresh()
        model.learn([r[0] for r in shown], [r[1] for r in shown], [r[2] for r in shown])
        predicted += [o.reward for o in model.step_many([StepRequest(r[0], r[1], "") for r in rest])]
        real += [r[2].reward for r in rest]
        tasks += [task] * len(rest)
    return np.array(predicted), np.array(real), tasks


def unseen_main(args) -> dict:
    """``--unseen``: world models fitted on the pretraining split, measured on tasks they never saw."""
    import sys

    from wmrl.autoresearch.tasks.suite import TaskSuite
    from wmrl.autoresearch.world_models.learned import LearnedWorldModel, read_executions
    from wmrl.autoresearch.world_models.task_aware import TaskAwareWorldModel

    sys.path.insert(0, str(Path(__file__).parent))
    from pretrain_world_model import score_view_starter

    suite = TaskSuite()
    split_of = {spec.id: spec.split for spec in suite.specs()}

    pretrain = learnable([r for path in args.unseen for r in read_executions(path)])
    outside = sorted({t for t, _, _ in pretrain if split_of.get(t) != "world_model"})
    if outside:
        raise SystemExit(f"--unseen: the pretraining log holds tasks outside the world_model split: {outside}")
    starters = {"score": score_view_starter(suite), "script": lambda task_id: suite.get(task_id).starter}
    ids, scripts, outcomes = ([r[k] for r in pretrain] for k in range(3))
    start = time.perf_counter()
    task_aware = TaskAwareWorldModel(suite=suite, cache_cards=False)
    task_aware.compare_with(starters["score"])
    task_aware.learn(ids, scripts, outcomes)
    task_aware_fit = time.perf_counter() - start - task_aware.card_seconds
    card_only = TaskAwareWorldModel(suite=suite, cache_cards=False, landmarks=False)
    card_only.cards = task_aware.cards  # one card per task, computed once
    card_only.compare_with(starters["score"])
    card_only.learn(ids, scripts, outcomes)
    start = time.perf_counter()
    embedding = LearnedWorldModel(suite=suite)
    embedding.compare_with(starters["score"])
    embedding.learn(ids, scripts, outcomes)
    embedding_fit = time.perf_counter() - start
    blind = family_baseline(pretrain, suite, starters["score"])

    def fresh_task_aware():
        copy = task_aware.copy()
        copy.since_fit = copy.refit_every  # the anchors refit it
        return copy

    def fresh_embedding():
        copy, view_starter = embedding.untrained_copy(), embedding._starter_of
        copy.compare_with(starters["score"])  # its pretraining examples read as when it was pretrained
        copy.learn(ids, scripts, outcomes)
        copy.compare_with(view_starter)
        copy.since_fit = copy.refit_every  # the anchors refit it, as the task-aware copy
        return copy

    pretrain_cards = task_aware.card_seconds
    cost = {"tasks": len(set(ids)), "executions": len(pretrain),
            "execution_seconds": round(sum(o.wall_seconds for o in outcomes), 1),
            "card_seconds_pretraining_tasks": round(pretrain_cards, 1),
            "fit_seconds_task_aware": round(task_aware_fit, 2), "fit_seconds_embedding": round(embedding_fit, 1)}
    print(f"pretraining: {json.dumps(cost)}")
    results = []
    for spec in args.executions:
        view, _, path = str(spec).partition("=")
        if view not in starters or not path:
            raise SystemExit(f"--unseen: give each execution log as VIEW=PATH with VIEW script or score (got {spec})")
        records = learnable(read_executions(path))
        seen = sorted({t for t, _, _ in records if split_of.get(t) == "world_model"})
        if seen:
            raise SystemExit(f"--unseen: {path} holds pretraining-split tasks ({seen}): not unseen")
        for model in (task_aware, card_only, embedding):
            model.compare_with(starters[view])
        cards_before = task_aware.card_seconds
        for split_name in sorted({split_of.get(t, "folder") for t, _, _ in records}):
            mine = [r for r in records if split_of.get(r[0], "folder") == split_name]
            tasks = [r[0] for r in mine]
            real = np.array([r[2].reward for r in mine])
            requests = [StepRequest(r[0], r[1], "") for r in mine]
            predictions = {
                "task_aware": np.array([o.reward for o in task_aware.step_many(requests)]),
                "task_aware_no_landmarks": np.array([o.reward for o in card_only.step_many(requests)]),
                "embedding": np.array([o.reward for o in embedding.step_many(requests)]),
                "task_blind_family_mean": np.array([blind(r[0], r[1]) for r in mine]),
            }
            row = {"view": view, "log": path, "split": split_name, "executions": len(mine),
                   "tasks": len(set(tasks)), "models": {}}
            for name, predicted in predictions.items():
                rho, n = within_task_spearman(predicted, real, tasks)
                row["models"][name] = {"within_task_spearman": rho, "tasks_ranked": n,
                                       "pairwise": pairwise_accuracy(predicted, real, tasks)}
            for name, fresh in (("task_aware", fresh_task_aware), ("embedding", fresh_embedding)):
                predicted, real_rest, rest_tasks = after_anchors(mine, args.anchors, args.seed, fresh)
                rho, n = within_task_spearman(predicted, real_rest, rest_tasks)
                row["models"][f"{name}_after_{args.anchors}_anchors"] = {
                    "within_task_spearman": rho, "tasks_ranked": n,
                    "pairwise": pairwise_accuracy(predicted, real_rest, rest_tasks)}
            row["card_seconds"] = round(task_aware.card_seconds - cards_before, 1)
            results.append(row)
            shown = "  ".join(f"{k} {v['within_task_spearman']:.3f} ({v['tasks_ranked']} tasks)"
                              for k, v in row["models"].items())
            print(f"{view:6} {split_name:8} {Path(path).name:48} n={len(mine):4}  {shown}", flush=True)
    out = {"date": time.strftime("%Y-%m-%d"), "pretraining": cost, "pretraining_logs": [str(p) for p in args.unseen],
           "target": "task_aware within-task Spearman >= 0.5 in the score view on tasks it never saw",
           "results": results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"written to {args.out}")
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("executions", nargs="+", help="execution logs (JSONL); with --unseen, VIEW=PATH each")
    parser.add_argument("--unseen", type=Path, action="append", default=None, metavar="PRETRAIN_LOG",
                        help="fit the world models on this log (world_model split; repeat the flag for more) and "
                             "rank the executions' tasks, which they never saw")
    parser.add_argument("--model", default="smollm2-135m-instruct", help="the world model (frozen)")
    parser.add_argument("--modes", nargs="+", default=["score", "generate", "learned"],
                        choices=["score", "generate", "learned"])
    parser.add_argument("--encoder", default="all-minilm-l6-v2", help="learned mode: the frozen text encoder")
    parser.add_argument("--reuse", type=Path, default=None,
                        help="an earlier output JSON: take its score/generate predictions (same executions)")
    parser.add_argument("--generate-limit", type=int, default=None,
                        help="generate mode on a seeded random subset of this many scripts (it costs far more)")
    parser.add_argument("--score-limit", type=int, default=None, help="score mode on a seeded random subset")
    parser.add_argument("--max-new-tokens", type=int, default=256, help="generate mode")
    parser.add_argument("--batch-size", type=int, default=8, help="world-model prompts per forward / generation pass")
    parser.add_argument("--fit-share", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--include-gated", action="store_true")
    parser.add_argument("--anchors", type=int, default=2, help="--unseen: also rank each task's executions after "
                        "this many of them were learned as anchors (the rest are ranked)")
    parser.add_argument("--out", type=Path, default=Path("runs/bench/world_model_fidelity.json"))
    args = parser.parse_args(argv)
    if args.unseen:
        unseen_main(args)
        return
    rows = [r for path in map(Path, args.executions) for r in load(path, args.include_gated)]
    real = np.array([r["outcome"]["reward"] for r in rows])
    tasks = [r["task"] for r in rows]
    statuses: dict[str, int] = {}
    for r in rows:
        statuses[r["outcome"]["status"]] = statuses.get(r["outcome"]["status"], 0) + 1
    print(f"{len(rows)} real executions from {len(set(tasks))} tasks: {statuses}")
    reused = json.loads(args.reuse.read_text()) if args.reuse else None
    if reused is not None and reused["executions"] != len(rows):
        raise SystemExit(f"--reuse {args.reuse}: {reused['executions']} executions, these are {len(rows)}")
    results = []
    for mode in args.modes:
        keep = list(range(len(rows)))
        limit = args.generate_limit if mode == "generate" else args.score_limit
        if limit is not None and limit < len(rows):
            keep = sorted(np.random.default_rng(args.seed).choice(len(rows), limit, replace=False))
        earlier = next((r for r in (reused or {}).get("results", []) if r["mode"] == mode), None)
        if earlier is not None:  # the LLM is memoryless: its answers do not depend on the split
            keep = [p["index"] for p in earlier["scripts"]]
        subset = [rows[i] for i in keep]
        fit, test = split([r["code"] for r in subset], args.fit_share, args.seed)
        sub_real, sub_tasks = real[keep], [tasks[i] for i in keep]
        pairs, parse_failures = None, 0
        start = time.perf_counter()
        if earlier is not None:
            predicted = np.array([p["predicted"] for p in earlier["scripts"]])
            seconds = earlier["seconds"]
            parse_failures = earlier.get("parse_failures", 0)
            print(f"  {mode}: {len(subset)} predictions reused from {args.reuse}")
        elif mode == "learned":
            predicted, pairs = learned_predictions(subset, fit, test, args)
            seconds = time.perf_counter() - start
        else:
            wm = LMWorldModel(model=args.model, mode=mode, max_new_tokens=args.max_new_tokens, seed=args.seed,
                              batch_size=args.batch_size)
            outcomes = []
            for first in range(0, len(subset), 32):
                chunk = subset[first : first + 32]
                outcomes += wm.step_many([StepRequest(r["task"], r["code"], r["response"]) for r in chunk])
                print(f"  {mode}: {len(outcomes)}/{len(subset)} scripts, {time.perf_counter() - start:.0f} s",
                      flush=True)
            seconds = time.perf_counter() - start
            predicted = np.array([o.reward for o in outcomes])
            parse_failures = wm.parse_failures
        result = evaluate(mode, predicted, sub_real, sub_tasks, fit, test, pairs)
        result.update(seconds=seconds, seconds_per_script=seconds / len(subset), parse_failures=parse_failures,
                      reliability_raw=reliability(predicted, real[keep]),
                      scripts=[{"index": int(i), "task": tasks[i], "real": float(real[i]), "predicted": float(p)}
                               for i, p in zip(keep, predicted, strict=True)])
        results.append(result)
        print(json.dumps({k: v for k, v in result.items() if k not in ("map", "scripts")}, indent=1))
        args.out.parent.mkdir(parents=True, exist_ok=True)
        plot_reliability(result, args.out.with_name(f"reliability_{mode}.png"))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"executions": len(rows), "statuses": statuses, "results": results}, indent=1))
    print(f"\n{'mode':9} {'n fit/test':>10} {'spearman raw':>12} {'calibrated':>10} {'MAE raw':>8} {'calibrated':>10} "
          f"{'MSE raw':>8} {'calibrated':>10} {'pairwise raw':>12} {'calibrated':>10} {'s/script':>8}")
    for r in results:
        print(f"{r['mode']:9} {r['fit']:>4}/{r['test']:<5} {r['spearman_raw']:12.3f} {r['spearman_calibrated']:10.3f} "
              f"{r['mae_raw']:8.3f} {r['mae_calibrated']:10.3f} {r['mse_raw']:8.3f} {r['mse_calibrated']:10.3f} "
              f"{r['pairwise_raw']:12.3f} {r['pairwise_calibrated']:10.3f} {r['seconds_per_script']:8.2f}")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
