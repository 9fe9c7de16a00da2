"""The VLA path's dependency check: Python >= 3.12 and LeRobot (the ``wmrl[lerobot]`` extra).

LeRobot 0.6.1 needs Python >= 3.12 and torch < 2.12, while wmrl's core pins torch 2.13 (docs/vla.md),
so the VLA path lives in its own Python 3.12 environment (``.venv312``, see docs/vla.md). Everything under
``wmrl.vla`` imports LeRobot only inside the functions that need it and calls :func:`require_lerobot` first, so
the error a user meets names the extra and the Python requirement instead of a bare ``ModuleNotFoundError``.
"""

from __future__ import annotations

import sys

LEROBOT_VERSION = "0.6.1"
INSTALL_HINT = (
    "create a Python 3.12 environment and install wmrl's VLA path into it: `python3.12 -m venv .venv312 && "
    ".venv312/bin/pip install -c constraints-vla.txt 'lerobot[pusht,smolvla]==0.6.1' lightning==2.6.6 "
    "'jsonargparse[signatures]==4.53.0' omegaconf==2.4.0 torchmetrics==1.9.0 scikit-learn==1.9.1 rich tensorboard "
    "&& .venv312/bin/pip install --no-deps -e .` (what .ci/run does; docs/vla.md). `pip install 'wmrl[lerobot]'` "
    "installs LeRobot only on Python >= 3.12, and LeRobot 0.6.1 needs torch < 2.12 while wmrl's core pins 2.13"
)


class MissingVLADependency(ImportError):
    """The VLA path was used without Python >= 3.12 and the ``wmrl[lerobot]`` extra."""


def require_lerobot(what: str = "wmrl's VLA path") -> None:
    """Raise :class:`MissingVLADependency` unless Python >= 3.12 and LeRobot are present.

    >>> import sys
    >>> if sys.version_info < (3, 12):
    ...     try:
    ...         require_lerobot("LeRobotVLADataModule")
    ...     except MissingVLADependency as error:
    ...         assert "Python >= 3.12" in str(error) and "wmrl[lerobot]" in str(error)
    """
    version = ".".join(map(str, sys.version_info[:3]))
    if sys.version_info < (3, 12):
        raise MissingVLADependency(
            f"{what} needs Python >= 3.12 and the 'wmrl[lerobot]' extra (LeRobot {LEROBOT_VERSION}); this is "
            f"Python {version}. Fix: {INSTALL_HINT}."
        )
    try:
        import gym_pusht  # noqa: F401
        import lerobot  # noqa: F401
    except ImportError as error:
        raise MissingVLADependency(
            f"{what} needs the 'wmrl[lerobot]' extra (LeRobot {LEROBOT_VERSION} with gym-pusht) on Python "
            f"{version}: {error}. Fix: {INSTALL_HINT}."
        ) from error
