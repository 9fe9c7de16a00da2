"""The paper's VLA table at CPU scale, in one sitting: SFT, GRPO on sparse success, GRPO on the raw progress world
model, and WMRL, with held-out success and paired intervals.

The paper's VLA transfer (LIBERO-Long, MiniVLA-1B) reports SFT 37.4, GRPO with sparse success 38.3, GRPO with the raw
world-model reward 39.2 and WMRL 41.2. This script measures the same four rows on PushT with a small LeRobot policy:

- **SFT**: the policy after behaviour cloning on the scripted demonstrations (``BehaviourCloningWarmStart``). Every
  RL arm clones the same demonstrations with the same seed and evaluates that policy before its first step; the
  script checks that those evaluations agree episode for episode and reports them as the SFT row.
- **GRPO, sparse success**: ``configs/vla/arms/pusht.yaml`` (every group graded by the simulator's success).
- **GRPO, raw world model**: ``+ configs/vla/arms/raw_world_model.yaml`` (no anchors; every group graded by the
  progress world model's shaped reward, uncalibrated).
- **WMRL**: ``+ configs/vla/arms/wmrl.yaml`` (one anchor group in eight graded by sparse success; the other groups
  by the world model, calibrated online on the anchors; anchor advantages weighted by inverse variance).
- Not a row of the paper's table, **sparse GRPO at WMRL's real-label budget**: ``+ configs/vla/arms/sparse_budget.yaml``
  (one group per step: as many real-graded episodes as WMRL's anchors).
- A diagnostic, not a row of the paper's table either (ACT preset), **GRPO on a perfect progress world model**:
  ``+ configs/vla/arms/shaped_oracle.yaml`` (every group graded by the simulator's own dense reward, read and shaped
  exactly as the world model's predictions are). It separates the world model's errors from the shaping
  objective's own mismatch with success.

Each RL arm is one ``wmrl fit`` process (the same seed, demonstrations, SFT, initial states and step budget). From
what the runs wrote (``heldout.jsonl``: every held-out episode; ``metrics.csv``: every step) it reports per arm:
held-out success with a 95% bootstrap interval over initial states; the gain over SFT with a *paired* interval
(the same initial states before and after, deterministic evaluation); the difference to sparse GRPO, paired the
same way (and WMRL's to the raw world model and to the budget-matched arm); the simulator steps of training rollouts; wall-clock (the process and its RL steps); and the
corrections' state at the end (anchor pairs, calibration refits, the world model's rank correlation with the
real success on the anchors, raw and calibrated, and the denoising weight). The ordering of the rows is reported
as measured.

    .venv312/bin/python benchmarks/vla_arms.py --jobs 2            # ACT, two arms at a time: 22 minutes on 2 cores
    .venv312/bin/python benchmarks/vla_arms.py                     # one arm at a time (not timed)
    .venv312/bin/python benchmarks/vla_arms.py --preset smolvla --jobs 2   # the tiny SmolVLA, smaller budget: 13 min
    .venv312/bin/python benchmarks/vla_arms.py --reuse             # finished arms are read, not rerun
    .venv312/bin/python benchmarks/vla_arms.py --trainer.max_steps=20   # wmrl fit flags go to every arm

It writes ``benchmarks/RESULTS-vla.md`` (``RESULTS-vla-smolvla.md``) and ``benchmarks/results/vla-arms.json``
(``vla-arms-smolvla.json``); a section headed ``## Reading (by hand, <date>)`` at the end of the markdown is kept
when the tables are regenerated. Runs go under ``runs/vla_arms/<preset>/<arm>``.
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

from wmrl.algorithms.stats import bootstrap_mean, interval, interval_text, paired_gain  # noqa: E402
from wmrl.modules.base import EVAL_FILE  # noqa: E402
from wmrl.report import cpu_probe, find_metrics, kept_by_hand, machine  # noqa: E402

ARMS = ("sft", "sparse_grpo", "raw_world_model", "wmrl", "sparse_budget", "shaped_oracle")
RL_ARMS = ARMS[1:]
LABELS = {"sft": "SFT only", "sparse_grpo": "GRPO, sparse success", "raw_world_model": "GRPO, raw world model",
          "wmrl": "WMRL (anchors + debiasing + denoising)",
          "sparse_budget": "GRPO, sparse success, WMRL's real-label budget",
          "shaped_oracle": "GRPO, a perfect progress model (the simulator's shaped dense reward)"}
# LIBERO-Long success (%) of the paper's VLA table; the budget-matched and the oracle arm are not among its rows
PAPER = {"sft": 37.4, "sparse_grpo": 38.3, "raw_world_model": 39.2, "wmrl": 41.2, "sparse_budget": None,
         "shaped_oracle": None}
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
                  "wmrl": ("configs/vla/arms/wmrl.yaml",), "sparse_budget": ("configs/vla/arms/sparse_budget.yaml",),
                  "shaped_oracle": ("configs/vla/arms/shaped_oracle.yaml",)},
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
}


def arm_command(preset: Preset, arm: str, run_dir: Path, extra: list[str]) -> list[str]:
    configs = [preset.base, *preset.overlays[arm]]
    command = [sys.executable, "-m", "wmrl.cli", "fit"]
    for c in configs:
        command += ["-c", str(ROOT / c)]
    return [*command, f"--trainer.default_root_dir={run_dir}", *preset.overrides, *extra]


def finished(run_dir: Path) -> bool:
    """A run whose process ended well and left its ``heldout.jsonl`` (``--reuse`` reads it instead of rerunning)."""
    meta = run_dir / "vla_arm.json"
    return meta.is_file() and (run_dir / EVAL_FILE).is_file() and json.loads(meta.read_text()).get("returncode") == 0


def run_arm(preset: Preset, arm: str, run_dir: Path, extra: list[str]) -> subprocess.Popen:
    """Start the arm's ``wmrl fit`` (log in ``<run dir>/fit.log``); a stale run dir is cleared first."""
    if run_dir.exists():
        import shutil

        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    command = arm_command(preset, arm, run_dir, extra)
    print(f"[vla_arms] {arm}: {' '.join(command)}", flush=True)
    with (run_dir / "fit.log").open("w") as log:  # the child keeps its own descriptor
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    process.wmrl_started = time.perf_counter()  # type: ignore[attr-defined]
    process.wmrl_meta = {"arm": arm, "command": " ".join(command), "load_before": os.getloadavg()[0],  # type: ignore[attr-defined]
                         "loads": [], "probe_s": [cpu_probe()]}
    return process


def run_arms(preset: Preset, arms: list[str], out: Path, extra: list[str], jobs: int) -> None:
    """Run ``arms``, ``jobs`` at a time, recording the load average every 15 s and each arm's process wall-clock
    in ``<run dir>/vla_arm.json``; a failed arm stops the sitting, naming its log."""
    pending, running = list(arms), {}
    while pending or running:
        while pending and len(running) < jobs:
            arm = pending.pop(0)
            running[arm] = run_arm(preset, arm, out / arm, extra)
        for arm, process in list(running.items()):
            meta = process.wmrl_meta  # type: ignore[attr-defined]
            if process.poll() is None:
                meta["loads"].append(os.getloadavg()[0])
                continue
            loads = meta.pop("loads") or [0.0]
            meta.update(returncode=process.returncode, process_wall_s=time.perf_counter() - process.wmrl_started,  # type: ignore[attr-defined]
                        load_mean=float(np.mean(loads)), load_max=float(max(loads)))
            meta["probe_s"].append(cpu_probe())  # the machine's speed before and after the arm (seconds, lower = faster)
            (out / arm / "vla_arm.json").write_text(json.dumps(meta, indent=1))
            del running[arm]
            if process.returncode != 0:
                for other in running.values():
                    other.kill()
                raise RuntimeError(f"arm {arm!r} failed (exit {process.returncode}); its log: {out / arm / 'fit.log'}")
            print(f"[vla_arms] {arm}: done in {meta['process_wall_s'] / 60:.1f} min", flush=True)
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


# -- statistics ------------------------------------------------------------------------------------------------
def aligned(a: dict[str, float], b: dict[str, float]) -> tuple[list[float], list[float]]:
    """The two evaluations' successes on the same initial states, in one order (they must cover the same ones)."""
    if sorted(a) != sorted(b):
        raise ValueError(f"the evaluations cover different initial states ({len(a)} vs {len(b)})")
    return in_order(a), in_order(b)


def in_order(evaluation: dict[str, float]) -> list[float]:
    """The successes ordered by initial state (the order every interval resamples in)."""
    return [evaluation[k] for k in sorted(evaluation)]


def paired_difference(base: dict[str, float], mine: dict[str, float]) -> dict[str, float]:
    """``mine - base`` on the same initial states with its paired 95% bootstrap interval."""
    before, after = aligned(base, mine)
    return interval(paired_gain({TASK: before}, {TASK: after}))


def sft_evaluation(runs: dict[str, ArmRun]) -> dict[str, float]:
    """The SFT policy's held-out episodes: every RL arm's evaluation before its first step, which must agree (the
    same demonstrations, seed and SFT); a disagreement means the arms did not start from one policy."""
    starts = {arm: run.start for arm, run in runs.items()}
    first_arm, first = next(iter(starts.items()))
    for arm, start in starts.items():
        if start != first:
            differ = sum(start.get(k) != v for k, v in first.items())
            raise ValueError(f"arms {first_arm!r} and {arm!r} started from different SFT policies ({differ} held-out "
                             "episodes differ): rerun them on one machine with the same configs")
    return first


def summarise(runs: dict[str, ArmRun]) -> dict[str, dict]:
    """Per arm the numbers of ``results/<json>``: held-out success with its interval, the paired gain over SFT, the
    paired difference to sparse GRPO, simulator steps, wall-clock and the corrections' state at the end."""
    sft = sft_evaluation(runs)
    out: dict[str, dict] = {}
    sft_values = list(sft.values())
    sft_steps = next(iter(runs.values())).meta.get("sft", {})
    out["sft"] = {"label": LABELS["sft"], "episodes": len(sft_values),
                  "held_out": interval(bootstrap_mean({TASK: sft_values})), "gain_over_sft": None,
                  "difference_to_sparse_grpo": None,
                  # the demonstrations' steps cloned, and the SFT stage's seconds (every RL arm pays them first)
                  "simulator_steps": int(sft_steps["demonstration_steps"]) if "demonstration_steps" in sft_steps else None,
                  "train_wall_s": sft_steps.get("seconds"), "process_wall_s": None, "sft_loss": sft_steps.get("loss"),
                  "held_out_noisy": None, "gain_over_sft_noisy": None, "difference_to_sparse_grpo_noisy": None}
    first = next(iter(runs.values()))
    if 0 in first.noisy:
        out["sft"]["held_out_noisy"] = interval(bootstrap_mean({TASK: list(first.noisy[0].values())}))
    sparse = runs.get("sparse_grpo")
    for arm in RL_ARMS:
        if arm not in runs:
            continue
        run = runs[arm]
        out[arm] = {
            "label": LABELS[arm],
            "episodes": len(run.final),
            "held_out": interval(bootstrap_mean({TASK: in_order(run.final)})),
            "gain_over_sft": paired_difference(sft, run.final),
            "difference_to_sparse_grpo": None if sparse is None or arm == "sparse_grpo" else paired_difference(
                sparse.final, run.final),
            **noisy_statistics(runs, arm),
            "steps": len(run.steps),
            "simulator_steps": int(run.total("rollout/simulator_steps")),
            "real_graded_episodes": int(run.total("anchor/executions")),
            "train_wall_s": run.total("time/step"),
            "env_s": run.total("time/env"),
            "world_model_s": run.total("time/world_model"),
            "update_s": run.total("time/update"),
            "process_wall_s": run.meta.get("process_wall_s"),
            "load_mean": run.meta.get("load_mean"),
            "probe_s": run.meta.get("probe_s"),
            "corrections": {
                "anchor_pairs": run.last("debias/pairs"),
                "calibration_refits": run.last("debias/refits"),
                "bias_reduction": run.last("debias/bias_reduction"),
                "spearman_raw": run.last("fidelity/spearman_raw"),
                "spearman_calibrated": run.last("fidelity/spearman_calibrated"),
                "denoise_weight": run.last("denoise/weight"),
            },
            "curve": {str(step): float(np.mean(list(e.values()))) for step, e in sorted(run.evaluations.items())},
            "rollout_success": run.column("rollout/success_rate"),
        }
    wmrl = runs.get("wmrl")
    for other in ("sparse_budget", "raw_world_model"):  # WMRL at the same real labels; WMRL's own additions
        if wmrl is None or other not in runs:
            continue
        out["wmrl"][f"difference_to_{other}"] = paired_difference(runs[other].final, wmrl.final)
        noisy = (runs[other].final_noisy, wmrl.final_noisy)
        out["wmrl"][f"difference_to_{other}_noisy"] = None if None in noisy else paired_difference(*noisy)
    return out


def noisy_statistics(runs: dict[str, ArmRun], arm: str) -> dict[str, dict | None]:
    """The same three numbers for the noisy evaluation (the Gaussian policy RL trains; ``eval_noisy_episodes``),
    when every arm has it before and after training; else ``None``s."""
    keys = ("held_out_noisy", "gain_over_sft_noisy", "difference_to_sparse_grpo_noisy")
    run = runs[arm]
    if not all(0 in r.noisy and max(r.evaluations) in r.noisy for r in runs.values()):
        return dict.fromkeys(keys)
    final = run.final_noisy
    out = {keys[0]: interval(bootstrap_mean({TASK: in_order(final)})),
           keys[1]: paired_difference(next(iter(runs.values())).noisy[0], final), keys[2]: None}
    sparse = runs.get("sparse_grpo")
    if sparse is not None and arm != "sparse_grpo":
        out[keys[2]] = paired_difference(sparse.final_noisy, final)
    return out


def checks(summary: dict[str, dict]) -> list[tuple[str, str, bool]]:
    """The issue's bars, as measured: GRPO's paired gain over SFT above 0; WMRL >= sparse GRPO."""
    out = []
    if "sparse_grpo" in summary:
        gain = summary["sparse_grpo"]["gain_over_sft"]
        out.append(("GRPO (sparse) beats SFT beyond noise: paired 95% interval of the gain above 0",
                    interval_text(gain), gain["low"] > 0))
    if "wmrl" in summary and summary["wmrl"]["difference_to_sparse_grpo"] is not None:
        diff = summary["wmrl"]["difference_to_sparse_grpo"]
        out.append(("WMRL's success >= sparse GRPO's (point estimate; interval reported)", interval_text(diff),
                    diff["point"] >= 0))
    return out


def ordering(summary: dict[str, dict]) -> str:
    """The rows from best to worst held-out success, as measured (``=`` for equal points)."""
    ranked = sorted(summary, key=lambda a: -summary[a]["held_out"]["point"])
    text = LABELS[ranked[0]]
    for prev, arm in zip(ranked, ranked[1:], strict=False):
        sign = "=" if math.isclose(summary[prev]["held_out"]["point"], summary[arm]["held_out"]["point"]) else ">"
        text += f" {sign} {LABELS[arm]}"
    return text


def markdown(name: str, preset: Preset, summary: dict[str, dict], command: str, sitting: str) -> list[str]:
    lines = [
        f"# The paper's VLA table at CPU scale: `{name}` ({preset.note})",
        "",
        f"Generated by `benchmarks/vla_arms.py` ({sitting}). Machine: {machine()}.",
        f"Command: `{command}`",
        "",
        "One seed (`seed_everything: 0`, the module's `seed: 0`) for every arm. Each arm's load average and speed probe",
        "(seconds of a fixed matrix-product workload before / after it): " + "; ".join(
            f"{arm} {summary[arm]['load_mean']:.1f}, {summary[arm]['probe_s'][0]:.2f} / {summary[arm]['probe_s'][-1]:.2f} s"
            if summary[arm].get("load_mean") is not None and summary[arm].get("probe_s") else f"{arm} -"
            for arm in RL_ARMS if arm in summary) + ".",
        "",
        "Held-out success: the simulator's sparse success of one noise-free episode per held-out initial state, with a",
        "95% bootstrap interval over initial states. Gains and differences are *paired* (the same initial states,",
        "deterministic evaluation): their intervals resample the pairs. Simulator steps and training wall-clock: the",
        "SFT row's are the demonstrations' steps it cloned and its SFT stage; an RL arm's are its RL steps' rollouts and",
        "seconds, on top of the SFT row's. Process wall-clock: the whole `wmrl fit` (demonstrations, SFT, world model,",
        "evaluations, RL).",
        "",
        "| arm | held-out success | gain over SFT (paired) | vs sparse GRPO (paired) | simulator steps | "
        "real-graded episodes | training wall-clock | process wall-clock | paper (LIBERO-Long) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for arm in ARMS:
        if arm not in summary:
            continue
        s = summary[arm]
        wall = "-" if s.get("train_wall_s") is None else f"{s['train_wall_s'] / 60:.1f} min"
        process = "-" if not s.get("process_wall_s") else f"{s['process_wall_s'] / 60:.1f} min"
        steps = "-" if s.get("simulator_steps") is None else f"{s['simulator_steps']:,}"
        real = "-" if s.get("real_graded_episodes") is None else f"{s['real_graded_episodes']:,}"
        lines.append(f"| {s['label']} | {interval_text(s['held_out'], signed=False)} ({s['episodes']} states) | "
                     f"{interval_text(s['gain_over_sft'])} | {interval_text(s['difference_to_sparse_grpo'])} | {steps} | "
                     f"{real} | {wall} | {process} | {PAPER[arm] or '-'} |")
    lines += ["", f"Ordering as measured: {ordering(summary)}."]
    wmrl = summary.get("wmrl", {})
    for other, what in (("sparse_budget", "sparse GRPO with as many real-graded episodes (one group per step, the "
                                          "anchors' count)"),
                        ("raw_world_model", "the raw world model (what the anchors and the two corrections add)")):
        if f"difference_to_{other}" in wmrl:
            noisy = wmrl.get(f"difference_to_{other}_noisy")
            lines += ["", f"WMRL against {what}, paired: {interval_text(wmrl[f'difference_to_{other}'])}"
                      + ("." if noisy is None else f"; with the exploration noise: {interval_text(noisy)}.")]
    if summary["sft"].get("held_out_noisy") is not None:
        lines += ["", "The same initial states played by the Gaussian policy RL trains (its mean plus the exploration noise,",
                  "one episode per state, the same noise draws at every evaluation: `model.init_args.eval_noisy_episodes`):",
                  "", "| arm | held-out success, with exploration noise | gain over SFT (paired) | vs sparse GRPO (paired) |",
                  "|---|---|---|---|"]
        for arm in ARMS:
            if arm in summary:
                s = summary[arm]
                lines.append(f"| {s['label']} | {interval_text(s['held_out_noisy'], signed=False)} | "
                             f"{interval_text(s['gain_over_sft_noisy'])} | {interval_text(s['difference_to_sparse_grpo_noisy'])} |")
    lines += ["", "## The issue's bars (the noise-free evaluation)", ""]
    for what, value, ok in checks(summary):
        lines.append(f"- {'met' if ok else 'NOT met'}: {what}: {value}")
    lines += ["", "## The corrections at the end", "",
              "| arm | anchor pairs | calibration refits | bias reduction | Spearman raw | Spearman calibrated | "
              "denoising weight |", "|---|---|---|---|---|---|---|"]

    def cell(v):
        return "-" if v is None else f"{v:.3g}"

    for arm in RL_ARMS:
        if arm in summary:
            c = summary[arm]["corrections"]
            lines.append(f"| {LABELS[arm]} | {cell(c['anchor_pairs'])} | {cell(c['calibration_refits'])} | "
                         f"{cell(c['bias_reduction'])} | {cell(c['spearman_raw'])} | {cell(c['spearman_calibrated'])} | "
                         f"{cell(c['denoise_weight'])} |")
    lines += ["", "## Held-out success over training", "", "| arm | " + " | ".join(
        f"step {s}" for s in next(summary[a] for a in RL_ARMS if a in summary)["curve"]) + " |"]
    lines.append("|---" * (1 + len(next(summary[a] for a in RL_ARMS if a in summary)["curve"])) + "|")
    for arm in RL_ARMS:
        if arm in summary:
            lines.append(f"| {LABELS[arm]} | " + " | ".join(f"{v:.3f}" for v in summary[arm]["curve"].values()) + " |")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=sorted(PRESETS), default="pusht")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "vla_arms", help="run directories go under <out>/<preset>")
    parser.add_argument("--results", type=Path, default=ROOT / "benchmarks", help="where RESULTS-vla*.md and results/ go")
    parser.add_argument("--arms", nargs="+", choices=RL_ARMS, help="RL arms to run (SFT comes with any; default: the "
                        "preset's arms)")
    parser.add_argument("--jobs", type=int, default=1, help="arms run at a time (each uses one torch thread)")
    parser.add_argument("--reuse", action="store_true", help="read finished arms instead of rerunning them")
    args, extra = parser.parse_known_args(argv)  # wmrl fit flags for every arm, e.g. --trainer.max_steps=20
    unknown = [f for f in extra if not f.startswith(FIT_FLAGS)]
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)} (wmrl fit flags for every arm start with "
                     f"{', '.join(FIT_FLAGS)} and carry their value after '=')")
    if args.jobs < 1:
        parser.error("--jobs must be >= 1")
    preset = PRESETS[args.preset]
    args.arms = args.arms or [a for a in RL_ARMS if a in preset.overlays]
    missing = [a for a in args.arms if a not in preset.overlays]
    if missing:
        parser.error(f"--arms {' '.join(missing)}: not an arm of --preset {args.preset} "
                     f"(its arms: {' '.join(preset.overlays)})")
    out = args.out / args.preset
    started = datetime.datetime.now(datetime.UTC)
    todo = [a for a in args.arms if not (args.reuse and finished(out / a))]
    run_arms(preset, todo, out, extra, args.jobs)
    runs = {arm: read_arm(out / arm, arm) for arm in RL_ARMS if arm in args.arms}
    summary = summarise(runs)
    command = "python benchmarks/vla_arms.py " + " ".join(argv if argv is not None else sys.argv[1:])
    sitting = (f"one sitting, {started:%Y-%m-%d %H:%M} UTC, {args.jobs} arm(s) at a time"
               + (f"; arms read from an earlier sitting: {sorted(set(args.arms) - set(todo))}" if set(args.arms) - set(todo) else ""))
    report = {"preset": args.preset, "machine": machine(), "command": command, "sitting": sitting,
              "configs": {arm: [preset.base, *preset.overlays[arm]] for arm in runs}, "extra_flags": extra,
              "arms": summary, "checks": [{"check": w, "value": v, "met": ok} for w, v, ok in checks(summary)],
              "ordering": ordering(summary)}
    (args.results / "results").mkdir(parents=True, exist_ok=True)
    (args.results / "results" / preset.json_name).write_text(json.dumps(report, indent=1))
    target = args.results / preset.results
    previous = target.read_text() if target.is_file() else ""
    text = "\n".join(markdown(args.preset, preset, summary, command, sitting)) + "\n"
    kept = kept_by_hand(previous)
    target.write_text(text + kept)
    print("\n".join(markdown(args.preset, preset, summary, command, sitting)))


if __name__ == "__main__":
    main()
