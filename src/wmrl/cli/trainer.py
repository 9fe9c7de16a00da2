"""`WMRLCli`: the LightningCLI behind ``wmrl fit|validate|test``, with errors a person can read.

- A class that fails while it is built (a bad model path, an unknown task, a negative temperature) is reported by
  ``wmrl`` in two lines: the config key, wmrl's own message (which says the fix), and the class being built;
  ``WMRL_TRACEBACK=1`` shows the full traceback instead (:func:`config_error`).
- A command-line mistake prints the parser's message, a did-you-mean for an unknown key, and where the keys are
  listed, not the ~50 lines of usage (:class:`WMRLArgumentParser`). Abbreviated keys are refused
  (argparse would read ``--trainer.max_st 7`` as ``max_steps``, silently).
- ``--optimizer`` / ``--lr_scheduler`` are not options: wmrl's modules configure their own optimizer
  (``model.init_args.lr`` and ``weight_decay``) and step it by hand, so a scheduler would be silently ignored.
- ``predict`` is not a subcommand: the RL modules have no predict step.
- ``--ckpt_path`` works for every wmrl module: a checkpoint holds its model's config (Lightning's form, see
  :meth:`wmrl.modules.base.RLModule.save_settings`), which replaces the config's model settings, so a checkpoint
  is resumed or evaluated as it was trained; each setting it changes is named on stderr
  (:func:`checkpoint_notes`).
- Ctrl+C during ``wmrl fit`` keeps the last finished step's checkpoint and prints the command that resumes it
  (:class:`~wmrl.cli.interrupt.InterruptCheckpoint`); every interrupted command exits 130, without a traceback.
- A run never replaces another run's saved ``config.yaml`` unless ``--overwrite_config true`` asks
  (:class:`SaveRunConfig`); with the default loggers each run saves into a new ``tensorboard/version_<n>``, so
  only a run without loggers (``--trainer.logger false``) into the same run dir meets the refusal.
- Loggers a config names (``trainer.logger``: MLflow, W&B, ...) log beside a CSV logger under the run dir, which
  ``wmrl report`` reads (:func:`with_csv_logger`); TensorBoard is then left out.
- wmrl's module and data classes are imported with this module, so ``--model.help GRPOModule`` and
  ``--data.help AutoResearchDataModule`` find them by their short names.

Importing this module imports Lightning; :mod:`wmrl.cli.commands` imports it only for the Lightning subcommands.
"""

from __future__ import annotations

import difflib
import importlib
import os
import re
import sys
import traceback
from typing import Any

import lightning.pytorch as pl
from jsonargparse import Namespace, set_parsing_settings
from lightning.fabric.utilities.cloud_io import get_filesystem
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI, SaveConfigCallback

# wmrl's modules and data modules, known to the parser by their short names (`--data.help AutoResearchDataModule`);
# none of them imports LeRobot, vLLM or transformers at import time
import wmrl.autoresearch.datamodule
import wmrl.autoresearch.module
import wmrl.vla.datamodule.lerobot
import wmrl.vla.module  # noqa: F401
from wmrl.cli.config_files import moved_modules_importable
from wmrl.cli.interrupt import INTERRUPTED, InterruptCheckpoint, Interrupted
from wmrl.cli.quick_help import LIGHTNING_COMMANDS

TRACEBACK_ENV = "WMRL_TRACEBACK"  # set to 1 for full tracebacks of configuration errors
OVERWRITE_KEY = "overwrite_config"  # `--overwrite_config true`: replace an earlier run's saved config
#: `checkpoint_every: N` (a config's top level, or `--checkpoint_every N`): the run's checkpoint every N training
#: steps (`<root>/checkpoints`, `last.ckpt` kept); every wmrl run has this one checkpoint, no config lists it
CHECKPOINT_KEY = "checkpoint_every"
NOT_OPTIONS = {
    "--optimizer": "wmrl's modules configure their own optimizer: set model.init_args.lr (and weight_decay)",
    "--lr_scheduler": "wmrl's modules step their optimizer by hand, so a scheduler would be ignored; no learning-rate "
                      "schedule option exists yet",
}


class WMRLArgumentParser(LightningArgumentParser):
    """A LightningArgumentParser that refuses abbreviated keys and reports mistakes in a few lines."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str, ex: Exception | None = None):  # type: ignore[override]
        if not getattr(self, "exit_on_error", True):
            return super().error(message, ex)
        words = (self.prog or "wmrl").split()
        command = f"wmrl {words[-1]}" if words and words[-1] in LIGHTNING_COMMANDS else "wmrl"
        sys.stderr.write("\n".join(parse_error_lines(message, self.known_keys(), command)) + "\n")
        sys.exit(2)

    def known_keys(self) -> list[str]:
        """Every ``--key`` this parser accepts (its own and its subcommands')."""
        keys = set(self._option_string_actions)
        for action in self._actions:
            for sub in getattr(action, "choices", None) or {}:
                parser = action.choices[sub] if isinstance(action.choices, dict) else None
                if isinstance(parser, LightningArgumentParser):
                    keys |= set(parser._option_string_actions)
        return sorted(k for k in keys if k.startswith("--"))


def parse_error_lines(message: str, known: list[str], prog: str) -> list[str]:
    """At most five lines for a command-line mistake: the message, a did-you-mean per unknown key, the help.

    >>> print("\\n".join(parse_error_lines("unrecognized arguments: --trainer.max_stepz 7",
    ...                                    ["--trainer.max_steps", "--trainer.max_epochs"], "wmrl fit")))
    error: unrecognized arguments: --trainer.max_stepz 7
      --trainer.max_stepz: did you mean --trainer.max_steps?
      `wmrl fit --help` lists every key (keys are never abbreviated)
    """
    first = message.strip().splitlines()[0] if message.strip() else "invalid arguments"
    lines = [f"error: {first}"]
    if first.startswith("unrecognized arguments:"):
        for word in re.findall(r"(--[\w.\-]+)", first)[:3]:
            key = word.split("=", 1)[0]
            if key in NOT_OPTIONS:
                lines.append(f"  {key}: {NOT_OPTIONS[key]}")
                continue
            close = difflib.get_close_matches(key, known, n=2, cutoff=0.75)
            guess = close[:1] or [k for k in known if k.startswith(key)][:2]  # an abbreviation: what it starts
            if guess:
                lines.append(f"  {key}: did you mean {' or '.join(guess)}?")
    elif unknown := _unknown_class_option(message):
        section, class_path, option = unknown
        key = f"--{section}.init_args.{option}"
        lines = [f"error: {key}: {class_path} has no setting {option!r}"]
        settings = _init_settings(class_path)
        close = difflib.get_close_matches(option, settings, n=2, cutoff=0.6)
        if close:
            lines.append(f"  did you mean {' or '.join(f'--{section}.init_args.{c}' for c in close)}?")
        elif settings:
            lines.append(f"  its settings: {', '.join(settings[:12])}{' ...' if len(settings) > 12 else ''}")
    else:
        lines += [f"  {line.strip()}" for line in message.strip().splitlines()[1:3] if line.strip()]
    lines.append(f"  `{prog} --help` lists every key (keys are never abbreviated)")
    return lines[:5]


def _unknown_class_option(message: str) -> tuple[str, str, str] | None:
    """``(section, class_path, option)`` when jsonargparse refused a ``class_path`` section (``model``, ``data``)
    for an option its class does not take (its message says only that no Union subtype validated, first)."""
    section = re.match(r'Parser key "([\w.]+)"', message.strip())
    found = re.search(r"given class_path '([\w.]+)':\s*(?:Option|Key) '(\w+)' is not accepted", message)
    if section is None or found is None:
        return None
    return section.group(1), found.group(1), found.group(2)


def _init_settings(class_path: str) -> list[str]:
    """The keyword settings of ``class_path``'s ``__init__`` (what ``init_args`` takes), or [] if it cannot be read."""
    import importlib
    import inspect

    module, _, name = class_path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name)
        parameters = inspect.signature(cls.__init__).parameters.values()
    except (ImportError, AttributeError, TypeError, ValueError):
        return []
    return [p.name for p in parameters if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


class RunConfigExists(RuntimeError):
    """The run's config file is there already: an earlier run saved its config in the same log dir."""


class SaveRunConfig(SaveConfigCallback):
    """Lightning's config saver (the run's ``config.yaml`` in its log dir), whose refusal to replace an earlier
    run's config names the flag that allows it (Lightning's own names a Python argument a command-line user cannot
    set). Under DDP rank zero looks and every rank raises."""

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if not self.already_saved and self.save_to_log_dir and not self.overwrite:
            path = os.path.join(trainer.log_dir, self.config_filename)
            exists = get_filesystem(path).isfile(path) if trainer.is_global_zero else False
            if trainer.strategy.broadcast(exists):
                raise RunConfigExists(f"{path} holds the config of an earlier run; give this run another "
                                      f"--trainer.default_root_dir, or pass --{OVERWRITE_KEY} true to replace it")
        super().setup(trainer, pl_module, stage)


class WMRLCli(LightningCLI):
    """``wmrl fit|validate|test``: any LightningModule / LightningDataModule by ``class_path`` (the wmrl ones in the
    shipped configs), ``data.init_args.group_size`` linked to the module's, ``omegaconf+`` interpolation (see
    :func:`wmrl.cli.commands.lightning_cli`). Subclass it to add arguments or links of your own."""

    def __init__(self, args: list[str] | None = None, run: bool = True, **kwargs: Any) -> None:
        self._command = list(args) if isinstance(args, list | tuple) else sys.argv[1:]  # for the resume command
        # configs write ${trainer.default_root_dir}; under `wmrl fit` the config root is `fit`, so absolute
        # interpolation paths are read relative to it
        set_parsing_settings(omegaconf_absolute_to_relative_paths=True)
        parser_kwargs: dict[str, Any] = {"parser_mode": "omegaconf+"}
        if not run:
            parser_kwargs["exit_on_error"] = False
        kwargs.setdefault("parser_kwargs", parser_kwargs)
        kwargs.setdefault("save_config_callback", SaveRunConfig)
        super().__init__(pl.LightningModule, pl.LightningDataModule, subclass_mode_model=True,
                         subclass_mode_data=True, args=args, run=run, parser_class=WMRLArgumentParser,
                         auto_configure_optimizers=False, **kwargs)

    @staticmethod
    def subcommands() -> dict[str, set[str]]:
        commands = LightningCLI.subcommands()
        commands.pop("predict")  # the RL modules have no predict step
        return commands

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.link_arguments("data.init_args.group_size", "model.init_args.group_size")
        parser.add_argument(f"--{OVERWRITE_KEY}", type=bool, default=False,
                            help="replace the config.yaml an earlier run saved in the same log dir (refused otherwise)")
        parser.add_argument(f"--{CHECKPOINT_KEY}", type=int, default=1,
                            help="save the run's checkpoint (<default_root_dir>/checkpoints, last.ckpt kept) every N "
                                 "training steps")

    def instantiate_trainer(self, **kwargs: Any) -> pl.Trainer:
        """The trainer, with what every wmrl run logs and keeps added once here instead of in every YAML: the
        loggers (:func:`default_loggers`) when the config names none, and the progress bar and checkpoint
        (:func:`default_callbacks`) that its callbacks lack. They go in as trainer arguments, which LightningCLI
        merges over the config's."""
        section = self.config_init.get(self.subcommand) if self.subcommand else self.config_init
        config = {**(section.get("trainer") or {}), **kwargs}
        root = config.get("default_root_dir") or os.getcwd()
        logger = config.get("logger")
        if logger in (None, True):
            kwargs["logger"] = default_loggers(root)
        elif logger is not False:
            kwargs["logger"] = with_csv_logger(logger, root)
        listed = config.get("callbacks") or []
        listed = list(listed) if isinstance(listed, list | tuple) else [listed]
        checkpointing = config.get("enable_checkpointing") is not False
        every = section.get(CHECKPOINT_KEY, 1)
        if not isinstance(every, int) or every < 1:
            raise ValueError(f"{CHECKPOINT_KEY} must be a whole number of training steps >= 1 (got {every!r}); "
                             f"set it at the config's top level, e.g. `{CHECKPOINT_KEY}: 10`")
        kwargs["callbacks"] = listed + default_callbacks(
            listed, root, checkpointing=checkpointing, progress_bar=config.get("enable_progress_bar") is not False,
            every=every)
        if self.subcommand == "fit":
            kwargs["callbacks"].append(InterruptCheckpoint(self._command, os.path.join(root, "checkpoints"),
                                                           checkpointing=checkpointing))
        if _THREADS is not None:  # once the config has built: a configuration error stays a few lines
            sys.stderr.write(_THREADS.line() + "\n")
        return super().instantiate_trainer(**kwargs)

    def fit(self, **kwargs: Any) -> None:
        """``trainer.fit``; after Ctrl+C (Lightning's shutdown exits 1; :class:`InterruptCheckpoint` has said what
        is kept) it raises :class:`Interrupted`."""
        _interruptible(self.trainer, self.trainer.fit, kwargs, "")

    def validate(self, **kwargs: Any) -> None:
        _interruptible(self.trainer, self.trainer.validate, kwargs,
                       "interrupted: wmrl validate stopped before it finished (it saves no checkpoint)")

    def test(self, **kwargs: Any) -> None:
        _interruptible(self.trainer, self.trainer.test, kwargs,
                       "interrupted: wmrl test stopped before it finished (it saves no checkpoint)")

    def _parse_ckpt_path(self) -> None:
        """LightningCLI's reading of ``--ckpt_path``'s saved model settings, with the class path that a checkpoint
        of an earlier layout names (``wmrl.autoresearch.grpo.GRPOModule``) importable while it is read: the parsed
        config then holds the class's present path (jsonargparse writes a class's own import path)."""
        with moved_modules_importable():
            super()._parse_ckpt_path()

    def parse_arguments(self, parser: LightningArgumentParser, args: Any) -> None:
        super().parse_arguments(parser, args)
        self._config_before_checkpoint = self.config.clone()  # LightningCLI then merges --ckpt_path's settings

    def before_instantiate_classes(self) -> None:
        section = self.config.get(self.subcommand) if self.subcommand else self.config
        if section.get(OVERWRITE_KEY):
            self.save_config_kwargs = {**self.save_config_kwargs, "overwrite": True}
        if self.subcommand is None or not hasattr(self, "_config_before_checkpoint"):
            return
        notes = checkpoint_notes(self._config_before_checkpoint[self.subcommand], self.config[self.subcommand])
        if notes:
            sys.stderr.write("\n".join(notes) + "\n")

    def instantiate_classes(self) -> None:
        section = self.config.get(self.subcommand) if self.subcommand else self.config
        try:
            check_data_first(section.get("data"))
            super().instantiate_classes()
        except Exception as exc:
            exc.wmrl_config = section  # type: ignore[attr-defined]
            raise


def check_data_first(data: Any) -> None:
    """Build the configured data module once before anything else, so that its own configuration check (task ids,
    task folders: milliseconds) is reported before the model loads (LightningCLI builds the model first: a misspelt
    task id took the model's load time to show). Only that check's ``ValueError`` is raised here; a data module whose
    arguments are classes of their own, or that fails otherwise, is left to the real build, which reports it."""
    if not (isinstance(data, Namespace) and isinstance(data.get("class_path"), str)):
        return
    init = data.get("init_args")
    kwargs = init.as_dict() if isinstance(init, Namespace) else {}
    if any(isinstance(value, dict) and "class_path" in value for value in kwargs.values()):
        return
    module, _, name = data.class_path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name)
    except Exception:  # noqa: BLE001 - a class path that does not import: the real build reports it
        return
    try:
        cls(**kwargs)
    except ValueError:  # the module's own configuration check
        raise
    except Exception:  # noqa: BLE001 - not the module's configuration check: the real build reports it
        return


def _interruptible(trainer: pl.Trainer, run: Any, kwargs: dict[str, Any], said: str) -> None:
    """``run(**kwargs)``, raising :class:`Interrupted` (after ``said``) where Ctrl+C ended it."""
    try:
        run(**kwargs)
    except SystemExit as exc:
        if exc.code != 1 or not trainer.interrupted:  # Lightning's exit after a KeyboardInterrupt, and only it
            raise
        if said and trainer.is_global_zero:
            sys.stderr.write(said + "\n")
        raise Interrupted from None


def checkpoint_notes(before: Any, after: Any, shown: int = 4) -> list[str]:
    """The model settings a ``--ckpt_path`` checkpoint changed (``before``/``after``: one subcommand's config).

    LightningCLI rebuilds the model a checkpoint was trained as: its saved settings replace the config's and the
    command line's. A user who passed ``--model.init_args.eval_temperature 0.8`` learns that the checkpoint's
    value is used instead, rather than finding out from the results.
    """
    old, new = before.get("model"), after.get("model")
    if old is None or new is None or old.get("init_args") is None or new.get("init_args") is None:
        return []
    old_args, new_args = vars(old.init_args), vars(new.init_args)
    changed = [k for k in new_args if k in old_args and _plain_value(old_args[k]) != _plain_value(new_args[k])]
    if not changed:
        return []
    path = after.get("ckpt_path")
    lines = [f"note: {path} was trained with other model settings; the checkpoint's are used "
             "(a checkpoint is resumed or evaluated as it was trained):"]
    lines += [f"  model.init_args.{k}: {_plain_value(new_args[k])!r} (the config gave {_plain_value(old_args[k])!r})"
              for k in changed[:shown]]
    if len(changed) > shown:
        lines.append(f"  ... and {len(changed) - shown} more")
    return lines


def _plain_value(value: Any) -> Any:
    """A config value as plain data (a nested Namespace as a dict), for comparing and printing."""
    if isinstance(value, Namespace):
        return value.as_dict()
    if isinstance(value, list | tuple):
        return [_plain_value(v) for v in value]
    return value


def default_loggers(root: str) -> list:
    """TensorBoard and CSV under the run dir (``<root>/tensorboard``, ``<root>/csv``: what ``wmrl report`` and
    ``benchmarks/speedup.py`` read), for a config that names no logger (``trainer.logger: false`` turns them off)."""
    from lightning.pytorch.loggers import TensorBoardLogger

    return [TensorBoardLogger(save_dir=root, name="tensorboard"), run_csv_logger(root)]


def run_csv_logger(root: str):
    """The CSV logger under the run dir (``<root>/csv/version_<n>/metrics.csv``) that ``wmrl report``, a resumed
    fit's table and the benchmarks read."""
    from lightning.pytorch.loggers import CSVLogger

    return CSVLogger(save_dir=root, name="csv", flush_logs_every_n_steps=1)


def with_csv_logger(logger: Any, root: str) -> list:
    """The loggers a config names (MLflow, W&B, ...), after the run's CSV logger (:func:`run_csv_logger`) unless the
    config names a CSV logger itself. The CSV logger goes first: the run's ``config.yaml`` is saved in the first
    logger's folder, a new ``csv/version_<n>`` per run (a tracker whose store is a server or a database has no folder
    of its own)."""
    from lightning.pytorch.loggers import CSVLogger

    named = list(logger) if isinstance(logger, list | tuple) else [logger]
    if any(isinstance(one, CSVLogger) for one in named):
        return named
    return [run_csv_logger(root), *named]


def default_callbacks(listed: list, root: str, checkpointing: bool = True, progress_bar: bool = True,
                      every: int = 1) -> list:
    """The progress bar and the checkpoint a config did not list itself: a :class:`StepProgressBar` on a terminal
    (:class:`PlainProgress`, a line per step and evaluation, when stdout is not one), and a
    ``ModelCheckpoint`` every ``every`` training steps (the config's ``checkpoint_every``; ``<root>/checkpoints``,
    ``last.ckpt`` kept: a run resumes where it stopped). A config that lists a ``ModelCheckpoint`` of its own (say,
    one that monitors a metric), or sets ``enable_checkpointing`` / ``enable_progress_bar`` false, gets none."""
    from lightning.pytorch.callbacks import ModelCheckpoint, ProgressBar

    from wmrl.callbacks.progress import PlainProgress, StepProgressBar

    out: list = []
    if progress_bar and not any(isinstance(c, ProgressBar) for c in listed):
        out.append(StepProgressBar() if sys.stdout.isatty() else PlainProgress())
    if checkpointing and not any(isinstance(c, ModelCheckpoint) for c in listed):
        out.append(ModelCheckpoint(dirpath=os.path.join(root, "checkpoints"), save_last=True,
                                   every_n_train_steps=every))
    return out


def _root(exc: BaseException) -> BaseException:
    """The innermost cause: the error a wmrl class raised, under jsonargparse's wrappers."""
    seen = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        nxt = exc.__cause__ or exc.__context__
        if nxt is None:
            break
        exc = nxt
    return exc


def _components(config: Any) -> dict[str, tuple[str, Any]]:
    """``class_path -> (config key, init_args)`` of the configured classes (model, data, trainer callbacks...)."""
    out: dict[str, tuple[str, Any]] = {}

    def visit(node: Any, key: str) -> None:
        if node is None:
            return
        if isinstance(getattr(node, "class_path", None), str):
            init = getattr(node, "init_args", None)
            out.setdefault(node.class_path, (key, init))
            if init is not None:
                for name, value in vars(init).items():
                    visit(value, f"{key}.init_args.{name}")
        elif isinstance(node, list | tuple):
            for i, item in enumerate(node):
                visit(item, f"{key}[{i}]")
        elif hasattr(node, "__dict__") and not isinstance(node, str | int | float | bool):
            for name, value in vars(node).items():
                if not name.startswith("_"):
                    visit(value, f"{key}.{name}" if key else name)

    visit(config, "")
    return out


def _quotes(message: str, value: Any) -> bool:
    """Whether ``message`` quotes ``value`` (a string of 3+ characters, or a number as a whole token)."""
    if isinstance(value, str):
        return len(value) >= 3 and value in message
    if isinstance(value, int | float) and not isinstance(value, bool):
        return re.search(rf"(?<![\w.]){re.escape(repr(value))}(?![\w.])", message) is not None
    return False


def config_error(exc: BaseException) -> list[str] | None:
    """At most five lines for an error raised while a configured class was built (``None``: not one of those).

    The config key is the class's (``model``, ``data``, ``trainer.callbacks[2]``...), narrowed to the init arg
    whose value the message quotes when there is one."""
    config = getattr(exc, "wmrl_config", None)
    if config is None:
        return None
    root = _root(exc)
    components = _components(config)
    key, init, built = None, None, None
    for frame, _ in traceback.walk_tb(root.__traceback__):
        owner = frame.f_locals.get("self")
        if owner is None:
            continue
        name = f"{type(owner).__module__}.{type(owner).__qualname__}"
        if name in components:
            key, init = components[name]
            built = name
            break
    if key is None:  # the class is named in jsonargparse's wrapper message
        for class_path, (k, i) in components.items():
            if class_path in str(exc) or class_path.rsplit(".", 1)[-1] in str(exc):
                key, init, built = k, i, class_path
                break
    text = str(root).strip().splitlines() or [type(root).__name__]
    message, details = text[0], [line.strip() for line in text[1:] if line.strip()]
    if len(details) > 3:  # five lines in all: the message, three of its details, where
        details = [*details[:2], f"... and {len(details) - 2} more"]
    if init is not None and "init_args." not in message:
        quoted = [name for name, value in vars(init).items() if _quotes(message, value)]
        if len(quoted) == 1:  # the one init arg whose value the message quotes
            key = f"{key}.init_args.{quoted[0]}"
    where = f"{key}: " if key else ""
    lines = [f"error: {where}{message}", *(f"  {line}" for line in details)]
    building = f"while building {built} " if built else ""
    lines.append(f"  {building}({type(root).__name__}); {TRACEBACK_ENV}=1 shows the full traceback")
    return lines


_THREADS = None  # the thread choice of this `wmrl fit|validate|test` (wmrl.threads.ThreadChoice)


def run(argv: list[str] | None) -> int:
    """``wmrl fit|validate|test``: run the CLI; a configuration error is printed short (exit 2).

    The working directory goes on ``sys.path`` first, as under ``python -m``: a config's ``class_path:
    my_callbacks.MyCallback`` finds ``./my_callbacks.py`` (the ``wmrl`` script alone would look only beside itself
    and in site-packages)."""
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    from wmrl.threads import apply_threads

    global _THREADS
    try:
        _THREADS = apply_threads()  # from what this process may really use (wmrl.threads); said with the trainer
    except ValueError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    tracked_before, code = _wandb_run(), 1
    try:
        WMRLCli(argv)
        code = 0
    except RunConfigExists as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    except Interrupted:  # what was kept is said
        return INTERRUPTED
    except KeyboardInterrupt:  # before the trainer ran: reading the config, loading the model
        sys.stderr.write("interrupted while reading the config or loading the model: nothing was saved\n")
        return INTERRUPTED
    except Exception as exc:
        lines = None if os.environ.get(TRACEBACK_ENV) else config_error(exc)
        if lines is None:
            raise
        sys.stderr.write("\n".join(lines) + "\n")
        return 2
    finally:
        _finish_wandb_run(tracked_before, code)
    return 0


def _wandb_run() -> Any:
    """The process's current W&B run (``None``: none, or wandb never imported)."""
    wandb = sys.modules.get("wandb")
    return getattr(wandb, "run", None)


def _finish_wandb_run(before: Any, exit_code: int) -> None:
    """Finish the W&B run this command started (Lightning's ``WandbLogger`` leaves it open): its files are complete
    when ``main`` returns, and a second command in the same process starts a run of its own instead of logging into
    this one. A run that was open before the command (a user's own) is left open."""
    run = _wandb_run()
    if run is not None and run is not before:
        run.finish(exit_code=exit_code)
