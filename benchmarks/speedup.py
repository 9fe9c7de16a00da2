"""WMRL against real-execution GRPO, side by side: wall-clock, executions, held-out quality and the speedup limit.

Runs the six ablation arms (real-execution GRPO, pure world model, uncorrected mixture, debiasing only, denoising
only, full WMRL) and real-execution GRPO at full WMRL's execution budget (as many groups a step as WMRL executes)
with the same seed, model, tasks and step budget, one ``wmrl fit`` process after the other, then reads what each
run logged:

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
    python benchmarks/speedup.py --preset cpu-learn               # 2 CPU cores, about 80 minutes: RESULTS-learn.md
    python benchmarks/speedup.py --preset cpu-quality --model DIR # a policy that can write one model line
    python benchmarks/speedup.py --preset gpu --model /models/Qwen3.5-4B   # paper scale (vLLM, one GPU or more)
    python benchmarks/speedup.py --preset cpu-quick --reuse       # finished arms are read, not rerun

Presets. ``cpu-quick``: SmolLM2-135M with LoRA, 2 steps of 4 groups x 2 rollouts, the *heavy execution tier*
(docs/findings.md): the two heavy multiclass training tasks with the ``heavy_boosting`` starter (a 1000-round
gradient-boosting run instead of the linear model; policy-written variants ran 5-65 s each, two at a time), so
that execution weighs what it does in AutoResearch work; the learned world model (``LearnedWorldModel``, learning
from this run's anchors only: no warm start, so no execution is free), execution cache off, 3 held-out samples per
task. ``cpu-learn`` (the regime where learning shows): the quickstart's learning settings (LoRA lr 3e-4, the 13
tabular training tasks, chosen on the train split), 4 steps of 4 groups x 3 rollouts, the learned world model
*pretrained* on real executions of base-policy scripts on the train split (``benchmarks/pretrain_world_model.py``;
its build cost is reported with the results), calibration constants scaled to 4 steps, 6 held-out samples per
task; it writes ``RESULTS-learn.md`` and ``results/cpu-learn.json`` with each arm's paired gain over the starting
policy and the issue's checks. ``gpu-learn`` is the same on one CUDA GPU (``benchmarks/gpu_learn.sh``).
``cpu-heavy`` (the paper's regime, attempted): 10 groups x 2 rollouts with one anchor group (a = 0.1), the two heavy
training tasks with the heavy starter, G kept near its floor by batching; it writes ``RESULTS-heavy.md`` and
``results/cpu-heavy.json`` with the regime's checks (execution share, ratio, fraction of the limit) and generation
and update against their compute floor (``benchmarks/g_floor.py`` measures G before and after the batching).
``gpu``: ``configs/autoresearch/paper_4b.yaml`` with the engine and world model of its ``paper_4b_vllm.yaml``
overlay, and the paper ablation overlays (vLLM for rollouts and the world model; the LLM world model in ``generate`` mode), the train
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
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from wmrl.algorithms.stats import (  # noqa: F401 (tests use speedup.*)
    bootstrap_difference,
    bootstrap_mean,
    interval,
    interval_text,
    paired_best_of_k,
    paired_gain,
    seed_interval,
)
from wmrl.benchmarking import (  # noqa: F401 (tests use speedup.*)
    best_matmul_seconds,
    best_seconds,
    cpu_probe,
    kept_by_hand,
    machine,
    memory_gbps,
)

ROOT = Path(__file__).resolve().parent.parent
ARMS = ("real_grpo", "pure_world_model", "uncorrected", "debias_only", "denoise_only", "wmrl", "real_grpo_equal_budget",
        "wmrl_paper", "wmrl_least_separated")
#: real-execution GRPO at full WMRL's execution budget: as many groups a step as full WMRL executes (its anchors)
EQUAL_BUDGET = "real_grpo_equal_budget"
LABELS = {
    "real_grpo": "Real-execution GRPO",
    EQUAL_BUDGET: "Real GRPO at WMRL's executions",
    "pure_world_model": "Pure world model",
    "uncorrected": "Uncorrected mixture",
    "debias_only": "Debiasing only",
    "denoise_only": "Denoising only",
    "wmrl": "Full WMRL",
    "wmrl_paper": "Full WMRL, the paper's corrections",  # run when asked (--arms): ablations/cpu/wmrl_paper.yaml
    "wmrl_least_separated": "Full WMRL, anchors where the world model separates least",  # run when asked (--arms)
}
#: arms that are another arm's overlay with some callbacks' settings changed (no YAML of their own): the kit's WMRL
#: with its anchors placed before each step on the tasks the world model tells apart least (AnchorRouting
#: ``selection: least_separated``; it needs a world model that says so, as the task-aware one of ``suite-quality``)
VARIANTS = {"wmrl_least_separated": ("wmrl", {"AnchorRouting": {"selection": "least_separated"}})}
# The two arms of the ratio first, back to back; the other ablations after them (``--reuse`` continues a
# benchmark that was stopped).
RUN_ORDER = ("wmrl", "real_grpo", EQUAL_BUDGET, "uncorrected", "debias_only", "denoise_only", "pure_world_model")
PARTS = {"time/generate": "generate", "time/update": "update", "time/env": "execute", "time/world_model": "world model"}

LEARNED_WORLD_MODEL = {
    "class_path": "wmrl.autoresearch.world_models.learned.LearnedWorldModel",
    "init_args": {"encoder": "all-minilm-l6-v2", "warm_start": [], "execution_log": False, "min_examples": 4,
                  "refit_every": 4},
}
PRETRAINED = "benchmarks/artefacts/learned_world_model_train.pt"  # built by benchmarks/pretrain_world_model.py
#: the learned world model *pretrained* on real executions of base-policy scripts on the train split (the CPU
#: counterpart of the paper's pretrained LLM world model), still learning from every anchor during the run
PRETRAINED_WORLD_MODEL = {
    "class_path": "wmrl.autoresearch.world_models.learned.LearnedWorldModel",
    "init_args": {"encoder": "all-minilm-l6-v2", "pretrained": str(ROOT / PRETRAINED), "warm_start": [],
                  "execution_log": False, "min_examples": 4, "refit_every": 3},
}
#: the same, pretrained on the cpu-quality policy's own scripts: ``score`` view, ``starter_estimator`` prefill, the
#: warm-started policy (benchmarks/warm_start.py), train split only. The script-view artefact above never saw a
#: script that changes the estimator, which is all a cpu-quality rollout writes.
PRETRAINED_QUALITY = "benchmarks/artefacts/learned_world_model_quality.pt"
_PAPER_VLLM = yaml.safe_load((ROOT / "configs/autoresearch/paper_4b_vllm.yaml").read_text())
#: the world model of the vLLM overlay (ablations/paper/*.yaml run it on transformers)
VLLM_WORLD_MODEL = next(c["init_args"]["world_model"] for c in _PAPER_VLLM["trainer"]["callbacks+"]
                        if c["class_path"].endswith("WorldModelReward"))


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
    starter_view: str = "script"  # SandboxEnvironment(starter_view=...): ``score`` leaves the model to choose
    world_model: dict | None = None  # replaces every arm's world model; None keeps the overlay's
    model: dict = field(default_factory=dict)  # more model.init_args
    #: init_args overrides of the overlays' callbacks, by class name (e.g. CPU-scaled calibration constants)
    callbacks: dict[str, dict] = field(default_factory=dict)
    trainer: dict = field(default_factory=dict)  # more trainer settings (e.g. the GPU accelerator)
    title: str = "Speedup: WMRL vs real-execution GRPO"
    results_name: str = "RESULTS.md"  # under --results; the figures go to --results/results/<figure_prefix>*.png
    figure_prefix: str = "speedup_"
    note: str = ""
    #: held-out evaluation every this many steps (the data module's ``steps_per_epoch``), not only after the last:
    #: the arms compared along the run, at equal executions, where they have not yet converged (None: at the end)
    eval_every: int | None = None
    #: the checks of the results: ``learning`` (issue 17: gains over the start) or ``regime`` (issue 20: the paper's
    #: regime, execution share, ratio and its fraction of the limit), or ``quality`` (issue 32: learning, and per held-out
    #: task the best-of-k against the start, and the equal-budget comparison)
    checks: str = "learning"


PRESETS: dict[str, Preset] = {
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
    # Learning that shows (issue 17): the quickstart's learning settings (LoRA lr 3e-4 and the 13 tabular training
    # tasks, chosen on the train split: benchmarks/README.md) with 4 groups x 3 rollouts a step, so the anchor
    # floor of one group executes a quarter of the rollouts; the pretrained learned world model; calibration
    # constants scaled to a 3-step run (the paper's 200 / 64 pairs and 32 warm-up observations would never engage
    # in 9 anchor rollouts, of which the gate decides some: a first try at min_pairs 3 / refit_every 3 had 2 pairs
    # after step 1 and 5 after step 2): the map refits after every step once 2 pairs exist, the denoising scale
    # freezes after its first observation (half-life 8 observations).
    "cpu-learn": Preset(
        base="configs/autoresearch/quickstart.yaml",
        ablations="configs/autoresearch/ablations/cpu",
        steps=4,
        group_size=3,
        groups_per_step=4,
        eval_samples=6,
        world_model=PRETRAINED_WORLD_MODEL,
        callbacks={
            "OnlineDebiasing": {"min_pairs": 2, "refit_every": 1},
            "InverseVarianceDenoising": {"warmup": 1, "half_life": 8},
        },
        title="Learning that shows: six arms from one starting policy, held-out gains with paired intervals",
        results_name="RESULTS-learn.md",
        figure_prefix="cpu-learn_",
        note="2 CPU cores, about 11-14 minutes an arm",
    ),
    # The paper's regime on CPU (issue 20): execution should dominate the real-execution run's step (the paper: 614
    # of 883 GPU-h) at the paper's anchor share (~10%, a floor of one group). The paper's 8 groups x 8 rollouts are
    # scaled to 2 cores as 10 groups x 2 (a = 1/10), on the two heavy training tasks whose boosting is costly (48 and
    # 10 classes: a tree per class per round), with the heavy tier's starter (1000 boosting rounds, no early
    # stopping); no sleeps, no padding. G is kept near its floor by batching: all 20 rollouts in one generation batch
    # (a task's identical prompts share one prefill) and update micro-batches of 8 rows of one task (its prompt runs
    # once a micro-batch; 20 rows in one ran out of 24 GiB: the attention weights the backward keeps grow with rows x
    # prompt length); neither changes the loss or the gradients. The stacking starter (heavy_stacking), which would
    # make every executed script pay a minute or two, derails the 135M policy (measured: 80-90% of its turns hit the
    # token limit), so it is not this preset's. 2 steps keep both arms within one sitting.
    "cpu-heavy": Preset(
        base="configs/autoresearch/quickstart.yaml",
        ablations="configs/autoresearch/ablations/cpu",
        steps=2,
        group_size=2,
        groups_per_step=10,
        eval_samples=3,
        tasks=["digits_recognition", "airport_state"],
        eval_tasks=["penguin_species", "hmda_mortgage_denial", "nmes_doctor_visits"],
        starter="heavy_boosting",
        world_model=LEARNED_WORLD_MODEL,
        model={"micro_batch_size": 8, "generation_batch_size": 20},
        title="The paper's regime on CPU: execution dominates, WMRL against real-execution GRPO",
        results_name="RESULTS-heavy.md",
        figure_prefix="cpu-heavy_",
        note="2 CPU cores, about 9 minutes for real-execution GRPO and 7 for full WMRL",
        checks="regime",
    ),
    "gpu": Preset(
        base="configs/autoresearch/paper_4b.yaml",
        ablations="configs/autoresearch/ablations/paper",
        steps=200,
        group_size=8,
        groups_per_step=8,
        eval_samples=8,
        world_model=VLLM_WORLD_MODEL,
        model=_PAPER_VLLM["model"]["init_args"],  # the vLLM engine, the LoRA adapter it syncs, top-p 1
        note="paper scale: Qwen3.5-4B (--model), vLLM; days on one GPU, hours on eight",
    ),
}

# Quality that is learnable (issue 32): in cpu-learn every valid held-out sample copied the starter's model line and
# scored exactly its leaderboard position, so GRPO taught the policy to finish a script, never to write a better
# one. Here the prompt shows the starter's head and its measured validation score, not its model line
# (``starter_view: score``, wmrl.autoresearch.tasks.model_choice), the script's fitting, scoring and writing sit in a
# ``finish(model)`` helper, and the prefill (``starter_estimator``) ends at ``model = make_pipeline(preprocess, ``:
# the policy's first tokens choose the estimator, and estimators score differently (benchmarks/model_choice.py on the train split: a
# random forest beats the linear starter on 11 of the 13 tabular training tasks, loses on 2). Settings chosen on
# the train split only (benchmarks/README.md, "cpu-quality"); 8 held-out samples a task, so that a task's best-of-k
# has an interval. The default SmolLM2-135M writes no valid line in this view (RESULTS-quality.md: 0 of 30 on
# training tasks): the policy is its warm start (``--model``, benchmarks/warm_start.py: every menu line of the
# training tasks once, no line preferred), and the world model is pretrained on that policy's train-split scripts.
PRESETS["cpu-quality"] = replace(
    PRESETS["cpu-learn"],
    starter_view="score",
    model={"prefill": "starter_estimator"},
    world_model={**PRETRAINED_WORLD_MODEL,
                 "init_args": {**PRETRAINED_WORLD_MODEL["init_args"], "pretrained": str(ROOT / PRETRAINED_QUALITY)}},
    steps=6,
    group_size=4,
    groups_per_step=4,
    eval_samples=8,
    title="Quality that is learnable: the policy chooses the model, held-out best-of-k against the start",
    results_name="RESULTS-quality.md",
    figure_prefix="cpu-quality_",
    note="2 CPU cores, the warm-started policy (--model)",
    checks="quality",
)


# cpu-quality on the suite at the paper's scale (issue 44): every tabular task of the train split (the types the score
# view serves) and every tabular held-out task, none chosen by results, and the task-aware world model pretrained on
# the world_model split only (benchmarks/artefacts/task_aware_world_model.pt: the task card and the code, exact
# recall of what an anchor ran). The arms of its table: real_grpo, real_grpo_equal_budget, pure_world_model,
# wmrl_paper and wmrl, over --seeds 0 1 2. Held-out evaluation after steps 2, 4 and 6 (eval_every): measured at the
# end only, every arm converged on the same script per held-out task within six steps and the arms tied exactly
# (seeds 0 and 1, benchmarks/README.md); the comparison is made along the run, at equal executions.
TASK_AWARE = "benchmarks/artefacts/task_aware_world_model.pt"  # built by benchmarks/pretrain_world_model.py --task-aware
TASK_AWARE_WORLD_MODEL = {
    "class_path": "wmrl.autoresearch.world_models.task_aware.TaskAwareWorldModel",
    "init_args": {"pretrained": str(ROOT / TASK_AWARE), "warm_start": [], "min_examples": 16, "refit_every": 4,
                  "recall": True},
}
SUITE_ARMS = ("wmrl", "real_grpo", EQUAL_BUDGET, "wmrl_paper", "pure_world_model")


def suite_tasks(split: str) -> list[str]:
    """The split's tasks of the types the ``score`` view serves (tabular: a model line to choose)."""
    from wmrl.autoresearch.tasks.catalog import TASKS

    return [t.id for t in TASKS if t.split == split and t.type in ("binary", "multiclass", "regression", "count")]


PRESETS["suite-quality"] = replace(
    PRESETS["cpu-quality"],
    tasks=suite_tasks("train"),
    eval_tasks=suite_tasks("heldout"),
    world_model=TASK_AWARE_WORLD_MODEL,
    eval_samples=4,
    eval_every=2,
    title="Quality on the suite at the paper's scale: the task-aware world model against real GRPO at its executions",
    results_name="RESULTS-suite-quality.md",
    figure_prefix="suite-quality_",
    note="2 CPU cores, the warm-started policy (--model), the task-aware world model",
)


# The same regime on one CUDA GPU with the transformers engine (benchmarks/gpu_learn.sh; vLLM is gpu_smoke.sh's):
# the policy, the reference log-probs and the update on the GPU in bf16 mixed precision, executions on the CPUs.
PRESETS["gpu-learn"] = replace(
    PRESETS["cpu-learn"], trainer={"accelerator": "gpu", "devices": 1, "precision": "bf16-mixed"},
    results_name="RESULTS-learn-gpu.md", figure_prefix="gpu-learn_", note="one CUDA GPU, about a minute an arm",
)


# -- running the arms ------------------------------------------------------------------------------------------
def arm_config(preset: Preset, arm: str, run_dir: Path, eval_at_start: bool) -> dict:
    """The overlay for one arm: its ablation overlay (a variant's: its base arm's, with its changes) with the preset's
    shared settings on top."""
    base, changes = VARIANTS.get(arm, (arm, {}))
    overlay_path = ROOT / preset.ablations / f"{base}.yaml"
    if not overlay_path.is_file():
        raise FileNotFoundError(f"{overlay_path}: the ablation overlay of arm {arm!r} is missing")
    overlay = yaml.safe_load(overlay_path.read_text())
    trainer = overlay.setdefault("trainer", {})
    trainer.update(default_root_dir=str(run_dir), max_steps=preset.steps, **preset.trainer)
    for callback in trainer.get("callbacks+", trainer.get("callbacks", [])):
        name = callback["class_path"].rsplit(".", 1)[-1]
        if preset.world_model is not None and name == "WorldModelReward":
            callback["init_args"]["world_model"] = json.loads(json.dumps(preset.world_model))
        callback.setdefault("init_args", {}).update(preset.callbacks.get(name, {}))
        callback["init_args"].update(changes.get(name, {}))
    model = {
        "environment": {
            "class_path": "wmrl.autoresearch.environments.real.SandboxEnvironment",
            # every script really runs: two arms with one seed sample the same scripts, and a cached one is free
            "init_args": {"use_cache": False, "starter_solution": preset.starter, "starter_view": preset.starter_view},
        },
        "eval_at_start": eval_at_start,
        **preset.model,
    }
    groups = equal_budget_groups(preset) if arm == EQUAL_BUDGET else preset.groups_per_step
    data = {"group_size": preset.group_size, "groups_per_step": groups,
            "steps_per_epoch": preset.eval_every or preset.steps, "eval_samples": preset.eval_samples}
    if preset.tasks is not None:
        data["tasks"] = list(preset.tasks)
    if preset.eval_tasks is not None:
        data["eval_tasks"] = list(preset.eval_tasks)
    overlay["model"] = {"init_args": model}
    overlay["data"] = {"init_args": data}
    return overlay


def equal_budget_groups(preset: Preset) -> int:
    """The groups a step that full WMRL executes at the preset's scale (its ``AnchorRouting``'s anchors at
    ``groups_per_step``): the equal-budget arm runs real-execution GRPO on that many groups, so both execute the same
    rollouts a step (the paper's claim is the same quality for a fraction of the executions; the fair opponent
    spends the same fraction)."""
    from wmrl.callbacks import AnchorRouting

    overlay = yaml.safe_load((ROOT / preset.ablations / "wmrl.yaml").read_text())
    trainer = overlay.get("trainer", {})
    routing = next(c for c in trainer.get("callbacks+", trainer.get("callbacks", []))
                   if c["class_path"].endswith("AnchorRouting"))
    settings = {**routing.get("init_args", {}), **preset.callbacks.get("AnchorRouting", {})}
    settings.pop("seed", None)  # the YAML's "${seed_everything}" is resolved by a fit; how many anchors needs no seed
    return AnchorRouting(**settings).anchors_for(preset.groups_per_step)


def matmul_gflops(size: int = 1024, repeats: int = 10) -> float:
    """The machine's float32 matrix-product throughput through torch (GFLOP/s, best of 3, torch's default threads),
    the faster of torch's own product and oneDNN's prepacked one (:mod:`wmrl.models.packed`, which generation uses;
    on an AMD EPYC with AVX-512 it runs ~2x torch's MKL product): what a compute floor of the policy's passes is
    measured against."""
    import torch

    from wmrl.models import packed

    a = torch.randn(size, size, generator=torch.Generator().manual_seed(0))
    seconds = best_matmul_seconds(a, repeats)
    if packed.available():
        weight = torch.ops.mkldnn._reorder_linear_weight(a, size)
        seconds = min(seconds, best_seconds(lambda: torch.ops.mkldnn._linear_pointwise(a, weight, None, "none", [], ""),
                                            repeats))
    return 2 * size**3 * repeats / seconds / 1e9


def run_arm(preset: Preset, arm: str, out: Path, eval_at_start: bool, seed: int = 0) -> dict:
    """Write the arm's config, run ``wmrl fit`` on it (log in the run dir) and time the process; ``seed`` is the
    run's ``seed_everything`` (the base config's is 0)."""
    run_dir = out / "runs" / arm
    config = out / "configs" / f"{arm}.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(yaml.safe_dump(arm_config(preset, arm, run_dir, eval_at_start), sort_keys=False))
    command = [sys.executable, "-m", "wmrl.cli", "fit", "-c", str(ROOT / preset.base), "-c", str(config),
               f"--seed_everything={seed}"]
    run_dir.mkdir(parents=True, exist_ok=True)
    print(f"[speedup] {arm}: {' '.join(command)}", flush=True)
    load_before, probe_before, gflops_before = os.getloadavg()[0], cpu_probe(), matmul_gflops()
    bandwidth_before = memory_gbps()
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
            "load_max": float(max(loads or [0])), "probe_s": [probe_before, cpu_probe()],
            "matmul_gflops": [gflops_before, matmul_gflops()], "memory_gbps": [bandwidth_before, memory_gbps()],
            "command": " ".join(command)}
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
    #: every held-out evaluation after the start, the last included: samples keyed ``task@step<k>`` (a pair is (task,
    #: evaluation step, sample): the held-out score along the run, at the executions each arm had made by then)
    along: dict[str, list[float]] = field(default_factory=dict)

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
    from wmrl.run_report import find_metrics

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
    along = {f"{t}@step{e['step']}": v for e in final for t, v in samples(e).items()}
    return ArmResult(
        arm=arm,
        steps=steps,
        positions=samples(final[-1]),
        start_positions=samples(start[0]) if start else None,
        valid_rate=float(np.mean([t["valid_rate"] for t in tasks if t["valid_rate"] is not None] or [np.nan])),
        meta=json.loads(meta_path.read_text()) if meta_path.is_file() else {},
        along=along,
    )


def pooled(per_seed: dict[int, dict[str, ArmResult]]) -> dict[str, ArmResult]:
    """Each arm's runs over seeds as one :class:`ArmResult`: held-out samples keyed ``task@seed<k>`` (so a pair is
    (seed, task, sample)), the steps of every seed in a row (times add up), the valid rate averaged. The starting
    policy is evaluated once (its held-out samples do not depend on the training seed: the evaluation's sampling
    seed is fixed) and stands for the start of every seed."""
    if len(per_seed) == 1:
        return next(iter(per_seed.values()))
    start = next((r.start_positions for runs in per_seed.values() for r in runs.values() if r.start_positions), None)
    arms = [a for a in ARMS if all(a in runs for runs in per_seed.values())]
    out = {}
    for a in arms:
        runs = {k: per_seed[k][a] for k in sorted(per_seed)}
        out[a] = ArmResult(
            arm=a,
            steps=pd.concat([r.steps for r in runs.values()], ignore_index=True),
            positions={f"{t}@seed{k}": v for k, r in runs.items() for t, v in r.positions.items()},
            start_positions=({f"{t}@seed{k}": v for k in runs for t, v in start.items()} if start else None),
            valid_rate=float(np.mean([r.valid_rate for r in runs.values()])),
            meta={"process_wall_s": sum(r.meta.get("process_wall_s") or 0.0 for r in runs.values()),
                  "seeds": {str(k): r.meta for k, r in runs.items()}},
            along={f"{t}@seed{k}": v for k, r in runs.items() for t, v in r.along.items()},
        )
    return out


def seed_difference(per_seed: dict[int, dict[str, ArmResult]], arm: str, other: str,
                    measure: str = "final") -> dict | None:
    """``arm`` minus ``other`` (held-out mean position, paired on (seed, task, sample)): pooled over seeds with its
    bootstrap interval, each seed's own (``per_seed``), and the Student-t interval of the seeds' points
    (``over_seeds``: whether another seed could flip the sign). ``measure``: ``final``, the evaluation after the
    last step, or ``along``, every evaluation after the start (pairs (seed, task, evaluation step, sample): the
    held-out score along the run at equal executions, the area under the held-out-vs-executions curve)."""
    seeds = [k for k in sorted(per_seed) if arm in per_seed[k] and other in per_seed[k]]
    if not seeds or arm == other:
        return None
    runs = {k: per_seed[k] for k in seeds}
    both = pooled(runs) if len(runs) > 1 else runs[seeds[0]]

    def samples(r: ArmResult) -> dict[str, list[float]]:
        return r.along if measure == "along" else r.positions

    out = interval(paired_gain(samples(both[other]), samples(both[arm])))
    per = {str(k): interval(paired_gain(samples(runs[k][other]), samples(runs[k][arm]))) for k in seeds}
    out["measure"] = measure
    out["per_seed"] = per
    out["seeds_at_or_above_0"] = sum(v["point"] >= 0 for v in per.values())
    if len(per) >= 2:
        out["over_seeds"] = interval(seed_interval([v["point"] for v in per.values()]))
    return out


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
def figures(results: dict[str, ArmResult], target: Path, prefix: str = "speedup_") -> list[str]:
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
    fig.savefig(target / f"{prefix}time.png", dpi=120)
    plt.close(fig)
    names.append(f"{prefix}time.png")

    fig, ax = plt.subplots(figsize=(8, 4))
    for i, a in enumerate(arms):
        mean, low, high = bootstrap_mean(results[a].positions)
        ax.errorbar(mean, i, xerr=[[max(mean - low, 0)], [max(high - mean, 0)]], fmt="o", capsize=4)
    ax.set_yticks(range(len(arms)), [LABELS[a] for a in arms])
    ax.invert_yaxis()
    ax.set_xlabel("held-out mean position (real execution), 95% bootstrap interval")
    fig.tight_layout()
    fig.savefig(target / f"{prefix}heldout.png", dpi=120)
    plt.close(fig)
    names.append(f"{prefix}heldout.png")

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
    fig.savefig(target / f"{prefix}reward.png", dpi=120)
    plt.close(fig)
    names.append(f"{prefix}reward.png")
    return names


# -- the learning summary (per arm: score, gain over the start, difference to real GRPO, cost, corrections) -----
def starting_samples(results: dict[str, ArmResult]) -> dict[str, list[float]] | None:
    """The starting policy's held-out samples: evaluated once, in the first arm run (every arm starts from the same
    policy and evaluates with the same seeds, so the pairs hold for every arm)."""
    return next((r.start_positions for r in results.values() if r.start_positions), None)


def summarise(results: dict[str, ArmResult]) -> dict[str, dict]:
    """Per arm the numbers of ``results/<preset>.json``: the held-out score with its interval, the paired gain over
    the start, the difference to real-execution GRPO (independent bootstrap), cost and the corrections' state."""
    start, real = starting_samples(results), results.get("real_grpo")
    out = {}
    for a in ARMS:
        if a not in results:
            continue
        r = results[a]
        cells = {c: r.last(c) for c in ("world_model/examples", "debias/pairs", "debias/refits", "denoise/weight")}
        out[a] = {
            "label": LABELS[a],
            "held_out": interval(bootstrap_mean(r.positions)),
            "valid_rate": r.valid_rate,
            "gain_over_start": interval(paired_gain(start, r.positions)) if start else None,
            "per_task": per_task(start, r.positions) if start else None,
            "difference_to_equal_budget": (interval(paired_gain(results[EQUAL_BUDGET].positions, r.positions))
                                           if EQUAL_BUDGET in results and a != EQUAL_BUDGET else None),
            "difference_to_real_grpo": (interval(bootstrap_difference(r.positions, real.positions))
                                        if real is not None and a != "real_grpo" else None),
            "along_the_run": along_the_run(r),
            "train_wall_s": r.train_s,
            "process_wall_s": r.meta.get("process_wall_s"),
            "real_executions": r.executions,
            "execution_s": r.part_s("env/execution_seconds"),
            "wall_clock_parts_s": {name: r.part_s(column) for column, name in PARTS.items()},
            "execution_share": r.part_s("time/env") / r.train_s if r.train_s else None,
            "compute_floor": compute_floor(r),
            "world_model_examples": cells["world_model/examples"],
            "pairs": cells["debias/pairs"],
            "refits": cells["debias/refits"],
            "weight": cells["denoise/weight"],
            "curve": {
                "train_wall_s": r.steps["time/step"].cumsum().tolist(),
                "executions": (r.steps["anchor/executions"].fillna(0).cumsum().tolist()
                               if "anchor/executions" in r.steps else [0.0] * len(r.steps)),
                "real_reward": (r.steps["reward/real_mean"].tolist() if "reward/real_mean" in r.steps else []),
            },
        }
    return out


def along_the_run(r: ArmResult) -> dict[str, dict] | None:
    """Per held-out evaluation step after the start (``r.along``, pooled over seeds where it is): the mean position
    with its 95% bootstrap interval and the real executions made by then (a seed's mean); ``None`` for a run that
    evaluated only at its end."""
    steps = sorted({int(key.split("@step")[1].split("@")[0]) for key in r.along})
    if len(steps) < 2:
        return None
    seeds = max(len(r.meta.get("seeds") or {}), 1)
    per_step = r.executions / seeds / max(len(r.steps) / seeds, 1)
    return {str(k): {"executions": per_step * k,
                     "held_out": interval(bootstrap_mean({key: v for key, v in r.along.items()
                                                          if int(key.split("@step")[1].split("@")[0]) == k}))}
            for k in steps}


def per_task(start: dict[str, list[float]], after: dict[str, list[float]]) -> dict[str, dict]:
    """Per held-out task, against the starting policy (the same evaluation seeds: sample ``i`` before and after are
    a pair): the mean position's paired gain and the best-of-k (the best of the K samples) before, after and its
    paired rise, each with a 95% bootstrap interval over the task's K pairs."""
    def best(values: list[float | None]) -> float:  # a missing sample (None) is no 0 and no best
        return max((v for v in values if v is not None), default=0.0)

    return {t: {"best_of_k_start": best(start[t]), "best_of_k": best(after[t]),
                "at_ceiling": best(start[t]) >= 1.0,  # the start's best already tops the leaderboard: no room
                "best_of_k_gain": interval(paired_best_of_k(start[t], after[t])),
                "mean_gain": interval(paired_gain({t: start[t]}, {t: after[t]}))} for t in sorted(start)}


def compute_floor(r: ArmResult) -> dict | None:
    """Generation and update per step against their compute floor: the matrix products of the passes they ran
    (``tokens/generate``, ``tokens/update``: token positions, padding included) at the machine's measured float32
    matmul throughput (:func:`matmul_gflops`, before and after the arm). A forward pass costs 2 x parameters FLOPs a
    position; the update runs the policy's forward and its backward (with a frozen base and a LoRA adapter,
    activation gradients only: about one forward) over ``tokens/update`` and the reference's forward over
    ``tokens/reference`` (runs logged before that metric: the reference ran over every position). Attention's
    quadratic terms are left out, so the floor is a lower bound. Generation's memory floor, where the arm measured
    the memory bandwidth (``memory_gbps``) and logged its passes (``passes/generate``) and weight bytes
    (``model/bytes``): every pass reads every weight once; its floor is the larger of the two. ``None`` for runs
    that logged no token counts."""
    gflops = r.meta.get("matmul_gflops")
    params = r.last("model/parameters")
    if not gflops or params is None or "tokens/generate" not in r.steps:
        return None
    throughput = float(np.mean(gflops)) * 1e9
    steps = len(r.steps)
    generate_tokens = r.part_s("tokens/generate") / steps
    update_tokens = r.part_s("tokens/update") / steps
    reference_tokens = r.part_s("tokens/reference") / steps if "tokens/reference" in r.steps else update_tokens
    compute_generate = 2 * params * generate_tokens / throughput
    floor_update = 2 * params * (2 * update_tokens + reference_tokens) / throughput
    bandwidth, weights = r.meta.get("memory_gbps"), r.last("model/bytes")
    memory_generate = None
    if bandwidth and weights and "passes/generate" in r.steps:
        memory_generate = r.part_s("passes/generate") / steps * weights / (float(np.mean(bandwidth)) * 1e9)
    floor_generate = max(compute_generate, memory_generate or 0.0)
    generate, update = r.part_s("time/generate") / steps, r.part_s("time/update") / steps
    return {"matmul_gflops": float(np.mean(gflops)), "parameters": params,
            "memory_gbps": float(np.mean(bandwidth)) if bandwidth else None,
            "generate": {"tokens": generate_tokens, "measured_s": generate, "compute_floor_s": compute_generate,
                         "memory_floor_s": memory_generate, "floor_s": floor_generate,
                         "over_floor": generate / floor_generate if floor_generate else None},
            "update": {"tokens": update_tokens, "measured_s": update, "floor_s": floor_update,
                       "over_floor": update / floor_update if floor_update else None}}


def regime_checks(summary: dict[str, dict], limit: Limit | None) -> list[tuple[str, str, bool]]:
    """The paper's regime (issue 20), each as (what, measured, holds); an arm that did not run fails its checks."""
    real, full = summary.get("real_grpo"), summary.get("wmrl")
    share = real and real["execution_share"]
    checks = [("real-execution GRPO: execution >= 70% of its training wall-clock",
               "-" if share is None or not real else f"{share:.0%}", bool(share and share >= 0.70))]
    if limit is None:
        return checks + [("real GRPO / full WMRL training wall-clock >= 3.0x", "-", False),
                         ("achieved >= 90% of the computed limit", "-", False)]
    checks.append(("real GRPO / full WMRL training wall-clock >= 3.0x", f"{limit.achieved:.2f}x",
                   limit.achieved >= 3.0))
    checks.append(("achieved >= 90% of the computed limit",
                   f"{limit.achieved:.2f}x of {limit.bound:.2f}x = {limit.fraction:.0%}", limit.fraction >= 0.9))
    diff = full and full["difference_to_real_grpo"]
    checks.append(("full WMRL's held-out score within real GRPO's interval or above (difference, 95% interval)",
                   interval_text(diff), bool(diff and diff["high"] >= 0)))
    return checks


def regime_markdown(summary: dict[str, dict], limit: Limit | None) -> list[str]:
    """The regime section: the checks, then generation and update against their compute floor."""
    lines = ["## The paper's regime: checks", "", "| check | measured | holds |", "|---|---|---|"]
    lines += [f"| {c} | {m} | {'yes' if ok else 'no'} |" for c, m, ok in regime_checks(summary, limit)]
    lines += ["", "Held-out score against the starting policy (the same evaluation seeds: a paired gain, resampling "
              "samples within tasks):", "", "| arm | held-out [95% CI] | paired gain over the start [95% CI] |",
              "|---|---|---|"]
    lines += [f"| {r['label']} | {interval_text(r['held_out'])} | {interval_text(r['gain_over_start'])} |"
              for r in summary.values()]
    lines += ["", "## G against its compute floor", "",
              "Per training step: the token positions the passes computed, the measured seconds, the floor (2 x "
              "parameters FLOPs a position and pass, the update's three passes, at the float32 matmul throughput "
              "measured before and after the arm; attention's quadratic terms left out; for generation the larger "
              "of that and its passes' weight reads at the measured memory bandwidth) and measured / floor.", "",
              "| arm | matmul GFLOP/s | generate tokens | generate s | floor s | x floor | update tokens | update s "
              "| floor s | x floor |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in summary.values():
        f = r.get("compute_floor")
        if not f:
            continue
        g, u = f["generate"], f["update"]
        lines.append(f"| {r['label']} | {f['matmul_gflops']:.0f} | {g['tokens']:.0f} | {g['measured_s']:.1f} | "
                     f"{g['floor_s']:.1f} | {g['over_floor']:.1f} | {u['tokens']:.0f} | {u['measured_s']:.1f} | "
                     f"{u['floor_s']:.1f} | {u['over_floor']:.1f} |")
    return lines + [""]


def quality_checks(summary: dict[str, dict]) -> list[tuple[str, str, bool]]:
    """The quality bar (issue 32): real-execution GRPO's held-out best-of-k above the starting policy's with a paired
    interval above 0 on at least two held-out tasks, and the equal-budget comparison, each as (what, measured,
    holds); an arm that did not run fails its checks."""
    checks = []
    for a in ("real_grpo", "wmrl", EQUAL_BUDGET):
        tasks = (summary.get(a) or {}).get("per_task") or {}
        risen = [t for t, row in tasks.items() if row["best_of_k_gain"]["low"] > 0]
        shown = "; ".join(f"{t} {row['best_of_k_start']:.2f} -> {row['best_of_k']:.2f} "
                          f"{interval_text(row['best_of_k_gain'])}" for t, row in tasks.items())
        if a in summary or a == "real_grpo":
            checks.append((f"{LABELS[a]}: held-out best-of-k above the start's, paired interval above 0, on >= 2 tasks",
                           shown or "-", len(risen) >= 2))
    for a in ("real_grpo", "wmrl"):
        diff = (summary.get(a) or {}).get("difference_to_equal_budget")
        if diff is not None:
            where = " along the run" if diff.get("measure") == "along" else ""
            checks.append((f"{LABELS[a]} minus {LABELS[EQUAL_BUDGET]} (held-out mean position{where}, paired): "
                           "interval above 0", interval_text(diff), diff["low"] > 0))
    for key, other in (("difference_to_equal_budget", EQUAL_BUDGET), ("difference_to_pure_world_model",
                                                                      "pure_world_model")):
        diff = (summary.get("wmrl") or {}).get(key)
        per = (diff or {}).get("per_seed") or {}
        if len(per) >= 2:
            least = len(per) // 2 + 1  # a majority: 2 of 3 seeds
            where = " (along the run)" if diff.get("measure") == "along" else ""
            checks.append((f"{LABELS['wmrl']} minus {LABELS[other]}{where}: pooled point and low above 0, >= 0 in "
                           f"{least} of {len(per)} seeds",
                           f"{interval_text(diff)}; per seed " + ", ".join(f"{v['point']:+.3f}" for v in per.values()),
                           diff["point"] > 0 and diff["low"] > 0 and diff["seeds_at_or_above_0"] >= least))
    return checks


def quality_markdown(summary: dict[str, dict]) -> list[str]:
    """The quality section: per arm and held-out task the best-of-k and mean-position gains, then the checks."""
    lines = ["## Held-out quality per task (paired with the starting policy, 95% intervals over the K pairs)", "",
             "A task whose start already has a sample at the leaderboard's top (best-of-k 1.00) has no room for the "
             "best-of-k to rise; it is reported, never dropped.", "",
             "| arm | task | best-of-k start -> end | best-of-k rise | mean-position gain |", "|---|---|---|---|---|"]
    for row in summary.values():
        for task, t in (row.get("per_task") or {}).items():
            room = " (no room)" if t.get("at_ceiling") else ""
            lines.append(f"| {row['label']} | {task} | {t['best_of_k_start']:.2f} -> {t['best_of_k']:.2f}{room} | "
                         f"{interval_text(t['best_of_k_gain'])} | {interval_text(t['mean_gain'])} |")
    along = {row["label"]: row["along_the_run"] for row in summary.values() if row.get("along_the_run")}
    if along:
        steps = sorted({int(k) for a in along.values() for k in a})
        lines += ["", "## Held-out along the run (mean position [95% CI]; real executions by then, a seed's mean)", "",
                  "| arm | " + " | ".join(f"after step {k}" for k in steps) + " |", "|---|" + "---|" * len(steps)]
        for label, a in along.items():
            lines.append(f"| {label} | " + " | ".join(
                (f"{a[str(k)]['held_out']['point']:.3f} [{a[str(k)]['held_out']['low']:.3f}, "
                 f"{a[str(k)]['held_out']['high']:.3f}] ({a[str(k)]['executions']:.0f})") if str(k) in a else "-"
                for k in steps) + " |")
    lines += ["", "## Quality checks (as measured; settings chosen on the train split)", "",
              "| check | measured | holds |", "|---|---|---|"]
    lines += [f"| {c} | {m} | {'yes' if ok else 'no'} |" for c, m, ok in quality_checks(summary)]
    return lines + [""]


def learning_checks(summary: dict[str, dict]) -> list[tuple[str, str, bool]]:
    """The issue's bar, each as (what, measured, holds); an arm that did not run fails its checks."""
    real, full = summary.get("real_grpo"), summary.get("wmrl")
    checks = []
    gain = real and real["gain_over_start"]
    checks.append(("real-execution GRPO's held-out gain over the start: 95% interval above 0", interval_text(gain),
                   bool(gain and gain["low"] > 0)))
    diff = full and full["difference_to_real_grpo"]
    checks.append(("full WMRL's held-out score >= real GRPO's - 0.05", interval_text(diff),
                   bool(diff and diff["point"] >= -0.05)))
    gain = full and full["gain_over_start"]
    checks.append(("full WMRL's held-out gain over the start: 95% interval above 0", interval_text(gain),
                   bool(gain and gain["low"] > 0)))
    if real and full:
        ratio = full["execution_s"] / real["execution_s"] if real["execution_s"] else math.inf
        checks.append(("full WMRL's execution-seconds <= 1/3 of real GRPO's",
                       f"{full['execution_s']:.0f} s / {real['execution_s']:.0f} s = {ratio:.2f}", ratio <= 1 / 3))
    for a in ("debias_only", "wmrl"):
        if a in summary:
            refits = summary[a]["refits"] or 0
            checks.append((f"{LABELS[a]}: >= 3 map refits", f"{refits:g}", refits >= 3))
    for a in ("denoise_only", "wmrl"):
        if a in summary:
            weight = summary[a]["weight"]
            checks.append((f"{LABELS[a]}: denoising weight off 1 at the end", "-" if weight is None else f"{weight:.2f}",
                           weight is not None and weight != 1.0))
    return checks


def learning_figures(summary: dict[str, dict], start: dict | None, target: Path, prefix: str) -> list[str]:
    """Held-out score against training wall-clock and against real executions (start and end per arm, with
    intervals), and the training curve (real reward of the executed rollouts per step) against wall-clock."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    target.mkdir(parents=True, exist_ok=True)
    names = []
    begin = bootstrap_mean(start) if start else None
    for axis, key, label in (("time", "train_wall_s", "training wall-clock (min)"),
                             ("executions", "real_executions", "real executions")):
        fig, ax = plt.subplots(figsize=(7, 4.2))
        for k, (a, row) in enumerate(summary.items()):
            x = row[key] / 60 if axis == "time" else row[key]
            h = row["held_out"]
            xs, ys = ([0, x], [begin[0], h["point"]]) if begin else ([x], [h["point"]])
            if axis == "executions" and row.get("along_the_run"):  # every evaluation along the run
                points = row["along_the_run"].values()
                xs = ([0] if begin else []) + [p["executions"] for p in points]
                ys = ([begin[0]] if begin else []) + [p["held_out"]["point"] for p in points]
                x = xs[-1]  # the last evaluation's interval where its line ends (a seed's executions, not the sum)
            # arms that end on the same score would hide each other: each gets its own marker and dash
            line, = ax.plot(xs, ys, marker="osv^Dx"[k % 6], ls=("-", "--", ":", "-.")[k % 4], ms=7 - k % 3,
                            label=LABELS[a])
            ax.errorbar(x, h["point"], yerr=[[max(h["point"] - h["low"], 0)], [max(h["high"] - h["point"], 0)]], capsize=4,
                        color=line.get_color())
        if begin:
            ax.axhline(begin[0], color="grey", lw=0.8, ls=":", label="starting policy")
        ax.set_xlabel(label)
        ax.set_ylabel("held-out mean position (real execution)")
        ax.legend(fontsize=7)
        fig.tight_layout()
        name = f"{prefix}heldout_vs_{axis}.png"
        fig.savefig(target / name, dpi=120)
        plt.close(fig)
        names.append(name)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for a, row in summary.items():
        curve = row["curve"]
        if curve["real_reward"]:
            ax.plot(np.array(curve["train_wall_s"]) / 60, curve["real_reward"], marker="o", label=LABELS[a])
    ax.set_xlabel("training wall-clock (min)")
    ax.set_ylabel("real reward of executed rollouts, per step")
    ax.legend(fontsize=7)
    fig.tight_layout()
    name = f"{prefix}train_reward.png"
    fig.savefig(target / name, dpi=120)
    plt.close(fig)
    return names + [name]


def learning_markdown(summary: dict[str, dict], start: dict | None, world_model: dict | None) -> list[str]:
    """The learning sections of the results page: the gain table and the issue's checks."""
    lines = []
    if world_model and "card_seconds" in world_model:  # the task-aware model: pretrained on the world_model split
        lines += ["## The pretrained world model", "",
                  f"`{world_model['path']}` ({world_model.get('model', 'TaskAwareWorldModel')}), built by "
                  f"`benchmarks/pretrain_world_model.py --task-aware` on {world_model.get('built')}: "
                  f"{world_model['executions']} real executions (`benchmarks/model_choice.py`'s menu scripts) on "
                  f"{len(world_model['tasks'])} tasks of the world_model split, which no arm trains on or is "
                  f"evaluated on; {world_model['execution_seconds']:.0f} execution-seconds, task cards "
                  f"{world_model['card_seconds']:.0f} s, fit {world_model['fit_seconds']:.0f} s; its error variance "
                  f"on tasks left out {world_model.get('out_of_task_error_variance') or float('nan'):.4f}. This cost "
                  "is paid once, before any arm, and is not in the arms' execution counts below.", ""]
    elif world_model:
        sampling = world_model.get("sampling") or {}
        lines += ["## The pretrained world model", "",
                  f"`{world_model['path']}`, built by `benchmarks/pretrain_world_model.py` on "
                  f"{world_model.get('built')}: {world_model['executions']} real executions of scripts the starting "
                  f"policy ({sampling.get('model', 'smollm2-135m-instruct')}) wrote on "
                  f"{len(world_model['tasks'])} train-split tasks only ({world_model['learnable_examples']} "
                  f"learnable, {world_model['distinct_scripts']} distinct scripts), "
                  f"{world_model['execution_seconds']:.0f} execution-seconds, sampling "
                  f"{sampling.get('wall_s') or float('nan'):.0f} s wall-clock / "
                  f"{sampling.get('cpu_s') or float('nan'):.0f} CPU-seconds, fit {world_model['fit_seconds']:.0f} s; "
                  f"out-of-fold Spearman against real rewards {world_model.get('out_of_fold_spearman') or float('nan'):.2f}. "
                  "This cost is paid once, before any arm, and is not in the arms' execution counts below.", ""]
    if start:
        mean, low, high = bootstrap_mean(start)
        equal = EQUAL_BUDGET in summary  # WMRL's paired difference to real GRPO at its execution budget
        lines += ["## Held-out gain over the starting policy", "",
                  f"Starting policy: {mean:.3f} [{low:.3f}, {high:.3f}] (evaluated once, same seeds as every arm's "
                  "final evaluation: the gains are paired).", "",
                  "| arm | held-out [95% CI] | gain over the start [paired 95% CI] | vs real GRPO [95% CI] "
                  + ("| vs equal budget [paired 95% CI] " if equal else "")
                  + "| training min | real executions | execution s | pairs | refits | weight |",
                  "|---|---|---|---|" + ("---|" if equal else "") + "---|---|---|---|---|---|"]
        for row in summary.values():
            h = row["held_out"]
            cells = [row[k] for k in ("pairs", "refits", "weight")]
            versus = [row["difference_to_real_grpo"]] + ([row["difference_to_equal_budget"]] if equal else [])
            lines.append(f"| {row['label']} | {h['point']:.3f} [{h['low']:.3f}, {h['high']:.3f}] | "
                         f"{interval_text(row['gain_over_start'])} | {' | '.join(map(interval_text, versus))} | "
                         f"{row['train_wall_s'] / 60:.1f} | {row['real_executions']} | {row['execution_s']:.0f} | "
                         + " | ".join("-" if v is None else f"{v:g}" for v in cells) + " |")
        lines += ["", "## Checks (as measured; nothing was tuned on the held-out tasks)", "",
                  "| check | measured | holds |", "|---|---|---|"]
        lines += [f"| {what} | {measured} | {'yes' if ok else 'no'} |" for what, measured, ok in learning_checks(summary)]
        lines.append("")
    return lines


def results_markdown(preset_name: str, preset: Preset, results: dict[str, ArmResult], limit: Limit | None,
                     command: str, figure_names: list[str], figure_dir: str, extra: list[str] | None = None) -> str:
    lines = [
        f"# {preset.title}",
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
    lines += list(extra or [])
    lines += ["## Figures", ""] + [f"![{n}]({figure_dir}/{n})" for n in figure_names] + [""]
    return "\n".join(lines)


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
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="training seeds (seed_everything); every "
                        "arm runs once per seed, seed by seed, and the results pool them (default: 0)")
    args = parser.parse_args(argv)

    preset = PRESETS[args.preset]
    if args.steps:
        preset = replace(preset, steps=args.steps)
    if args.model:
        preset = replace(preset, model={**preset.model, "model": args.model})
    out = args.out / args.preset
    out.mkdir(parents=True, exist_ok=True)
    (out / "preset.json").write_text(json.dumps(asdict(preset), indent=1))

    per_seed: dict[int, dict[str, ArmResult]] = {}
    for s_index, seed in enumerate(args.seeds):
        seed_out = out if args.seeds == [0] else out / f"seed{seed}"  # one seed 0: the layout of earlier sittings
        per_seed[seed] = {}
        for i, arm in enumerate(args.arms):
            run_dir = seed_out / "runs" / arm
            if not (args.reuse and (run_dir / "speedup_arm.json").is_file()):
                if run_dir.exists():
                    import shutil

                    shutil.rmtree(run_dir)  # a fresh run: no stale metrics or checkpoints to resume from
                run_arm(preset, arm, seed_out, eval_at_start=(s_index == 0 and i == 0), seed=seed)
            per_seed[seed][arm] = read_arm(run_dir, arm)
    results = pooled(per_seed)

    limit = None
    if "real_grpo" in results and "wmrl" in results:
        limit = speedup_limit(results["real_grpo"], results["wmrl"], preset.group_size * preset.groups_per_step)
    figure_dir = args.results / "results"
    summary, start = summarise(results), starting_samples(results)
    for arm, row in summary.items():  # per-seed and over-seed intervals beside the pooled ones
        for key, other in (("difference_to_equal_budget", EQUAL_BUDGET), ("difference_to_pure_world_model",
                                                                          "pure_world_model")):
            if arm != other and other in results:
                # a preset that evaluates along the run compares there (the arms of the suite converge on one
                # script per task within six steps: at the end they tie); the last evaluation's figure beside it
                row[key] = seed_difference(per_seed, arm, other, "along" if preset.eval_every else "final")
                if preset.eval_every:
                    row[f"{key}_final"] = seed_difference(per_seed, arm, other)
    world_model = None
    if preset.world_model is not None and preset.world_model["init_args"].get("pretrained"):
        manifest = Path(f"{preset.world_model['init_args']['pretrained']}.json")
        world_model = json.loads(manifest.read_text()) if manifest.is_file() else None
        if world_model is not None:
            world_model["path"] = os.path.relpath(manifest.with_suffix(""), ROOT)
    policy_build = None  # how a warm-started policy (--model DIR, benchmarks/warm_start.py) was built
    if args.model and (Path(args.model) / "warm_start.json").is_file():
        policy_build = json.loads((Path(args.model) / "warm_start.json").read_text())
    names = figures(results, figure_dir, preset.figure_prefix)
    names += learning_figures(summary, start, figure_dir, preset.figure_prefix)
    command = "python benchmarks/speedup.py " + " ".join(argv if argv is not None else sys.argv[1:])
    regime, quality = preset.checks == "regime", preset.checks == "quality"
    extra = regime_markdown(summary, limit) if regime else learning_markdown(summary, start, world_model)
    if policy_build:
        extra = ["## The warm-started policy", "",
                 f"`--model {args.model}`, built by `benchmarks/warm_start.py` on {policy_build.get('built')} from "
                 f"{policy_build['model']}: {policy_build['demonstrations']} demonstrations (every menu line of "
                 f"{len(policy_build['tasks'])} train-split tasks once; nothing executed), {policy_build['epochs']} "
                 f"epochs, loss per epoch {policy_build['loss_per_epoch']}, {policy_build['wall_s']:.0f} s wall-clock / "
                 f"{policy_build['cpu_s']:.0f} CPU-seconds. Paid once, before any arm.", "", *extra]
    text = results_markdown(args.preset, preset, results, limit, command, names,
                            os.path.relpath(figure_dir, args.results),
                            extra=extra + (quality_markdown(summary) if quality else []))
    checks = (regime_checks(summary, limit) if regime
              else learning_checks(summary) + (quality_checks(summary) if quality else []))
    record = {"preset": args.preset, "seeds": list(args.seeds), "settings": asdict(preset), "command": command,
              "machine": machine(),
              "date": time.strftime("%Y-%m-%d"), "world_model_build": world_model, "policy_build": policy_build,
              "start": interval(bootstrap_mean(start)) if start else None, "arms": summary,
              "checks": [{"check": c, "measured": m, "holds": ok} for c, m, ok in checks],
              "limit": None if limit is None else {**asdict(limit), "bound": limit.bound,
                                                   "fraction_of_bound": limit.fraction}}
    (figure_dir / f"{args.preset}.json").write_text(json.dumps(record, indent=1) + "\n")
    target = args.results / preset.results_name
    text += kept_by_hand(target.read_text() if target.is_file() else "")
    target.write_text(text)
    from wmrl.run_report import write_report

    for arm in ("wmrl", "real_grpo"):
        if arm in per_seed[args.seeds[0]]:
            write_report((out if args.seeds == [0] else out / f"seed{args.seeds[0]}") / "runs" / arm)
    print(text)


if __name__ == "__main__":
    main()
