"""Whether this host can run the process sandbox with bubblewrap: a module of its own (not ``conftest``) so that a
test may import it at any time (``tests/vllm_real`` has a ``conftest`` of its own, and the name is taken by
whichever was collected last)."""

from __future__ import annotations


def bwrap_missing() -> str | None:
    """Why bubblewrap cannot run here, or None when it can."""
    from wmrl.autoresearch.environments.sandbox.process import _probe

    return _probe("bwrap")
