"""benchmarks/vla_arms.py: the arms of the paper's VLA table (and its ablation) instantiate, a seed changes every seed
of an arm, and the statistics (paired gains over SFT, paired differences between arms, pooled over seeds, the bars,
the ordering) are right on synthetic episodes."""

from __future__ import annotations

import csv
import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest

from wmrl.cli import lightning_cli

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("vla_arms", ROOT / "benchmarks" / "vla_arms.py")
vla_arms = importlib.util.module_from_spec(spec)
sys.modules["vla_arms"] = vla_arms
spec.loader.exec_module(vla_arms)

EXPECTED = {"sparse_grpo": [], "raw_world_model": ["AnchorRouting", "WorldModelReward"],
            "wmrl": ["AnchorRouting", "WorldModelReward", "OnlineDebiasing", "VarianceFusion"],
            "wmrl_paper": ["AnchorRouting", "WorldModelReward", "OnlineDebiasing", "InverseVarianceDenoising"],
            "debias_only": ["AnchorRouting", "WorldModelReward", "OnlineDebiasing"],
            "denoise_only": ["AnchorRouting", "WorldModelReward", "InverseVarianceDenoising"],
            "uncorrected": ["AnchorRouting", "WorldModelReward"], "sparse_budget": [], "shaped_oracle": []}


@pytest.mark.parametrize(("preset", "arm"), [(p, a) for p in sorted(vla_arms.PRESETS) for a in vla_arms.PRESETS[p].overlays])
def test_every_arm_instantiates_with_its_callbacks_and_shares_the_start(preset, arm, tmp_path, monkeypatch):
    """Each arm is the base config plus its overlays (as the script runs it): the callbacks the arm names, and the
    same simulator, policy, SFT stage, initial states and step budget as every other arm of the preset. Only the
    oracle arm's simulator grades by the shaped dense reward; the demonstrations' simulator is the same in all."""
    from wmrl.callbacks import RLCallback

    monkeypatch.chdir(tmp_path)
    command = vla_arms.arm_command(vla_arms.PRESETS[preset], arm, tmp_path / arm, [])
    args = command[command.index("fit") + 1:]
    cli = lightning_cli(args, run=False)
    assert [type(c).__name__ for c in cli.trainer.callbacks if isinstance(c, RLCallback)] == EXPECTED[arm]
    (warm_start,) = [c for c in cli.trainer.callbacks if type(c).__name__ == "BehaviourCloningWarmStart"]
    model, data = cli.model, cli.datamodule
    assert type(model.policy).__name__ == ("SmolVLAChunkPolicy" if preset == "smolvla" else "ACTChunkPolicy")
    assert model.hparams.eval_at_start and model.hparams.group_size == data.group_size
    assert str(cli.trainer.default_root_dir) == str(tmp_path / arm)
    shared = (warm_start.steps, model.hparams.lr, model.hparams.exploration_std, model.hparams.seed,
              data.train_seeds, data.heldout_seeds, data.num_demonstrations, cli.trainer.max_steps)
    act = (3000, 1e-4, 0.05, 0, list(range(64)), list(range(64, 464)), 200, 150)
    expected = {"pusht": act, "corrections": act,  # the kit's corrections against the paper's: the ACT preset's start
                "smolvla": (3000, 1e-4, 0.05, 0, list(range(64)), list(range(64, 264)), 200, 100)}[preset]
    assert shared == expected
    assert model.simulator.reward == ("shaped" if arm == "shaped_oracle" else "success")
    simulator = ("max_episode_steps", "success_threshold", "initial_states", "max_offset", "max_angle")
    assert data.simulator.reward == "success"
    assert [getattr(model.simulator, f) for f in simulator] == [getattr(data.simulator, f) for f in simulator] \
        == [100, 0.85, "near_goal", 25.0, 0.25]


@pytest.mark.parametrize("seed", [0, 2])
def test_a_seed_changes_every_seed_of_an_arm(seed, tmp_path, monkeypatch):
    """Seed k reaches the policy, exploration and SFT (the module's seed), the order of training states (the data
    module's), the world model, the anchor draws and the demonstrations' initial states; seed 0 is the shipped
    configs; the training and held-out states do not move."""
    from wmrl.callbacks import AnchorRouting, WorldModelReward

    monkeypatch.chdir(tmp_path)
    command = vla_arms.arm_command(vla_arms.PRESETS["pusht"], "wmrl", tmp_path / "wmrl", [], seed=seed)
    cli = lightning_cli(command[command.index("fit") + 1:], run=False)
    (routing,) = [c for c in cli.trainer.callbacks if isinstance(c, AnchorRouting)]
    (reward,) = [c for c in cli.trainer.callbacks if isinstance(c, WorldModelReward)]
    assert cli.model.hparams.seed == cli.datamodule.seed == routing.seed == seed
    assert reward.world_model.generator.initial_seed() == seed
    assert cli.datamodule.demo_seed == 100_000 + 1000 * seed
    assert cli.datamodule.train_seeds == list(range(64)) and cli.datamodule.heldout_seeds == list(range(64, 464))
    shipped = lightning_cli(["-c", str(ROOT / "configs/vla/arms/pusht.yaml"), "-c", str(ROOT / "configs/vla/arms/wmrl.yaml")],
                           run=False)
    if seed == 0:
        assert (shipped.model.hparams.seed, shipped.datamodule.demo_seed) == (0, cli.datamodule.demo_seed)


def write_run(run_dir: Path, evaluations: dict[int, list[float]], metrics: list[dict], wall: float = 60.0,
              noisy: dict[int, list[float]] | None = None) -> None:
    """A finished arm as ``wmrl fit`` leaves it: ``heldout.jsonl``, a CSV logger's ``metrics.csv``, the script's
    ``vla_arm.json``."""
    run_dir.mkdir(parents=True)
    with (run_dir / "heldout.jsonl").open("w") as f:
        for step, successes in evaluations.items():
            episodes = [{"task_id": f"pusht-seed-{64 + i}", "success": s, "coverage": s, "steps": 50}
                        for i, s in enumerate(successes)]
            for i, episode in enumerate(episodes):
                if noisy is not None:
                    episode["noisy_success"] = noisy[step][i]
            f.write(json.dumps({"split": "heldout", "step": step, "episodes": episodes}) + "\n")
    rows = [{"sft/loss": 0.03, "sft/seconds": 17.0, "sft/demonstration_steps": 9000.0, "step": 0}, *metrics]
    columns = sorted({k for r in rows for k in r})
    path = run_dir / "csv" / "version_0" / "metrics.csv"
    path.parent.mkdir(parents=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    (run_dir / "vla_arm.json").write_text(json.dumps({"returncode": 0, "process_wall_s": wall, "load_mean": 1.0,
                                                          "probe_s": [0.5, 0.55]}))


def step_rows(steps: int, anchors: int, corrections: bool) -> list[dict]:
    rows = []
    for s in range(steps):
        row = {"time/step": 2.0, "time/env": 1.5, "time/update": 0.3, "rollout/simulator_steps": 4000.0,
               "anchor/executions": float(anchors), "rollout/success_rate": 0.5, "step": s}
        if corrections:
            row.update({"debias/pairs": 8.0 * (s + 1), "debias/refits": float(s), "fidelity/spearman_raw": 0.4,
                        "fidelity/spearman_calibrated": 0.5, "denoise/weight": 2.0, "debias/bias_reduction": 0.3})
        rows.append(row)
    return rows


def synthetic_sitting(out: Path) -> None:
    """Seed 0 (``out/seed0``): 100 held-out states; SFT succeeds on the first 30. Sparse GRPO adds 30 (states
    30-59) and loses none; the raw world model adds 10 and loses 5; WMRL adds what sparse GRPO does plus states 60-64;
    sparse GRPO at WMRL's real-label budget adds 15; the perfect progress model (the oracle's shaped reward) adds 3.
    The ablation arms: the uncorrected mixture adds 20 (30-49), debiasing-only 25 (30-54), denoising-only 22 (30-51),
    WMRL with the paper's corrections 23 (30-52).
    """
    out = out / "seed0"
    sft = [1.0] * 30 + [0.0] * 70
    sparse = [1.0] * 60 + [0.0] * 40
    raw = [0.0] * 5 + [1.0] * 25 + [1.0] * 10 + [0.0] * 60
    wmrl = [1.0] * 65 + [0.0] * 35
    noisy_sft = [1.0] * 40 + [0.0] * 60  # with the exploration noise: SFT 0.40, every RL arm 0.50
    noisy_after = [1.0] * 50 + [0.0] * 50
    write_run(out / "sparse_grpo", {0: sft, 5: sparse}, step_rows(5, 64, False), noisy={0: noisy_sft, 5: noisy_after})
    write_run(out / "raw_world_model", {0: sft, 5: raw}, step_rows(5, 0, False), noisy={0: noisy_sft, 5: noisy_after})
    write_run(out / "wmrl", {0: sft, 5: wmrl}, step_rows(5, 8, True), noisy={0: noisy_sft, 5: noisy_after})
    budget = [1.0] * 45 + [0.0] * 55  # sparse GRPO with WMRL's real-label budget: 15 more than SFT
    write_run(out / "sparse_budget", {0: sft, 5: budget}, step_rows(5, 8, False), noisy={0: noisy_sft, 5: noisy_after})
    oracle = [1.0] * 33 + [0.0] * 67
    write_run(out / "shaped_oracle", {0: sft, 5: oracle}, step_rows(5, 64, False), noisy={0: noisy_sft, 5: noisy_after})
    for arm, gained, corrections in (("uncorrected", 20, False), ("debias_only", 25, True), ("denoise_only", 22, True),
                                     ("wmrl_paper", 23, True)):
        final = [1.0] * (30 + gained) + [0.0] * (70 - gained)
        write_run(out / arm, {0: sft, 5: final}, step_rows(5, 8, corrections), noisy={0: noisy_sft, 5: noisy_after})


def comparison(compared: list[dict], arm: str, base: str) -> dict:
    (found,) = [c for c in compared if (c["arm"], c["base"]) == (arm, base)]
    return found


def test_statistics_on_synthetic_episodes(tmp_path):
    synthetic_sitting(tmp_path)
    runs = vla_arms.read_sitting(tmp_path, [0], list(vla_arms.RL_ARMS))
    summary = vla_arms.summarise(runs)

    assert summary["sft"]["held_out"]["point"] == pytest.approx(0.30)
    assert summary["sft"]["simulator_steps"] == 9000 and summary["sft"]["train_wall_s"] == 17.0
    sparse, raw, wmrl = summary["sparse_grpo"], summary["raw_world_model"], summary["wmrl"]
    # paired: 30 states gained, none lost -> +0.30 with an interval clear of 0
    assert sparse["gain_over_sft"]["point"] == pytest.approx(0.30) and sparse["gain_over_sft"]["low"] > 0.15
    # 10 gained, 5 lost: +0.05, within noise
    assert raw["gain_over_sft"]["point"] == pytest.approx(0.05) and raw["gain_over_sft"]["low"] < 0
    # WMRL vs sparse GRPO, paired on the same states: 5 more, none fewer
    assert wmrl["difference_to_sparse_grpo"]["point"] == pytest.approx(0.05)
    assert 0 <= wmrl["difference_to_sparse_grpo"]["low"] <= 0.05 <= wmrl["difference_to_sparse_grpo"]["high"]
    assert sparse["difference_to_sparse_grpo"] is None
    assert sparse["simulator_steps"] == 20000 and sparse["real_graded_episodes"] == 320 and wmrl["real_graded_episodes"] == 40
    assert sparse["train_wall_s"] == pytest.approx(10.0) and sparse["process_wall_s"] == 60.0
    assert wmrl["corrections"]["anchor_pairs"] == 40.0 and wmrl["corrections"]["denoise_weight"] == 2.0
    assert raw["corrections"]["anchor_pairs"] is None
    assert wmrl["curve"] == {"0": pytest.approx(0.30), "5": pytest.approx(0.65)}
    assert wmrl["per_seed"]["0"]["held_out"] == pytest.approx(0.65)
    # the noisy evaluation, reported beside: SFT 0.40 -> 0.50 in every arm, paired; equal to sparse GRPO exactly
    assert summary["sft"]["held_out_noisy"]["point"] == pytest.approx(0.40)
    assert wmrl["held_out_noisy"]["point"] == pytest.approx(0.50) and wmrl["gain_over_sft_noisy"]["low"] > 0
    assert wmrl["difference_to_sparse_grpo_noisy"] == {"point": 0.0, "low": 0.0, "high": 0.0}

    bars = vla_arms.checks(summary)
    assert [ok for _, _, ok in bars] == [True, True]
    compared = vla_arms.comparisons(runs)
    assert {(c["arm"], c["base"]) for c in compared} == {(a, b) for a, b, _ in vla_arms.COMPARISONS}
    budget = comparison(compared, "wmrl", "sparse_budget")["difference"]
    assert budget["point"] == pytest.approx(0.20) and budget["low"] > 0
    # WMRL against the raw world model, paired: 30 states more (0-4 and 40-64), none fewer; equal with the noise
    raw_world_model = comparison(compared, "wmrl", "raw_world_model")
    assert raw_world_model["difference"]["point"] == pytest.approx(0.30) and raw_world_model["difference"]["low"] > 0.15
    assert raw_world_model["noisy"] == {"point": 0.0, "low": 0.0, "high": 0.0}
    # the ablation: debiasing adds 5 states to the uncorrected mixture, denoising 2, debiasing beats denoising by 3
    assert comparison(compared, "debias_only", "uncorrected")["difference"]["point"] == pytest.approx(0.05)
    assert comparison(compared, "denoise_only", "uncorrected")["difference"]["point"] == pytest.approx(0.02)
    assert comparison(compared, "debias_only", "denoise_only")["per_seed"]["0"]["point"] == pytest.approx(0.03)
    assert math.isnan(comparison(compared, "wmrl", "uncorrected")["over_seeds"]["low"])  # one seed: no spread
    # the oracle: 27 states fewer than sparse GRPO, none more: a paired difference below 0
    oracle = summary["shaped_oracle"]["difference_to_sparse_grpo"]
    assert oracle["point"] == pytest.approx(-0.27) and oracle["high"] < 0
    assert vla_arms.ordering(summary).startswith("WMRL, the kit's corrections (anchors + strict map + fusion by "
                                                 "agreement) > GRPO, sparse success > "
                                                 "debiasing only")


def test_seeds_pool_paired_on_seed_and_state(tmp_path):
    """Two seeds with their own SFT starts: each arm's success pools seeds x states, a paired difference pairs
    (seed, state) with (seed, state) and resamples states within seeds; per-seed points are kept."""
    sft0, sft1 = [1.0] * 10 + [0.0] * 10, [0.0] * 20
    write_run(tmp_path / "seed0" / "sparse_grpo", {0: sft0, 4: [1.0] * 20}, step_rows(4, 64, False))
    write_run(tmp_path / "seed0" / "wmrl", {0: sft0, 4: [1.0] * 15 + [0.0] * 5}, step_rows(4, 8, True))
    write_run(tmp_path / "seed1" / "sparse_grpo", {0: sft1, 4: [1.0] * 4 + [0.0] * 16}, step_rows(4, 64, False))
    write_run(tmp_path / "seed1" / "wmrl", {0: sft1, 4: [1.0] * 6 + [0.0] * 14}, step_rows(4, 8, True))
    runs = vla_arms.read_sitting(tmp_path, [0, 1], ["sparse_grpo", "wmrl"])
    summary = vla_arms.summarise(runs)
    assert summary["sft"]["held_out"]["point"] == pytest.approx(0.25)
    assert summary["sft"]["per_seed"] == {"0": {"held_out": 0.5, "gain_over_sft": None, "difference_to_sparse_grpo": None},
                                          "1": {"held_out": 0.0, "gain_over_sft": None, "difference_to_sparse_grpo": None}}
    wmrl = summary["wmrl"]
    assert wmrl["held_out"]["point"] == pytest.approx((15 + 6) / 40) and wmrl["episodes"] == 40
    assert wmrl["gain_over_sft"]["point"] == pytest.approx((5 + 6) / 40)
    # seed 0: -5 states; seed 1: +2 states: pooled -3/40, per seed -0.25 and +0.10
    difference = wmrl["difference_to_sparse_grpo"]
    assert difference["point"] == pytest.approx(-3 / 40) and difference["low"] < difference["point"] < difference["high"]
    assert wmrl["per_seed"]["0"]["difference_to_sparse_grpo"]["point"] == pytest.approx(-0.25)
    assert wmrl["per_seed"]["1"]["difference_to_sparse_grpo"]["point"] == pytest.approx(0.10)
    assert wmrl["curve"] == {"0": pytest.approx(0.25), "4": pytest.approx(21 / 40)}
    # over seeds: the seeds' own differences, -0.25 and +0.10, a Student-t interval around their mean
    (over,) = [c["over_seeds"] for c in vla_arms.comparisons(runs)] or [None]
    assert over is None  # (sparse_grpo, wmrl) is no comparison of COMPARISONS: only the table's columns pair them
    with pytest.raises(ValueError, match="every seed needs the same arms"):
        vla_arms.summarise({0: runs[0], 1: {"wmrl": runs[1]["wmrl"]}})


def test_arms_that_started_from_different_policies_are_refused(tmp_path):
    synthetic_sitting(tmp_path)
    other = tmp_path / "other"
    write_run(other, {0: [0.0] * 100, 5: [1.0] * 100}, step_rows(5, 64, False))
    runs = {0: {"sparse_grpo": vla_arms.read_arm(tmp_path / "seed0" / "sparse_grpo", "sparse_grpo"),
                "wmrl": vla_arms.read_arm(other, "wmrl")}}
    with pytest.raises(ValueError, match="started from different SFT policies"):
        vla_arms.summarise(runs)


def test_a_run_without_an_evaluation_after_training_is_named(tmp_path):
    write_run(tmp_path / "sparse_grpo", {0: [1.0, 0.0]}, step_rows(1, 64, False))
    run = vla_arms.read_arm(tmp_path / "sparse_grpo", "sparse_grpo")
    with pytest.raises(ValueError, match="no held-out evaluation after training"):
        _ = run.final


def test_the_script_reports_finished_arms_and_keeps_the_reading(tmp_path):
    """``--reuse`` on a finished sitting runs nothing: it writes the JSON and the markdown, keeping the section
    read by hand."""
    out = tmp_path / "runs"
    synthetic_sitting(out / "pusht")
    results = tmp_path / "results"
    results.mkdir()
    (results / "RESULTS-vla.md").write_text("old tables\n## Reading (by hand, 2026-12-02)\nkept\n")
    vla_arms.main(["--out", str(out), "--results", str(results), "--reuse"])
    report = json.loads((results / "results" / "vla-arms.json").read_text())
    assert set(report["arms"]) == {"sft", *vla_arms.RL_ARMS} and report["seeds"] == [0]
    assert report["seed_flags"]["0"] == ["--seed_everything=0", "--data.init_args.demo_seed=100000"]
    assert [c["met"] for c in report["checks"]][:2] == [True, True]
    kit = report["checks"][2]  # both WMRL arms ran: the kit's corrections against the paper's, paired
    assert kit["check"].startswith("the kit's corrections >= the paper's") and "over seeds" in kit["value"]
    assert report["arms"]["sparse_grpo"]["gain_over_sft"]["point"] == pytest.approx(0.30)
    text = (results / "RESULTS-vla.md").read_text()
    assert "| SFT only | 0.300" in text and "old tables" not in text and text.endswith("kept\n")
    assert "| SFT only | 0.400 [" in text  # the noisy evaluation's table
    assert "1 seed(s): 0." in text and "load 1.0, probe 0.50 / 0.55 s" in text  # seeds, load and speed probe recorded
    assert "9 of 9 runs read from disk (--reuse)" in text
    assert "| wmrl - raw_world_model | what the anchors and both corrections add to the raw world model | +0.300 [" in text
    assert "| - | +0.300 |" in text.split("wmrl - raw_world_model")[1].split("\n")[0]  # one seed: no spread


def test_unknown_flags_are_refused_and_fit_flags_pass_through(tmp_path, capsys):
    with pytest.raises(SystemExit):
        vla_arms.main(["--out", str(tmp_path), "--steps", "3"])
    assert "wmrl fit flags for every arm start with" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # the diagnostic arm belongs to the ACT preset only
        vla_arms.main(["--out", str(tmp_path), "--preset", "smolvla", "--arms", "shaped_oracle"])
    assert "not an arm of --preset smolvla" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        vla_arms.main(["--out", str(tmp_path), "--seeds", "1", "1"])
    assert "--seeds must be distinct" in capsys.readouterr().err
    command = vla_arms.arm_command(vla_arms.PRESETS["pusht"], "wmrl", tmp_path, ["--trainer.max_steps=3"], seed=1)
    assert command[-1] == "--trainer.max_steps=3" and str(ROOT / "configs/vla/arms/wmrl.yaml") in command
    assert command[-3:-1] == ["--seed_everything=1", "--data.init_args.demo_seed=101000"]  # the user's flags win
