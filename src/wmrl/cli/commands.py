"""The `wmrl` command.

    wmrl fit|validate|test -c CONFIG.yaml [--key value ...]   training and held-out evaluation (LightningCLI)
    wmrl tasks list [--split S] [--json]          the catalogue (built-in and registered folder tasks)
    wmrl tasks add DIR... [--mlebench-data D]     register task folders / MLE-bench competitions (docs/tasks.md)
    wmrl tasks remove ID|DIR...                   unregister them
    wmrl tasks show ID                            a task's card and prompt
    wmrl tasks build [IDS...] [--split S] [--rebuild] [--record]
    wmrl tasks check [IDS...] [--split S]         run reference solutions, compare with recorded scores
    wmrl exec TASK_ID solution.py [--sandbox docker] [--json]
    wmrl leak-scan [IDS...] [--split S] [--sandbox docker] [--report PATH]   no answers readable in a sandbox
    wmrl evaluate POLICY... [--tasks IDS... | --split S] [--samples K]   compare policies (base, checkpoints)
    wmrl report RUN_DIR                           figures and an HTML page for a training run

The entry point (:func:`main`) and the parser (:func:`build_parser`); each group of subcommands lives in its own
module, which registers it on the parser: :mod:`wmrl.cli.tasks`, :mod:`wmrl.cli.scripts` (``exec``, ``leak-scan``),
:mod:`wmrl.cli.evaluate`, and ``report`` here.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from rich.text import Text

from wmrl.autoresearch.environments.quoting import printable
from wmrl.cli import evaluate, scripts, tasks
from wmrl.cli.common import CliError, console
from wmrl.cli.quick_help import INTERRUPTED, LIGHTNING_COMMANDS


def cmd_report(args) -> None:
    from wmrl.run_report import training_logs, write_report

    try:
        logs = training_logs(Path(args.run_dir)) if Path(args.run_dir).is_dir() else []
        page = write_report(args.run_dir, args.out)
    except FileNotFoundError as exc:
        raise CliError(str(exc)) from exc
    console.print(f"read: {', '.join(str(p) for p in logs)}", markup=False, highlight=False)
    console.print(f"report written: {page} (open it in a browser)")


def build_parser() -> argparse.ArgumentParser:
    """The parser of wmrl's own subcommands; each group's module registers its commands (``add_parsers``), and
    ``fit``, ``validate`` and ``test`` are named here and run by LightningCLI (:func:`main` hands them over)."""
    parser = argparse.ArgumentParser(
        prog="wmrl",
        description="World Model RL for AutoResearch agents. Training: wmrl fit|validate|test -c CONFIG.yaml",
    )
    parser.add_argument("--cache-dir", default=None, help="task cache (default $WMRL_CACHE or ~/.cache/wmrl)")
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, what in (("fit", "train"), ("validate", "evaluate on the held-out tasks"),
                       ("test", "evaluate on the test split")):
        sub.add_parser(name, help=f"{what} (LightningCLI): wmrl {name} -c CONFIG.yaml [--key value ...]; "
                                  f"`wmrl {name} --help` lists every key")
    tasks.add_parsers(sub)
    scripts.add_parsers(sub)
    evaluate.add_parsers(sub)
    p = sub.add_parser("report", help="figures and an HTML page for a training run")
    p.add_argument("run_dir", help="the run's trainer.default_root_dir (holds csv/ and calibration.jsonl)")
    p.add_argument("--out", default=None, help="output dir (default RUN_DIR/report)")
    p.set_defaults(fn=cmd_report)
    return parser


def lightning_cli(argv: list[str] | None, run: bool = True):
    """The LightningCLI behind ``wmrl fit|validate|test`` (``run=False``: parse and instantiate only; errors raise).

    ``omegaconf+`` parser mode: a config may interpolate (``${trainer.default_root_dir}``), and interpolations
    resolve after every config file and command-line value is merged, so ``--trainer.default_root_dir`` moves
    the logs and checkpoints that interpolate it (plain ``omegaconf`` mode resolved each file on its own and kept
    the file's run dir). ``data.group_size`` is linked to the module's ``group_size`` rather than repeated. The
    class is :class:`wmrl.cli.trainer.WMRLCli` (importable, to subclass).
    """
    from wmrl.cli.trainer import WMRLCli

    return WMRLCli(argv, run=run)


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    if words and words[0] in LIGHTNING_COMMANDS:
        if words[1:] in (["--help"], ["-h"]):  # the keys a user sets, without importing Lightning
            from wmrl.cli.quick_help import quick_help

            print(quick_help(words[0]))
            return 0
        from wmrl.cli.config_files import command_line_errors

        if lines := command_line_errors(words[0], words[1:]):  # before Lightning is imported: an instant answer
            sys.stderr.write("\n".join(lines) + "\n")
            return 2
        from wmrl.cli.trainer import run

        return run(argv)  # None: LightningCLI reads sys.argv itself; a configuration error prints short
    args = build_parser().parse_args(words)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    from wmrl.autoresearch.tasks.build import TaskCacheError
    from wmrl.autoresearch.tasks.suite import UnknownTaskError

    try:
        args.fn(args)
    except KeyboardInterrupt as exc:  # Ctrl+C: one line, no traceback
        said = str(exc) or f"wmrl {args.command} stopped before it finished"
        console.print(Text(f"interrupted: {said}"), highlight=False)
        return INTERRUPTED
    except (CliError, UnknownTaskError, TaskCacheError, ValueError, KeyError, FileNotFoundError) as exc:
        # The message can quote what the user typed (a path with brackets): shown as text, never as markup.
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)  # KeyError quotes its str
        console.print(Text.assemble(("error:", "red"), " ", printable(str(message))), highlight=False)
        return 2
    return 0

