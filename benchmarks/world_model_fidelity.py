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
from wmrl.autoresearch.environments.lm_world_model import LMWorldModel
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
    from wmrl.autoresearch.environments.learned import LearnedWorldModel
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("executions", type=Path, nargs="+")
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
    parser.add_argument("--out", type=Path, default=Path("runs/bench/world_model_fidelity.json"))
    args = parser.parse_args(argv)

    rows = [r for path in args.executions for r in load(path, args.include_gated)]
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
