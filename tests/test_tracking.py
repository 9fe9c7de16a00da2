"""Tracking a run in MLflow: `wmrl fit` with configs/loggers/mlflow.yaml writes the kit's metrics and the run's
config to a real local MLflow store (SQLite), read back here with MLflow's own client, and keeps its CSV logger
beside it (what `wmrl report` reads)."""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import pytest

from wmrl.cli import main

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = str(ROOT / "configs" / "autoresearch" / "quickstart.yaml")
MLFLOW = str(ROOT / "configs" / "loggers" / "mlflow.yaml")
FAST = str(ROOT / "configs" / "debug" / "fast.yaml")

needs_mlflow = pytest.mark.skipif(
    importlib.util.find_spec("mlflow") is None or importlib.util.find_spec("sqlalchemy") is None,
    reason="no mlflow package (the mlflow extra: pip install -c constraints.txt -e '.[mlflow]')")


@needs_mlflow
def test_a_fit_tracked_in_mlflow_is_read_back_with_the_kits_metrics_and_config(tmp_path, monkeypatch,
                                                                               tiny_model_dir, capsys):
    from mlflow.tracking import MlflowClient

    monkeypatch.chdir(tmp_path)  # the overlay's store is sqlite:///mlflow.db, in the working directory
    run_dir = tmp_path / "run"
    code = main(["fit", "-c", QUICKSTART, "-c", MLFLOW, "-c", FAST, "--model.init_args.model", str(tiny_model_dir),
                 "--trainer.max_steps", "2", "--trainer.enable_progress_bar", "false",
                 "--trainer.default_root_dir", str(run_dir)])
    assert code == 0
    assert (tmp_path / "mlflow.db").is_file()

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("wmrl")
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.status == "FINISHED"
    (metrics_csv,) = run_dir.glob("csv/version_0/metrics.csv")  # the CSV logger beside it, first: the config's folder
    assert (metrics_csv.parent / "config.yaml").is_file() and not (run_dir / "tensorboard").exists()
    with open(metrics_csv) as f:
        logged = {key for row in csv.DictReader(f) for key, value in row.items() if value not in ("", None)}
    logged -= {"step", "epoch"}
    tracked = set(run.data.metrics)
    assert logged <= tracked, f"metrics in the CSV log that MLflow lacks: {sorted(logged - tracked)}"
    assert {"time/generate", "rollout/response_tokens", "heldout/score"} <= tracked
    steps = [m.step for m in client.get_metric_history(run.info.run_id, "time/generate")]
    assert steps == [0, 1]  # one value per training step, at its step
    params = run.data.params  # the module's settings, as the checkpoint holds them
    assert params["max_new_tokens"] == "160" and params["model"] == str(tiny_model_dir) and params["lora/r"] == "16"


def test_the_mlflow_overlay_keeps_the_kits_csv_logger_first_and_a_named_csv_logger_alone(tmp_path):
    from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger

    from wmrl.cli.trainer import with_csv_logger

    tensorboard = TensorBoardLogger(save_dir=str(tmp_path))
    loggers = with_csv_logger(tensorboard, str(tmp_path))
    assert [type(one) for one in loggers] == [CSVLogger, TensorBoardLogger]
    assert loggers[0].log_dir == str(tmp_path / "csv" / "version_0")
    own = CSVLogger(save_dir=str(tmp_path), name="mine")
    assert with_csv_logger([own, tensorboard], str(tmp_path)) == [own, tensorboard]
