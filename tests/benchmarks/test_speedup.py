"""benchmarks/speedup.py: every arm's generated config instantiates, and the tables, limit and intervals come out
right from logged runs (synthetic run dirs here; the measured run is in benchmarks/RESULTS.md)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from support.config_overlays import ABLATIONS  # which WMRL callbacks each ablation arm turns on

from wmrl.cli import lightning_cli

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("speedup", ROOT / "benchmarks" / "speedup.py")
speedup = importlib.util.module_from_spec(spec)
sys.modules["speedup"] = speedup
spec.loader.exec_module(speedup)



def instantiate_arm(preset, arm: str, tmp_path: Path, monkeypatch, eval_at_start: bool):
    """The arm's generated config on its base, instantiated; its WMRL callbacks are the ablation's."""
    from wmrl.callbacks import RLCallback

    monkeypatch.chdir(tmp_path)
    config = tmp_path / f"{arm}.yaml"
    config.write_text(yaml.safe_dump(speedup.arm_config(preset, arm, tmp_path / "run", eval_at_start=eval_at_start)))
    cli = lightning_cli(["-c", str(ROOT / preset.base), "-c", str(config)], run=False)
    assert [type(c).__name__ for c in cli.trainer.callbacks if isinstance(c, RLCallback)] == ABLATIONS[arm]
    return cli


@pytest.mark.parametrize("arm", [a for a in speedup.ARMS if a not in speedup.VARIANTS])  # a variant: suite-quality's
def test_every_cpu_quick_arm_instantiates_with_the_shared_settings(arm, tmp_path, monkeypatch):
    from wmrl.autoresearch.world_models.learned import LearnedWorldModel
    from wmrl.callbacks import WorldModelReward

    preset = speedup.PRESETS["cpu-quick"]
    cli = instantiate_arm(preset, arm, tmp_path, monkeypatch, eval_at_start=False)
    for c in cli.trainer.callbacks:
        if isinstance(c, WorldModelReward):  # learns from this run's anchors only: no execution comes free
            assert isinstance(c.world_model, LearnedWorldModel) and not c.world_model.execution_log
    env = cli.model.environments["real"]
    assert env.starter_solution == "heavy_boosting" and env.log.use_cache is False
    assert cli.trainer.max_steps == preset.steps and cli.trainer.default_root_dir == str(tmp_path / "run")
    assert cli.datamodule.train_tasks == preset.tasks and cli.datamodule.eval_task_ids == preset.eval_tasks
    groups = speedup.equal_budget_groups(preset) if arm == speedup.EQUAL_BUDGET else preset.groups_per_step
    assert (cli.datamodule.groups_per_step, cli.model.hparams.group_size) == (groups, preset.group_size)
    assert cli.model.hparams.eval_at_start is False


@pytest.mark.parametrize("preset_name, groups, anchors", [("cpu-quick", 1, 1), ("cpu-learn", 1, 1),
                                                          ("cpu-quality", 1, 1), ("gpu", 2, 2)])
def test_the_equal_budget_arm_executes_as_many_rollouts_a_step_as_full_wmrl(preset_name, groups, anchors):
    """Real-execution GRPO at WMRL's execution budget: every group real, as many groups a step as full WMRL's
    AnchorRouting executes at the preset's scale (so the two arms run the same scripts a step), nothing else
    changed; its shipped overlays say the same for the quickstart (1 of 2 groups) and the paper (2 of 8)."""
    from wmrl.callbacks import AnchorRouting

    preset = speedup.PRESETS[preset_name]
    config = speedup.arm_config(preset, speedup.EQUAL_BUDGET, Path("run"), eval_at_start=False)
    assert config["data"]["init_args"]["groups_per_step"] == groups == speedup.equal_budget_groups(preset)
    assert "callbacks+" not in config["trainer"] and "callbacks" not in config["trainer"]
    full = speedup.arm_config(preset, "wmrl", Path("run"), eval_at_start=False)
    (routing,) = [c for c in full["trainer"]["callbacks+"] if c["class_path"].endswith("AnchorRouting")]
    assert AnchorRouting(**routing["init_args"]).anchors_for(preset.groups_per_step) == anchors
    assert groups * preset.group_size == anchors * preset.group_size  # executed rollouts a step, equal
    assert {k: v for k, v in config["data"]["init_args"].items() if k != "groups_per_step"} == \
        {k: v for k, v in full["data"]["init_args"].items() if k != "groups_per_step"}
    for name, base, shipped in (("cpu", "quickstart.yaml", 1), ("paper", "paper_4b.yaml", 2)):
        overlay = yaml.safe_load((ROOT / f"configs/autoresearch/ablations/{name}/real_grpo_equal_budget.yaml").read_text())
        wmrl = yaml.safe_load((ROOT / f"configs/autoresearch/ablations/{name}/wmrl.yaml").read_text())
        groups_there = yaml.safe_load((ROOT / "configs/autoresearch" / base).read_text())["data"]["init_args"]
        (r,) = [c for c in wmrl["trainer"]["callbacks+"] if c["class_path"].endswith("AnchorRouting")]
        assert overlay["data"]["init_args"]["groups_per_step"] == shipped == \
            AnchorRouting(**r["init_args"]).anchors_for(groups_there["groups_per_step"])


def test_the_gpu_preset_keeps_the_paper_config_and_puts_the_world_model_on_vllm(tmp_path, monkeypatch):
    from wmrl.generation.vllm import VLLMGenerationEngine
    from wmrl.generation.vllm_world_model import VLLMWorldModelBackend

    monkeypatch.chdir(tmp_path)
    preset = speedup.PRESETS["gpu"]
    config = tmp_path / "wmrl.yaml"
    config.write_text(yaml.safe_dump(speedup.arm_config(preset, "wmrl", tmp_path / "run", eval_at_start=True)))
    cpu = ["--trainer.accelerator=cpu", "--trainer.precision=32-true", "--model.init_args.model=smollm2-135m-instruct",
           "--model.init_args.dtype=float32"]
    cli = lightning_cli(["-c", str(ROOT / preset.base), "-c", str(config), *cpu], run=False)
    (world_model,) = [c.world_model for c in cli.trainer.callbacks if hasattr(c, "world_model")]
    assert isinstance(world_model.backend, VLLMWorldModelBackend) and world_model.mode == "generate"
    assert isinstance(cli.model.engine, VLLMGenerationEngine) and cli.model.engine.settings.max_model_len == 24576
    assert cli.trainer.max_steps == 200 and cli.datamodule.groups_per_step == 8
    assert cli.model.environments["real"].starter_solution == "linear_baseline"


def test_the_least_separated_arm_is_full_wmrl_with_its_anchors_placed_and_nothing_else_changed():
    preset = speedup.PRESETS["suite-quality"]
    full = speedup.arm_config(preset, "wmrl", Path("run"), eval_at_start=False)
    placed = speedup.arm_config(preset, "wmrl_least_separated", Path("run"), eval_at_start=False)
    (routing,) = [c for c in placed["trainer"]["callbacks+"] if c["class_path"].endswith("AnchorRouting")]
    assert routing["init_args"]["selection"] == "least_separated"
    routing["init_args"]["selection"] = "random"
    assert placed == full
    world_model = next(c for c in full["trainer"]["callbacks+"] if c["class_path"].endswith("WorldModelReward"))
    assert world_model["init_args"]["world_model"]["class_path"].endswith("TaskAwareWorldModel")  # it says


def test_a_missing_overlay_is_named(tmp_path):
    preset = speedup.Preset(base="x.yaml", ablations="configs/nowhere", steps=1, group_size=2, groups_per_step=1,
                            eval_samples=1)
    with pytest.raises(FileNotFoundError, match="configs/nowhere/wmrl.yaml: the ablation overlay of arm 'wmrl'"):
        speedup.arm_config(preset, "wmrl", tmp_path, eval_at_start=False)


def fake_run(root: Path, arm: str, step_s: float, parts: dict[str, float], executions: int,
             positions: dict[str, list[float]], steps: int = 2,
             along: dict[int, dict[str, list[float]]] | None = None) -> Path:
    """A run dir as a finished arm leaves it: CSV metrics, heldout.jsonl and the arm's record; ``along``: the
    held-out samples of evaluations before the last step, by step."""
    run = root / "runs" / arm
    (run / "csv" / "version_0").mkdir(parents=True)
    rows = [{"step": s, "time/step": step_s, **parts, "anchor/executions": executions, "reward/mean": 0.1 * s,
             "reward/real_mean": 0.1 * s, "env/execution_seconds": parts.get("time/env", 0.0) * 2}
            for s in range(1, steps + 1)]
    pd.DataFrame(rows).to_csv(run / "csv" / "version_0" / "metrics.csv", index=False)
    evals = [{"split": "heldout", "step": 0, "tasks": [{"task_id": t, "valid_rate": 0.5, "positions": [0.3] * len(p)}
                                                      for t, p in positions.items()]},
             *({"split": "heldout", "step": k, "tasks": [{"task_id": t, "valid_rate": 0.5, "positions": p}
                                                         for t, p in at.items()]} for k, at in (along or {}).items()),
             {"split": "heldout", "step": steps, "tasks": [{"task_id": t, "valid_rate": 0.5, "positions": p}
                                                          for t, p in positions.items()]}]
    (run / "heldout.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evals))
    (run / "speedup_arm.json").write_text(json.dumps({"arm": arm, "process_wall_s": step_s * steps + 60,
                                                      "load_mean": 0.1, "load_max": 0.2, "probe_s": [0.5, 0.55]}))
    return run


def test_results_limit_and_intervals_from_logged_runs(tmp_path):
    rng = np.random.default_rng(0)
    good = {t: list(rng.uniform(0.4, 1.0, 8)) for t in ("a", "b", "c")}
    poor = {t: list(rng.uniform(0.0, 0.3, 8)) for t in ("a", "b", "c")}
    out = tmp_path / "cpu-quick"
    # real: G = 60 + 40, E = 200 per step; WMRL: 2 of the preset's 4 x 2 rollouts executed, W = 5
    fake_run(out, "real_grpo", 300, {"time/generate": 60, "time/update": 40, "time/env": 200}, 16, poor)
    fake_run(out, "wmrl", 155, {"time/generate": 60, "time/update": 40, "time/env": 50, "time/world_model": 5,
                                "debias/pairs": 8.0}, 2, good)
    for arm in ("pure_world_model", "uncorrected", "debias_only", "denoise_only"):
        fake_run(out, arm, 150, {"time/generate": 60, "time/update": 40, "time/env": 45, "time/world_model": 5},
                 4, {t: [0.0] * 8 for t in poor} if arm == "pure_world_model" else poor)
    fake_run(out, speedup.EQUAL_BUDGET, 80, {"time/generate": 15, "time/update": 10, "time/env": 50}, 2, poor)

    real, wmrl = speedup.read_arm(out / "runs" / "real_grpo", "real_grpo"), speedup.read_arm(out / "runs" / "wmrl", "wmrl")
    limit = speedup.speedup_limit(real, wmrl, rollouts_per_step=8)
    assert (limit.generate_update_s, limit.execute_s, limit.world_model_s, limit.anchor_share) == (100, 200, 5, 0.25)
    assert limit.bound == pytest.approx(300 / 155) and limit.achieved == pytest.approx(600 / 310)
    assert limit.fraction == pytest.approx(1.0)
    assert speedup._execution_needed(limit, 3.0) == pytest.approx((3 * 105 - 100) / 0.25)

    results = tmp_path / "results"
    speedup.main(["--preset", "cpu-quick", "--out", str(tmp_path), "--results", str(results), "--reuse"])
    text = (results / "RESULTS.md").read_text()
    assert "| Full WMRL | 5.2 | 1.94x |" in text  # 310 s of training, 600 / 310
    assert "| 100.0 | 200.0 | 5.0 | 0.250 | 1.94x | 1.94x | 100% |" in text
    mean, low, high = speedup.bootstrap_mean(good)
    assert f"{mean:.3f} [{low:.3f}, {high:.3f}]" in text and low < mean < high
    assert "Ablation ordering (uncorrected < single corrections < full WMRL, by mean position): does not hold" in text
    section = text.split("## Held-out quality against real-execution GRPO")[1].split("\n## ")[0]
    rows = {line.split(" | ")[0][2:]: line for line in section.splitlines() if line.startswith("| ")}
    assert rows["Pure world model"].endswith("| no |") and rows["Uncorrected mixture"].endswith("| yes |")
    assert "| Full WMRL | +" in text and "| 0.1 (max 0.2) | 0.50 / 0.55 |" in text
    assert "| Full WMRL | - | 8 | - | - |" in text  # what the corrections had: pairs logged, the rest never
    assert "Held-out mean position of the starting policy: 0.300 [0.300, 0.300]" in text
    for name in ("speedup_time.png", "speedup_heldout.png", "speedup_reward.png"):
        assert (results / "results" / name).stat().st_size > 10_000 and f"(results/{name})" in text
    assert (out / "runs" / "wmrl" / "report" / "index.html").is_file()

    reading = "## Reading (by hand, 2026-11-30)\n\n- The corrections never engaged.\n"
    (results / "RESULTS.md").write_text(text + reading)
    speedup.main(["--preset", "cpu-quick", "--out", str(tmp_path), "--results", str(results), "--reuse"])
    again = (results / "RESULTS.md").read_text()
    assert again.endswith(reading) and again.count("## The limit") == again.count(reading.split("\n")[0]) == 1


def test_the_speed_probe_times_a_fixed_workload():
    assert speedup.cpu_probe(size=64, repeats=2) < speedup.cpu_probe(size=512, repeats=10)


def test_bootstrap_intervals_narrow_with_samples_and_separate_different_arms():
    rng = np.random.default_rng(1)
    few = {"a": list(rng.uniform(0, 1, 4))}
    many = {"a": list(rng.uniform(0, 1, 400))}
    _, low_few, high_few = speedup.bootstrap_mean(few)
    _, low_many, high_many = speedup.bootstrap_mean(many)
    assert high_many - low_many < (high_few - low_few) / 3
    point, low, high = speedup.bootstrap_difference({"a": [0.9] * 5 + [0.8] * 5}, {"a": [0.1] * 5 + [0.2] * 5})
    assert point == pytest.approx(0.7) and 0.6 < low <= point <= high < 0.8
    with pytest.raises(ValueError, match="different tasks"):
        speedup.bootstrap_difference({"a": [1.0]}, {"b": [1.0]})


def test_an_arm_without_a_final_evaluation_is_refused(tmp_path):
    run = fake_run(tmp_path, "wmrl", 100, {"time/generate": 1.0}, 1, {"a": [0.5]})
    lines = (run / "heldout.jsonl").read_text().splitlines()
    (run / "heldout.jsonl").write_text(lines[0] + "\n")
    with pytest.raises(ValueError, match="no held-out evaluation after training"):
        speedup.read_arm(run, "wmrl")


@pytest.mark.parametrize("arm", speedup.ARMS)
def test_every_cpu_learn_arm_instantiates_with_the_pretrained_world_model_and_cpu_scaled_constants(arm, tmp_path,
                                                                                                  monkeypatch):
    from wmrl.autoresearch.world_models.learned import LearnedWorldModel
    from wmrl.callbacks import AnchorRouting, InverseVarianceDenoising, OnlineDebiasing, WorldModelReward

    preset = speedup.PRESETS["cpu-learn"]
    cli = instantiate_arm(preset, arm, tmp_path, monkeypatch, eval_at_start=True)
    for c in cli.trainer.callbacks:
        if isinstance(c, WorldModelReward):
            wm = c.world_model
            assert isinstance(wm, LearnedWorldModel) and Path(wm.pretrained).is_file() and not wm.execution_log
        if isinstance(c, OnlineDebiasing):  # 2-3 anchor pairs a step: a refit after every step
            assert (c.min_pairs, c.refit_every) == (2, 1)
        if isinstance(c, InverseVarianceDenoising):
            assert c.state.warmup == 1
        if isinstance(c, AnchorRouting):  # the floor of one group of four: a quarter of the rollouts real
            assert (c.floor, c.fraction) == ((0, 0.0) if arm == "pure_world_model" else (1, 0.1))
    # the quickstart's learning settings: the LoRA lr and the 13 tabular training tasks, 3 held-out tasks
    assert cli.model.hparams.lr == 3.0e-4 and len(cli.datamodule.train_tasks) == 13
    groups = 1 if arm == speedup.EQUAL_BUDGET else 4  # the equal-budget arm: full WMRL's one anchor group
    assert (cli.datamodule.groups_per_step, cli.model.hparams.group_size) == (groups, 3)
    assert cli.datamodule.eval_samples == 6 and cli.model.hparams.eval_at_start is True
    assert cli.model.environments["real"].log.use_cache is False


def test_the_learning_summary_json_checks_and_figures_from_logged_runs(tmp_path):
    rng = np.random.default_rng(3)
    start = {t: [0.3] * 6 for t in ("a", "b", "c")}
    better = {t: list(np.clip(0.3 + rng.uniform(0.2, 0.5, 6), 0, 1)) for t in start}
    out = tmp_path / "cpu-learn"
    corrections = {"debias/pairs": 9.0, "debias/refits": 3.0, "denoise/weight": 2.0, "world_model/examples": 90.0}
    fake_run(out, "real_grpo", 300, {"time/generate": 60, "time/update": 40, "time/env": 200}, 12, better, steps=3)
    fake_run(out, "wmrl", 200, {"time/generate": 60, "time/update": 40, "time/env": 50, "time/world_model": 5,
                                **corrections}, 3, better, steps=3)
    for arm in ("pure_world_model", "uncorrected", "debias_only", "denoise_only"):
        fake_run(out, arm, 200, {"time/generate": 60, "time/update": 40, "time/env": 50, "time/world_model": 5,
                                 "debias/refits": 2.0}, 3, start, steps=3)
    fake_run(out, speedup.EQUAL_BUDGET, 100, {"time/generate": 20, "time/update": 15, "time/env": 50}, 3, start,
             steps=3)
    for arm in speedup.RUN_ORDER:  # the start evaluated at 0.3 everywhere: the pairs of every arm
        lines = (out / "runs" / arm / "heldout.jsonl").read_text().splitlines()
        first = json.loads(lines[0])
        first["tasks"] = [{"task_id": t, "valid_rate": 0.5, "positions": p} for t, p in start.items()]
        (out / "runs" / arm / "heldout.jsonl").write_text(json.dumps(first) + "\n" + lines[1] + "\n")
    results = tmp_path / "results"
    speedup.main(["--preset", "cpu-learn", "--out", str(tmp_path), "--results", str(results), "--reuse"])
    assert "wmrl_paper" not in speedup.RUN_ORDER  # the paper's corrections run when asked (--arms)
    record = json.loads((results / "results" / "cpu-learn.json").read_text())
    arms = record["arms"]
    gain = speedup.paired_gain(start, better)
    assert arms["real_grpo"]["gain_over_start"]["point"] == pytest.approx(gain[0]) and gain[1] > 0
    assert arms["wmrl"]["difference_to_real_grpo"]["point"] == pytest.approx(0.0)
    assert arms["pure_world_model"]["gain_over_start"] == {"point": 0.0, "low": 0.0, "high": 0.0}
    assert arms["wmrl"]["real_executions"] == 9 and arms["real_grpo"]["real_executions"] == 36
    assert arms["wmrl"]["execution_s"] == pytest.approx(300) and arms["real_grpo"]["execution_s"] == pytest.approx(1200)
    assert (arms["wmrl"]["refits"], arms["wmrl"]["weight"], arms["real_grpo"]["refits"]) == (3.0, 2.0, None)
    assert arms["wmrl"]["curve"]["executions"] == [3.0, 6.0, 9.0]
    checks = {c["check"]: c["holds"] for c in record["checks"]}
    assert checks["real-execution GRPO's held-out gain over the start: 95% interval above 0"]
    assert checks["full WMRL's execution-seconds <= 1/3 of real GRPO's"]  # 300 / 1200
    assert checks["Full WMRL: >= 3 map refits"] and not checks["Debiasing only: >= 3 map refits"]
    assert not checks["Denoising only: denoising weight off 1 at the end"]  # never logged
    text = (results / "RESULTS-learn.md").read_text()
    assert "## Held-out gain over the starting policy" in text and "| Full WMRL: >= 3 map refits | 3 | yes |" in text
    for name in ("cpu-learn_heldout_vs_time.png", "cpu-learn_heldout_vs_executions.png", "cpu-learn_train_reward.png"):
        assert (results / "results" / name).stat().st_size > 10_000 and f"(results/{name})" in text
    assert not (results / "RESULTS.md").exists()  # the cpu-quick page is left alone


@pytest.mark.parametrize("arm", ["real_grpo", speedup.EQUAL_BUDGET, "wmrl"])
def test_the_cpu_quality_arms_leave_the_model_to_choose(arm, tmp_path, monkeypatch):
    """cpu-learn's settings with the ``score`` starter view: the prompt shows the starter's validation score, not its
    model line; 8 held-out samples a task so that a task's best-of-k has an interval."""
    preset = speedup.PRESETS["cpu-quality"]
    cli = instantiate_arm(preset, arm, tmp_path, monkeypatch, eval_at_start=True)
    env = cli.model.environments["real"]
    assert env.starter_view == "score" and env.log.use_cache is False
    assert env.starter("airport_state").rstrip().endswith("finish(model)")
    assert cli.model.hparams.prefill == "starter_estimator" and len(cli.datamodule.train_tasks) == 13
    assert cli.datamodule.eval_samples == 8 and cli.trainer.max_steps == preset.steps
    assert cli.datamodule.groups_per_step == (1 if arm == speedup.EQUAL_BUDGET else 4)
    from wmrl.callbacks import WorldModelReward

    for c in cli.trainer.callbacks:  # pretrained on the warm-started policy's score-view scripts, not cpu-learn's
        if isinstance(c, WorldModelReward):
            assert c.world_model.pretrained == str(ROOT / speedup.PRETRAINED_QUALITY)
            assert json.loads(Path(f"{c.world_model.pretrained}.json").read_text())["starter_view"] == "score"


def test_the_quality_checks_read_best_of_k_per_task_and_the_equal_budget_difference(tmp_path):
    start = {"a": [0.4, 0.4, 0.0, 0.4], "b": [0.5, 0.5, 0.5, 0.5], "c": [0.2, 0.0, 0.2, 0.2]}
    better = {"a": [0.8, 0.9, 0.8, 0.8], "b": [0.9, 0.8, 0.9, 0.9], "c": [0.2, 0.0, 0.2, 0.9]}
    out = tmp_path / "cpu-quality"
    fake_run(out, "real_grpo", 300, {"time/generate": 60, "time/update": 40, "time/env": 200}, 16, better, steps=3)
    fake_run(out, speedup.EQUAL_BUDGET, 100, {"time/generate": 20, "time/update": 15, "time/env": 50}, 4, start,
             steps=3)
    for arm in ("real_grpo", speedup.EQUAL_BUDGET):
        lines = (out / "runs" / arm / "heldout.jsonl").read_text().splitlines()
        first = json.loads(lines[0])
        first["tasks"] = [{"task_id": t, "valid_rate": 1.0, "positions": p} for t, p in start.items()]
        (out / "runs" / arm / "heldout.jsonl").write_text(json.dumps(first) + "\n" + lines[1] + "\n")
    results = tmp_path / "results"
    policy = tmp_path / "warm-start"  # a warm-started policy's directory: how it was built goes into the results
    policy.mkdir()
    build = {"model": "smollm2-135m-instruct", "tasks": ["t1", "t2"], "demonstrations": 17, "epochs": 3,
             "loss_per_epoch": [0.5, 0.2, 0.1], "wall_s": 900.0, "cpu_s": 1700.0, "built": "2026-12-03"}
    (policy / "warm_start.json").write_text(json.dumps(build))
    speedup.main(["--preset", "cpu-quality", "--arms", "real_grpo", speedup.EQUAL_BUDGET, "--out", str(tmp_path),
                  "--results", str(results), "--reuse", "--model", str(policy)])
    record = json.loads((results / "results" / "cpu-quality.json").read_text())
    assert record["policy_build"] == build
    assert "## The warm-started policy" in (results / "RESULTS-quality.md").read_text()
    tasks = record["arms"]["real_grpo"]["per_task"]
    assert (tasks["a"]["best_of_k_start"], tasks["a"]["best_of_k"]) == (0.4, 0.9)
    assert not tasks["a"]["at_ceiling"]
    assert tasks["a"]["best_of_k_gain"]["low"] > 0 and tasks["b"]["best_of_k_gain"]["low"] > 0
    assert tasks["c"]["best_of_k_gain"]["point"] == pytest.approx(0.7) and tasks["c"]["best_of_k_gain"]["low"] == 0
    assert record["arms"]["real_grpo"]["difference_to_equal_budget"]["low"] > 0
    assert record["arms"][speedup.EQUAL_BUDGET]["difference_to_equal_budget"] is None
    checks = {c["check"]: c["holds"] for c in record["checks"]}
    name = "Real-execution GRPO: held-out best-of-k above the start's, paired interval above 0, on >= 2 tasks"
    assert checks[name] and not checks[name.replace("Real-execution GRPO", speedup.LABELS[speedup.EQUAL_BUDGET])]
    assert checks["Real-execution GRPO minus Real GRPO at WMRL's executions (held-out mean position, paired): "
                  "interval above 0"]
    text = (results / "RESULTS-quality.md").read_text()
    assert "| Real-execution GRPO | a | 0.40 -> 0.90 | +0.500 [" in text and "## Quality checks" in text
    row = next(line for line in text.splitlines() if line.startswith("| Real-execution GRPO | 0."))
    header = next(line for line in text.splitlines() if line.startswith("| arm | held-out"))
    assert "vs equal budget" in header and header.count("|") == row.count("|")
    difference = record["arms"]["real_grpo"]["difference_to_equal_budget"]
    assert f"| {difference['point']:+.3f} [" in row  # the paired difference to the equal-budget arm, in the table


@pytest.mark.parametrize("arm", ["real_grpo", "wmrl"])
def test_the_cpu_heavy_arms_instantiate_in_the_papers_regime(arm, tmp_path, monkeypatch):
    """10 groups x 2 on the two heavy tasks with the heavy starter; one anchor group (a = 0.1); all rollouts in
    one generation batch and micro-batches of 8 rows of one task (G near its floor, the same loss and gradients)."""
    from wmrl.callbacks import AnchorRouting

    preset = speedup.PRESETS["cpu-heavy"]
    cli = instantiate_arm(preset, arm, tmp_path, monkeypatch, eval_at_start=True)
    env = cli.model.environments["real"]
    assert env.starter_solution == "heavy_boosting" and env.log.use_cache is False
    assert "HistGradientBoostingClassifier(max_iter=1000" in env.prompt("airport_state")  # shown the long run
    assert cli.datamodule.train_tasks == ["digits_recognition", "airport_state"]
    assert (cli.datamodule.groups_per_step, cli.model.hparams.group_size) == (10, 2)
    assert (cli.model.hparams.micro_batch_size, cli.model.engine.max_batch_size) == (8, 20)
    routing = [c for c in cli.trainer.callbacks if isinstance(c, AnchorRouting)]
    assert [r.anchors_for(10) for r in routing] == ([1] if arm == "wmrl" else [])


def test_the_regime_checks_execution_share_and_compute_floor_from_logged_runs(tmp_path):
    same = {t: [0.5, 0.6, 0.7] for t in ("a", "b", "c")}
    out = tmp_path / "cpu-heavy"
    tokens = {"tokens/generate": 10_000.0, "tokens/update": 5_000.0, "model/parameters": 1e8,
              "passes/generate": 1_000.0, "model/bytes": 4e8}
    # real: G = 30 + 70 = 100 s, E = 400 s a step (80% of it); WMRL: 2 of 20 rollouts executed a step, W = 2
    fake_run(out, "real_grpo", 500, {"time/generate": 30, "time/update": 70, "time/env": 400, **tokens}, 20, same,
             steps=3)
    fake_run(out, "wmrl", 145, {"time/generate": 30, "time/update": 70, "time/env": 40, "time/world_model": 2,
                                **tokens}, 2, same, steps=3)
    for arm in ("real_grpo", "wmrl"):  # the arms' matmul throughput: 100 and 200 GFLOP/s before / after
        record = out / "runs" / arm / "speedup_arm.json"
        record.write_text(json.dumps({**json.loads(record.read_text()), "matmul_gflops": [100.0, 200.0],
                                      "memory_gbps": [15.0, 25.0]}))
    results = tmp_path / "results"
    speedup.main(["--preset", "cpu-heavy", "--arms", "wmrl", "real_grpo", "--out", str(tmp_path),
                  "--results", str(results), "--reuse"])
    record = json.loads((results / "results" / "cpu-heavy.json").read_text())
    real = record["arms"]["real_grpo"]
    assert real["execution_share"] == pytest.approx(0.8)
    assert real["wall_clock_parts_s"] == {"generate": 90, "update": 210, "execute": 1200, "world model": 0}
    floor = real["compute_floor"]  # 2 x 1e8 x 10,000 FLOPs at 150 GFLOP/s; the update's three passes
    assert floor["generate"]["compute_floor_s"] == pytest.approx(2e12 / 150e9)
    # generation's 1,000 passes each read 0.4 GB at 20 GB/s: 20 s, more than its compute floor, so its floor
    assert floor["generate"]["memory_floor_s"] == pytest.approx(20.0) == floor["generate"]["floor_s"]
    assert floor["update"]["floor_s"] == pytest.approx(3e12 / 150e9)
    assert floor["update"]["over_floor"] == pytest.approx(70 / 20)
    limit = record["limit"]
    assert limit["bound"] == pytest.approx(500 / 142) and limit["achieved"] == pytest.approx(500 / 145)
    assert limit["fraction_of_bound"] == pytest.approx(142 / 145)
    checks = {c["check"]: (c["measured"], c["holds"]) for c in record["checks"]}
    assert checks["real-execution GRPO: execution >= 70% of its training wall-clock"] == ("80%", True)
    assert checks["real GRPO / full WMRL training wall-clock >= 3.0x"] == ("3.45x", True)
    assert checks["achieved >= 90% of the computed limit"][1]
    assert checks["full WMRL's held-out score within real GRPO's interval or above (difference, 95% interval)"][1]
    text = (results / "RESULTS-heavy.md").read_text()
    assert "## The paper's regime: checks" in text and "## G against its compute floor" in text
    import re  # the paired gain over the start (0.3 on every task), its interval around it

    assert re.search(r"\| Full WMRL \| \+0\.600 \[\+0\.5\d\d, \+0\.6\d\d\] \| \+0\.300 \[\+0\.2\d\d, \+0\.3\d\d\] \|", text)
    assert "| Real-execution GRPO | 150 | 10000 | 30.0 | 20.0 | 1.5 | 5000 | 70.0 | 20.0 | 3.5 |" in text
    assert not (results / "RESULTS.md").exists() and not (results / "RESULTS-learn.md").exists()


def test_g_floor_measures_the_preset_step_under_the_quickstarts_batching_and_its_own(tmp_path, monkeypatch):
    """benchmarks/g_floor.py's two settings instantiate: one step of the pure-world-model arm (nothing executed),
    no held-out evaluation, the quickstart's batching before and the preset's after."""
    spec_ = importlib.util.spec_from_file_location("g_floor", ROOT / "benchmarks" / "g_floor.py")
    g_floor = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(g_floor)
    preset = speedup.PRESETS["cpu-heavy"]
    monkeypatch.chdir(tmp_path)
    for model, expected in ((g_floor.BEFORE, (4, 8)), ({}, (8, 20))):
        config = tmp_path / "g.yaml"
        config.write_text(yaml.safe_dump(g_floor.floor_config(preset, model, tmp_path / "run")))
        cli = lightning_cli(["-c", str(ROOT / preset.base), "-c", str(config)], run=False)
        assert (cli.model.hparams.micro_batch_size, cli.model.engine.max_batch_size) == expected
        assert cli.trainer.max_steps == 1 and cli.trainer.limit_val_batches == 0
        assert cli.model.environments["real"].starter_solution == "heavy_boosting"


def test_seeds_pool_the_pairs_and_report_each_seed_and_the_interval_over_seeds(tmp_path):
    """``--seeds 0 1 2``: each seed's arms under ``seed<k>/``; pairs are (seed, task, sample); full WMRL's
    differences to the equal-budget arm and to the pure world model carry each seed's interval, the seeds' t
    interval and how many seeds were at or above 0, and the check reads them."""
    start = {"a": [0.3] * 4, "b": [0.3] * 4}
    out = tmp_path / "cpu-quality"
    shift = {0: 0.2, 1: 0.1, 2: -0.05}  # full WMRL above the equal-budget arm in two seeds of three
    for seed, delta in shift.items():
        root = out / f"seed{seed}"
        wmrl = {t: [0.5 + delta + 0.01 * i for i in range(4)] for t in start}
        fake_run(root, "wmrl", 200, {"time/generate": 60, "time/update": 40, "time/env": 50}, 3, wmrl, steps=3)
        fake_run(root, speedup.EQUAL_BUDGET, 100, {"time/generate": 20, "time/update": 15, "time/env": 50}, 3,
                 {t: [0.5 + 0.01 * i for i in range(4)] for t in start}, steps=3)
        fake_run(root, "pure_world_model", 150, {"time/generate": 60, "time/update": 40}, 0, start, steps=3)
        if seed:  # the start is evaluated once, in the first seed's first arm
            for arm in ("wmrl", speedup.EQUAL_BUDGET, "pure_world_model"):
                path = root / "runs" / arm / "heldout.jsonl"
                path.write_text(path.read_text().splitlines()[1] + "\n")
    results = tmp_path / "results"
    speedup.main(["--preset", "cpu-quality", "--arms", "wmrl", speedup.EQUAL_BUDGET, "pure_world_model",
                  "--seeds", "0", "1", "2", "--out", str(tmp_path), "--results", str(results), "--reuse"])
    record = json.loads((results / "results" / "cpu-quality.json").read_text())
    assert record["seeds"] == [0, 1, 2]
    diff = record["arms"]["wmrl"]["difference_to_equal_budget"]
    assert diff["point"] == pytest.approx(np.mean(list(shift.values())))
    assert {k: round(v["point"], 6) for k, v in diff["per_seed"].items()} == {"0": 0.2, "1": 0.1, "2": -0.05}
    assert diff["seeds_at_or_above_0"] == 2 and diff["over_seeds"]["low"] < 0 < diff["low"]
    versus_pure = record["arms"]["wmrl"]["difference_to_pure_world_model"]
    assert versus_pure["point"] == pytest.approx(0.2 + np.mean(list(shift.values())) + 0.015)
    assert record["arms"]["wmrl"]["gain_over_start"]["point"] > 0  # paired with the start, for every seed
    checks = {c["check"]: c["holds"] for c in record["checks"]}
    assert checks["Full WMRL minus Real GRPO at WMRL's executions: pooled point and low above 0, >= 0 in 2 of 3 seeds"]
    assert checks["Full WMRL minus Pure world model: pooled point and low above 0, >= 0 in 2 of 3 seeds"]


@pytest.mark.parametrize("arm", [*speedup.SUITE_ARMS, "wmrl_least_separated"])
def test_the_suite_quality_arms_train_on_every_tabular_task_with_the_task_aware_world_model(arm, tmp_path, monkeypatch):
    """The successor of cpu-quality on the suite at the paper's scale: every tabular train and held-out task (none
    chosen by results), the score view, and the task-aware world model pretrained on the world_model split."""
    from wmrl.autoresearch.tasks.catalog import TASKS
    from wmrl.autoresearch.world_models.task_aware import TaskAwareWorldModel
    from wmrl.callbacks import WorldModelReward

    preset = speedup.PRESETS["suite-quality"]
    cli = instantiate_arm(preset, arm, tmp_path, monkeypatch, eval_at_start=True)
    tabular = ("binary", "multiclass", "regression", "count")
    assert cli.datamodule.train_tasks == [t.id for t in TASKS if t.split == "train" and t.type in tabular]
    assert len(cli.datamodule.train_tasks) >= 40 and len(cli.datamodule.eval_task_ids) >= 10
    assert cli.model.environments["real"].starter_view == "score"
    assert cli.datamodule.steps_per_epoch == preset.eval_every == 2  # held-out after steps 2, 4 and 6
    assert cli.trainer.max_steps == 6 and cli.trainer.check_val_every_n_epoch == 1
    for c in cli.trainer.callbacks:
        if isinstance(c, WorldModelReward):
            assert isinstance(c.world_model, TaskAwareWorldModel) and Path(c.world_model.pretrained).is_file()


def test_a_task_whose_start_already_tops_the_leaderboard_is_reported_without_room():
    rows = speedup.per_task({"full": [1.0, 0.2, 0.4], "room": [0.5, 0.2, 0.4]},
                            {"full": [1.0, 0.6, 0.4], "room": [0.9, 0.2, 0.4]})
    assert rows["full"]["at_ceiling"] and rows["full"]["best_of_k_gain"]["point"] == 0.0
    assert not rows["room"]["at_ceiling"] and rows["room"]["best_of_k_gain"]["point"] == pytest.approx(0.4)


def test_the_suite_quality_page_names_the_task_aware_world_models_pretraining_cost(tmp_path):
    """suite-quality's world model (the task-aware one) is pretrained on the world_model split: the results page
    states that cost from its manifest (executions, execution-seconds, task cards, fit), as it does for the learned
    model's (which has other fields)."""
    start = {"a": [0.3] * 4, "b": [0.3] * 4}
    root = tmp_path / "suite-quality" / "seed1"
    better = {t: [0.5 + 0.01 * i for i in range(4)] for t in start}
    fake_run(root, "wmrl", 200, {"time/generate": 60, "time/update": 40, "time/env": 50}, 3, better, steps=3)
    fake_run(root, speedup.EQUAL_BUDGET, 100, {"time/generate": 20, "time/update": 15, "time/env": 50}, 3, start,
             steps=3)
    results = tmp_path / "results"
    speedup.main(["--preset", "suite-quality", "--arms", "wmrl", speedup.EQUAL_BUDGET, "--seeds", "1",
                  "--out", str(tmp_path), "--results", str(results), "--reuse"])
    manifest = json.loads((ROOT / f"{speedup.TASK_AWARE}.json").read_text())
    (page,) = results.glob("RESULTS-*.md")
    text = page.read_text()
    assert f"{manifest['executions']} real executions" in text and "world_model split" in text
    assert f"task cards {manifest['card_seconds']:.0f} s" in text


def test_a_preset_that_evaluates_along_the_run_compares_the_arms_there(tmp_path):
    """``eval_every``: arms that end on the same scripts tie at the end; the comparison pairs every evaluation after
    the start ((seed, task, evaluation step, sample)), the last evaluation's figure beside it, and the page shows the
    held-out score against the executions made by then."""
    start = {"a": [0.3] * 4, "b": [0.3] * 4}
    end = {t: [0.6 + 0.01 * i for i in range(4)] for t in start}
    out = tmp_path / "suite-quality"
    ahead = {0: 0.2, 1: 0.1, 2: -0.05}  # full WMRL ahead after step 2 in two seeds of three, level after step 4
    for seed, delta in ahead.items():
        root = out / f"seed{seed}"
        early = {t: [0.4 + delta + 0.01 * i for i in range(4)] for t in start}
        equal = {t: [0.4 + 0.01 * i for i in range(4)] for t in start}
        fake_run(root, "wmrl", 200, {"time/generate": 60, "time/update": 40, "time/env": 50}, 4, end, steps=6,
                 along={2: early, 4: end})
        fake_run(root, speedup.EQUAL_BUDGET, 100, {"time/generate": 20, "time/update": 15, "time/env": 50}, 4,
                 end, steps=6, along={2: equal, 4: end})
        if seed:
            for arm in ("wmrl", speedup.EQUAL_BUDGET):
                path = root / "runs" / arm / "heldout.jsonl"
                path.write_text("\n".join(path.read_text().splitlines()[1:]) + "\n")
    results = tmp_path / "results"
    speedup.main(["--preset", "suite-quality", "--arms", "wmrl", speedup.EQUAL_BUDGET, "--seeds", "0", "1", "2",
                  "--out", str(tmp_path), "--results", str(results), "--reuse"])
    record = json.loads((results / "results" / "suite-quality.json").read_text())
    wmrl = record["arms"]["wmrl"]
    diff, final = wmrl["difference_to_equal_budget"], wmrl["difference_to_equal_budget_final"]
    assert diff["measure"] == "along" and final["measure"] == "final"
    assert final["point"] == 0.0 and final["low"] == final["high"] == 0.0  # converged: a tie at the end
    assert diff["point"] == pytest.approx(np.mean(list(ahead.values())) / 3)  # one evaluation of three differs
    assert {k: round(v["point"], 6) for k, v in diff["per_seed"].items()} == {"0": round(0.2 / 3, 6),
                                                                             "1": round(0.1 / 3, 6),
                                                                             "2": round(-0.05 / 3, 6)}
    assert diff["seeds_at_or_above_0"] == 2
    along = wmrl["along_the_run"]
    assert list(along) == ["2", "4", "6"] and [p["executions"] for p in along.values()] == [8, 16, 24]
    assert along["2"]["held_out"]["point"] == pytest.approx(0.415 + np.mean(list(ahead.values())))
    text = (results / "RESULTS-suite-quality.md").read_text()
    assert "## Held-out along the run" in text and "| after step 2 | after step 4 | after step 6 |" in text
    checks = {c["check"]: c["holds"] for c in record["checks"]}
    assert ("Full WMRL minus Real GRPO at WMRL's executions (along the run): pooled point and low above 0, >= 0 in "
            "2 of 3 seeds") in checks
