"""A controlled test of each correction: a world model with a known bias and known noise, and what each correction
recovers, on the cheapest domain that runs the real method.

The paper's analysis (bias enters the error bound at full size, noise is damped by the step size; Online Debiasing
shrinks the first, Inverse-Variance Denoising the second) is about a world model whose rewards are a monotone
distortion of the real ones plus noise. A learned world model's errors are unknown, so this benchmark builds one
whose errors are known: :class:`wmrl.vla.world_models.distorted_oracle.DistortedOracle` grades with the true reward ``r`` and
returns ``clip(g(r) + noise, 0, 1)``, ``g`` a chosen monotone distortion (the *bias*), the noise Gaussian with a
chosen sd (the *noise*). The domain is :class:`wmrl.vla.simulators.bandit.TargetBandit` (one action per episode, a continuous
true reward, a linear Gaussian policy): the real :class:`~wmrl.vla.module.VLAGRPOModule` and the real
callbacks (``AnchorRouting``, ``WorldModelReward``, ``OnlineDebiasing``, ``InverseVarianceDenoising``) run unchanged;
a training step takes milliseconds instead of PushT's seconds, so every arm runs with several seeds.

Arms (diagnostic arms, not rows of the paper's table), per world-model setting:

- ``oracle``: GRPO with every group graded by the true reward (the reference the corrections try to reach).
- ``anchors_only``: GRPO on the anchor groups alone: the routing, anchor draws and rollouts of the world-model arms
  (one group in eight graded by the true reward), with every world-model group's advantages set to 0 and the anchors'
  rescaled to their own update (:class:`AnchorsAlone`): real GRPO at WMRL's executions, paired with the world-model
  arms draw for draw. A world model that knows nothing must not fall below it.
- ``anchors_only_separate``: the same budget drawn apart: one group per step from the data module, graded by the true
  reward (its own contexts and noise: its difference to a world-model arm also holds the sampling's randomness).
- ``uncorrected``: one group in eight is an anchor (true reward), the other seven get the distorted world model's
  reward as it is.
- the paper's corrections: ``debias_only_paper`` (``OnlineDebiasing``: 10 equal-width bins, isotonic, flat ends),
  ``denoise_only_paper`` (``InverseVarianceDenoising``: the anchors' advantages weighted up, relative and capped),
  ``wmrl_paper`` (both);
- the kit's: ``debias_only`` (``OnlineDebiasing(method="strict")``: a map that introduces no ties),
  ``denoise_only`` (``VarianceFusion``: the world-model rows weighed by their measured agreement, down to 0),
  ``wmrl`` (both).

Settings: ``bias`` (a monotone distortion, no noise), ``noise`` (no distortion, Gaussian noise), ``clean`` (the world
model is the truth: every arm with world-model groups should then match ``oracle``; a check of the machinery),
``chance`` (independent of the truth), ``anti`` (ranks backwards) and ``bias_noise`` (both errors). The
held-out score is the mean true reward of the noise-free policy on held-out contexts (also its success rate), paired
across arms (the same seed starts every arm from the same policy on the same contexts) and pooled over seeds, with
95% intervals that resample contexts within seeds. Diagnostics per arm: the agreement of the advantages the update
used on world-model rows with the advantages the true reward would have given (mean within-group correlation), the
calibration's bias reduction and rank correlation, the denoising weight or fusion share, and the anchors' share of
the update.

Every setting (distortion, noise, learning rate, steps) was chosen on a separate split of contexts (``--first-seed
1000``: training 1000-1063, selection 1064-1463), never on the reported held-out contexts (64-463).

    .venv/bin/python benchmarks/corrections.py                       # the reported table (5 seeds)
    .venv/bin/python benchmarks/corrections.py --seeds 0 --steps 4   # a tiny smoke run

It writes ``benchmarks/RESULTS-corrections.md`` and ``benchmarks/results/corrections.json``; a section headed
``## Reading (by hand, <date>)`` at the end of the markdown is kept when the tables are regenerated. Runs (metrics,
held-out records) go under ``runs/corrections/<setting>/seed<k>/<arm>``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from wmrl.algorithms.stats import bootstrap_mean, interval, interval_text, paired_gain, seed_interval  # noqa: E402
from wmrl.benchmarking import cpu_probe, kept_by_hand, machine  # noqa: E402
from wmrl.callbacks.base import RLCallback  # noqa: E402
from wmrl.modules.base import EVAL_FILE  # noqa: E402

ARMS = ("oracle", "anchors_only", "anchors_only_separate", "uncorrected", "debias_only_paper", "denoise_only_paper", "wmrl_paper",
        "debias_only", "denoise_only", "wmrl")
WORLD_MODEL_ARMS = ARMS[3:]
SETTING_FREE = ("oracle", "anchors_only", "anchors_only_separate")  # no world model's reward used: one run per seed
LABELS = {"oracle": "every group graded by the true reward",
          "anchors_only": "the anchor groups alone (true reward; the world-model arms' draws)",
          "anchors_only_separate": "one group a step alone (true reward; drawn apart)",
          "uncorrected": "anchors + world model, uncorrected",
          "debias_only_paper": "+ the paper's debiasing", "denoise_only_paper": "+ the paper's denoising",
          "wmrl_paper": "+ both of the paper's corrections",
          "debias_only": "+ the kit's debiasing (strict map)", "denoise_only": "+ the kit's fusion (measured agreement)",
          "wmrl": "+ both of the kit's corrections"}
#: the world model of each setting: DistortedOracle's distortion and noise (chosen on the selection split; chance,
#: anti and bias_noise chosen before any run, to know nothing or to combine the two)
SETTINGS = {
    "clean": {"distortion": "identity", "noise_sd": 0.0},
    "bias": {"distortion": "power", "power": 6.0, "noise_sd": 0.0},
    "bias_extreme": {"distortion": "power", "power": 20.0, "noise_sd": 0.0},
    # the affine part (offset, scale) is cancelled by group standardisation: what counts is noise_sd / scale = 1,
    # noise as large as the true reward's whole range; the offset keeps clipping below 1e-5
    "noise": {"distortion": "identity", "offset": 0.45, "scale": 0.1, "noise_sd": 0.1},
    "chance": {"distortion": "independent", "offset": 0.5, "noise_sd": 0.1},
    "anti": {"distortion": "reverse", "noise_sd": 0.0},
    "bias_noise": {"distortion": "power", "power": 6.0, "offset": 0.25, "scale": 0.5, "noise_sd": 0.05},
}
RESULT_FILE = "result.json"  # a run's diagnostics at the end, beside its heldout.jsonl
SITTING_FILE = "sitting.json"  # under --out: when the runs were made, the machine's load and speed around them
WHAT = {"clean": "the world model is the truth (a check of the machinery)",
        "bias": "a strong monotone distortion, no noise: r_wm = r^6",
        "bias_extreme": "an extreme monotone distortion, no noise: r_wm = r^20 (most rewards fall in the first of "
                        "the paper's 10 bins)",
        "noise": "no distortion, Gaussian noise as large as the reward's range: r_wm = 0.45 + 0.1 r + N(0, 0.1^2) "
                 "(noise sd / scale = 1)",
        "chance": "a world model at chance: r_wm = 0.5 + N(0, 0.1^2), independent of r",
        "anti": "a world model that ranks backwards: r_wm = 1 - r",
        "bias_noise": "the distortion and noise together: r_wm = 0.25 + 0.5 r^6 + N(0, 0.05^2) (noise sd / scale = "
                      "0.1)"}


@dataclass(frozen=True)
class Budget:
    """The training regime every arm shares (chosen on the selection split)."""

    steps: int = 100
    groups: int = 8  # contexts per step (the anchors' arm: 1)
    group_size: int = 8
    lr: float = 1e-2
    exploration_std: float = 0.1
    kl_coef: float = 0.0
    train_states: int = 64
    heldout_states: int = 400
    first_seed: int = 0


class AdvantageAgreement(RLCallback):
    """A diagnostic (last in the callback list): how well the advantages the update uses on world-model rows agree
    with those the true reward would have given the same rollouts (mean within-group correlation), the share of
    world-model rows whose reward ties another row of their group (the truth, continuous, never ties: a tie is
    ranking lost), and how much of the update the anchors carry.

    It reads the true reward from the oracle (the simulator), which a real run never can: a measurement of the
    corrections, not part of the method.
    """

    def __init__(self, oracle) -> None:
        self.oracle = oracle
        self.agreement: list[float] = []
        self.anchor_share: list[float] = []
        self.tied: list[float] = []

    def on_advantages(self, trainer, pl_module, batch) -> None:
        import torch

        from wmrl.algorithms.grpo import group_advantages

        truth = torch.tensor([o.reward for o in self.oracle.grade([t.episode for t in batch.trajectories])],
                             dtype=torch.float32)
        true_advantages, _ = group_advantages(truth, batch.group_ids, batch.graded)
        values, tied = [], []
        for group in torch.unique(batch.group_ids[~batch.is_real]).tolist():
            rows = (batch.group_ids == group) & ~batch.is_real
            used, true = batch.advantages[rows].double(), true_advantages[rows].double()
            rewards = batch.rewards[rows].tolist()
            tied.append(sum(rewards.count(r) > 1 for r in rewards) / len(rewards))
            if float(used.std()) > 0 and float(true.std()) > 0:
                values.append(float(torch.corrcoef(torch.stack([used, true]))[0, 1]))
        metrics = {"diagnostic/anchor_share": float(batch.advantages[batch.is_real].abs().sum()
                                                    / max(float(batch.advantages.abs().sum()), 1e-12))}
        self.anchor_share.append(metrics["diagnostic/anchor_share"])
        if values:
            metrics["diagnostic/advantage_agreement"] = float(np.mean(values))
            self.agreement.append(metrics["diagnostic/advantage_agreement"])
        if tied:
            metrics["diagnostic/tied"] = float(np.mean(tied))
            self.tied.append(metrics["diagnostic/tied"])
        pl_module.log_dict(metrics, on_step=True, batch_size=len(batch))


class AnchorsAlone(RLCallback):
    """The anchors' own update inside a world-model arm's step: world-model rows' advantages 0, the anchors' rescaled
    so that the loss (a mean over every row) is their mean (:func:`~wmrl.algorithms.fusion.fusion_scales` at share 0).
    What ``VarianceFusion`` does when its share is 0, with no measurement behind it."""

    def on_advantages(self, trainer, pl_module, batch) -> None:
        from wmrl.algorithms.fusion import fusion_scales

        real_scale, wm_scale = fusion_scales(float((batch.used & batch.is_real).sum()),
                                             float((batch.used & ~batch.is_real).sum()), 0.0)
        batch.advantages[batch.is_real] *= real_scale
        batch.advantages[~batch.is_real] *= wm_scale


def build(setting: str, arm: str, seed: int, budget: Budget, run_dir: Path):
    """The module, data module and callbacks of one run (every seed in them is ``seed``)."""
    from wmrl.callbacks import (
        AnchorRouting,
        InverseVarianceDenoising,
        OnlineDebiasing,
        VarianceFusion,
        WorldModelReward,
    )
    from wmrl.vla.datamodule.bandit_contexts import BanditDataModule
    from wmrl.vla.module import VLAGRPOModule
    from wmrl.vla.simulators.bandit import LinearGaussianPolicy, TargetBandit
    from wmrl.vla.world_models.distorted_oracle import DistortedOracle

    bandit = TargetBandit()
    module = VLAGRPOModule(simulator=bandit, group_size=budget.group_size, exploration_std=budget.exploration_std,
                           lr=budget.lr, kl_coef=budget.kl_coef, eval_at_start=True, torch_threads=1, seed=seed,
                           policy_instance=LinearGaussianPolicy())
    data = BanditDataModule(train_states=budget.train_states, heldout_states=budget.heldout_states,
                            first_seed=budget.first_seed, group_size=budget.group_size,
                            groups_per_step=1 if arm == "anchors_only_separate" else budget.groups,
                            steps_per_epoch=max(budget.steps // 2, 1), seed=seed)
    callbacks: list = []
    if arm == "anchors_only":  # the world-model arms' routing and rollouts; the world model's groups weigh nothing
        callbacks += [AnchorRouting(fraction=0.1, floor=1, selection="random", seed=seed),
                      WorldModelReward(DistortedOracle(bandit, seed=seed), side_grade=False), AnchorsAlone()]
    if arm in WORLD_MODEL_ARMS:
        world_model = DistortedOracle(bandit, **SETTINGS[setting], seed=seed)
        # the VLA arms' constants (configs/vla/arms/wmrl.yaml): one anchor group in eight, calibration and
        # denoising scaled to one anchor group (8 pairs) per step
        callbacks += [AnchorRouting(fraction=0.1, floor=1, selection="random", seed=seed),
                      WorldModelReward(world_model, side_grade=True)]
        if arm in ("debias_only_paper", "wmrl_paper", "debias_only", "wmrl"):
            method = "paper" if arm.endswith("_paper") else "strict"
            callbacks.append(OnlineDebiasing(min_pairs=16, refit_every=8, buffer_size=5000, bins=10, method=method))
        if arm in ("denoise_only_paper", "wmrl_paper"):
            callbacks.append(InverseVarianceDenoising(half_life=64, warmup=2, target=2.0, min_weight=1.0,
                                                      max_weight=4.0))
        if arm in ("denoise_only", "wmrl"):
            callbacks.append(VarianceFusion())
    callbacks.append(AdvantageAgreement(bandit))
    return module, data, callbacks


def run(setting: str, arm: str, seed: int, budget: Budget, run_dir: Path) -> dict:
    """Train one arm of one setting and seed; its held-out records (step -> context -> (reward, success)) and the
    diagnostics at the end."""
    import lightning.pytorch as pl
    from lightning.pytorch.loggers import CSVLogger

    if run_dir.exists():
        import shutil

        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    pl.seed_everything(seed, verbose=False)
    module, data, callbacks = build(setting, arm, seed, budget, run_dir)
    trainer = pl.Trainer(max_steps=budget.steps, accelerator="cpu", devices=1, logger=CSVLogger(run_dir, name="csv"),
                         default_root_dir=run_dir, callbacks=callbacks, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                         log_every_n_steps=1)
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*does not have many workers.*")
        warnings.filterwarnings("ignore", message=".*`IterableDataset` has `__len__` defined.*")
        trainer.fit(module, datamodule=data)
    by_name = {type(c).__name__: c for c in callbacks}
    agreement = by_name["AdvantageAgreement"]
    debias, denoise = by_name.get("OnlineDebiasing"), by_name.get("InverseVarianceDenoising")
    world_model = by_name.get("WorldModelReward")
    out = {"wall_s": time.perf_counter() - started,
           "advantage_agreement": float(np.mean(agreement.agreement)) if agreement.agreement else None,
           "anchor_share": float(np.mean(agreement.anchor_share)),
           "tied": float(np.mean(agreement.tied)) if agreement.tied else None,
           "bias_reduction": None, "rank_corr": None, "refits": None, "denoise_weight": None, "fusion_rho": None,
           "clipped": None}
    if debias is not None and debias.pairs:
        from wmrl.algorithms.debias import bias_reduction

        wm, real, groups = debias.columns()
        out.update(bias_reduction=bias_reduction(wm, real, groups, debias.calibration), rank_corr=debias.rank_corr,
                   refits=debias.refits)
    if denoise is not None:
        out["denoise_weight"] = denoise.weight
    if (fusion := by_name.get("VarianceFusion")) is not None:
        out["fusion_rho"] = fusion.share
    if world_model is not None:
        out["clipped"] = world_model.world_model.metrics()["clipped"]
    (run_dir / RESULT_FILE).write_text(json.dumps(out))
    return read_run(run_dir)


def finished(run_dir: Path) -> bool:
    """A run that wrote its diagnostics (``--reuse`` reads it instead of training again)."""
    return (run_dir / RESULT_FILE).is_file() and (run_dir / EVAL_FILE).is_file()


def read_run(run_dir: Path) -> dict:
    """A finished run: its held-out records (step -> context -> (true reward, success)) and its diagnostics."""
    evaluations = {}
    for line in (run_dir / EVAL_FILE).read_text().splitlines():
        record = json.loads(line)
        evaluations[int(record["step"])] = {e["task_id"]: (e["coverage"], e["success"]) for e in record["episodes"]}
    return {"evaluations": evaluations, **json.loads((run_dir / RESULT_FILE).read_text())}


def run_dir(out: Path, setting: str, seed: int, arm: str) -> Path:
    return out / ("any" if arm in SETTING_FREE else setting) / f"seed{seed}" / arm


def run_sitting(todo: list[tuple[str, int, str]], budget: Budget, out: Path) -> dict:
    """Train every job of ``todo`` in turn (a progress bar), recording the sitting in ``<out>/sitting.json``: when it
    started, how long it took, the load average and the speed probe before and after."""
    from rich.progress import Progress

    started = datetime.datetime.now(datetime.UTC)
    load_before, probe_before = os.getloadavg()[0], cpu_probe()
    with Progress() as progress:
        task = progress.add_task("corrections", total=len(todo))
        for setting, seed, arm in todo:
            progress.update(task, description=f"{setting} seed {seed} {arm}")
            run(setting, arm, seed, budget, run_dir(out, setting, seed, arm))
            progress.advance(task)
    sitting = {"started": f"{started:%Y-%m-%d %H:%M} UTC", "runs": len(todo),
               "minutes": (datetime.datetime.now(datetime.UTC) - started).total_seconds() / 60,
               "load": [load_before, os.getloadavg()[0]], "probe_s": [probe_before, cpu_probe()]}
    out.mkdir(parents=True, exist_ok=True)
    (out / SITTING_FILE).write_text(json.dumps(sitting, indent=1))
    return sitting


# -- statistics ------------------------------------------------------------------------------------------------
def final(result: dict, index: int) -> dict[str, float]:
    """The last evaluation's reward (``index`` 0) or success (1) per context."""
    last = result["evaluations"][max(result["evaluations"])]
    return {task: float(values[index]) for task, values in last.items()}


def start(result: dict, index: int) -> dict[str, float]:
    return {task: float(values[index]) for task, values in result["evaluations"][0].items()}


def pooled(per_seed: dict[int, dict[str, float]]) -> dict[str, list[float]]:
    return {f"seed{s}": [e[k] for k in sorted(e)] for s, e in sorted(per_seed.items())}


def difference(base: dict[int, dict[str, float]], mine: dict[int, dict[str, float]]) -> dict:
    """``mine - base`` paired on (seed, context), pooled over seeds, with two 95% intervals: ``low`` / ``high``
    resample contexts within seeds (the evaluation's noise for these seeds), ``over_seeds`` is the Student-t interval
    of the seeds' own differences (``per_seed``: training's randomness too, the one that says whether another seed
    could flip the sign)."""
    out = interval(paired_gain(pooled(base), pooled(mine)))
    per_seed = [float(np.mean([mine[s][k] - base[s][k] for k in base[s]])) for s in sorted(base)]
    return {**out, "per_seed": per_seed, "over_seeds": interval(seed_interval(per_seed))}


def summarise(results: dict[str, dict[int, dict[str, dict]]]) -> dict:
    """Per setting and arm: the held-out true reward and success (pooled, per seed), the paired gain over the start,
    the paired differences to ``oracle`` and to ``uncorrected``, and the diagnostics (means over seeds)."""
    out = {}
    for setting, by_seed in results.items():
        seeds = sorted(by_seed)
        arms = [a for a in ARMS if all(a in by_seed[s] for s in seeds)]
        rows = {}
        for arm in arms:
            row = {"label": LABELS[arm]}
            for metric, index in (("reward", 0), ("success", 1)):
                mine = {s: final(by_seed[s][arm], index) for s in seeds}
                row[metric] = interval(bootstrap_mean(pooled(mine)))
                row[f"{metric}_per_seed"] = {str(s): float(np.mean(list(mine[s].values()))) for s in seeds}
                row[f"{metric}_gain"] = difference({s: start(by_seed[s][arm], index) for s in seeds}, mine)
                for base in ("oracle", "anchors_only", "uncorrected"):
                    if base in arms and base != arm:
                        row[f"{metric}_vs_{base}"] = difference({s: final(by_seed[s][base], index) for s in seeds}, mine)
            for key in ("advantage_agreement", "tied", "anchor_share", "bias_reduction", "rank_corr", "refits",
                        "denoise_weight", "fusion_rho", "clipped", "wall_s"):
                values = [by_seed[s][arm].get(key) for s in seeds if by_seed[s][arm].get(key) is not None]
                row[key] = float(np.mean(values)) if values else None
            rows[arm] = row
        start_rewards = {s: start(by_seed[s][arms[0]], 0) for s in seeds}
        rows["start"] = {"label": "the starting policy", "reward": interval(bootstrap_mean(pooled(start_rewards)))}
        out[setting] = rows
    return out


def both(d: dict | None) -> str:
    """A difference with both intervals: within seeds (contexts resampled), then over seeds."""
    if d is None:
        return "-"
    above, below = sum(v > 0 for v in d["per_seed"]), sum(v < 0 for v in d["per_seed"])
    return (f"{interval_text(d)}; over seeds [{d['over_seeds']['low']:+.3f}, {d['over_seeds']['high']:+.3f}] "
            f"({above} seeds above 0, {below} below)")


def verdicts(summary: dict) -> list[tuple[str, str, bool]]:
    """The checks, as measured (pooled held-out reward, paired). The kit's corrections: a world model that knows
    nothing costs nothing (``wmrl`` - ``anchors_only``, its interval over seeds above -0.02 in every setting), one that
    knows something adds to the anchors (above 0 in ``clean``, ``bias``, ``bias_extreme``), fusion beats the
    uncorrected mixture under noise (point above 0), and the strict map does not lose to the raw rewards under a
    distortion (point >= 0). Then the paper's own claims for its corrections (a check is met only when the interval
    over seeds agrees: the stricter of the two; both are reported)."""
    out = []
    for setting, rows in summary.items():
        if "wmrl" in rows and "anchors_only" in rows:
            d = rows["wmrl"]["reward_vs_anchors_only"]
            out.append((f"{setting}: the kit's wmrl costs nothing: wmrl - anchors_only, over seeds low >= -0.02", both(d),
                        d["over_seeds"]["low"] >= -0.02))
            if setting in ("clean", "bias", "bias_extreme"):
                out.append((f"{setting}: the kit's wmrl adds to the anchors: wmrl - anchors_only, over seeds low > 0",
                            both(d), d["over_seeds"]["low"] > 0))
        if setting in ("noise", "bias_noise") and "wmrl" in rows and "uncorrected" in rows:
            d = rows["wmrl"]["reward_vs_uncorrected"]
            out.append((f"{setting}: the kit's wmrl beats the uncorrected mixture: wmrl - uncorrected, point > 0", both(d),
                        d["point"] > 0))
        if setting in ("bias", "bias_extreme") and "debias_only" in rows and "uncorrected" in rows:
            d = rows["debias_only"]["reward_vs_uncorrected"]
            out.append((f"{setting}: the strict map keeps the ranking: debias_only - uncorrected, point >= 0", both(d),
                        d["point"] >= 0))
    for setting, correction, arm in (("bias", "debiasing", "debias_only_paper"),
                                     ("bias_extreme", "debiasing", "debias_only_paper"),
                                     ("noise", "denoising", "denoise_only_paper")):
        rows = summary.get(setting, {})
        if arm not in rows or "uncorrected" not in rows:
            continue
        gain = rows[arm]["reward_vs_uncorrected"]
        out.append((f"{setting}: the paper's {correction} recovers: {arm} - uncorrected above 0", both(gain),
                    gain["low"] > 0 and gain["over_seeds"]["low"] > 0))
    return out


def markdown(summary: dict, budget: Budget, seeds: list[int], command: str, sitting: str) -> list[str]:
    lines = [
        "# A controlled test of each correction: a world model with a known bias and known noise",
        "",
        f"Generated by `benchmarks/corrections.py` ({sitting}). Machine: {machine()}.",
        f"Command: `{command}`",
        "",
        f"Domain: `wmrl.vla.simulators.bandit.TargetBandit` (one action per episode, true reward exp(-d^2 / 2 w^2), w = 64 px) with "
        f"the real `VLAGRPOModule` and callbacks; a linear Gaussian policy starting at zero. {budget.steps} steps of "
        f"{budget.groups} contexts x {budget.group_size} rollouts, lr {budget.lr:g}, exploration std "
        f"{budget.exploration_std:g}, KL {budget.kl_coef:g}; anchors one group in eight (fraction 0.1, floor 1); "
        "OnlineDebiasing min_pairs 16, refit_every 8, 10 bins (the paper's map: equal-width bins, flat ends; the kit's: "
        "quantile knots, strictly increasing, sloped ends, anchors out of sample); InverseVarianceDenoising warmup 2, "
        "half-life 64, target 2, clip [1, 4] (the VLA arms' constants); the kit's VarianceFusion half-life 32 anchor "
        f"groups, share = the 95% lower bound of the within-group agreement. {len(seeds)} seeds ({', '.join(map(str, seeds))}): seed k "
        "seeds the exploration noise, the world model's noise, the anchor draws and the order of training contexts; "
        f"every seed starts from the same policy. Held-out: {budget.heldout_states} contexts (seeds "
        f"{budget.first_seed + budget.train_states}-{budget.first_seed + budget.train_states + budget.heldout_states - 1}), "
        "the noise-free policy's true reward (and success, reward >= 0.5), pooled over seeds. Every difference is paired "
        "on (seed, context) and carries two 95% intervals: a bootstrap over contexts within seeds (the evaluation's "
        "noise for these seeds) and a Student-t interval over the seeds' own differences (training's randomness too; "
        "the verdicts below require both).",
        "",
    ]
    def cell(v, f=".2f"):
        return "-" if v is None else format(v, f)

    for setting, rows in summary.items():
        arms = [a for a in ARMS if a in rows]
        lines += [f"## Setting `{setting}`: {WHAT[setting]}", "",
                  f"Starting policy: held-out true reward {interval_text(rows['start']['reward'], signed=False)}. "
                  "Differences: the point, its interval over contexts within seeds, then its interval over seeds.", "",
                  "| arm | held-out true reward | per seed | gain over start | vs anchors only | vs uncorrected |",
                  "|---|---|---|---|---|---|"]
        for arm in arms:
            r = rows[arm]
            per = ", ".join(f"{v:.3f}" for v in r["reward_per_seed"].values())
            lines.append(f"| {r['label']} | {interval_text(r['reward'], signed=False)} | {per} | "
                         f"{interval_text(r['reward_gain'])} | {both(r.get('reward_vs_anchors_only'))} | "
                         f"{both(r.get('reward_vs_uncorrected'))} |")
        lines += ["", "| arm | success | advantage agreement (world-model rows) | tied (world-model rows) | anchors' share "
                  "of the update | bias reduction | rank correlation of r_wm with r (anchors) | denoising weight | fusion share "
                  "(rho) | clipped |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for arm in arms:
            r = rows[arm]
            lines.append(f"| {r['label']} | {r['success']['point']:.3f} | {cell(r['advantage_agreement'])} | "
                         f"{cell(r['tied'])} | {cell(r['anchor_share'])} | {cell(r['bias_reduction'])} | "
                         f"{cell(r['rank_corr'])} | {cell(r['denoise_weight'])} | {cell(r.get('fusion_rho'))} | "
                         f"{cell(r['clipped'], '.3f')} |")
        lines.append("")
    lines += ["## The checks, as measured", ""]
    for what, value, ok in verdicts(summary):
        lines.append(f"- {'met' if ok else 'NOT met'}: {what}: {value}")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--settings", nargs="+", choices=sorted(SETTINGS), default=list(SETTINGS))
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    parser.add_argument("--steps", type=int, default=Budget.steps, help="training steps of every arm")
    parser.add_argument("--heldout-states", type=int, default=Budget.heldout_states)
    parser.add_argument("--first-seed", type=int, default=Budget.first_seed, help="the first context's seed: 1000 "
                        "gives the selection split (training 1000-1063, selection 1064-)")
    parser.add_argument("--lr", type=float, default=Budget.lr)
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "corrections")
    parser.add_argument("--results", type=Path, default=ROOT / "benchmarks", help="where RESULTS-corrections.md and "
                        "results/corrections.json go")
    parser.add_argument("--reuse", action="store_true", help="read finished runs instead of training them again (the "
                        "report names the sitting that made them)")
    args = parser.parse_args(argv)
    if args.steps < 2:
        parser.error("--steps must be >= 2 (held-out reward is measured at the start, half-way and at the end)")
    budget = Budget(steps=args.steps, heldout_states=args.heldout_states, first_seed=args.first_seed, lr=args.lr)
    jobs = [(setting, seed, arm) for setting in args.settings for seed in args.seeds for arm in args.arms]
    todo, dirs = [], set()
    for job in jobs:  # a setting-free arm's run serves every setting: trained once
        where = run_dir(args.out, *job)
        if where not in dirs and not (args.reuse and finished(where)):
            todo.append(job)
        dirs.add(where)
    sitting = run_sitting(todo, budget, args.out) if todo else json.loads((args.out / SITTING_FILE).read_text())
    results: dict[str, dict[int, dict[str, dict]]] = {}
    for setting, seed, arm in jobs:
        results.setdefault(setting, {}).setdefault(seed, {})[arm] = read_run(run_dir(args.out, setting, seed, arm))
    summary = summarise(results)
    text_sitting = (f"one sitting, {sitting['started']}, {sitting['minutes']:.1f} min for {sitting['runs']} runs; load "
                    f"average {sitting['load'][0]:.1f} before, {sitting['load'][1]:.1f} after; speed probe "
                    f"{sitting['probe_s'][0]:.2f} / {sitting['probe_s'][1]:.2f} s"
                    + (f"; {len(jobs) - len(todo)} of {len(jobs)} runs read from disk (--reuse)" if len(todo) < len(jobs) else ""))
    command = "python benchmarks/corrections.py " + " ".join(argv if argv is not None else sys.argv[1:])
    report = {"machine": machine(), "command": command, "sitting": text_sitting, "seeds": args.seeds,
              "budget": budget.__dict__, "settings": {s: {**SETTINGS[s], "what": WHAT[s]} for s in args.settings},
              "load": sitting["load"], "probe_s": sitting["probe_s"],
              "summary": summary, "verdicts": [{"check": w, "value": v, "met": ok} for w, v, ok in verdicts(summary)]}
    (args.results / "results").mkdir(parents=True, exist_ok=True)
    (args.results / "results" / "corrections.json").write_text(json.dumps(report, indent=1))
    target = args.results / "RESULTS-corrections.md"
    previous = target.read_text() if target.is_file() else ""
    text = "\n".join(markdown(summary, budget, args.seeds, command, text_sitting)) + "\n"
    target.write_text(text + kept_by_hand(previous))
    print(text)
    if not all(math.isfinite(r["reward"]["point"]) for rows in summary.values() for r in rows.values()):
        raise SystemExit("a held-out reward is not finite")


if __name__ == "__main__":
    main()
