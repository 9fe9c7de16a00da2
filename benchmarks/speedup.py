"""WMRL against real-execution GRPO, side by side: wall-clock, executions, held-out quality and the speedup limit.

Runs the six ablation arms (real-execution GRPO, pure world model, uncorrected mixture, debiasing only, denoising
only, full WMRL) with the same seed, model, tasks and step budget, one ``wmrl fit`` process after the other, then
reads what each run logged:

- wall-clock: the sum of the logged ``time/step`` (training only: model loading and evaluation excluded) and
  its parts (generation, real execution, world model, update), and the process's whole wall-clock;
- real executions used and their execution seconds (``anchor/executions``, ``env/execution_seconds``);
- the final policy's held-out quality with real execution only (the module's evaluation after the last step,
  K samples per held-out task, per-sample positions from ``heldout.jsonl``): mean position with a 95% bootstrap
  confidence interval (samples resampled within each task), valid-submission rate, and the difference to
  real-execution GRPO with its interval;
- the speedup limit ``R = (G + E) / (G + W + a E)`` from the measured components (G generation + update and E
  real execution per step of the real-execution run, W the world model's seconds and a the executed share of
  rollouts in the WMRL run) and the achieved ratio as a fraction of it.

It writes ``RESULTS.md`` (machine, commands, tables) and figures into ``--results`` (default ``benchmarks/``:
``benchmarks/RESULTS.md`` and ``benchmarks/results/*.png``), and ``wmrl report`` pages for the full-WMRL and the
real-execution runs. A section headed ``## Reading (by hand, <date>)`` at the end of RESULTS.md is kept when the
tables are regenerated.

    python benchmarks/speedup.py --preset cpu-quick               # 2 CPU cores, about 63 minutes
    python benchmarks/speedup.py --preset gpu --model /models/Qwen3.5-4B   # paper scale (vLLM, one GPU or more)
    python benchmarks/speedup.py --preset cpu-quick --reuse       # finished arms are read, not rerun

Presets. ``cpu-quick``: SmolLM2-135M with LoRA, 2 steps of 4 groups x 2 rollouts, the *heavy execution tier*
(DESIGN.md section 7): the two heavy multiclass training tasks with the ``heavy_boosting`` starter (a 1000-round
gradient-boosting run instead of the linear model; policy-written variants ran 5-65 s each, two at a time), so
that execution weighs what it does in AutoResearch work; the learned world model (``LearnedWorldModel``, learning
from this run's anchors only: no warm start, so no execution is free), execution cache off, 3 held-out samples per
task. ``gpu``: ``configs/autoresearch/paper_4b_vllm.yaml`` and the paper
ablation overlays (vLLM for rollouts and the world model; the LLM world model in ``generate`` mode), the train
split, the paper's step budget unless ``--steps`` says otherwise.

Every arm runs in a fresh process on the same machine one after the other; nothing else should run meanwhile
(the load average is recorded per arm).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from wmrl.algorithms.stats import bootstrap_difference, bootstrap_mean  # noqa: F401 (tests use speedup.*)

ROOT = Path(__file__).resolve().parent.parent
ARMS = ("real_grpo", "pure_world_model", "uncorrected", "debias_only", "denoise_only", "wmrl")
LABELS = {
    "real_grpo": "Real-execution GRPO",
    "pure_world_model": "Pure world model",
    "uncorrected": "Uncorrected mixture",
    "debias_only": "Debiasing only",
    "denoise_only": "Denoising only",
    "wmrl": "Full WMRL",
}
# The two arms of the ratio first, back to back; the other ablations after them (``--reuse`` continues a
# benchmark that was stopped).
RUN_ORDER = ("wmrl", "real_grpo", "uncorrected", "debias_only", "denoise_only", "pure_world_model")
PARTS = {"time/generate": "generate", "time/update": "update", "time/env": "execute", "time/world_model": "world model"}

LEARNED_WORLD_MODEL = {
    "class_path": "wmrl.environments.learned.LearnedWorldModel",
    "init_args": {"encoder": "all-minilm-l6-v2", "warm_start": [], "execution_log": False, "min_examples": 4,
                  "refit_every": 4},
}
VLLM_WORLD_MODEL = {
    "class_path": "wmrl.environments.world_model.LMWorldModel",
    "init_args": {"model": "policy", "mode": "generate", "backend": "vllm", "max_new_tokens": 1024,
                  "temperature": 0.7, "top_p": 0.8, "batch_size": 64},
}


@dataclass(frozen=True)
class Preset:
    """One benchmark scale: the base config, the ablation overlays and what every arm shares."""

    base: str
    ablations: str
    steps: int
    group_size: int
    groups_per_step: int
    eval_samples: int
    tasks: list[str] | None = None  # None: the base config's split
    eval_tasks: list[str] | None = None  # None: the base config's held-out tasks
    starter: str = "linear_baseline"
    world_model: dict | None = None  # replaces every arm's world model; None keeps the overlay's
    model: dict = field(default_factory=dict)  # more model.init_args
    note: str = ""


PRESETS = {
    "cpu-quick": Preset(
        base="configs/autoresearch/quickstart.yaml",
        ablations="configs/autoresearch/ablations/cpu",
        steps=2,
        group_size=2,
        groups_per_step=4,  # the anchor floor of one group makes a quarter of the rollouts real, as in the paper
        eval_samples=3,
        tasks=["digits_recognition", "airport_state"],
        eval_tasks=["penguin_species", "hmda_mortgage_denial", "nmes_doctor_visits"],
        starter="heavy_boosting",
        world_model=LEARNED_WORLD_MODEL,
        model={"lr": 2.0e-5},  # as measured in RESULTS.md (the quickstart has since moved to 3e-4)
        note="2 CPU cores, about 9-12 minutes an arm",
    ),
    "gpu": Preset(
        base="configs/autoresearch/paper_4b_vllm.yaml",
        ablations="configs/autoresearch/ablations/paper",
        steps=200,
        group_size=8,
        groups_per_step=8,
        eval_samples=8,
        world_model=VLLM_WORLD_MODEL,
        note="paper scale: Qwen3.5-4B (--model), vLLM; days on one GPU, hours on eight",
    ),
}


# -- running the arms ------------------------------------------------------------------------------------------
def arm_config(preset: Preset, arm: str, run_dir: Path, eval_at_start: bool) -> dict:
    """The overlay for one arm: its ablation overlay with the preset's shared settings on top."""
    overlay_path = ROOT / preset.ablations / f"{arm}.yaml"
    if not overlay_path.is_file():
        raise FileNotFoundError(f"{overlay_path}: the ablation overlay of arm {arm!r} is missing")
    overlay = yaml.safe_load(overlay_path.read_text())
    trainer = overlay.setdefault("trainer", {})
    trainer.update(default_root_dir=str(run_dir), max_steps=preset.steps)
    if preset.world_model is not None:
        for callback in trainer.get("callbacks", []):
            if callback["class_path"].endswith("WorldModelReward"):
                callback["init_args"]["world_model"] = json.loads(json.dumps(preset.world_model))
    model = {
        "environment": {
            "class_path": "wmrl.environments.real.SandboxEnvironment",
            # every script really runs: two arms with one seed sample the same scripts, and a cached one is free
            "init_args": {"use_cache": False, "starter_solution": preset.starter},
        },
        "eval_at_start": eval_at_start,
        **preset.model,
    }
    data = {"group_size": preset.group_size, "groups_per_step": preset.groups_per_step,
            "steps_per_epoch": preset.steps, "eval_samples": preset.eval_samples}
    if preset.tasks is not None:
        data["tasks"] = list(preset.tasks)
    if preset.eval_tasks is not None:
        data["eval_tasks"] = list(preset.eval_tasks)
    overlay["model"] = {"init_args": model}
    overlay["data"] = {"init_args": data}
    return overlay


def cpu_probe(size: int = 768, repeats: int = 20) -> float:
    """Seconds for a fixed float32 matrix-product workload (best of 3): the machine's speed around an arm.

    A shared or virtual machine's speed drifts between hours (measured here: the same rollouts took 20% less
    generation and update time in a later session), which a ratio of two arms cannot tell from the method."""
    a = np.random.default_rng(0).standard_normal((size, size), dtype=np.float32)
    best = math.inf
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(repeats):
            a @ a
        best = min(best, time.perf_counter() - start)
    return best


def run_arm(preset: Preset, arm: str, out: Path, eval_at_start: bool) -> dict:
    """Write the arm's config, run ``wmrl fit`` on it (log in the run dir) and time the process."""
    run_dir = out / "runs" / arm
    config = out / "configs" / f"{arm}.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(yaml.safe_dump(arm_config(preset, arm, run_dir, eval_at_start), sort_keys=False))
    command = [sys.executable, "-m", "wmrl.cli", "fit", "-c", str(ROOT / preset.base), "-c", str(config)]
    run_dir.mkdir(parents=True, exist_ok=True)
    print(f"[speedup] {arm}: {' '.join(command)}", flush=True)
    load_before, probe_before = os.getloadavg()[0], cpu_probe()
    started = time.perf_counter()
    loads = []
    with (run_dir / "fit.log").open("w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        while process.poll() is None:  # the 1-minute load average every 15 s: contention shows in the table
            loads.append(os.getloadavg()[0])
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=15)
        done = process
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"arm {arm!r} failed (exit {done.returncode}); its log: {run_dir / 'fit.log'}")
    meta = {"arm": arm, "process_wall_s": wall, "load_before": load_before, "load_mean": float(np.mean(loads or [0])),
            "load_max": float(max(loads or [0])), "probe_s": [probe_before, cpu_probe()], "command": " ".join(command)}
    (run_dir / "speedup_arm.json").write_text(json.dumps(meta, indent=1))
    print(f"[speedup] {arm}: done in {wall / 60:.1f} min", flush=True)
    return meta


# -- reading a finished arm ------------------------------------------------------------------------------------
@dataclass
class ArmResult:
    arm: str
    steps: pd.DataFrame  # per training step: time/* and counters
    positions: dict[str, list[float]]  # held-out task -> per-sample positions after the last step
    start_positions: dict[str, list[float]] | None
    valid_rate: float
    meta: dict

    @property
    def train_s(self) -> float:
        return float(self.steps["time/step"].sum())

    def part_s(self, column: str) -> float:
        return float(self.steps[column].fillna(0).sum()) if column in self.steps else 0.0

    def last(self, column: str) -> float | None:
        """The column's value at the last step it was logged (``None``: never logged)."""
        if column not in self.steps or self.steps[column].dropna().empty:
            return None
        return float(self.steps[column].dropna().iloc[-1])

    @property
    def executions(self) -> int:
        return int(self.steps["anchor/executions"].fillna(0).sum()) if "anchor/executions" in self.steps else 0


def read_arm(run_dir: Path, arm: str) -> ArmResult:
    """An arm's per-step metrics (CSV logger) and held-out samples (``heldout.jsonl``)."""
    from wmrl.report import find_metrics

    frame = pd.read_csv(find_metrics(run_dir))
    steps = frame.dropna(subset=["time/step"]).groupby("step").last().sort_index()
    evals = [json.loads(line) for line in (run_dir / "heldout.jsonl").read_text().splitlines() if line.strip()]
    # the evaluation after training (the CSV's step column counts from 0, the evaluation's global step from 1)
    final = [e for e in evals if e["step"] > 0 and e["split"] == "heldout"]
    if not final:
        raise ValueError(f"{run_dir / 'heldout.jsonl'} has no held-out evaluation after training: did validation "
                         "run at the end of training?")
    start = [e for e in evals if e["step"] == 0]

    def samples(evaluation: dict) -> dict[str, list[float]]:
        return {t["task_id"]: t["positions"] for t in evaluation["tasks"]}

    tasks = final[-1]["tasks"]
    meta_path = run_dir / "speedup_arm.json"
    return ArmResult(
        arm=arm,
        steps=steps,
        positions=samples(final[-1]),
        start_positions=samples(start[0]) if start else None,
        valid_rate=float(np.mean([t["valid_rate"] for t in tasks])),
        meta=json.loads(meta_path.read_text()) if meta_path.is_file() else {},
    )


# -- the speedup's limit ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Limit:
    """The speedup's components per training step and the bound they imply."""

    generate_update_s: float  # G: generation + update, per step of the real-execution run
    execute_s: float  # E: real execution per step of the real-execution run
    world_model_s: float  # W: world-model seconds per step of the WMRL run
    anchor_share: float  # a: executed share of rollouts in the WMRL run
    achieved: float  # real-execution GRPO / WMRL, training wall-clock at the same step budget

    @property
    def bound(self) -> float:
        g, e, w, a = self.generate_update_s, self.execute_s, self.world_model_s, self.anchor_share
        return (g + e) / (g + w + a * e)

    @property
    def fraction(self) -> float:
        return self.achieved / self.bound


def speedup_limit(real: ArmResult, wmrl: ArmResult, rollouts_per_step: int) -> Limit:
    """:class:`Limit` from the two runs' logged components (``time/env`` is wall-clock spent executing)."""
    n = len(real.steps)
    g = (real.part_s("time/generate") + real.part_s("time/update")) / n
    e = real.part_s("time/env") / n
    w = wmrl.part_s("time/world_model") / len(wmrl.steps)
    a = wmrl.executions / (rollouts_per_step * len(wmrl.steps))
    return Limit(g, e, w, a, real.train_s / wmrl.train_s)


# -- writing RESULTS.md and figures ----------------------------------------------------------------------------
def machine() -> str:
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"{os.cpu_count()} CPU cores ({cpu}), {memory:.0f} GiB RAM, {gpu}; Python {platform.python_version()}, "
            f"torch {torch.__version__}")


def figures(results: dict[str, ArmResult], target: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    target.mkdir(parents=True, exist_ok=True)
    arms = [a for a in ARMS if a in results]
    names = []

    fig, ax = plt.subplots(figsize=(8, 4))
    bottom = np.zeros(len(arms))
    for column, label in PARTS.items():
        values = np.array([results[a].part_s(column) / 60 for a in arms])
        ax.barh([LABELS[a] for a in arms], values, left=bottom, label=label)
        bottom += values
    ax.set_xlabel("training wall-clock (min), by component")
    ax.invert_yaxis()
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(target / "speedup_time.png", dpi=120)
    plt.close(fig)
    names.append("speedup_time.png")

    fig, ax = plt.subplots(figsize=(8, 4))
    for i, a in enumerate(arms):
        mean, low, high = bootstrap_mean(results[a].positions)
        ax.errorbar(mean, i, xerr=[[mean - low], [high - mean]], fmt="o", capsize=4)
    ax.set_yticks(range(len(arms)), [LABELS[a] for a in arms])
    ax.invert_yaxis()
    ax.set_xlabel("held-out mean position (real execution), 95% bootstrap interval")
    fig.tight_layout()
    fig.savefig(target / "speedup_heldout.png", dpi=120)
    plt.close(fig)
    names.append("speedup_heldout.png")

    fig, ax = plt.subplots(figsize=(8, 4))
    for a in arms:
        steps = results[a].steps
        column = "reward/real_mean" if a == "real_grpo" else "reward/mean"
        if column in steps:
            ax.plot(steps["time/step"].cumsum() / 60, steps[column], marker="o", label=LABELS[a])
    ax.set_xlabel("training wall-clock (min)")
    ax.set_ylabel("mean training reward")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(target / "speedup_reward.png", dpi=120)
    plt.close(fig)
    names.append("speedup_reward.png")
    return names


def results_markdown(preset_name: str, preset: Preset, results: dict[str, ArmResult], limit: Limit | None,
                     command: str, figure_names: list[str], figure_dir: str) -> str:
    lines = [
        "# Speedup: WMRL vs real-execution GRPO",
        "",
        f"Measured by `benchmarks/speedup.py` on {time.strftime('%Y-%m-%d')}. Machine: {machine()}.",
        "",
        f"    {command}",
        "",
        f"Preset `{preset_name}` ({preset.note}): {preset.steps} steps x {preset.groups_per_step} groups x "
        f"{preset.group_size} rollouts, train tasks {preset.tasks or 'of the base config'}, starter "
        f"`{preset.starter}`, held-out tasks {preset.eval_tasks or 'of the base config'} with "
        f"{preset.eval_samples} samples each (real execution), base config `{preset.base}`, overlays "
        f"`{preset.ablations}/<arm>.yaml`, world model "
        f"`{(preset.world_model or {}).get('class_path', 'of the overlays')}`. Same seed (0) in every arm.",
        "",
        "| arm | training wall-clock (min) | ratio vs real | generate | update | execute | world model "
        "| real executions | execution s | held-out mean position [95% CI] | valid rate | process (min) | load "
        "| speed probe (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    real = results.get("real_grpo")
    for a in ARMS:
        if a not in results:
            continue
        r = results[a]
        mean, low, high = bootstrap_mean(r.positions)
        ratio = f"{real.train_s / r.train_s:.2f}x" if real else "n/a"
        exec_s = r.part_s("env/execution_seconds")
        load = r.meta.get("load_mean")
        load_text = "" if load is None else f"{load:.1f} (max {r.meta.get('load_max', load):.1f})"
        lines.append(
            f"| {LABELS[a]} | {r.train_s / 60:.1f} | {ratio} | "
            + " | ".join(f"{r.part_s(c) / 60:.1f}" for c in PARTS)
            + f" | {r.executions} | {exec_s:.0f} | {mean:.3f} [{low:.3f}, {high:.3f}] | {r.valid_rate:.2f} | "
            f"{r.meta.get('process_wall_s', float('nan')) / 60:.1f} | "
            f"{load_text} | {probe_text(r.meta.get('probe_s'))} |"
        )
    lines += ["", "Component columns are minutes of training wall-clock (`time/*`); *execute* is wall-clock "
              "spent waiting for real executions (concurrent runs overlap), *execution s* the executions' own "
              "seconds; *process* includes model loading and held-out evaluation; *load* is the mean (max) of the "
              "1-minute load average sampled every 15 s while the arm ran (2 = both cores busy); *speed probe* the "
              "seconds of a fixed matrix-product workload before and after the arm (lower is faster; arms whose "
              "probes differ ran on a machine of different speed).", ""]
    lines += ["What the world model and the corrections had to work with at the end of each arm (a "
              "correction acts only once it has its minimum of anchor pairs or observations):", "",
              "| arm | world-model examples | calibration pairs | map refits | denoising weight (last step) |",
              "|---|---|---|---|---|"]
    for a in ARMS:
        if a in results and a != "real_grpo":
            r = results[a]
            cells = [r.last(c) for c in ("world_model/examples", "debias/pairs", "debias/refits", "denoise/weight")]
            lines.append(f"| {LABELS[a]} | " + " | ".join("-" if v is None else f"{v:g}" for v in cells) + " |")
    lines.append("")
    start = next((r.start_positions for r in results.values() if r.start_positions), None)
    if start:
        mean, low, high = bootstrap_mean(start)
        lines += [f"Held-out mean position of the starting policy: {mean:.3f} [{low:.3f}, {high:.3f}].", ""]
    if limit is not None:
        lines += [
            "## The limit",
            "",
            "R = (G + E) / (G + W + a E), per training step: G generation + update and E real execution of the "
            "real-execution run, W world model and a the executed share of rollouts of the full-WMRL run.",
            "",
            "| G (s) | E (s) | W (s) | a | limit R | achieved | achieved / limit |",
            "|---|---|---|---|---|---|---|",
            f"| {limit.generate_update_s:.1f} | {limit.execute_s:.1f} | {limit.world_model_s:.1f} | "
            f"{limit.anchor_share:.3f} | {limit.bound:.2f}x | {limit.achieved:.2f}x | {limit.fraction:.0%} |",
            "",
            f"R >= 3 needs E >= {_execution_needed(limit, 3.0):.0f} s per step at these G, W and a "
            f"({_execution_needed(limit, 3.0) / max(limit.generate_update_s, 1e-9):.1f} G).",
            "",
        ]
    if real:
        lines += ["## Held-out quality against real-execution GRPO", "",
                  "| arm | difference in mean position [95% CI] | within the interval of real GRPO or above |",
                  "|---|---|---|"]
        for a in ARMS:
            if a in results and a != "real_grpo":
                point, low, high = bootstrap_difference(results[a].positions, real.positions)
                lines.append(f"| {LABELS[a]} | {point:+.3f} [{low:+.3f}, {high:+.3f}] | "
                             f"{'yes' if high >= 0 else 'no'} |")
        lines.append("")
        order = [a for a in ("uncorrected", "debias_only", "denoise_only", "wmrl") if a in results]
        if len(order) == 4:
            m = {a: bootstrap_mean(results[a].positions)[0] for a in order}
            holds = m["uncorrected"] < min(m["debias_only"], m["denoise_only"]) and \
                max(m["debias_only"], m["denoise_only"]) < m["wmrl"]
            lines += [f"Ablation ordering (uncorrected < single corrections < full WMRL, by mean position): "
                      f"{'holds' if holds else 'does not hold'} here "
                      f"({', '.join(f'{LABELS[a]} {m[a]:.3f}' for a in order)}).", ""]
    lines += ["## Figures", ""] + [f"![{n}]({figure_dir}/{n})" for n in figure_names] + [""]
    return "\n".join(lines)


BY_HAND = "## Reading (by hand"  # the heading of a section a person wrote under the tables


def kept_by_hand(previous: str) -> str:
    """The hand-written reading of an earlier RESULTS.md (from its ``## Reading (by hand`` heading on), which a
    regeneration keeps: its heading carries the date it was written, so the reader can tell it from the tables."""
    at = previous.find("\n" + BY_HAND)
    return "" if at < 0 else "\n" + previous[at + 1 :].rstrip("\n") + "\n"


def probe_text(probe: list[float] | None) -> str:
    """``before / after`` seconds of :func:`cpu_probe` (``-`` for arms measured before the probe existed)."""
    return "-" if not probe else " / ".join(f"{p:.2f}" for p in probe)


def _execution_needed(limit: Limit, target: float) -> float:
    """E per step for which the bound reaches ``target`` at the measured G, W and a."""
    g, w, a = limit.generate_update_s, limit.world_model_s, limit.anchor_share
    denominator = 1 - target * a
    return float("inf") if denominator <= 0 else (target * (g + w) - g) / denominator


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=sorted(PRESETS), default="cpu-quick")
    parser.add_argument("--arms", nargs="*", choices=ARMS, default=list(RUN_ORDER),
                        help="arms to run, in this order (default: full WMRL and real-execution GRPO first)")
    parser.add_argument("--steps", type=int, help="override the preset's step budget")
    parser.add_argument("--model", help="override the policy (a local checkpoint dir or a built-in name)")
    parser.add_argument("--out", type=Path, default=Path("runs/speedup"), help="run dirs and generated configs")
    parser.add_argument("--results", type=Path, default=ROOT / "benchmarks",
                        help="where RESULTS.md and results/*.png go")
    parser.add_argument("--reuse", action="store_true", help="read arms that already finished instead of rerunning")
    args = parser.parse_args(argv)

    preset = PRESETS[args.preset]
    if args.steps:
        preset = replace(preset, steps=args.steps)
    if args.model:
        preset = replace(preset, model={**preset.model, "model": args.model})
    out = args.out / args.preset
    out.mkdir(parents=True, exist_ok=True)
    (out / "preset.json").write_text(json.dumps(asdict(preset), indent=1))

    results: dict[str, ArmResult] = {}
    for i, arm in enumerate(args.arms):
        run_dir = out / "runs" / arm
        if not (args.reuse and (run_dir / "speedup_arm.json").is_file()):
            if run_dir.exists():
                import shutil

                shutil.rmtree(run_dir)  # a fresh run: no stale metrics or checkpoints to resume from
            run_arm(preset, arm, out, eval_at_start=(i == 0))
        results[arm] = read_arm(run_dir, arm)

    limit = None
    if "real_grpo" in results and "wmrl" in results:
        limit = speedup_limit(results["real_grpo"], results["wmrl"], preset.group_size * preset.groups_per_step)
    figure_dir = args.results / "results"
    names = figures(results, figure_dir)
    command = "python benchmarks/speedup.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = results_markdown(args.preset, preset, results, limit, command, names,
                            os.path.relpath(figure_dir, args.results))
    target = args.results / "RESULTS.md"
    text += kept_by_hand(target.read_text() if target.is_file() else "")
    target.write_text(text)
    from wmrl.report import write_report

    for arm in ("wmrl", "real_grpo"):
        if arm in results:
            write_report(out / "runs" / arm)
    print(text)


if __name__ == "__main__":
    main()
