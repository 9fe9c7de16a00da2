"""`wmrl report`: figures and an HTML page from a real (tiny) WMRL training run; the page renders in Chromium."""

from __future__ import annotations

import shutil
import subprocess

import lightning.pytorch as pl
import pandas as pd
import pytest
import torch
from PIL import Image
from test_wmrl_training import Steps, make, wmrl_callbacks

from wmrl.cli import main
from wmrl.run_report import FIGURES, load_run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("run")
    module, world_model = make()
    trainer = pl.Trainer(
        max_steps=4, accelerator="cpu", default_root_dir=root, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, log_every_n_steps=1,
        logger=pl.loggers.CSVLogger(root, name="csv"), callbacks=wmrl_callbacks(world_model),
    )
    trainer.fit(module, torch.utils.data.DataLoader(Steps(4), batch_size=None))
    return root


def test_a_run_writes_what_the_report_reads(run_dir):
    run = load_run(run_dir)
    assert list(run.steps.index) == [1, 2, 3, 4]  # as the fit numbers them
    for column in ("time/step", "time/generate", "time/update", "reward/real_mean", "anchor/fraction",
                   "denoise/weight", "debias/pairs"):
        assert run.steps[column].notna().all(), column
    assert (run.steps["time/step"] >= run.steps["time/update"]).all()
    refits = [s["refit"] for s in run.snapshots]
    assert refits == list(range(1, len(refits) + 1)) and refits  # one line per refit, in order
    first = run.snapshots[0]
    assert first["pairs"] >= 8 and len(first["map"]["xs"]) == len(first["map"]["ys"]) > 0
    assert sum(first["bins"]["count"]) == first["pairs"]


def test_report_writes_every_figure_and_the_page(run_dir, tmp_path, capsys):
    assert main(["report", str(run_dir), "--out", str(tmp_path)]) == 0
    assert "report written" in capsys.readouterr().err
    page = (tmp_path / "index.html").read_text()
    for name in FIGURES:
        image = Image.open(tmp_path / name)
        assert image.size[0] > 400 and len(set(image.convert("L").getdata())) > 20, name  # drawn, not blank
        assert f'src="{name}"' in page
    assert "real executions" in page and "calibration refits" in page


def test_a_run_without_world_model_still_reports(run_dir, tmp_path):
    real_only = tmp_path / "real_only"
    shutil.copytree(run_dir, real_only)
    (real_only / "calibration.jsonl").unlink()
    csv = next(real_only.glob("csv/version_*/metrics.csv"))
    frame = pd.read_csv(csv)
    frame.drop(columns=[c for c in frame.columns if c.startswith(("denoise/", "debias/", "reward/world"))]).to_csv(
        csv, index=False)
    assert main(["report", str(real_only)]) == 0
    assert (real_only / "report" / "calibration.png").exists()


def test_report_on_a_missing_run_names_the_fix(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty")]) == 2
    assert "CSVLogger" in capsys.readouterr().err


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(_chromium() is None, reason="no chromium browser (apt-get install chromium)")
def test_the_page_renders_in_headless_chromium(run_dir, tmp_path):
    main(["report", str(run_dir), "--out", str(tmp_path)])
    page = (tmp_path / "index.html").as_uri()
    flags = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--allow-file-access-from-files",
             "--virtual-time-budget=10000"]
    dom = subprocess.run([*flags, "--dump-dom", page], capture_output=True, text=True, timeout=120).stdout
    assert f'data-images="{len(FIGURES)}/{len(FIGURES)}"' in dom  # every figure loaded (naturalWidth > 0)
    shot = tmp_path / "screenshot.png"
    subprocess.run([*flags, f"--screenshot={shot}", "--window-size=1400,2000", page], capture_output=True,
                   timeout=120, check=True)
    image = Image.open(shot).convert("RGB")
    assert image.size == (1400, 2000)
    assert len(set(image.resize((140, 200)).getdata())) > 50  # figures on the page, not a blank screen


def test_a_run_with_the_kits_fusion_draws_its_share(tmp_path):
    """With VarianceFusion in place of InverseVarianceDenoising the weight panel draws the world-model rows' share
    and the measured agreement (it said "not logged" before)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from wmrl.run_report import Run, plot_denoising

    steps = pd.DataFrame({"fusion/wm_share": [0.0, 0.4, 0.8], "fusion/agreement": [0.2, 0.9, 0.95]}, index=[1, 2, 3])
    run = Run(root=tmp_path, steps=steps, evals=pd.DataFrame())
    figure, ax = plt.subplots()
    plot_denoising(run, ax)
    assert [line.get_label() for line in ax.get_lines()] == ["world-model rows' share of the update",
                                                            "agreement with the anchors (rho)"]
    assert list(ax.get_lines()[0].get_ydata()) == [0.0, 0.4, 0.8]
    plt.close(figure)
