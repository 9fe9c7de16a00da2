"""Tracking a run in MLflow and W&B: `wmrl fit` with configs/loggers/mlflow.yaml writes the kit's metrics and the
run's config to a real local MLflow store (SQLite), read back here with MLflow's own client; with
configs/loggers/wandb.yaml, to a real offline W&B run, read back from its files. Both keep the CSV logger beside them
(what `wmrl report` reads)."""

from __future__ import annotations

import csv
import importlib.util
import json
import struct
from pathlib import Path

import pytest

from wmrl.cli import main

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = str(ROOT / "configs" / "autoresearch" / "quickstart.yaml")
MLFLOW = str(ROOT / "configs" / "loggers" / "mlflow.yaml")
WANDB = str(ROOT / "configs" / "loggers" / "wandb.yaml")
FAST = str(ROOT / "configs" / "debug" / "fast.yaml")

needs_mlflow = pytest.mark.skipif(
    importlib.util.find_spec("mlflow") is None or importlib.util.find_spec("sqlalchemy") is None,
    reason="no mlflow package (the mlflow extra: pip install -c constraints.txt -e '.[mlflow]')")
needs_wandb = pytest.mark.skipif(importlib.util.find_spec("wandb") is None,
                                 reason="no wandb package (the wandb extra: pip install -c constraints.txt -e '.[wandb]')")


def csv_metrics(run_dir: Path) -> tuple[Path, list[dict]]:
    """The CSV logger's ``metrics.csv`` under the run dir (the first logger: the config's folder) and its rows."""
    (metrics_csv,) = run_dir.glob("csv/version_0/metrics.csv")
    with open(metrics_csv) as f:
        return metrics_csv, list(csv.DictReader(f))


def logged_keys(rows: list[dict]) -> set[str]:
    return {key for row in rows for key, value in row.items() if value not in ("", None)} - {"step", "epoch"}


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
    metrics_csv, rows = csv_metrics(run_dir)  # the CSV logger beside it, first: the config's folder
    assert (metrics_csv.parent / "config.yaml").is_file() and not (run_dir / "tensorboard").exists()
    logged = logged_keys(rows)
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


def wandb_records(path: Path) -> list:
    """The records of an offline W&B run's transaction log (``run-<id>.wandb``), as wandb's ``Record`` protos.

    wandb 0.31 has no Python reader of its own (its core writes the log), so this reads the framing, LevelDB's log
    format as wandb writes it: a 7-byte file header (``:W&B``, magic ``0xBEE1``, version 0), then 32 KiB blocks of
    chunks, each with a 7-byte header (CRC-32C, length, type: 1 full record, 2/3/4 first/middle/last piece)."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:7] == b":W&B\xe1\xbe\x00", f"{path} is not a W&B transaction log (version 0)"
    block, at, pieces, records = 32768, 7, b"", []
    while at + 7 <= len(data):
        if block - at % block < 7:  # a block's tail too short for a header is padding
            at += block - at % block
            continue
        length, kind = struct.unpack("<HB", data[at + 4 : at + 7])
        chunk, at = data[at + 7 : at + 7 + length], at + 7 + length
        pieces = chunk if kind in (1, 2) else pieces + chunk
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pieces)
            records.append(record)
    return records


@needs_wandb
def test_a_fit_tracked_in_wandb_offline_is_read_back_with_the_kits_metrics_and_config(tmp_path, monkeypatch,
                                                                                     tiny_model_dir):
    monkeypatch.chdir(tmp_path)  # the overlay writes ./wandb/offline-run-*/
    for key in ("WANDB_API_KEY", "WANDB_MODE", "WANDB_DIR", "WANDB_PROJECT", "WANDB_RUN_ID"):
        monkeypatch.delenv(key, raising=False)
    run_dir = tmp_path / "run"
    code = main(["fit", "-c", QUICKSTART, "-c", WANDB, "-c", FAST, "--model.init_args.model", str(tiny_model_dir),
                 "--trainer.max_steps", "2", "--trainer.enable_progress_bar", "false",
                 "--trainer.default_root_dir", str(run_dir)])
    assert code == 0
    (offline,) = tmp_path.glob("wandb/offline-run-*")
    (log,) = offline.glob("run-*.wandb")
    records = wandb_records(log)
    history = [{"/".join(item.nested_key) or item.key: json.loads(item.value_json) for item in record.history.item}
               for record in records if record.WhichOneof("record_type") == "history"]
    tracked = {key for row in history for key in row}

    _, rows = csv_metrics(run_dir)
    logged = logged_keys(rows)
    assert logged <= tracked, f"metrics in the CSV log that W&B lacks: {sorted(logged - tracked)}"
    generate = [(row["trainer/global_step"], row["time/generate"]) for row in history if "time/generate" in row]
    assert [step for step, _ in generate] == [0, 1]  # one value per training step, at its step
    assert [value for _, value in generate] == pytest.approx(
        [float(row["time/generate"]) for row in rows if row.get("time/generate")])
    (config,) = [record.config for record in records if record.WhichOneof("record_type") == "config"]
    settings = {item.key: json.loads(item.value_json) for item in config.update}  # the module's settings
    assert settings["max_new_tokens"] == 160 and settings["model"] == str(tiny_model_dir)

    # the command finished its run (complete on disk when main returns): the next command starts a run of its own
    again = ["--trainer.max_steps", "1", "--trainer.default_root_dir", str(tmp_path / "again")]
    assert main(["fit", "-c", QUICKSTART, "-c", WANDB, "-c", FAST, "--model.init_args.model", str(tiny_model_dir),
                 "--trainer.enable_progress_bar", "false", *again]) == 0
    assert len(list(tmp_path.glob("wandb/offline-run-*"))) == 2 and wandb_records(log) == records
