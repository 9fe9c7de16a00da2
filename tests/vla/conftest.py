"""tests/vla run in the Python 3.12 LeRobot environment (.venv312, created by .ci/run); elsewhere they skip.

From the 3.11 suite, tests/project/test_vla_env.py runs this directory through ``.venv312/bin/python -m pytest``.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

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


@pytest.fixture
def fit_shortened():
    """Runs a shipped VLA quickstart the way a user does, shortened: see :func:`_fit_shortened`."""
    return _fit_shortened


def _fit_shortened(configs: list[str], run_dir: Path, demonstrations: int, heldout_states: int,
                   sft_steps: int) -> str:
    """``wmrl fit -c <config> [-c <overlay>]`` cut to 2 steps (fewer demonstrations, SFT steps and held-out states)
    in a fresh process; fails with the end of its output unless it exits 0, else returns that output.

    The SFT steps are an element of ``trainer.callbacks`` (``BehaviourCloningWarmStart``), which a command-line
    flag cannot address, so the run reads a copy of the last config that lists the callbacks, with that one value
    changed."""
    import yaml

    paths = [ROOT / c for c in configs]
    last = max(i for i, path in enumerate(paths) if "callbacks" in yaml.safe_load(path.read_text())["trainer"])
    settings = yaml.safe_load(paths[last].read_text())
    callbacks = settings["trainer"]["callbacks"]
    (warm_start,) = [c for c in callbacks if c["class_path"] == "wmrl.vla.warm_start.BehaviourCloningWarmStart"]
    warm_start["init_args"]["steps"] = sft_steps
    paths[last] = run_dir.parent / f"shortened_{paths[last].name}"
    paths[last].write_text(yaml.safe_dump(settings, sort_keys=False))
    command = [
        sys.executable, "-m", "wmrl.cli", "fit", *(a for path in paths for a in ("-c", str(path))),
        f"--trainer.default_root_dir={run_dir}", "--trainer.max_steps=2", "--data.init_args.steps_per_epoch=2",
        f"--data.init_args.demonstrations={demonstrations}", f"--data.init_args.heldout_states={heldout_states}",
    ]
    run = subprocess.run(command, cwd=run_dir.parent, capture_output=True, text=True, timeout=600)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-4000:]
    assert "start: success" in output and "step 2: success" in output
    return output
