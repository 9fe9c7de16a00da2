"""The paper's VLA table and its ablation at CPU scale, in one sitting over several seeds: SFT, GRPO on sparse
success, GRPO on the raw progress world model, debiasing only, denoising only and WMRL, with held-out success and
paired intervals pooled over seeds.

The paper's VLA transfer (LIBERO-Long, MiniVLA-1B) reports SFT 37.4, GRPO with sparse success 38.3, GRPO with the raw
world-model reward 39.2 and WMRL 41.2; its ablation of the two corrections (on MLE-Dojo) orders uncorrected mixture <
denoising only < debiasing only < both. This script measures those rows on PushT with a small LeRobot policy:

- **SFT**: the policy after behaviour cloning on the scripted demonstrations (``BehaviourCloningWarmStart``). Every
  RL arm of a seed clones the same demonstrations with the same seed and evaluates that policy before its first
  step; the script checks that those evaluations agree episode for episode and reports them as the SFT row.
- **GRPO, sparse success**: ``configs/vla/arms/pusht.yaml`` (every group graded by the simulator's success).
- **GRPO, raw world model**: ``+ configs/vla/arms/raw_world_model.yaml`` (no anchors; every group graded by the
  progress world model's shaped reward, uncalibrated).
- **Debiasing only** / **denoising only**: ``+ configs/vla/arms/debias_only.yaml`` / ``denoise_only.yaml`` (WMRL
  without ``InverseVarianceDenoising`` / without ``OnlineDebiasing``).
- **WMRL**: ``+ configs/vla/arms/wmrl.yaml`` (one anchor group in eight graded by sparse success; the other groups
  by the world model, calibrated online on the anchors by a map that keeps every ranking, and weighed by their
  measured agreement with the anchors: the kit's corrections); ``wmrl_paper.yaml`` is the same arm with the paper's
  corrections (the isotonic map on equal-width bins, the anchors' advantages weighted by inverse variance).
- Beyond those six rows (run after them, so a sitting cut short keeps whole seeds of the six): the **uncorrected
  mixture** (``uncorrected.yaml``: WMRL's anchors without either correction, the paper's ablation baseline), **sparse
  GRPO at WMRL's real-label budget** (``sparse_budget.yaml``: one group per step, as many real-graded episodes as
  WMRL's anchors) and, a diagnostic (ACT preset), **GRPO on a perfect progress world model** (``shaped_oracle.yaml``:
  every group graded by the simulator's own dense reward, read and shaped exactly as the world model's predictions
  are), which separates the world model's errors from the shaping objective's own mismatch with success.

Each RL arm of each seed is one ``wmrl fit`` process (within a seed: the same demonstrations, SFT, initial states and
step budget). Seed ``k`` (``--seeds``) is ``--seed_everything=k``, which the configs interpolate into every seed of
the run, plus demonstrations from other initial states (``--data.init_args.demo_seed=100000+1000k``); the training
and held-out initial states are the same in every seed. From what the runs wrote (``heldout.jsonl``: every held-out
episode; ``metrics.csv``: every step) it reports per arm: held-out success pooled over seeds and states with a 95%
bootstrap interval that resamples states within seeds; the gain over SFT and the difference to sparse GRPO, *paired*
on (seed, state); the paired differences between the ablation arms (:data:`COMPARISONS`); each seed's points;
simulator steps, real-graded episodes and wall-clock per seed; the corrections' state at the end (anchor pairs,
calibration refits, the world model's rank correlation with the real success on the anchors, raw and calibrated,
and the denoising weight); and each run's load average and speed probe. The ordering of the rows is reported as
measured.

    .venv312/bin/python benchmarks/vla_arms.py --jobs 4 --seeds 0 1 2   # ACT, every arm, three seeds (see RESULTS-vla.md)
    .venv312/bin/python benchmarks/vla_arms.py --jobs 2            # one seed, two runs at a time: 22 minutes on 2 idle cores
    .venv312/bin/python benchmarks/vla_arms.py --preset smolvla --jobs 2   # the tiny SmolVLA, smaller budget: 13 min
    .venv312/bin/python benchmarks/vla_arms.py --preset corrections --jobs 2 --seeds 0 1 2   # kit vs paper, ACT
    .venv312/bin/python benchmarks/vla_arms.py --reuse --seeds 0 1 2   # finished runs are read, not rerun
    .venv312/bin/python benchmarks/vla_arms.py --trainer.max_steps=20   # wmrl fit flags go to every arm

It writes ``benchmarks/RESULTS-vla.md`` (``RESULTS-vla-smolvla.md``) and ``benchmarks/results/vla-arms.json``
(``vla-arms-smolvla.json``); a section headed ``## Reading (by hand, <date>)`` at the end of the markdown is kept
when the tables are regenerated. Runs go under ``runs/vla_arms/<preset>/seed<k>/<arm>``; each arm process runs this
checkout's ``src`` (``PYTHONPATH``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from wmrl.algorithms.stats import bootstrap_mean, interval, interval_text, paired_gain, seed_interval  # noqa: E402
from wmrl.benchmarking import cpu_probe, kept_by_hand, machine  # noqa: E402
from wmrl.modules.base import EVAL_FILE  # noqa: E402
from wmrl.run_report import find_metrics  # noqa: E402

ARMS = ("sft", "sparse_grpo", "raw_world_model", "debias_only", "denoise_only", "wmrl", "uncorrected", "sparse_budget",
        "shaped_oracle", "wmrl_paper")
RL_ARMS = ARMS[1:]
#: the six rows of the issue's table: the paper's VLA rows plus its two single-correction ablations
PAPER_ARMS = ("sft", "sparse_grpo", "raw_world_model", "debias_only", "denoise_only", "wmrl")
LABELS = {"sft": "SFT only", "sparse_grpo": "GRPO, sparse success", "raw_world_model": "GRPO, raw world model",
          "debias_only": "debiasing only (anchors + debiasing)", "denoise_only": "denoising only (anchors + denoising)",
          "wmrl": "WMRL, the kit's corrections (anchors + strict map + fusion by agreement)",
          "wmrl_paper": "WMRL, the paper's corrections (anchors + debiasing + denoising)",
          "uncorrected": "uncorrected mixture (anchors, no correction)",
          "sparse_budget": "GRPO, sparse success, WMRL's real-label budget",
          "shaped_oracle": "GRPO, a perfect progress model (the simulator's shaped dense reward)"}
# LIBERO-Long success (%) of the paper's VLA table; its ablation rows (and the budget-matched and oracle arms) are not
# among that table's rows (the paper's ablation table is on MLE-Dojo: see the reading)
PAPER = {"sft": 37.4, "sparse_grpo": 38.3, "raw_world_model": 39.2, "wmrl": 41.2}
#: paired comparisons reported beyond "vs SFT" and "vs sparse GRPO": (arm, base, what the difference measures)
COMPARISONS = (
    ("wmrl", "raw_world_model", "what the anchors and both corrections add to the raw world model"),
    ("uncorrected", "raw_world_model", "what the anchors alone add to the raw world model"),
    ("debias_only", "uncorrected", "what debiasing adds to the anchored mixture"),
    ("denoise_only", "uncorrected", "what denoising adds to the anchored mixture"),
    ("wmrl", "uncorrected", "what both corrections add to the anchored mixture"),
    ("debias_only", "raw_world_model", "what the anchors and debiasing add to the raw world model"),
    ("denoise_only", "raw_world_model", "what the anchors and denoising add to the raw world model"),
    ("debias_only", "denoise_only", "debiasing alone against denoising alone (the paper: debiasing gains more)"),
    ("wmrl", "debias_only", "what denoising adds on top of debiasing"),
    ("wmrl", "denoise_only", "what debiasing adds on top of denoising"),
    ("wmrl", "sparse_budget", "WMRL against sparse GRPO with as many real-graded episodes"),
    ("wmrl_paper", "sparse_budget", "the paper's WMRL against sparse GRPO with as many real-graded episodes"),
    ("wmrl", "wmrl_paper", "the kit's corrections against the paper's"),
)
#: a seed ``k`` is ``--seed_everything=k`` (the configs interpolate it into every seed: the policy's initialisation,
#: SFT batch order, exploration and evaluation noise, the order of training initial states, the world model's
#: initialisation and minibatches, the anchor draws) plus demonstrations from other initial states
#: (``data.init_args.demo_seed`` = DEMO_SEED + DEMO_SEED_STRIDE * k); training and held-out initial states stay fixed
DEMO_SEED, DEMO_SEED_STRIDE = 100_000, 1_000
FIT_FLAGS = ("--trainer.", "--model.", "--data.", "--seed_everything=")
TASK = "pusht"  # every held-out initial state is a sample of one task: the bootstrap resamples initial states


@dataclass(frozen=True)
class Preset:
    """Which configs make the arms, and where the results go."""

    base: str
    overlays: dict[str, tuple[str, ...]]  # RL arm -> overlays on ``base`` (the preset's arms)
    results: str  # markdown name under benchmarks/
    json_name: str  # under benchmarks/results/
    overrides: tuple[str, ...] = ()  # command-line flags every arm gets
    note: str = ""


PRESETS = {
    "pusht": Preset(
        base="configs/vla/arms/pusht.yaml",
        overlays={"sparse_grpo": (), "raw_world_model": ("configs/vla/arms/raw_world_model.yaml",),
                  "debias_only": ("configs/vla/arms/debias_only.yaml",),
                  "denoise_only": ("configs/vla/arms/denoise_only.yaml",),
                  "wmrl": ("configs/vla/arms/wmrl.yaml",), "uncorrected": ("configs/vla/arms/uncorrected.yaml",),
                  "sparse_budget": ("configs/vla/arms/sparse_budget.yaml",),
                  "shaped_oracle": ("configs/vla/arms/shaped_oracle.yaml",),
                  "wmrl_paper": ("configs/vla/arms/wmrl_paper.yaml",)},
        results="RESULTS-vla.md", json_name="vla-arms.json",
        note="state-based LeRobot ACT (88k parameters)",
    ),
    "smolvla": Preset(
        base="configs/vla/arms/pusht.yaml",
        overlays={"sparse_grpo": ("configs/vla/arms/smolvla.yaml",),
                  "raw_world_model": ("configs/vla/arms/smolvla.yaml", "configs/vla/arms/raw_world_model.yaml"),
                  "wmrl": ("configs/vla/arms/smolvla.yaml", "configs/vla/arms/wmrl.yaml"),
                  "sparse_budget": ("configs/vla/arms/smolvla.yaml", "configs/vla/arms/sparse_budget.yaml")},
        results="RESULTS-vla-smolvla.md", json_name="vla-arms-smolvla.json",
        note="LeRobot SmolVLA on the tiny SmolVLM built locally (random backbone weights), a smaller budget",
    ),
    # the kit's corrections against the paper's on the ACT preset, and the real labels alone at WMRL's budget
    "corrections": Preset(
        base="configs/vla/arms/pusht.yaml",
        overlays={"sparse_budget": ("configs/vla/arms/sparse_budget.yaml",),
                  "wmrl_paper": ("configs/vla/arms/wmrl_paper.yaml",), "wmrl": ("configs/vla/arms/wmrl.yaml",)},
        results="RESULTS-vla-corrections.md", json_name="vla-arms-corrections.json",
        note="state-based LeRobot ACT (88k parameters): the kit's corrections against the paper's",
    ),
}


def seed_flags(seed: int) -> list[str]:
    """The ``wmrl fit`` flags that make seed ``seed`` (see :data:`DEMO_SEED`); seed 0 is the configs as shipped."""
    return [f"--seed_everything={seed}", f"--data.init_args.demo_seed={DEMO_SEED + DEMO_SEED_STRIDE * seed}"]


def arm_command(preset: Preset, arm: str, run_dir: Path, extra: list[str], seed: int = 0) -> list[str]:
    """One arm's ``wmrl fit`` command; the user's flags (``extra``) come last and win."""
    configs = [preset.base, *preset.overlays[arm]]
    command = [sys.executable, "-m", "wmrl.cli", "fit"]
    for c in configs:
        command += ["-c", str(ROOT / c)]
    return [*command, f"--trainer.default_root_dir={run_dir}", *seed_flags(seed), *preset.overrides, *extra]


@dataclass(frozen=True)
class Job:
    """One arm of one seed: a ``wmrl fit`` process with its own run dir ``<out>/seed<seed>/<arm>``."""

    seed: int
    arm: str

    def run_dir(self, out: Path) -> Path:
        return out / f"seed{self.seed}" / self.arm


def schedule(arms: list[str], seeds: list[int]) -> list[Job]:
    """The order a sitting runs its jobs: the paper's arms seed by seed, then each other arm in every seed, so a
    sitting cut short still holds whole seeds of the paper's table, and whole arms beyond it.

    >>> [(j.seed, j.arm) for j in schedule(["sparse_budget", "wmrl", "sparse_grpo", "uncorrected"], [0, 1])]
    [(0, 'wmrl'), (0, 'sparse_grpo'), (1, 'wmrl'), (1, 'sparse_grpo'), (0, 'uncorrected'), (1, 'uncorrected'), (0, 'sparse_budget'), (1, 'sparse_budget')]
    """
    rest = [a for a in RL_ARMS if a in arms and a not in PAPER_ARMS]
    tiers = ([a for a in arms if a in PAPER_ARMS], *([a] for a in rest))
    return [Job(seed, arm) for tier in tiers for seed in seeds for arm in tier]


def finished(run_dir: Path) -> bool:
    """A run whose process ended well and left its ``heldout.jsonl`` (``--reuse`` reads it instead of rerunning)."""
    meta = run_dir / "vla_arm.json"
    return meta.is_file() and (run_dir / EVAL_FILE).is_file() and json.loads(meta.read_text()).get("returncode") == 0


def child_env() -> dict[str, str]:
    """The environment of an arm's process: this checkout's ``src`` first on the path, so the arms run the code this
    script reads (an environment may have another checkout of wmrl installed)."""
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": str(ROOT / "src") + (os.pathsep + path if path else "")}


def run_arm(preset: Preset, job: Job, out: Path, extra: list[str]) -> subprocess.Popen:
    """Start the job's ``wmrl fit`` (log in ``<run dir>/fit.log``); a stale run dir is cleared first."""
    run_dir = job.run_dir(out)
    if run_dir.exists():
        import shutil

        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    command = arm_command(preset, job.arm, run_dir, extra, job.seed)
    print(f"[vla_arms] seed {job.seed} {job.arm}: {' '.join(command)}", flush=True)
    with (run_dir / "fit.log").open("w") as log:  # the child keeps its own descriptor
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=child_env())
    process.wmrl_started = time.perf_counter()  # type: ignore[attr-defined]
    process.wmrl_meta = {"arm": job.arm, "seed": job.seed, "command": " ".join(command),  # type: ignore[attr-defined]
                         "started": f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC",
                         "load_before": os.getloadavg()[0], "loads": [], "probe_s": [cpu_probe()]}
    return process


def run_arms(preset: Preset, todo: list[Job], out: Path, extra: list[str], jobs: int) -> None:
    """Run ``todo``, ``jobs`` at a time, recording the load average every 15 s and each job's process wall-clock
    in ``<run dir>/vla_arm.json``; a failed job stops the sitting, naming its log."""
    pending, running = list(todo), {}
    while pending or running:
        while pending and len(running) < jobs:
            job = pending.pop(0)
            running[job] = run_arm(preset, job, out, extra)
        for job, process in list(running.items()):
            meta = process.wmrl_meta  # type: ignore[attr-defined]
            if process.poll() is None:
                meta["loads"].append(os.getloadavg()[0])
                continue
            loads = meta.pop("loads") or [0.0]
            meta.update(returncode=process.returncode, process_wall_s=time.perf_counter() - process.wmrl_started,  # type: ignore[attr-defined]
                        load_mean=float(np.mean(loads)), load_max=float(max(loads)),
                        ended=f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC")
            meta["probe_s"].append(cpu_probe())  # the machine's speed before and after the arm (seconds, lower = faster)
            (job.run_dir(out) / "vla_arm.json").write_text(json.dumps(meta, indent=1))
            del running[job]
            if process.returncode != 0:
                for other in running.values():
                    other.kill()
                raise RuntimeError(f"seed {job.seed} arm {job.arm!r} failed (exit {process.returncode}); its log: "
                                   f"{job.run_dir(out) / 'fit.log'}")
            print(f"[vla_arms] seed {job.seed} {job.arm}: done in {meta['process_wall_s'] / 60:.1f} min", flush=True)
        if running:
            time.sleep(15)


# -- reading a finished arm ------------------------------------------------------------------------------------
@dataclass
class ArmRun:
    """What one RL arm's run wrote: its held-out evaluations and its per-step metrics."""

    arm: str
    evaluations: dict[int, dict[str, float]]  # step -> {task id: success}
    steps: list[dict[str, float]]  # the CSV logger's rows of training steps (``time/step`` logged)
    meta: dict = field(default_factory=dict)
    noisy: dict[int, dict[str, float]] = field(default_factory=dict)  # the same, with the exploration noise

    @property
    def start(self) -> dict[str, float]:
        if 0 not in self.evaluations:
            raise ValueError(f"arm {self.arm!r} has no evaluation before RL (model.init_args.eval_at_start: false?)")
        return self.evaluations[0]

    @property
    def final(self) -> dict[str, float]:
        last = max(self.evaluations)
        if last == 0:
            raise ValueError(f"arm {self.arm!r} has no held-out evaluation after training")
        return self.evaluations[last]

    @property
    def final_noisy(self) -> dict[str, float] | None:
        """The last evaluation with the exploration noise (``None`` without ``eval_noisy_episodes``)."""
        return self.noisy.get(max(self.evaluations))

    def column(self, name: str) -> list[float]:
        return [row[name] for row in self.steps if name in row and not math.isnan(row[name])]

    def total(self, name: str) -> float:
        return float(sum(self.column(name)))

    def last(self, name: str) -> float | None:
        values = self.column(name)
        return values[-1] if values else None


def read_arm(run_dir: Path, arm: str) -> ArmRun:
    """An arm's ``heldout.jsonl`` (every evaluation, episode by episode) and its ``metrics.csv`` rows."""
    import csv

    evaluations: dict[int, dict[str, float]] = {}
    noisy: dict[int, dict[str, float]] = {}
    for line in (run_dir / EVAL_FILE).read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            evaluations[int(record["step"])] = {e["task_id"]: float(e["success"]) for e in record["episodes"]}
            if all("noisy_success" in e for e in record["episodes"]):
                noisy[int(record["step"])] = {e["task_id"]: float(e["noisy_success"]) for e in record["episodes"]}
    rows, sft = [], {}
    with find_metrics(run_dir).open() as f:
        for row in csv.DictReader(f):
            values = {k: float(v) for k, v in row.items() if v not in ("", None)}
            if "time/step" in values:
                rows.append(values)
            # the SFT stage's cost and last loss, logged once before RL (sft/seconds, sft/demonstration_steps)
            sft.update({k.split("/", 1)[1]: v for k, v in values.items() if k.startswith("sft/")})
    meta_file = run_dir / "vla_arm.json"
    meta = json.loads(meta_file.read_text()) if meta_file.is_file() else {}
    return ArmRun(arm, evaluations, rows, {**meta, "sft": sft}, noisy)


def read_sitting(out: Path, seeds: list[int], arms: list[str]) -> dict[int, dict[str, ArmRun]]:
    """Every job's run, as ``{seed: {arm: run}}``."""
    return {seed: {arm: read_arm(Job(seed, arm).run_dir(out), arm) for arm in arms} for seed in seeds}


# -- statistics ------------------------------------------------------------------------------------------------
# Seeds x initial states: every arm of a seed plays the same held-out states deterministically, so a comparison
# pairs (seed, state) with (seed, state); the intervals resample initial states within each seed (the seeds are
# the sitting's, like the tasks of wmrl.algorithms.stats) and pool the seeds' differences.
Evaluations = dict[int, dict[str, float]]  # seed -> {task id: success}


def aligned(a: dict[str, float], b: dict[str, float]) -> tuple[list[float], list[float]]:
    """The two evaluations' successes on the same initial states, in one order (they must cover the same ones)."""
    if sorted(a) != sorted(b):
        raise ValueError(f"the evaluations cover different initial states ({len(a)} vs {len(b)})")
    return in_order(a), in_order(b)


def in_order(evaluation: dict[str, float]) -> list[float]:
    """The successes ordered by initial state (the order every interval resamples in)."""
    return [evaluation[k] for k in sorted(evaluation)]


def seed_key(seed: int) -> str:
    return f"seed{seed}"


def level(evaluations: Evaluations) -> dict[str, float]:
    """Success pooled over seeds and initial states with a 95% interval that resamples states within each seed."""
    return interval(bootstrap_mean({seed_key(s): in_order(e) for s, e in sorted(evaluations.items())}))


def paired_difference(base: Evaluations, mine: Evaluations) -> dict[str, float]:
    """``mine - base`` pooled over seeds, paired on (seed, initial state), with a 95% interval that resamples the
    pairs within each seed."""
    if sorted(base) != sorted(mine):
        raise ValueError(f"the comparison covers different seeds ({sorted(base)} vs {sorted(mine)})")
    before, after = {}, {}
    for seed in sorted(base):
        before[seed_key(seed)], after[seed_key(seed)] = aligned(base[seed], mine[seed])
    return interval(paired_gain(before, after))


def per_seed(base: Evaluations, mine: Evaluations) -> dict[str, dict[str, float]]:
    """The same paired difference, seed by seed (each with its own interval over initial states)."""
    return {str(s): paired_difference({s: base[s]}, {s: mine[s]}) for s in sorted(base)}


def sft_evaluation(runs: dict[str, ArmRun]) -> dict[str, float]:
    """The SFT policy's held-out episodes in one seed: every RL arm's evaluation before its first step, which must
    agree (the same demonstrations, seed and SFT); a disagreement means the arms did not start from one policy."""
    starts = {arm: run.start for arm, run in runs.items()}
    first_arm, first = next(iter(starts.items()))
    for arm, start in starts.items():
        if start != first:
            differ = sum(start.get(k) != v for k, v in first.items())
            raise ValueError(f"arms {first_arm!r} and {arm!r} started from different SFT policies ({differ} held-out "
                             "episodes differ): rerun them on one machine with the same configs")
    return first


def has_noisy(runs: dict[int, dict[str, ArmRun]]) -> bool:
    """Every run evaluated the noisy policy (``eval_noisy_episodes``) before and after training."""
    return all(0 in r.noisy and max(r.evaluations) in r.noisy for arms in runs.values() for r in arms.values())


def mean_or_none(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return float(np.mean(kept)) if kept else None


def summarise(runs: dict[int, dict[str, ArmRun]]) -> dict[str, dict]:
    """Per arm the numbers of ``results/<json>``, pooled over seeds (and seed by seed): held-out success with its
    interval, the paired gain over SFT, the paired difference to sparse GRPO (the same three with the exploration
    noise), simulator steps, real-graded episodes and wall-clock per seed, the corrections' state at the end, the
    curve."""
    seeds = sorted(runs)
    arms = [a for a in RL_ARMS if a in runs[seeds[0]]]
    for seed in seeds:
        if sorted(runs[seed]) != sorted(arms):
            raise ValueError(f"seed {seed} has arms {sorted(runs[seed])}, seed {seeds[0]} has {sorted(arms)}: every "
                             "seed needs the same arms to pool them")
    sft = {s: sft_evaluation(runs[s]) for s in seeds}
    noisy = has_noisy(runs)
    sft_noisy = {s: next(iter(runs[s].values())).noisy[0] for s in seeds} if noisy else None
    out = {"sft": sft_row(runs, sft, sft_noisy)}
    sparse = "sparse_grpo" in arms
    for arm in arms:
        final = {s: runs[s][arm].final for s in seeds}
        final_noisy = {s: runs[s][arm].final_noisy for s in seeds} if noisy else None
        versus = None if not sparse or arm == "sparse_grpo" else {s: runs[s]["sparse_grpo"].final for s in seeds}
        versus_noisy = None if versus is None or not noisy else {s: runs[s]["sparse_grpo"].final_noisy for s in seeds}
        out[arm] = {
            "label": LABELS[arm],
            "episodes": sum(len(e) for e in final.values()),
            "held_out": level(final),
            "gain_over_sft": paired_difference(sft, final),
            "difference_to_sparse_grpo": None if versus is None else paired_difference(versus, final),
            "held_out_noisy": None if final_noisy is None else level(final_noisy),
            "gain_over_sft_noisy": None if final_noisy is None else paired_difference(sft_noisy, final_noisy),
            "difference_to_sparse_grpo_noisy": None if versus_noisy is None else paired_difference(versus_noisy, final_noisy),
            "per_seed": {str(s): {"held_out": float(np.mean(list(final[s].values()))),
                                  "gain_over_sft": per_seed({s: sft[s]}, {s: final[s]})[str(s)],
                                  "difference_to_sparse_grpo": None if versus is None else per_seed(
                                      {s: versus[s]}, {s: final[s]})[str(s)]} for s in seeds},
            **costs([runs[s][arm] for s in seeds]),
            "runs": {str(s): run_record(runs[s][arm]) for s in seeds},
            "corrections": {key: mean_or_none([runs[s][arm].last(metric) for s in seeds])
                            for key, metric in CORRECTIONS.items()},
            "curve": curve([runs[s][arm] for s in seeds]),
        }
    return out


def sft_row(runs: dict[int, dict[str, ArmRun]], sft: Evaluations, sft_noisy: Evaluations | None) -> dict:
    """The SFT policy's row: its held-out success (every RL arm's evaluation before RL), the demonstrations' steps
    it cloned and its SFT stage's seconds (every RL arm pays them first), per seed and pooled."""
    stages = [next(iter(runs[s].values())).meta.get("sft", {}) for s in sorted(runs)]
    return {"label": LABELS["sft"], "episodes": sum(len(e) for e in sft.values()), "held_out": level(sft),
            "gain_over_sft": None, "difference_to_sparse_grpo": None,
            "held_out_noisy": None if sft_noisy is None else level(sft_noisy), "gain_over_sft_noisy": None,
            "difference_to_sparse_grpo_noisy": None,
            "per_seed": {str(s): {"held_out": float(np.mean(list(sft[s].values()))), "gain_over_sft": None,
                                  "difference_to_sparse_grpo": None} for s in sorted(sft)},
            "simulator_steps": mean_or_none([stage.get("demonstration_steps") for stage in stages]),
            "real_graded_episodes": None, "train_wall_s": mean_or_none([stage.get("seconds") for stage in stages]),
            "process_wall_s": None, "sft_loss": mean_or_none([stage.get("loss") for stage in stages])}


#: the corrections' state at the end of a run: the JSON key and the metric it is the last value of
CORRECTIONS = {"anchor_pairs": "debias/pairs", "calibration_refits": "debias/refits",
               "bias_reduction": "debias/bias_reduction", "spearman_raw": "fidelity/spearman_raw",
               "spearman_calibrated": "fidelity/spearman_calibrated", "denoise_weight": "denoise/weight",
               "fusion_share": "fusion/wm_share", "fusion_agreement": "fusion/agreement"}


def costs(runs: list[ArmRun]) -> dict[str, float | None]:
    """Per seed (the mean over seeds): training steps, simulator steps of the training rollouts, real-graded
    episodes, and the RL steps' and the whole process's wall-clock."""
    return {"steps": float(np.mean([len(r.steps) for r in runs])),
            "simulator_steps": float(np.mean([r.total("rollout/simulator_steps") for r in runs])),
            "real_graded_episodes": float(np.mean([r.total("anchor/executions") for r in runs])),
            "train_wall_s": float(np.mean([r.total("time/step") for r in runs])),
            "env_s": float(np.mean([r.total("time/env") for r in runs])),
            "world_model_s": float(np.mean([r.total("time/world_model") for r in runs])),
            "update_s": float(np.mean([r.total("time/update") for r in runs])),
            "process_wall_s": mean_or_none([r.meta.get("process_wall_s") for r in runs]),
            "load_mean": mean_or_none([r.meta.get("load_mean") for r in runs])}


def run_record(run: ArmRun) -> dict:
    """One job's own record: when it ran, the machine's load and speed around it, its wall-clock, its rollouts'
    success on the simulator (a diagnostic the training never reads)."""
    return {key: run.meta.get(key) for key in ("started", "ended", "load_mean", "load_max", "probe_s",
                                                "process_wall_s")} | {
        "train_wall_s": run.total("time/step"), "rollout_success": run.column("rollout/success_rate")}


def curve(runs: list[ArmRun]) -> dict[str, float]:
    """Held-out success after each evaluated step, the mean over seeds."""
    steps = sorted(runs[0].evaluations)
    return {str(step): float(np.mean([np.mean(list(r.evaluations[step].values())) for r in runs])) for step in steps}


def comparisons(runs: dict[int, dict[str, ArmRun]]) -> list[dict]:
    """The paired differences of :data:`COMPARISONS` whose two arms ran, pooled over seeds (with the interval over
    states within seeds, and a Student-t interval over the seeds' own differences) and seed by seed (and with the
    exploration noise when every run has it)."""
    seeds, noisy, out = sorted(runs), has_noisy(runs), []
    for arm, base, what in COMPARISONS:
        if arm not in runs[seeds[0]] or base not in runs[seeds[0]]:
            continue
        mine = {s: runs[s][arm].final for s in seeds}
        other = {s: runs[s][base].final for s in seeds}
        seeds_points = per_seed(other, mine)
        out.append({"arm": arm, "base": base, "what": what, "difference": paired_difference(other, mine),
                    "per_seed": seeds_points,
                    # Student-t over the seeds' own differences: training's randomness, not only the evaluation's
                    "over_seeds": interval(seed_interval([seeds_points[str(s)]["point"] for s in seeds])),
                    "noisy": paired_difference({s: runs[s][base].final_noisy for s in seeds},
                                               {s: runs[s][arm].final_noisy for s in seeds}) if noisy else None})
    return out


def checks(summary: dict[str, dict], compared: list[dict] = ()) -> list[tuple[str, str, bool]]:
    """The issues' bars, as measured (pooled over seeds): GRPO's paired gain over SFT above 0; WMRL >= sparse GRPO;
    where both ran, the kit's WMRL >= the paper's (paired, with its interval over seeds)."""
    out = []
    if "sparse_grpo" in summary:
        gain = summary["sparse_grpo"]["gain_over_sft"]
        out.append(("GRPO (sparse) beats SFT beyond noise: paired 95% interval of the gain above 0",
                    interval_text(gain), gain["low"] > 0))
    if "wmrl" in summary and summary["wmrl"]["difference_to_sparse_grpo"] is not None:
        diff = summary["wmrl"]["difference_to_sparse_grpo"]
        out.append(("WMRL's success >= sparse GRPO's (point estimate; interval reported)", interval_text(diff),
                    diff["point"] >= 0))
    for c in compared:
        if (c["arm"], c["base"]) == ("wmrl", "wmrl_paper"):
            over = c["over_seeds"]
            out.append(("the kit's corrections >= the paper's: WMRL - the paper's WMRL, paired (interval over states; "
                        "over seeds)", f"{interval_text(c['difference'])}; over seeds [{over['low']:+.3f}, "
                        f"{over['high']:+.3f}]", c["difference"]["point"] >= 0))
    return out


def ordering(summary: dict[str, dict]) -> str:
    """The rows from best to worst held-out success, as measured (``=`` for equal points)."""
    ranked = sorted(summary, key=lambda a: -summary[a]["held_out"]["point"])
    text = LABELS[ranked[0]]
    for prev, arm in zip(ranked, ranked[1:], strict=False):
        sign = "=" if math.isclose(summary[prev]["held_out"]["point"], summary[arm]["held_out"]["point"]) else ">"
        text += f" {sign} {LABELS[arm]}"
    return text


# -- the markdown ----------------------------------------------------------------------------------------------
def seeds_text(seeds: list[int]) -> str:
    return ", ".join(str(s) for s in seeds)


def points(values: list[float], signed: bool = True) -> str:
    return ", ".join(f"{v:+.3f}" if signed else f"{v:.3f}" for v in values)


def markdown(name: str, preset: Preset, summary: dict[str, dict], compared: list[dict], command: str,
             sitting: str) -> list[str]:
    seeds = [int(s) for s in summary["sft"]["per_seed"]]
    arms = [a for a in ARMS if a in summary]
    lines = [
        f"# The paper's VLA table at CPU scale: `{name}` ({preset.note})",
        "",
        f"Generated by `benchmarks/vla_arms.py` ({sitting}). Machine: {machine()}.",
        f"Command: `{command}`",
        "",
        f"{len(seeds)} seed(s): {seeds_text(seeds)}. Seed k is `--seed_everything=k` (the configs interpolate it into",
        "every seed of the run: the policy's initialisation, the SFT batch order, exploration and evaluation noise, the",
        "order of training initial states, the world model's initialisation and minibatches, the anchor draws) and",
        f"`--data.init_args.demo_seed={DEMO_SEED}+{DEMO_SEED_STRIDE}k` (the scripted demonstrations start from other",
        "initial states, so each seed clones its own SFT policy); the 64 training and the held-out initial states are",
        "the same in every seed. Runs under `runs/vla_arms/<preset>/seed<k>/<arm>`.",
        "",
        "Held-out success: the simulator's sparse success of one noise-free episode per held-out initial state, pooled",
        "over seeds, with a 95% bootstrap interval that resamples initial states within each seed. Gains and differences",
        "are *paired* (within a seed every arm plays the same initial states deterministically): their intervals resample",
        "the (seed, state) pairs within seeds, so they measure the evaluation's noise for these seeds, not the spread",
        "between seeds; the per-seed points show that. Simulator steps, real-graded episodes and wall-clock are per seed",
        "(the mean over seeds): the SFT row's are the demonstrations' steps it cloned and its SFT stage; an RL arm's are",
        "its RL steps' rollouts and seconds, on top of the SFT row's.",
        "",
        "| arm | held-out success (pooled) | per seed | gain over SFT (paired) | vs sparse GRPO (paired) | simulator steps | "
        "real-graded episodes | RL wall-clock | paper (LIBERO-Long) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for arm in arms:
        s = summary[arm]
        wall = "-" if s.get("train_wall_s") is None else f"{s['train_wall_s'] / 60:.1f} min"
        steps = "-" if s.get("simulator_steps") is None else f"{s['simulator_steps']:,.0f}"
        real = "-" if s.get("real_graded_episodes") is None else f"{s['real_graded_episodes']:,.0f}"
        per = points([s["per_seed"][str(k)]["held_out"] for k in seeds], signed=False)
        lines.append(f"| {s['label']} | {interval_text(s['held_out'], signed=False)} | {per} | "
                     f"{interval_text(s['gain_over_sft'])} | {interval_text(s['difference_to_sparse_grpo'])} | {steps} | "
                     f"{real} | {wall} | {PAPER.get(arm) or '-'} |")
    lines += ["", f"Ordering as measured (pooled points): {ordering(summary)}.", ""]
    if compared:
        lines += ["## The paired differences between arms", "",
                  "The noise-free difference pooled over seeds with its interval over states within seeds, then the "
                  "Student-t interval over the seeds' own differences (training's randomness too; with 3 seeds it is "
                  "wide), the seeds' points, and the same difference with the exploration noise:", "",
                  "| difference | what it measures | noise-free (paired, pooled) | over seeds | per seed | "
                  "with the exploration noise |", "|---|---|---|---|---|---|"]
        for c in compared:
            per = points([c["per_seed"][str(k)]["point"] for k in seeds])
            over = c["over_seeds"]
            spread = "-" if math.isnan(over["low"]) else f"[{over['low']:+.3f}, {over['high']:+.3f}]"
            lines.append(f"| {c['arm']} - {c['base']} | {c['what']} | {interval_text(c['difference'])} | {spread} | "
                         f"{per} | {interval_text(c['noisy'])} |")
        lines.append("")
    if summary["sft"].get("held_out_noisy") is not None:
        lines += ["The same initial states played by the Gaussian policy RL trains (its mean plus the exploration noise,",
                  "one episode per state, the same noise draws at every evaluation of a seed: "
                  "`model.init_args.eval_noisy_episodes`):", "",
                  "| arm | held-out success, with exploration noise | gain over SFT (paired) | vs sparse GRPO (paired) |",
                  "|---|---|---|---|"]
        for arm in arms:
            s = summary[arm]
            lines.append(f"| {s['label']} | {interval_text(s['held_out_noisy'], signed=False)} | "
                         f"{interval_text(s['gain_over_sft_noisy'])} | {interval_text(s['difference_to_sparse_grpo_noisy'])} |")
        lines.append("")
    if bars := checks(summary, compared):
        lines += ["## The issues' bars (the noise-free evaluation, pooled)", ""]
        lines += [f"- {'met' if ok else 'NOT met'}: {what}: {value}" for what, value, ok in bars] + [""]
    lines += ["## The corrections at the end (mean over seeds)", "",
              "| arm | anchor pairs | calibration refits | bias reduction | Spearman raw | Spearman calibrated | "
              "denoising weight | fusion: world-model share (agreement) |", "|---|---|---|---|---|---|---|---|"]

    def cell(v):
        return "-" if v is None else f"{v:.3g}"

    rl = [a for a in arms if a != "sft"]
    for arm in rl:
        c = summary[arm]["corrections"]
        lines.append(f"| {LABELS[arm]} | {cell(c['anchor_pairs'])} | {cell(c['calibration_refits'])} | "
                     f"{cell(c['bias_reduction'])} | {cell(c['spearman_raw'])} | {cell(c['spearman_calibrated'])} | "
                     f"{cell(c['denoise_weight'])} | {cell(c.get('fusion_share'))} ({cell(c.get('fusion_agreement'))}) |")
    evaluated = list(summary[rl[0]]["curve"])
    lines += ["", "## Held-out success over training (mean over seeds)", "",
              "| arm | " + " | ".join(f"step {s}" for s in evaluated) + " |", "|---" * (1 + len(evaluated)) + "|"]
    for arm in rl:
        lines.append(f"| {LABELS[arm]} | " + " | ".join(f"{v:.3f}" for v in summary[arm]["curve"].values()) + " |")
    lines += ["", "## The machine around each run", "",
              "Load average (mean over the run, sampled every 15 s), the speed probe (seconds of a fixed matrix-product",
              "workload before / after the run; lower is faster) and the process wall-clock, per seed:", "",
              "| arm | " + " | ".join(f"seed {k}" for k in seeds) + " |", "|---" * (1 + len(seeds)) + "|"]
    for arm in rl:
        cells = []
        for k in seeds:
            r = summary[arm]["runs"][str(k)]
            probe = r.get("probe_s") or []
            cells.append("-" if r.get("load_mean") is None else
                         f"load {r['load_mean']:.1f}, probe {probe[0]:.2f} / {probe[-1]:.2f} s, "
                         f"{(r.get('process_wall_s') or 0) / 60:.1f} min")
        lines.append(f"| {LABELS[arm]} | " + " | ".join(cells) + " |")
    return lines


def sitting_span(runs: dict[int, dict[str, ArmRun]]) -> str:
    """When the jobs ran (the first start and the last end their ``vla_arm.json`` recorded)."""
    starts = sorted(r.meta["started"] for arms in runs.values() for r in arms.values() if r.meta.get("started"))
    ends = sorted(r.meta["ended"] for arms in runs.values() for r in arms.values() if r.meta.get("ended"))
    return f"jobs ran {starts[0]} to {ends[-1]}" if starts and ends else "job times not recorded"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=sorted(PRESETS), default="pusht")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "vla_arms", help="run directories go under "
                        "<out>/<preset>/seed<k>/<arm>")
    parser.add_argument("--results", type=Path, default=ROOT / "benchmarks", help="where RESULTS-vla*.md and results/ go")
    parser.add_argument("--arms", nargs="+", choices=RL_ARMS, help="RL arms to run (SFT comes with any; default: the "
                        "preset's arms)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0], help="seeds to run every arm with (seed k: "
                        f"--seed_everything=k and demonstrations from demo_seed {DEMO_SEED}+{DEMO_SEED_STRIDE}k)")
    parser.add_argument("--jobs", type=int, default=1, help="runs at a time (each uses one torch thread)")
    parser.add_argument("--reuse", action="store_true", help="read finished runs instead of rerunning them")
    args, extra = parser.parse_known_args(argv)  # wmrl fit flags for every arm, e.g. --trainer.max_steps=20
    unknown = [f for f in extra if not f.startswith(FIT_FLAGS)]
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)} (wmrl fit flags for every arm start with "
                     f"{', '.join(FIT_FLAGS)} and carry their value after '=')")
    if args.jobs < 1:
        parser.error("--jobs must be >= 1")
    if len(set(args.seeds)) < len(args.seeds) or min(args.seeds) < 0:
        parser.error(f"--seeds must be distinct and >= 0 (got {' '.join(map(str, args.seeds))})")
    preset = PRESETS[args.preset]
    args.arms = args.arms or [a for a in RL_ARMS if a in preset.overlays]
    missing = [a for a in args.arms if a not in preset.overlays]
    if missing:
        parser.error(f"--arms {' '.join(missing)}: not an arm of --preset {args.preset} "
                     f"(its arms: {' '.join(preset.overlays)})")
    out = args.out / args.preset
    planned = schedule(args.arms, sorted(args.seeds))
    todo = [job for job in planned if not (args.reuse and finished(job.run_dir(out)))]
    run_arms(preset, todo, out, extra, args.jobs)
    runs = read_sitting(out, sorted(args.seeds), [a for a in RL_ARMS if a in args.arms])
    summary = summarise(runs)
    compared = comparisons(runs)
    command = "python benchmarks/vla_arms.py " + " ".join(argv if argv is not None else sys.argv[1:])
    reused = len(planned) - len(todo)
    sitting = (f"one sitting, {sitting_span(runs)}, {args.jobs} run(s) at a time; report written "
               f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC"
               + (f"; {reused} of {len(planned)} runs read from disk (--reuse)" if reused else ""))
    report = {"preset": args.preset, "machine": machine(), "command": command, "sitting": sitting,
              "seeds": sorted(args.seeds), "seed_flags": {str(s): seed_flags(s) for s in sorted(args.seeds)},
              "configs": {arm: [preset.base, *preset.overlays[arm]] for arm in args.arms}, "extra_flags": extra,
              "arms": summary, "comparisons": compared,
              "checks": [{"check": w, "value": v, "met": ok} for w, v, ok in checks(summary, compared)],
              "ordering": ordering(summary)}
    (args.results / "results").mkdir(parents=True, exist_ok=True)
    (args.results / "results" / preset.json_name).write_text(json.dumps(report, indent=1))
    target = args.results / preset.results
    previous = target.read_text() if target.is_file() else ""
    text = "\n".join(markdown(args.preset, preset, summary, compared, command, sitting)) + "\n"
    target.write_text(text + kept_by_hand(previous))
    print(text)


if __name__ == "__main__":
    main()
