"""Which configs an overlay goes on, read from its own first line: ``# overlay on: a.yaml + b.yaml`` (paths from the
repository root, in the order they come before it on the command line). A config without that line is a base."""

from __future__ import annotations

from pathlib import Path

from wmrl.cli.config_files import OVERLAY_LINE, declared_bases

__all__ = ["OVERLAY_LINE", "composed", "declared_bases"]

ROOT = Path(__file__).resolve().parents[1]


def composed(config: Path) -> list[str]:
    """``-c`` arguments for a config as a user runs it: its declared bases, then itself."""
    return [a for c in [*(ROOT / b for b in declared_bases(config)), config] for a in ("-c", str(c))]
