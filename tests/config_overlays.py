"""Which configs an overlay goes on, read from its own first line: ``# overlay on: a.yaml + b.yaml`` (paths from the
repository root, in the order they come before it on the command line). A config without that line is a base."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OVERLAY_LINE = "# overlay on: "


def declared_bases(config: Path) -> list[str]:
    """The configs ``config`` goes on, in order; [] for a base."""
    first = config.read_text().partition("\n")[0]
    return [b.strip() for b in first.removeprefix(OVERLAY_LINE).split(" + ")] if first.startswith(OVERLAY_LINE) else []


def composed(config: Path) -> list[str]:
    """``-c`` arguments for a config as a user runs it: its declared bases, then itself."""
    return [a for c in [*(ROOT / b for b in declared_bases(config)), config] for a in ("-c", str(c))]
