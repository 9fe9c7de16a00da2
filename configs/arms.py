"""The arm overlays of every scale, from one table: ``python configs/arms.py`` writes them,
``tests/project/test_configs.py`` checks that the shipped files are what it writes.

An arm is an overlay on its scale's base config that appends the WMRL callbacks it ablates (or changes the data or
the environment, for the baselines). What a scale fixes once -- its base config, where its runs go, its world model
and the constants of each callback -- is written once here; an arm names the callbacks it runs. Edit this table,
then run ``python configs/arms.py``: the YAML files beside the base configs are the ones users read and run.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APPENDED = "  callbacks+:  # appended to the base config's own callbacks\n"


@dataclass(frozen=True)
class Arm:
    """One overlay: what it is (``about``, comment lines without ``# ``; ``note``: the scale's note follows), the
    scale's callbacks it appends, by name (``world_model``: the world model with side-grading,
    ``world_model_only``: without), and any other section written out (``extra``: YAML lines)."""

    about: str
    callbacks: tuple[str, ...] = ()
    note: bool = False
    extra: str = ""


@dataclass(frozen=True)
class Scale:
    """The arms of one scale: their folder, the base config they go on, the command that runs them, where their runs
    go, the note most of them carry, the world model (its ``world_model:`` lines), each callback's class and
    settings."""

    folder: str
    base: str
    command: str
    runs: str
    world_model: str
    callbacks: dict[str, tuple[str, str]]  # name -> (a wmrl.callbacks class, its init_args in flow style)
    arms: dict[str, Arm]
    note: str = ""

    def entry(self, name: str) -> str:
        if name in ("world_model", "world_model_only"):
            side = "true" if name == "world_model" else "false"
            return ("    - class_path: wmrl.callbacks.WorldModelReward\n      init_args:\n"
                    f"        side_grade: {side}\n" + self.world_model)
        cls, init_args = self.callbacks[name]
        return f"    - class_path: wmrl.callbacks.{cls}\n      init_args: {init_args}\n"

    def render(self, name: str) -> str:
        """The overlay file of arm ``name``."""
        arm = self.arms[name]
        path = f"{self.folder}/{name}.yaml"
        about = arm.about + (self.note if arm.note else "")
        text = f"# overlay on: {self.base}\n" + "".join(f"# {line}\n" for line in about.splitlines())
        text += "# (written by configs/arms.py from its table: edit the table there, then run it)\n"
        text += f"#   {self.command} -c {self.base} -c {path}\n"
        text += f"trainer:\n  default_root_dir: {self.runs}/{name}\n"
        if arm.callbacks:
            text += APPENDED + "".join(self.entry(c) for c in arm.callbacks)
        return text + arm.extra


#: the AutoResearch ablations whose overlay reads the same at every scale (the scale's constants differ)
ABLATIONS: dict[str, Arm] = {
    'debias_only': Arm(
        about='Ablation overlay, Debiasing only: world-model rewards through the isotonic map, no advantage weight.\n',
        note=True,
        callbacks=('anchors', 'world_model', 'isotonic_map'),
    ),
    'denoise_only': Arm(
        about='Ablation overlay, Denoising only: raw world-model rewards, anchor advantages weighted by inverse variance.\n',
        note=True,
        callbacks=('anchors', 'world_model', 'denoising'),
    ),
    'pure_world_model': Arm(
        about='Ablation overlay, Pure world model: no anchors, the raw world model grades every group.\n',
        note=True,
        callbacks=('no_anchors', 'world_model_only'),
    ),
    'real_grpo': Arm(
        about='Ablation overlay, Real-execution GRPO: every group executed for real, no world model (the baseline).\n',
        note=True,
    ),
    'uncorrected': Arm(
        about='Ablation overlay, Uncorrected mixture: anchors and world-model groups, world-model rewards used raw.\n',
        note=True,
        callbacks=('anchors', 'world_model'),
    ),
}

SCALES: list[Scale] = [
    Scale(
        folder='configs/autoresearch/ablations/cpu', base='configs/autoresearch/quickstart.yaml', command='wmrl fit', runs='runs/ablations/cpu',
        note=(
            'At CPU quickstart scale (2 groups x 4 rollouts per step, so the floor makes 1 of 2 groups an anchor;\n'
            'calibration after 4 pairs, refit every 4, denoising warm-up 1 observation: small enough for a few-step run).\n'
        ),
        world_model=(
            '        world_model:\n'
            '          class_path: wmrl.autoresearch.world_models.lm.LMWorldModel\n'
            '          init_args: {model: policy, mode: score}\n'
        ),
        callbacks={
            'anchors': ('AnchorRouting', '{fraction: 0.1, floor: 1, capacity: null, selection: random, seed: "${seed_everything}"}'),
            'isotonic_map': ('OnlineDebiasing', '{min_pairs: 4, refit_every: 4, buffer_size: 5000, bins: 10}'),
            'denoising': ('InverseVarianceDenoising', '{half_life: 64, warmup: 1, target: 2.0, min_weight: 1.0, max_weight: 4.0}'),
            'no_anchors': ('AnchorRouting', '{fraction: 0.0, floor: 0}'),
            'strict_map': ('OnlineDebiasing', '{min_pairs: 4, refit_every: 4, buffer_size: 5000, bins: 10, method: strict}'),
            'fusion': ('VarianceFusion', '{half_life: 32.0, z: 1.645}'),
        },
        arms={
            **ABLATIONS,
            'real_grpo_equal_budget': Arm(
                about=(
                    "Ablation overlay, Real-execution GRPO at full WMRL's execution budget: every group executed for real, no world\n"
                    'model, but only as many groups a step as full WMRL executes (its anchor groups: AnchorRouting fraction 0.1,\n'
                    "floor 1 of the quickstart's 2 groups is 1), so both arms run the same number of scripts a step. The paper's claim\n"
                    'is the same quality for a fraction of the executions; this is the opponent that spends the same fraction.\n'
                    "benchmarks/speedup.py sets groups_per_step from its preset's scale the same way (equal_budget_groups).\n"
                ),
                extra=(
                    'data:\n'
                    '  init_args:\n'
                    '    groups_per_step: 1\n'
                ),
            ),
            'wmrl': Arm(
                about=(
                    "Ablation overlay, Full WMRL with the kit's corrections: anchors, a calibration that keeps every ranking\n"
                    '(OnlineDebiasing, method: strict) and the world model weighed by its measured agreement with the anchors, down to 0\n'
                    "(VarianceFusion; docs/concepts.md). wmrl_paper.yaml is the paper's corrections.\n"
                    'At CPU quickstart scale (2 groups x 4 rollouts per step, so the floor makes 1 of 2 groups an anchor;\n'
                    'calibration after 4 pairs, refit every 4: small enough for a few-step run).\n'
                ),
                callbacks=('anchors', 'world_model', 'strict_map', 'fusion'),
            ),
            'wmrl_paper': Arm(
                about=(
                    "Ablation overlay, Full WMRL with the paper's corrections: anchors, the paper's Online Debiasing (10 equal-width bins,\n"
                    "flat ends) and Inverse-Variance Denoising (a relative anchor weight, capped at 4). wmrl.yaml is the kit's variant.\n"
                    'At CPU quickstart scale (2 groups x 4 rollouts per step, so the floor makes 1 of 2 groups an anchor;\n'
                    'calibration after 4 pairs, refit every 4, denoising warm-up 1 observation: small enough for a few-step run).\n'
                ),
                callbacks=('anchors', 'world_model', 'isotonic_map', 'denoising'),
            ),
        },
    ),
    Scale(
        folder='configs/autoresearch/ablations/paper', base='configs/autoresearch/paper_4b.yaml', command='wmrl fit', runs='runs/ablations/paper',
        note=(
            "At the paper's scale and constants (8 groups x 8 rollouts; ~10% anchors with a floor of 2 groups;\n"
            'min_pairs 200, refit every 64, EWMA half-life 64, warm-up 32, target weight 2, clip [1, 4]).\n'
        ),
        world_model=(
            '        world_model:\n'
            '          class_path: wmrl.autoresearch.world_models.lm.LMWorldModel\n'
            '          init_args: {model: policy, mode: generate, max_new_tokens: 1024, temperature: 0.7, top_p: 0.8, seed: "${seed_everything}",\n'
            '                      backend: {class_path: wmrl.generation.hf_world_model.HFWorldModelBackend, init_args: {batch_size: 64}}}\n'
        ),
        callbacks={
            'anchors': ('AnchorRouting', '{fraction: 0.1, floor: 2, capacity: null, selection: random, seed: "${seed_everything}"}'),
            'isotonic_map': ('OnlineDebiasing', '{min_pairs: 200, refit_every: 64, buffer_size: 5000, bins: 10}'),
            'denoising': ('InverseVarianceDenoising', '{half_life: 64, warmup: 32, target: 2.0, min_weight: 1.0, max_weight: 4.0}'),
            'no_anchors': ('AnchorRouting', '{fraction: 0.0, floor: 0}'),
        },
        arms={
            **ABLATIONS,
            'real_grpo_equal_budget': Arm(
                about=(
                    "Ablation overlay, Real-execution GRPO at full WMRL's execution budget: every group executed for real, no world\n"
                    'model, but only as many groups a step as full WMRL executes (its anchors: ~10% with a floor of 2 of 8 groups is\n'
                    "2), so both arms run the same number of scripts a step: the opponent of the paper's claim (the same quality for\n"
                    'a fraction of the executions) that spends the same fraction.\n'
                ),
                extra=(
                    'data:\n'
                    '  init_args:\n'
                    '    groups_per_step: 2\n'
                ),
            ),
            'wmrl': Arm(
                about='Ablation overlay, Full WMRL: anchors, Online Debiasing and Inverse-Variance Denoising.\n',
                note=True,
                callbacks=('anchors', 'world_model', 'isotonic_map', 'denoising'),
            ),
        },
    ),
    Scale(
        folder='configs/vla/arms', base='configs/vla/arms/pusht.yaml', command='.venv312/bin/wmrl fit', runs='runs/vla_arms',
        world_model=(
            '        world_model:\n'
            '          class_path: wmrl.vla.world_models.progress.ProgressWorldModel\n'
            "          # trained on the demonstrations' recorded dense reward (label: reward), then frozen (refresh_every: 0)\n"
            '          init_args: {chunk_size: 4, hidden: 128, frames: 8, k: 3, train_steps: 5000, refresh_every: 0,\n'
            '                      refresh_steps: 50, batch_size: 256, lr: 1.0e-3, checkpoint: null, invert: false, seed: "${seed_everything}",\n'
            '                      label: reward}\n'
        ),
        callbacks={
            'anchors': ('AnchorRouting', '{fraction: 0.1, floor: 1, capacity: null, selection: random, seed: "${seed_everything}"}'),
            'isotonic_map': ('OnlineDebiasing', '{min_pairs: 16, refit_every: 8, buffer_size: 5000, bins: 10}'),
            'denoising': ('InverseVarianceDenoising', '{half_life: 64, warmup: 2, target: 2.0, min_weight: 1.0, max_weight: 4.0}'),
            'no_anchors': ('AnchorRouting', '{fraction: 0.0, floor: 0}'),
            'strict_map': ('OnlineDebiasing', '{min_pairs: 16, refit_every: 8, buffer_size: 5000, bins: 10, method: strict}'),
            'fusion': ('VarianceFusion', '{half_life: 32.0, z: 1.645}'),
        },
        arms={
            'debias_only': Arm(
                about=(
                    'Ablation arm "debiasing only" of the paper\'s table, on PushT: WMRL (wmrl.yaml) without InverseVarianceDenoising.\n'
                    "One anchor group in eight is graded by the simulator's sparse success and side-graded by the world model; the\n"
                    "other groups get the world model's shaped reward through OnlineDebiasing's isotonic map; anchor advantages keep\n"
                    'weight 1. The same frozen world model as wmrl.yaml. Overlay on pusht.yaml:\n'
                ),
                callbacks=('anchors', 'world_model', 'isotonic_map'),
            ),
            'denoise_only': Arm(
                about=(
                    'Ablation arm "denoising only" of the paper\'s table, on PushT: WMRL (wmrl.yaml) without OnlineDebiasing.\n'
                    "One anchor group in eight is graded by the simulator's sparse success and side-graded by the world model; the\n"
                    "other groups get the world model's raw shaped reward; anchor advantages are weighted by inverse variance, the\n"
                    'disagreement measured on the raw (uncalibrated) world-model rewards from the first anchor group on. The same\n'
                    'frozen world model as wmrl.yaml. Overlay on pusht.yaml:\n'
                ),
                callbacks=('anchors', 'world_model', 'denoising'),
            ),
            'raw_world_model': Arm(
                about=(
                    'Arm "GRPO on the raw progress world model" of the paper\'s VLA table: no anchors; every group is graded by the\n'
                    "progress world model's shaped reward (last-k minus first-k progress), uncalibrated. Rollouts still run in the\n"
                    'simulator (the world model replaces the reward, not the dynamics). Overlay on pusht.yaml:\n'
                ),
                callbacks=('no_anchors', 'world_model_only'),
            ),
            'shaped_oracle': Arm(
                about=(
                    "A diagnostic arm, not a row of the paper's table: GRPO on the simulator's own shaped dense reward (goal coverage\n"
                    'over the success threshold at 8 evenly spaced steps, last 3 minus first 3: exactly what the progress world model\n'
                    'is trained to predict, shaped the same way). It is the reward of a *perfect* progress world model, so it tells\n'
                    "the world model's errors apart from the shaping objective's own mismatch with success: if it loses to sparse\n"
                    'GRPO, no better progress model can make WMRL beat sparse GRPO in this regime. Held-out success is still the\n'
                    'sparse success. Overlay on pusht.yaml:\n'
                ),
                extra=(
                    'model:\n'
                    '  init_args:\n'
                    "    simulator:  # pusht.yaml's simulator (data.init_args.simulator keeps it), graded by the shaped dense reward\n"
                    '      class_path: wmrl.vla.simulators.pusht.PushTSimulator\n'
                    '      init_args: {max_episode_steps: 100, success_threshold: 0.85, initial_states: near_goal, max_offset: 25.0,\n'
                    '                  max_angle: 0.25, reward: shaped, shaping_frames: 8, shaping_k: 3}\n'
                ),
            ),
            'sparse_budget': Arm(
                about=(
                    'Arm "GRPO on sparse success at WMRL\'s real-label budget": one group of 8 rollouts per step instead of 8 groups,\n'
                    "so that it sees exactly as many real-graded episodes as WMRL's anchors (one group in eight per step). Not a row\n"
                    "of the paper's table: the comparison WMRL's claim rests on when real labels are what costs. Overlay on\n"
                    'pusht.yaml (or on pusht.yaml + smolvla.yaml):\n'
                ),
                extra=(
                    'data:\n'
                    '  init_args:\n'
                    '    groups_per_step: 1\n'
                ),
            ),
            'uncorrected': Arm(
                about=(
                    'Ablation arm "uncorrected mixture" of the paper\'s table, on PushT: WMRL\'s routing (one anchor group in eight,\n'
                    "graded by the simulator's sparse success) without either correction: the other groups get the world model's raw\n"
                    'shaped reward, anchor advantages keep weight 1. The anchors are side-graded only for the fidelity metrics. Not a\n'
                    "row of the paper's VLA table (its ablation table has it); with it the corrections' share of WMRL - raw world model\n"
                    "separates from the anchors'. Overlay on pusht.yaml:\n"
                ),
                callbacks=('anchors', 'world_model'),
            ),
            'wmrl': Arm(
                about=(
                    'Arm "WMRL" of the paper\'s VLA table with the kit\'s corrections: one group in eight is an anchor, graded by the\n'
                    "simulator's sparse success and side-graded by the world model; the other groups get the world model's shaped\n"
                    'reward, calibrated online on the anchors by a map that keeps every ranking (OnlineDebiasing, method: strict), and\n'
                    'weighed against the anchors by their measured agreement, down to 0 (VarianceFusion). wmrl_paper.yaml is the\n'
                    "paper's corrections. The same frozen world model as raw_world_model.yaml (the paper's). Overlay on pusht.yaml:\n"
                ),
                callbacks=('anchors', 'world_model', 'strict_map', 'fusion'),
            ),
            'wmrl_paper': Arm(
                about=(
                    'Arm "WMRL" of the paper\'s VLA table with the paper\'s own corrections: one group in eight is an anchor, graded by\n'
                    "the simulator's sparse success and side-graded by the world model; the other groups get the world model's shaped\n"
                    "reward, calibrated online on the anchors by the paper's map (OnlineDebiasing: 10 equal-width bins, flat ends);\n"
                    "anchor advantages are weighted up by the paper's relative, capped weight (InverseVarianceDenoising). wmrl.yaml is\n"
                    "the kit's variant (docs/concepts.md). The same frozen world model as raw_world_model.yaml. Overlay on pusht.yaml:\n"
                ),
                callbacks=('anchors', 'world_model', 'isotonic_map', 'denoising'),
            ),
        },
    ),
]


def rendered() -> dict[Path, str]:
    """Every arm overlay's path and the text this table gives it."""
    return {ROOT / scale.folder / f"{name}.yaml": scale.render(name) for scale in SCALES for name in scale.arms}


def main(argv: list[str]) -> int:
    """Write the overlays (``--check``: only say which differ, exit 1 if any)."""
    stale = [path for path, text in rendered().items() if not path.is_file() or path.read_text() != text]
    if "--check" in argv:
        for path in stale:
            print(f"{path.relative_to(ROOT)} differs from configs/arms.py: run python configs/arms.py")
        return 1 if stale else 0
    for path in stale:
        path.write_text(rendered()[path])
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
