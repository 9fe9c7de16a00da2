"""Where wmrl keeps what it builds: one cache root, chosen by the environment.

Built tasks (``tasks/``), converted models and tokenizers (``models/``, ``tokenizers/``), the execution log and
the sandbox's runtime views all live under this root. It sits at the bottom of the package (stdlib only) so
that any part can find the cache without importing the part that fills it.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir", "default_cache_dir"]


def default_cache_dir() -> Path:
    """``$WMRL_CACHE``, else ``$XDG_CACHE_HOME/wmrl``, else ``~/.cache/wmrl``."""
    if os.environ.get("WMRL_CACHE"):
        return Path(os.environ["WMRL_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "wmrl"


def cache_dir(override: str | Path | None = None) -> Path:
    """The cache root a caller should use: ``override`` (a ``cache_dir`` argument) if given, else the default.

    >>> cache_dir("~/runs") == Path.home() / "runs"
    True
    """
    return Path(override).expanduser() if override is not None else default_cache_dir()
