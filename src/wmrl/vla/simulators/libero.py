"""`LiberoSimulator`: the paper's VLA benchmark (LIBERO) as the real environment, for GPU machines; a stub for now.

The paper post-trains on LIBERO-Long (``libero_10``: 10 long-horizon tasks, 50 initial states each) with the
simulator's sparse success as the anchor. LeRobot 0.6.1 wraps LIBERO in ``lerobot.envs.libero`` (the
``lerobot[libero]`` extra: ``hf-libero``, MuJoCo/robosuite, Linux only, plus LIBERO's assets and initial-state
files). None of that is on the CPU machines wmrl is tested on, so this class checks for LIBERO at first use and
names the fix; with LIBERO installed it stops with ``NotImplementedError`` naming what is not wired yet (LIBERO's
image and proprioceptive observations, its 7-D actions, and demonstrations from the LIBERO datasets instead of the
scripted PushT pusher; docs/vla.md, "What is not done"). Constructing it never imports LIBERO, so
``configs/vla/libero_gpu.yaml`` instantiates anywhere.
"""

from __future__ import annotations

import importlib.util

from wmrl.types import Source
from wmrl.vla.requirements import require_lerobot

LIBERO_SUITES = ("libero_spatial", "libero_object", "libero_goal", "libero_10", "libero_90")
LIBERO_HINT = (
    "install LIBERO into the Python 3.12 VLA environment on a Linux GPU machine: "
    ".venv312/bin/pip install -c constraints-vla.txt 'lerobot[libero]==0.6.1' (it brings hf-libero and "
    "robosuite/MuJoCo); LIBERO's assets must be present locally (wmrl never downloads them)"
)


def require_libero(what: str = "LiberoSimulator") -> None:
    """Raise :class:`~wmrl.vla.requirements.MissingVLADependency` naming ``hf-libero`` unless LIBERO imports."""
    from wmrl.vla.requirements import MissingVLADependency

    require_lerobot(what)
    if importlib.util.find_spec("libero") is None:
        raise MissingVLADependency(
            f"{what} needs LIBERO (the PyPI package hf-libero, module 'libero'), which is not installed. Fix: "
            f"{LIBERO_HINT}. On CPU use configs/vla/pusht_quickstart.yaml (PushT)."
        )


class LiberoSimulator:
    """LIBERO as the real environment (sparse success); checks for LIBERO at first use (see the module docstring).

    Args:
        suite: the LIBERO task suite (paper: ``libero_10``, LIBERO-Long).
        max_episode_steps: control steps per episode (LeRobot's LIBERO default for libero_10: 520).
        success_threshold: LIBERO's success is binary; kept for the data module's simulator check (1.0).
    """

    source = Source.REAL

    def __init__(self, suite: str = "libero_10", max_episode_steps: int = 520, success_threshold: float = 1.0) -> None:
        key, problems = "model.init_args.simulator.init_args.", []
        if suite not in LIBERO_SUITES:
            problems.append(f"{key}suite must be one of {', '.join(LIBERO_SUITES)} (got {suite!r})")
        if max_episode_steps < 1:
            problems.append(f"{key}max_episode_steps must be >= 1 (got {max_episode_steps})")
        if problems:
            raise ValueError("invalid LiberoSimulator configuration:\n  - " + "\n  - ".join(problems))
        self.suite, self.max_episode_steps, self.success_threshold = suite, max_episode_steps, success_threshold
        self.initial_states, self.max_offset, self.max_angle = suite, None, None  # the data module's recipe fields

    def play(self, seeds, controller, n_action_steps: int = 1, frames=None, max_steps=None):
        require_libero(f"LiberoSimulator ({self.suite})")
        raise NotImplementedError(
            "LIBERO is installed, but its rollouts are not wired into the VLA GRPO module yet (image and "
            "proprioceptive observations, 7-D actions, demonstrations from the LIBERO datasets instead of the scripted "
            "PushT pusher); docs/vla.md, 'What is not done'. model.init_args.simulator: use "
            "wmrl.vla.simulators.pusht.PushTSimulator meanwhile"
        )

    def grade(self, episodes):
        require_libero(f"LiberoSimulator ({self.suite})")
        raise NotImplementedError("LiberoSimulator.grade: LIBERO rollouts are not wired yet (docs/vla.md)")

    def close(self) -> None:
        pass
