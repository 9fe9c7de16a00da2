"""`wmrl fit|validate|test --help`: the keys a user sets, in under a second.

LightningCLI's own help imports Lightning and torch (10-15 s on a busy 2-core machine) and, with the model and
data chosen by ``class_path``, lists every Trainer key but none of the model's or the data's. This help reads the
signatures and docstrings of wmrl's classes from their source files (``ast``, nothing imported), so it costs no
import, and lists the ``model.init_args`` and ``data.init_args`` keys of the AutoResearch classes with their
defaults. ``wmrl fit -c CONFIG --help`` still prints LightningCLI's full help (every Trainer key).
"""

from __future__ import annotations

import ast
import importlib.util
import re
import textwrap
from pathlib import Path

#: (config key prefix, class) listed in full; the VLA classes are named with the command that lists them
CLASSES = (("model", "wmrl.autoresearch.module", "GRPOModule"),
           ("data", "wmrl.autoresearch.datamodule", "AutoResearchDataModule"))
#: the subcommands that LightningCLI runs (:mod:`wmrl.cli.trainer`); the others are wmrl's own (:mod:`wmrl.cli.commands`)
LIGHTNING_COMMANDS = ("fit", "validate", "test")
#: the exit status of a ``wmrl`` command stopped by Ctrl+C (128 + SIGINT, as a shell reports one); here, beside the
#: subcommand names, because both the Lightning subcommands and wmrl's own use it and this module imports nothing
INTERRUPTED = 130
WHAT = {"fit": "train (and evaluate on the held-out tasks at each epoch end)",
        "validate": "evaluate a policy on the held-out tasks, with real execution",
        "test": "evaluate a policy on the held-out tasks, with real execution (the test split's name)"}
CHECKPOINT = {"fit": "resume a run from its checkpoint (runs/quickstart/checkpoints/last.ckpt), exactly",
              "validate": "evaluate this checkpoint of `wmrl fit`, with the model settings it was trained with",
              "test": "evaluate this checkpoint of `wmrl fit`, with the model settings it was trained with"}
WIDTH = 118


def quick_help(command: str) -> str:
    """The help of ``wmrl <command>`` (``fit``, ``validate`` or ``test``).

    >>> text = quick_help("validate")
    >>> "--ckpt_path" in text and "--model.init_args.eval_temperature" in text and "--data.init_args.eval_tasks" in text
    True
    """
    lines = [f"usage: wmrl {command} -c CONFIG.yaml [-c OVERLAY.yaml ...] [--KEY VALUE ...] [--ckpt_path CKPT]", "",
             f"{WHAT[command]} (LightningCLI). Keys are never abbreviated; a later config or flag overrides an "
             "earlier one.", "",
             _entry("-c, --config CONFIG", "a YAML config, e.g. configs/autoresearch/quickstart.yaml; overlays after "
                                          "it say what they change (configs/debug/fast.yaml)"),
             _entry("--ckpt_path CKPT", CHECKPOINT[command]),
             _entry("--trainer.KEY VALUE", "Lightning Trainer arguments: max_steps, default_root_dir, accelerator, "
                                           "devices, limit_val_batches, ..."),
             _entry("--seed_everything N", "the global seed (the configs set 0)"),
             _entry("--overwrite_config true", "replace the config.yaml an earlier run saved in the same log dir "
                                              "(refused otherwise; only a run without loggers saves it there)")]
    for prefix, module, name in CLASSES:
        lines += ["", f"{prefix} keys, --{prefix}.init_args.KEY (the AutoResearch configs' {prefix}: {module}.{name}):"]
        for key, default, text in class_keys(module, name):
            lines.append(_entry(f"--{prefix}.init_args.{key}", f"{text} (default {default})"))
    lines += ["",
              "VLA (Python 3.12, .venv312): `wmrl fit --model.help VLAGRPOModule` and "
              "`--data.help LeRobotVLADataModule` list their keys.",
              f"`wmrl {command} -c CONFIG --help` prints LightningCLI's full help (every Trainer key, the config's "
              "values as defaults; it imports Lightning)."]
    return "\n".join(lines)


def class_keys(module: str, name: str) -> list[tuple[str, str, str]]:
    """``(key, default, description)`` of each ``__init__`` argument of ``module.name``, read from its source."""
    from docstring_parser import parse

    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(f"{module} is not installed")
    tree = ast.parse(Path(spec.origin).read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    described = {p.arg_name: _plain(p.description) for p in parse(ast.get_docstring(cls) or "").params}
    args = init.args.args[1:]
    defaults = [None] * (len(args) - len(init.args.defaults)) + list(init.args.defaults)
    return [(a.arg, "required" if d is None else ast.unparse(d), described.get(a.arg, ""))
            for a, d in zip(args, defaults, strict=True)]


def _plain(text: str, limit: int = 170) -> str:
    """A docstring's text on one line without its markup, cut after ``limit`` characters.

    >>> _plain("the ``smollm2`` model, see :class:`~wmrl.autoresearch.agent.AgentSettings`")
    'the smollm2 model, see AgentSettings'
    """
    text = re.sub(r":\w+:`~?(?:[\w.]+\.)?(\w+)`", r"\1", " ".join(text.split())).replace("``", "")
    return text if len(text) <= limit else text[: limit - 3].rsplit(" ", 1)[0] + " ..."


def _entry(key: str, text: str) -> str:
    """One key and its text, wrapped under a 34-column key column."""
    if len(key) < 32:
        return textwrap.fill(text, WIDTH, initial_indent=f"  {key:<32}", subsequent_indent=" " * 34)
    return f"  {key}\n" + textwrap.fill(text, WIDTH, initial_indent=" " * 34, subsequent_indent=" " * 34)
