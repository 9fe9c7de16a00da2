"""tests/vla run in the Python 3.12 LeRobot environment (.venv312, created by .ci/run); elsewhere they skip.

From the 3.11 suite, tests/test_vla_env.py runs this directory through ``.venv312/bin/python -m pytest``.
"""

from __future__ import annotations

import importlib.util
import sys

import pytest

MISSING = None
if sys.version_info < (3, 12):
    MISSING = f"needs Python >= 3.12 (this is {sys.version.split()[0]}): run in .venv312 (.ci/run creates it)"
elif importlib.util.find_spec("lerobot") is None or importlib.util.find_spec("gym_pusht") is None:
    MISSING = "needs LeRobot with gym-pusht: pip install 'wmrl[lerobot]' (see docs/vla.md)"


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "tests/vla/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.lerobot)
            if MISSING:
                item.add_marker(pytest.mark.skip(reason=MISSING))


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    """Tiny models on a shared 2-core machine: one thread is ~10x faster than torch's default (measured)."""
    import torch

    torch.set_num_threads(1)
