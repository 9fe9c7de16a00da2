"""``wmrl exec`` and ``wmrl leak-scan``: a script run and graded in the sandbox, and every file a sandboxed script
can read searched for the tasks' answers. What a script prints is shown as text inside a frame, never as markup."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rich.table import Table
from rich.text import Text

from wmrl.autoresearch.environments.quoting import printable
from wmrl.autoresearch.tasks.spec import SPLITS
from wmrl.cli import common
from wmrl.cli.common import CliError, console, out


def add_parsers(sub) -> None:
    """``wmrl exec`` and ``wmrl leak-scan`` on the top-level parser's subcommands."""
    p = sub.add_parser("exec", help="run and grade one solution script")
    p.add_argument("task_id")
    p.add_argument("script")
    p.add_argument("--json", action="store_true", help="print the outcome as JSON")
    p.add_argument("--timeout", type=float, default=None, help="override the task's time budget (s)")
    p.add_argument("--no-cache", action="store_true", help="execute even if this script was run before")
    common.add_sandbox_args(p)
    p.set_defaults(fn=cmd_exec)

    p = sub.add_parser("leak-scan", help="search every file a sandboxed script can read for the tasks' answers")
    p.add_argument("ids", nargs="*", help="tasks to scan for (default: every task, built-in and registered)")
    p.add_argument("--split", choices=SPLITS)
    p.add_argument("--report", default=None, metavar="PATH", help="write the full report (every file) as JSON")
    p.add_argument("--root", action="append", metavar="DIR",
                   help="search only under DIR, as the sandbox shows it (repeatable; default: /)")
    p.add_argument("--fresh", action="store_true",
                   help="search every file again, even contents an earlier scan of the same tasks cleared")
    common.add_sandbox_args(p)
    p.set_defaults(fn=cmd_leak_scan)


def read_script(path: str) -> str:
    p = Path(path)
    if not p.is_file():
        raise CliError(f"solution script {path!r} does not exist (give the path of a .py file)")
    try:
        return p.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CliError(
            f"solution script {path!r} is not UTF-8 text (byte {exc.start}: {exc.reason}); save it as UTF-8"
        ) from None


def safe_json(obj: object) -> str:
    r"""``obj`` as JSON that is plain ASCII: every non-ASCII character (C1 controls and bidi overrides included) and
    every control character (DEL included) is a ``\uXXXX`` escape, so a script's output and column names cannot
    drive the terminal that shows it, yet parse back to exactly what the script wrote.

    >>> safe_json({"out": "\x9b2J \u202e \x7f"}).splitlines()[1].strip()
    '"out": "\\u009b2J \\u202e \\u007f"'
    """
    return json.dumps(obj, indent=2, ensure_ascii=True).replace("\x7f", "\\u007f")


def framed(text: str, title: str, width: int) -> Text:
    """``text`` (written by a script) inside a frame: a rule naming it, then every line behind a gutter, cut to
    ``width`` cells so that no wrapped remainder starts at the margin, then a closing rule. Whatever the script
    prints -- a fake result table included -- shows inside the frame, above wmrl's own result table, and cannot
    pass for it."""
    from rich.cells import chop_cells

    lines = printable(text).split("\n") if text else ["(nothing)"]
    frame = Text(f"┌─ {title}\n", style="dim")
    for line in lines:
        for piece in chop_cells(line.expandtabs(4), max(20, width - 2)) or [""]:
            frame.append("│ ", style="dim")
            frame.append(piece + "\n")
    frame.append("└─ end of script output", style="dim")
    return frame


def cmd_exec(args) -> None:
    from wmrl.autoresearch.environments.real import SandboxEnvironment

    script = read_script(args.script)
    suite = common.suite(args)
    suite.spec(args.task_id)
    sandbox = common.sandbox(args)
    common.warn_if_weak(sandbox, "run only scripts you trust")
    # `wmrl exec` runs the user's own script: weak isolation is their choice, and it was warned about above.
    env = SandboxEnvironment(suite, sandbox, use_cache=not args.no_cache, timeout_s=args.timeout,
                             allow_weak_isolation=True, allow_weak_bounds=True)
    with console.status(Text(f"running {printable(args.script)} on {args.task_id} ({env.sandbox.name} sandbox)")):
        outcome = env.execute(args.task_id, script)
    env.close()
    if args.json:
        sys.stdout.write(safe_json(outcome.to_dict()) + "\n")
        return
    # The script's words first, framed; wmrl's own verdict last, where nothing the script printed can follow it.
    out.print(framed(outcome.feedback, "feedback (the script's output and the grader's message, shown as text)",
                     out.width), highlight=False, soft_wrap=True)
    table = Table(title=f"wmrl exec: {args.task_id}", show_header=False)
    for key in ("status", "reward", "score", "position", "wall_seconds", "validation_score", "cached", "error"):
        value = getattr(outcome, key)
        table.add_row(key, common.plain(value.value if hasattr(value, "value") else value))
    if outcome.flags:
        table.add_row("flags", common.plain("; ".join(outcome.flags)))
    out.print(table)


def cmd_leak_scan(args) -> None:
    from wmrl.autoresearch.environments.leak_scan import leak_scan
    from wmrl.autoresearch.environments.real import SandboxEnvironment

    suite = common.suite(args)
    ids = common.task_ids(args, suite)
    sandbox = common.sandbox(args)
    common.warn_if_weak(sandbox, "the scan shows what such runs can read")
    env = SandboxEnvironment(suite, sandbox, use_log=False, allow_weak_isolation=True, allow_weak_bounds=True)
    try:
        with console.status(Text(f"scanning every file a {sandbox.name} sandbox run can read for {len(ids)} "
                                 "tasks' answers")):
            report = leak_scan(suite, sandbox, ids, roots=tuple(args.root or ["/"]), hidden=env.hidden_paths(),
                               fresh=args.fresh)
    except RuntimeError as exc:
        raise CliError(str(exc)) from exc
    finally:
        env.close()
    table = Table(title=f"leak scan: {report.backend} sandbox ({report.isolation}), "
                        f"{len(report.files)} files, {report.bytes_scanned / 1e9:.2f} GB"
                        + (f" ({report.known_clean} cleared by an earlier scan)" if report.known_clean else ""))
    for col in ("task", "files scanned", "public files", "row fingerprints", "sequence length", "hits"):
        table.add_column(col, justify="left" if col == "task" else "right")
    for t in report.tasks.values():
        table.add_row(t.task_id, str(t.files_scanned), str(len(t.public_files)), str(t.row_fingerprints),
                      str(t.sequence_length), str(len(t.hits)))
    out.print(table)
    if args.report:
        Path(args.report).write_text(json.dumps(report.to_dict(), indent=1))
        console.print(f"report written: {args.report} (every file scanned, per task)")
    if report.unreadable:
        console.print(f"{len(report.unreadable)} files could not be opened inside the sandbox (not readable there)")
    if not report.clean:
        lines = "; ".join(f"{task}: {path} ({how})" for task, path, how in report.hits[:20])
        raise CliError(f"{len(report.hits)} file(s) a sandboxed script can read hold a task's answers: {lines}")
    out.print(f"no answers of the {len(ids)} tasks in any of the {len(report.files)} files a run can read",
              markup=False)
