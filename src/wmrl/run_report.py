"""`wmrl report RUN_DIR`: PNG figures and an HTML page for one training run.

Reads what a run writes: the CSV logger's training logs (every ``csv/version_*/metrics.csv`` under the run dir that
a training step wrote, a resumed run's joined; ``validate`` and ``test`` logs left out) and ``calibration.jsonl`` (one line per refit of ``OnlineDebiasing``). Writes into
``RUN_DIR/report/`` (or ``--out``):

- ``reward_wallclock.png``: reward against cumulative training wall-clock (``time/step``): real (anchor) rewards,
  raw and calibrated world-model rewards, held-out score;
- ``calibration.png``: the calibration map at up to four refits, over the anchor pairs it was fitted on (small
  dots: recent pairs; circles: bin means, sized by count);
- ``denoising.png``: the inverse-variance weight and the disagreement s^2 per step;
- ``time_split.png``: per step, generation / execution / world model / update seconds (stacked);
- ``anchors.png``: anchor fraction and real executions per step;
- ``index.html``: the figures and a summary table (steps, wall-clock, executions, held-out scores).

A figure whose metrics the run did not log (a real-execution run has no world model) says so instead of
being drawn empty. Needs matplotlib (a dependency of wmrl).
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

FIGURES = {
    "reward_wallclock.png": "Reward vs wall-clock",
    "calibration.png": "Calibration map over its anchor pairs",
    "denoising.png": "Inverse-variance weight",
    "time_split.png": "Time split per step",
    "anchors.png": "Anchors and real executions",
}
TIME_PARTS = [("time/generate", "generate"), ("time/env", "execute (real)"),
              ("time/world_model", "world model"), ("time/update", "update")]


@dataclass
class Run:
    """What ``wmrl report`` reads from a run dir."""

    root: Path
    steps: pd.DataFrame  # one row per training step (train metrics), indexed by step: 1 is the first step
    evals: pd.DataFrame  # held-out evaluations (heldout/*), by the number of steps before them (0: the start)
    snapshots: list[dict] = field(default_factory=list)
    sources: list[Path] = field(default_factory=list)  # the metrics.csv files read, oldest first


_NOT_TRAINING = ("heldout", "test", "val", "epoch")


def _training_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of a Lightning CSV log that a training step wrote (``wmrl validate``/``test`` write none)."""
    columns = [c for c in frame.columns if c != "step" and not c.startswith(_NOT_TRAINING)]
    return frame.dropna(how="all", subset=columns) if columns else frame.iloc[0:0]


def _logs(run_dir: Path) -> list[Path]:
    """Every CSV-logger ``metrics.csv`` of the run, oldest first (``csv/version_*``, else any below the run dir)."""
    found = sorted(run_dir.glob("csv/version_*/metrics.csv"), key=lambda p: int(p.parent.name.split("_")[-1]))
    if not found:
        found = sorted(run_dir.rglob("metrics.csv"), key=lambda p: p.stat().st_mtime)
    if not found:
        raise FileNotFoundError(
            f"no metrics.csv under {run_dir}: point wmrl report at a run dir (trainer.default_root_dir) of a run "
            "logged with lightning.pytorch.loggers.CSVLogger (the shipped configs do)"
        )
    return found


def training_logs(run_dir: Path) -> list[Path]:
    """The run's training logs, oldest first: each ``metrics.csv`` with rows a training step wrote. A fit and its
    resumes each write one (Lightning's CSV logger starts a new ``version_<n>``); ``wmrl validate`` and ``wmrl test``
    in the same run dir write logs without training rows, which are left out. A run dir with no training log at
    all gives its newest log."""
    logs = _logs(run_dir)
    training = [p for p in logs if "step" in (frame := pd.read_csv(p)) and len(_training_rows(frame))]
    return training or logs[-1:]


def find_metrics(run_dir: Path) -> Path:
    """The run's newest training log (:func:`training_logs`)."""
    return training_logs(run_dir)[-1]


def load_run(run_dir: str | Path) -> Run:
    """The run's training logs joined (a resumed step's last value wins), its held-out evaluations and refits.

    Lightning logs a training step's metrics, and a held-out evaluation after a step, at the ``global_step`` before
    that step (0 for the first); the start's evaluation is logged at 0. The steps here are numbered as the fit
    prints them (``step 1/3`` is step 1; an evaluation "at step 3" is the one after the third step, 0 the start)."""
    root = Path(run_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"run dir {root} does not exist (pass the run's trainer.default_root_dir)")
    sources = training_logs(root)
    frames = []
    for path in sources:
        frame = pd.read_csv(path)
        if "step" not in frame:
            raise ValueError(f"{path} has no 'step' column: not a Lightning CSVLogger file")
        frames.append(frame)
    frame = pd.concat(frames, ignore_index=True, sort=False)
    train_cols = [c for c in frame.columns if not c.startswith(_NOT_TRAINING)]
    steps = _training_rows(frame)[train_cols]
    steps = steps.groupby("step").last().sort_index()  # resumed runs may repeat a step: the last value wins
    steps.index = steps.index.astype(int) + 1
    eval_cols = [c for c in frame.columns if c.startswith("heldout/")]
    evals = frame.dropna(how="all", subset=eval_cols) if eval_cols else pd.DataFrame()
    if len(evals):
        # Lightning's own logging (an evaluation after a step; it adds "epoch") stamps the step before; the start's
        # evaluation is logged by hand at 0, without "epoch"
        after = evals["epoch"].notna() if "epoch" in evals else pd.Series(True, index=evals.index)
        evals = evals.assign(step=evals["step"].astype(int) + after.astype(int))[["step", *eval_cols]]
        evals = evals.groupby("step").last().sort_index()
    snapshots = []
    snapshot_file = root / "calibration.jsonl"
    if snapshot_file.exists():
        snapshots = [json.loads(line) for line in snapshot_file.read_text().splitlines() if line.strip()]
    return Run(root, steps, evals, snapshots, sources)


def _column(frame: pd.DataFrame, name: str) -> pd.Series | None:
    if name not in frame or frame[name].dropna().empty:
        return None
    return frame[name]


def _not_logged(ax, what: str) -> None:
    ax.text(0.5, 0.5, f"not logged in this run:\n{what}", ha="center", va="center", transform=ax.transAxes,
            color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


def _step_axis(ax) -> None:
    """Steps as the fit numbers them, on whole-number ticks."""
    from matplotlib.ticker import MaxNLocator

    ax.set_xlabel("step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _wallclock(steps: pd.DataFrame) -> pd.Series:
    """Cumulative minutes at the end of each step (``time/step``; the sum of the parts for older runs)."""
    per_step = _column(steps, "time/step")
    if per_step is None:
        parts = [steps[c] for c, _ in TIME_PARTS if c in steps]
        per_step = sum(p.fillna(0.0) for p in parts) if parts else pd.Series(0.0, index=steps.index)
    return per_step.fillna(0.0).cumsum() / 60.0


def plot_reward(run: Run, ax) -> None:
    steps = run.steps
    minutes = _wallclock(steps)
    drawn = False
    for name, label, style in (("reward/real_mean", "real (anchors)", "o-"),
                               ("reward/world_model_raw_mean", "world model, raw", "s--"),
                               ("reward/world_model_calibrated_mean", "world model, calibrated", "^-")):
        series = _column(steps, name)
        if series is not None:
            ax.plot(minutes[series.notna()], series.dropna(), style, label=label, markersize=4)
            drawn = True
    if len(run.evals) and "heldout/score" in run.evals:
        at = [float(minutes[minutes.index <= s].iloc[-1]) if (minutes.index <= s).any() else 0.0
              for s in run.evals.index]
        ax.plot(at, run.evals["heldout/score"], "D", color="black", label="held-out score (real)")
        drawn = True
    if not drawn:
        _not_logged(ax, "reward/real_mean, reward/world_model_*_mean")
        return
    ax.set_xlabel("training wall-clock (min)")
    ax.set_ylabel("reward")
    ax.legend(fontsize=8)


def plot_calibration(run: Run, ax) -> None:
    if not run.snapshots:
        _not_logged(ax, "calibration.jsonl (OnlineDebiasing not in the run, or no refit yet)")
        return
    picks = run.snapshots
    if len(picks) > 4:
        picks = [picks[round(i * (len(picks) - 1) / 3)] for i in range(4)]
    grid = np.linspace(0.0, 1.0, 101)
    for snap in picks:
        xs, ys = snap["map"]["xs"], snap["map"]["ys"]
        curve = np.interp(grid, xs, ys) if xs else grid  # the map as applied: flat beyond its end knots
        line, = ax.plot(grid, curve, label=f"step {snap['step']} ({snap['pairs']} pairs, rho {snap['rank_corr']:.2f})")
        bins, recent = snap["bins"], snap.get("recent_pairs", {"wm": [], "real": []})
        ax.scatter(recent["wm"], recent["real"], s=5, color=line.get_color(), alpha=0.25)  # the pairs themselves
        sizes = [10 + 90 * c / max(bins["count"]) for c in bins["count"]]
        ax.scatter(bins["wm"], bins["real"], s=sizes, color=line.get_color(), alpha=0.6, edgecolors="black")
    ax.plot([0, 1], [0, 1], ":", color="0.5", label="identity")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("world-model reward (raw)")
    ax.set_ylabel("real reward (bin mean) / calibrated")
    ax.legend(fontsize=7)


def plot_denoising(run: Run, ax) -> None:
    """The weight between the streams: the paper's anchor weight ``w`` or, with the kit's ``VarianceFusion``, the
    world-model rows' share of the update and their measured agreement."""
    weight = _column(run.steps, "denoise/weight")
    share = _column(run.steps, "fusion/wm_share")
    if weight is None and share is not None:
        ax.plot(share.index, share, "o-", label="world-model rows' share of the update")
        agreement = _column(run.steps, "fusion/agreement")
        if agreement is not None:
            ax.plot(agreement.index, agreement, "x:", color="tab:red", label="agreement with the anchors (rho)")
        ax.set_ylim(-0.05, 1.05)
        _step_axis(ax)
        ax.set_ylabel("share / rho")
        ax.legend(loc="upper left", fontsize=8)
        return
    if weight is None:
        _not_logged(ax, "denoise/weight or fusion/wm_share (neither InverseVarianceDenoising nor VarianceFusion in "
                        "the run)")
        return
    ax.plot(weight.index, weight, "o-", label="weight w on anchor advantages")
    ax.set_ylim(0.9, 4.1)
    _step_axis(ax)
    ax.set_ylabel("w")
    disagreement = _column(run.steps, "denoise/disagreement")
    if disagreement is not None:
        twin = ax.twinx()
        twin.plot(disagreement.index, disagreement, "x:", color="tab:red", label="disagreement s^2")
        twin.set_ylabel("s^2")
        twin.legend(loc="lower right", fontsize=8)
    ax.legend(loc="upper left", fontsize=8)


def plot_time_split(run: Run, ax) -> None:
    parts = [(c, label) for c, label in TIME_PARTS if _column(run.steps, c) is not None]
    if not parts:
        _not_logged(ax, "time/*")
        return
    bottom = pd.Series(0.0, index=run.steps.index)
    for column, label in parts:
        values = run.steps[column].fillna(0.0)
        ax.bar(run.steps.index, values, bottom=bottom, label=label)
        bottom = bottom + values
    _step_axis(ax)
    ax.set_ylabel("seconds")
    ax.legend(fontsize=8)


def plot_anchors(run: Run, ax) -> None:
    fraction = _column(run.steps, "anchor/fraction")
    executions = _column(run.steps, "anchor/executions")
    if fraction is None and executions is None:
        _not_logged(ax, "anchor/fraction, anchor/executions")
        return
    if fraction is not None:
        ax.plot(fraction.index, fraction, "o-", label="anchor fraction (groups)")
        ax.set_ylim(-0.05, 1.05)
    _step_axis(ax)
    ax.set_ylabel("fraction")
    if executions is not None:
        twin = ax.twinx()
        twin.bar(executions.index, executions, alpha=0.3, color="tab:green", label="real executions")
        twin.set_ylabel("executions")
        twin.legend(loc="lower right", fontsize=8)
    ax.legend(loc="upper left", fontsize=8)


PLOTS = {
    "reward_wallclock.png": plot_reward,
    "calibration.png": plot_calibration,
    "denoising.png": plot_denoising,
    "time_split.png": plot_time_split,
    "anchors.png": plot_anchors,
}


def summary(run: Run) -> list[tuple[str, str]]:
    steps = run.steps
    rows = [("training steps", str(len(steps))), ("wall-clock (min)", f"{float(_wallclock(steps).iloc[-1]):.1f}"
                                                   if len(steps) else "-")]
    executions = _column(steps, "anchor/executions")
    if executions is not None:
        rows.append(("real executions", f"{int(executions.sum())}"))
    for column, label in (("env/execution_seconds", "execution seconds"), ("env/seconds_saved", "seconds saved")):
        series = _column(steps, column)
        if series is not None:
            rows.append((label, f"{float(series.sum()):.0f}"))
    if len(run.evals) and "heldout/score" in run.evals:
        for step, score in run.evals["heldout/score"].items():
            rows.append((f"held-out score at step {int(step)}" if step else "held-out score at the start",
                         f"{float(score):.3f}"))
    if run.snapshots:
        last = run.snapshots[-1]
        rows.append(("calibration refits", str(len(run.snapshots))))
        if not math.isnan(last["rank_corr"]):
            rows.append(("anchor rank correlation (last refit)", f"{last['rank_corr']:.3f}"))
    rows.append(("logs read", ", ".join(str(p.relative_to(run.root)) for p in run.sources)))
    return rows


def write_report(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write the figures and ``index.html``; returns the page's path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run = load_run(run_dir)
    target = Path(out) if out else run.root / "report"
    target.mkdir(parents=True, exist_ok=True)
    for name, plot in PLOTS.items():
        fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=110)
        plot(run, ax)
        ax.set_title(FIGURES[name])
        fig.tight_layout()
        fig.savefig(target / name)
        plt.close(fig)
    table = "\n".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in summary(run))
    figures = "\n".join(
        f'<figure><img src="{name}" alt="{html.escape(title)}"><figcaption>{html.escape(title)}</figcaption></figure>'
        for name, title in FIGURES.items()
    )
    page = target / "index.html"
    page.write_text(f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>wmrl report: {html.escape(run.root.name)}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1400px}} table{{border-collapse:collapse}}
th,td{{border:1px solid #ccc;padding:4px 10px;text-align:left}} figure{{display:inline-block;margin:1em}}
img{{width:620px}}</style></head>
<body data-images="pending"><h1>wmrl report</h1><p>run: <code>{html.escape(str(run.root.resolve()))}</code></p>
<table>{table}</table>
{figures}
<script>
window.addEventListener("load", () => {{  // how many figures rendered (checked by the headless-browser test)
  const images = [...document.images];
  const ok = images.filter(img => img.complete && img.naturalWidth > 0).length;
  document.body.dataset.images = ok + "/" + images.length;
}});
</script>
</body></html>
""")
    return page
