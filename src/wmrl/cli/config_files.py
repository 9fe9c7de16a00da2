"""The config files on a ``wmrl fit|validate|test`` command line, checked before LightningCLI reads them.

Two mistakes that jsonargparse reports as a long union-type error that names neither the file nor the fix:

- an overlay given alone or first: an overlay says in its first line which configs it goes on
  (``# overlay on: configs/vla/pusht_gpu.yaml``), and holds only what it changes;
- a ``class_path`` written for an earlier layout (``wmrl.modules.grpo.GRPOModule`` or
  ``wmrl.autoresearch.grpo.GRPOModule``, now ``wmrl.autoresearch.module.GRPOModule``), in a config or a flag.

A checkpoint is not the user's to edit: one written under an earlier layout names its module's old class path in its
saved settings, and :func:`moved_modules_importable` lets ``--ckpt_path`` read it under the present one.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

OVERLAY_LINE = "# overlay on: "
#: old module path -> where it lives now: the AutoResearch and VLA code in their wings, and each wing's parts in
#: the folder of their role (module, datamodule, world_models, simulators, policies)
MOVED = {
    "wmrl.modules.grpo": "wmrl.autoresearch.module",
    "wmrl.modules.vla_grpo": "wmrl.vla.module",
    "wmrl.datamodules.autoresearch": "wmrl.autoresearch.datamodule",
    "wmrl.datamodules": "wmrl.vla.datamodule",
    "wmrl.tasks": "wmrl.autoresearch.tasks",
    "wmrl.environments": "wmrl.autoresearch.environments",
    "wmrl.autoresearch.grpo": "wmrl.autoresearch.module",
    "wmrl.autoresearch.data": "wmrl.autoresearch.datamodule",
    "wmrl.rollout.agent": "wmrl.autoresearch.agent",
    "wmrl.vla.grpo": "wmrl.vla.module",
    "wmrl.vla.data.bandit": "wmrl.vla.datamodule.bandit_contexts",
    "wmrl.vla.data": "wmrl.vla.datamodule",
    "wmrl.vla.simulator": "wmrl.vla.simulators.pusht",
    "wmrl.vla.libero": "wmrl.vla.simulators.libero",
    "wmrl.vla.bandit": "wmrl.vla.simulators.bandit",
    "wmrl.vla.progress_world_model": "wmrl.vla.world_models.progress",
    "wmrl.vla.reward_model": "wmrl.vla.world_models.reward_model",
    "wmrl.vla.distorted_oracle": "wmrl.vla.world_models.distorted_oracle",
    "wmrl.vla.policy": "wmrl.vla.policies.chunk",
    "wmrl.vla.smolvlm": "wmrl.vla.policies.smolvlm",
    "wmrl.vla.scripted": "wmrl.vla.policies.scripted",
}
for _wing in ("wmrl.environments", "wmrl.autoresearch.environments"):  # the AutoResearch world models' folder
    MOVED.update({f"{_wing}.lm_world_model": "wmrl.autoresearch.world_models.lm",
                  f"{_wing}.learned": "wmrl.autoresearch.world_models.learned",
                  f"{_wing}.task_aware": "wmrl.autoresearch.world_models.task_aware",
                  f"{_wing}.gate": "wmrl.autoresearch.world_models.gate"})
# the longest old path first; an old path is a whole name (``wmrl.vla.data`` is not ``wmrl.vla.datamodule``)
_OLD = re.compile(r"\b(" + "|".join(re.escape(old) for old in sorted(MOVED, key=len, reverse=True))
                  + r")(?![\w])(\.[\w.]+)?")


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old module path of :data:`MOVED` as a module holding the names of the module it moved to (the
    same objects: a class read through the old path is the class, whose ``__module__`` is its present one)."""

    def find_spec(self, name, path=None, target=None):  # noqa: ANN001, ANN201 - importlib's signature
        return importlib.util.spec_from_loader(name, self) if name in MOVED else None

    def exec_module(self, module) -> None:  # noqa: ANN001 - importlib's signature
        present = importlib.import_module(MOVED[module.__name__])
        module.__dict__.update({k: v for k, v in vars(present).items() if not k.startswith("__")})


@contextmanager
def moved_modules_importable() -> Iterator[None]:
    """While the block runs, ``import wmrl.autoresearch.grpo`` (an old path of :data:`MOVED`) gives the module it
    moved to, so a class path saved in a checkpoint of an earlier layout resolves to the class's present one; after
    it, old paths fail again (a config keeps being refused with the new name: :func:`command_line_errors`).

    >>> with moved_modules_importable():
    ...     from wmrl.autoresearch.grpo import GRPOModule
    >>> GRPOModule.__module__
    'wmrl.autoresearch.module'
    >>> import wmrl.autoresearch.grpo
    Traceback (most recent call last):
    ModuleNotFoundError: No module named 'wmrl.autoresearch.grpo'
    """
    finder = _MovedModules()
    before = set(sys.modules)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
        for name in set(sys.modules) - before:
            if name in MOVED:
                del sys.modules[name]


def declared_bases(config: Path) -> list[str]:
    """The configs ``config`` goes on, in command-line order, from its first line; [] for a base config.

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "libero.yaml"
    >>> _ = path.write_text("# overlay on: configs/vla/pusht_gpu.yaml\\nmodel: {}\\n")
    >>> declared_bases(path)
    ['configs/vla/pusht_gpu.yaml']
    """
    first = config.read_text().partition("\n")[0]
    if not first.startswith(OVERLAY_LINE):
        return []
    return [base.strip() for base in first.removeprefix(OVERLAY_LINE).split(" + ")]


def config_paths(words: list[str]) -> list[Path]:
    """The files given with ``-c``/``--config`` (``--config=FILE`` too), in order; files that do not exist are
    left to LightningCLI, which names them."""
    paths = []
    for i, word in enumerate(words):
        if word in ("-c", "--config") and i + 1 < len(words):
            paths.append(Path(words[i + 1]))
        elif word.startswith("--config="):
            paths.append(Path(word.partition("=")[2]))
    return [path for path in paths if path.is_file()]


def moved_name(text: str) -> tuple[str, str] | None:
    """The first old wmrl module path in ``text`` and its new name, or ``None``.

    >>> moved_name("class_path: wmrl.modules.grpo.GRPOModule")
    ('wmrl.modules.grpo.GRPOModule', 'wmrl.autoresearch.module.GRPOModule')
    >>> moved_name("class_path: wmrl.autoresearch.module.GRPOModule") is None
    True
    >>> moved_name("class_path: wmrl.autoresearch.environments.learned.LearnedWorldModel")
    ('wmrl.autoresearch.environments.learned.LearnedWorldModel', 'wmrl.autoresearch.world_models.learned.LearnedWorldModel')
    >>> moved_name("class_path: wmrl.vla.datamodule.lerobot.LeRobotVLADataModule") is None
    True
    """
    match = _OLD.search(text)
    if match is None:
        return None
    return match.group(0), MOVED[match.group(1)] + (match.group(2) or "")


def command_line_errors(command: str, words: list[str]) -> list[str]:
    """Error lines for an overlay given first, a moved class path or a ``--ckpt_path`` that is no checkpoint; []
    when none is there. Read before Lightning is imported: each answer comes in well under a second."""
    configs = config_paths(words)
    if configs and (bases := declared_bases(configs[0])):
        chain = " ".join(f"-c {path}" for path in [*bases, configs[0]])
        return [f"error: {configs[0]} is an overlay on {' + '.join(bases)}, not a config of its own "
                "(its first line says so)",
                f"  run: wmrl {command} {chain}"]
    for config in configs:
        for number, line in enumerate(config.read_text().splitlines(), 1):
            if not line.lstrip().startswith("#") and (moved := moved_name(line)):
                return [f"error: {config}:{number}: {moved[0]} is now {moved[1]}",
                        "  the module moved (CHANGELOG.md lists what moved where): replace the name in the config"]
    for word in words:
        if (moved := moved_name(word)):
            return [f"error: {moved[0]} is now {moved[1]}: replace the name in the command"]
    return checkpoint_errors(words)


_LIGHTNING_CKPT_WORDS = ("last", "best", "hpc", "registry")  # --ckpt_path values Lightning resolves itself


def checkpoint_errors(words: list[str]) -> list[str]:
    """Error lines for a ``--ckpt_path`` that is no checkpoint file (missing, a folder, truncated or not a torch
    archive), found in milliseconds before any model loads; [] when it is one or none is given."""
    path = None
    for i, word in enumerate(words):
        if word == "--ckpt_path" and i + 1 < len(words):
            path = words[i + 1]
        elif word.startswith("--ckpt_path="):
            path = word.split("=", 1)[1]
    if path is None or path in _LIGHTNING_CKPT_WORDS or path.startswith("registry:") or "://" in path:
        return []
    file = Path(path).expanduser()
    if not file.exists():
        return [f"error: --ckpt_path {path}: no such file",
                "  give a checkpoint `wmrl fit` wrote (e.g. runs/quickstart/checkpoints/last.ckpt)"]
    if not file.is_file():
        hint = f" (did you mean {file / 'checkpoints' / 'last.ckpt'}?)" if (file / "checkpoints" / "last.ckpt").is_file() else ""
        return [f"error: --ckpt_path {path}: a folder, not a checkpoint file{hint}"]
    import zipfile

    if not zipfile.is_zipfile(file):  # torch.save's archive: a truncated copy has no central directory
        return [f"error: --ckpt_path {path}: not a readable checkpoint ({file.stat().st_size} bytes, not a complete "
                "torch archive: truncated, or not written by torch.save)",
                "  copy it again, or give another checkpoint of the run (its checkpoints/ folder)"]
    return []
