"""What every one of wmrl's own subcommands shares: the two consoles, the errors that end a command, the progress
display, and the task suite, sandbox and task ids a command's flags name.

A subcommand lives in the module of its group (:mod:`wmrl.cli.tasks`, :mod:`wmrl.cli.scripts`,
:mod:`wmrl.cli.evaluate`), which registers it on the parser (``add_parsers``); :mod:`wmrl.cli.commands` puts them
together.
"""

from __future__ import annotations

import argparse
import sys

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from wmrl.autoresearch.environments.quoting import printable

# Tables stay readable when piped or logged (rich assumes 80 columns without a terminal).
console = Console(stderr=True, width=None if sys.stderr.isatty() else 140)  # progress, notes, warnings
out = Console(width=None if sys.stdout.isatty() else 140)  # a command's result


class CliError(Exception):
    """A user error: printed without a traceback, exit code 2."""


class CommandInterrupted(KeyboardInterrupt):
    """Ctrl+C, with what the command kept (printed in one line, exit :data:`~wmrl.cli.quick_help.INTERRUPTED`)."""


def progress() -> Progress:
    """The progress display of a long command: a bar per piece of work, its count, time and last event."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[last]}"),
        console=console,
        transient=False,
    )


def plain(value: object) -> Text:
    """A table cell that rich shows as it is: no markup (brackets in a path or a column name), no escapes."""
    return Text(printable(str(value)))


def suite(args: argparse.Namespace):
    """The task suite of ``--cache-dir``."""
    from wmrl.autoresearch.tasks.suite import TaskSuite

    return TaskSuite(cache_dir=args.cache_dir)


def task_ids(args: argparse.Namespace, tasks) -> list[str]:
    """The tasks a command names: its ids, or every task of ``--split``; an unknown id fails with a did-you-mean."""
    if args.ids and args.split:
        raise CliError("give task ids or --split, not both")
    ids = args.ids or [s.id for s in tasks.specs(args.split)]
    for task_id in ids:
        tasks.spec(task_id)  # raises a clear error for an unknown id
    return ids


def add_sandbox_args(parser: argparse.ArgumentParser) -> None:
    """``--sandbox``, ``--isolation`` and ``--max-concurrency``: where a command's scripts run."""
    parser.add_argument("--sandbox", choices=("process", "docker"), default="process")
    parser.add_argument("--isolation", choices=("auto", "bwrap", "unshare", "none"), default="auto",
                        help="process sandbox isolation (default: bubblewrap if it works here)")
    parser.add_argument("--max-concurrency", type=int, default=None, help="runs at once (default: CPU cores)")


def sandbox(args: argparse.Namespace):
    """The sandbox :func:`add_sandbox_args`' flags name; one that cannot start here is a :class:`CliError`."""
    from wmrl.autoresearch.environments.sandbox import make_sandbox

    kwargs = {}
    if args.sandbox == "process":
        kwargs["isolation"] = args.isolation
    if args.max_concurrency:
        kwargs["max_concurrency"] = args.max_concurrency
    try:
        return make_sandbox(args.sandbox, **kwargs)
    except (ImportError, RuntimeError) as exc:
        raise CliError(f"--sandbox {args.sandbox}: {exc}") from exc


def warn_if_weak(box, consequence: str) -> None:
    """Say so when a process sandbox cannot hide the answers (``--isolation unshare|none``, or no bubblewrap) or
    cannot bound each run (no cgroup here: the sandbox logged why)."""
    if not box.bounds_each_run:
        console.print(Text(f"warning: no cgroup per run here: a run's memory is bounded per process only and its CPU "
                           f"not at all; {consequence}.", style="yellow"))
    if not box.hides_answers:
        console.print(
            Text(
                f"warning: --isolation {box.isolation}: scripts run as you on this machine's filesystem "
                f"and can read the hidden answers; {consequence}. Install bubblewrap "
                "(apt-get install bubblewrap) or use --sandbox docker.",
                style="yellow",
            )
        )
