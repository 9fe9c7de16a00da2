"""benchmarks/vla_arms.py: the four arms of the paper's VLA table instantiate, and their statistics (paired gains
over SFT, paired differences to sparse GRPO, the bars, the ordering) are right on synthetic episodes."""

from __future__ import annotations

import csv
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from wmrl.cli import lightning_cli

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("vla_arms", ROOT / "benchmarks" / "vla_arms.py")
vla_arms = importlib.util.module_from_spec(spec)
sys.modules["vla_arms"] = vla_arms
spec.loader.exec_module(vla_arms)

EXPECTED = {"sparse_grpo": [], "raw_world_model": ["AnchorRouting", "WorldModelReward"],
            "wmrl": ["AnchorRouting", "WorldModelReward", "OnlineDebiasing", "InverseVarianceDenoising"],
            "sparse_budget": [], "shaped_oracle": []}


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
    assert model.settings.type == ("smolvla" if preset == "smolvla" else "act")
    assert model.hparams.eval_at_start and model.hparams.group_size == data.group_size
    assert str(cli.trainer.default_root_dir) == str(tmp_path / arm)
    shared = (warm_start.steps, model.hparams.lr, model.hparams.exploration_std, model.hparams.seed,
              data.train_seeds, data.heldout_seeds, data.num_demonstrations, cli.trainer.max_steps)
    expected = {"pusht": (3000, 1e-4, 0.05, 0, list(range(64)), list(range(64, 464)), 200, 150),
                "smolvla": (3000, 1e-4, 0.05, 0, list(range(64)), list(range(64, 264)), 200, 100)}[preset]
    assert shared == expected
    assert model.simulator.reward == ("shaped" if arm == "shaped_oracle" else "success")
    simulator = ("max_episode_steps", "success_threshold", "initial_states", "max_offset", "max_angle")
    assert data.simulator.reward == "success"
    assert [getattr(model.simulator, f) for f in simulator] == [getattr(data.simulator, f) for f in simulator] \
        == [100, 0.85, "near_goal", 25.0, 0.25]


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
    """100 held-out states; SFT succeeds on the first 30. Sparse GRPO adds 30 (states 30-59) and loses none;
    the raw world model adds 10 and loses 5; WMRL adds what sparse GRPO does plus states 60-64; sparse GRPO at
    WMRL's real-label budget adds 15; the perfect progress model (the oracle's shaped reward) adds 3."""
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


def test_statistics_on_synthetic_episodes(tmp_path):
    synthetic_sitting(tmp_path)
    runs = {arm: vla_arms.read_arm(tmp_path / arm, arm) for arm in vla_arms.RL_ARMS}
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
    # the noisy evaluation, reported beside: SFT 0.40 -> 0.50 in every arm, paired; equal to sparse GRPO exactly
    assert summary["sft"]["held_out_noisy"]["point"] == pytest.approx(0.40)
    assert wmrl["held_out_noisy"]["point"] == pytest.approx(0.50) and wmrl["gain_over_sft_noisy"]["low"] > 0
    assert wmrl["difference_to_sparse_grpo_noisy"] == {"point": 0.0, "low": 0.0, "high": 0.0}

    bars = vla_arms.checks(summary)
    assert [ok for _, _, ok in bars] == [True, True]
    assert wmrl["difference_to_sparse_budget"]["point"] == pytest.approx(0.20)
    assert wmrl["difference_to_sparse_budget"]["low"] > 0
    # WMRL against the raw world model, paired: 30 states more (0-4 and 40-64), none fewer; equal with the noise
    assert wmrl["difference_to_raw_world_model"]["point"] == pytest.approx(0.30)
    assert wmrl["difference_to_raw_world_model"]["low"] > 0.15
    assert wmrl["difference_to_raw_world_model_noisy"] == {"point": 0.0, "low": 0.0, "high": 0.0}
    # the oracle: 27 states fewer than sparse GRPO, none more: a paired difference below 0
    oracle = summary["shaped_oracle"]["difference_to_sparse_grpo"]
    assert oracle["point"] == pytest.approx(-0.27) and oracle["high"] < 0
    assert vla_arms.ordering(summary) == ("WMRL (anchors + debiasing + denoising) > GRPO, sparse success > "
                                          "GRPO, sparse success, WMRL's real-label budget > GRPO, raw world model > "
                                          "GRPO, a perfect progress model (the simulator's shaped dense reward) > "
                                          "SFT only")


def test_arms_that_started_from_different_policies_are_refused(tmp_path):
    synthetic_sitting(tmp_path)
    other = tmp_path / "other"
    write_run(other, {0: [0.0] * 100, 5: [1.0] * 100}, step_rows(5, 64, False))
    runs = {"sparse_grpo": vla_arms.read_arm(tmp_path / "sparse_grpo", "sparse_grpo"),
            "wmrl": vla_arms.read_arm(other, "wmrl")}
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
    assert set(report["arms"]) == {"sft", "sparse_grpo", "raw_world_model", "wmrl", "sparse_budget", "shaped_oracle"}
    assert [c["met"] for c in report["checks"]] == [True, True]
    assert report["arms"]["sparse_grpo"]["gain_over_sft"]["point"] == pytest.approx(0.30)
    text = (results / "RESULTS-vla.md").read_text()
    assert "| SFT only | 0.300" in text and "old tables" not in text and text.endswith("kept\n")
    assert "| SFT only | 0.400 [" in text  # the noisy evaluation's table
    assert "One seed" in text and "sparse_grpo 1.0, 0.50 / 0.55 s" in text  # seeds, load and speed probe recorded
    assert "arms read from an earlier sitting" in text
    assert "WMRL against the raw world model (what the anchors and the two corrections add), paired: +0.300 [" in text


def test_unknown_flags_are_refused_and_fit_flags_pass_through(tmp_path, capsys):
    with pytest.raises(SystemExit):
        vla_arms.main(["--out", str(tmp_path), "--steps", "3"])
    assert "wmrl fit flags for every arm start with" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # the diagnostic arm belongs to the ACT preset only
        vla_arms.main(["--out", str(tmp_path), "--preset", "smolvla", "--arms", "shaped_oracle"])
    assert "not an arm of --preset smolvla" in capsys.readouterr().err
    command = vla_arms.arm_command(vla_arms.PRESETS["pusht"], "wmrl", tmp_path, ["--trainer.max_steps=3"])
    assert command[-1] == "--trainer.max_steps=3" and str(ROOT / "configs/vla/arms/wmrl.yaml") in command
