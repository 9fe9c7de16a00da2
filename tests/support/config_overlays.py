"""Which configs an overlay goes on, read from its own first line: ``# overlay on: a.yaml + b.yaml`` (paths from the
repository root, in the order they come before it on the command line). A config without that line is a base."""

from __future__ import annotations

from pathlib import Path

from wmrl.cli.config_files import OVERLAY_LINE, declared_bases

__all__ = ["ABLATIONS", "FULL", "KIT", "OVERLAY_LINE", "composed", "declared_bases"]

ROOT = Path(__file__).resolve().parents[2]


def composed(config: Path) -> list[str]:
    """``-c`` arguments for a config as a user runs it: its declared bases, then itself."""
    return [a for c in [*(ROOT / b for b in declared_bases(config)), config] for a in ("-c", str(c))]


# The ablations of the paper, by configuration alone: which WMRL callbacks each config turns on. FULL is the paper's
# method; KIT the kit's corrections (the strict map and VarianceFusion), which the CPU and VLA `wmrl` overlays use.
FULL = ["AnchorRouting", "WorldModelReward", "OnlineDebiasing", "InverseVarianceDenoising"]
KIT = ["AnchorRouting", "WorldModelReward", "OnlineDebiasing", "VarianceFusion"]
ABLATIONS = {
    "real_grpo": [],
    "pure_world_model": ["AnchorRouting", "WorldModelReward"],
    "uncorrected": ["AnchorRouting", "WorldModelReward"],
    "debias_only": ["AnchorRouting", "WorldModelReward", "OnlineDebiasing"],
    "denoise_only": ["AnchorRouting", "WorldModelReward", "InverseVarianceDenoising"],
    "wmrl": KIT,
    "wmrl_paper": FULL,
    "real_grpo_equal_budget": [],  # real GRPO on as many groups a step as full WMRL executes
    "wmrl_least_separated": KIT,  # benchmarks/speedup.py's variant of wmrl (its anchors placed), no YAML of its own
}
