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
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from wmrl.autoresearch.environments.quoting import printable
from wmrl.autoresearch.tasks.spec import SPLITS
from wmrl.cli.quick_help import INTERRUPTED, LIGHTNING_COMMANDS
from wmrl.evaluation.records import EVAL_SEED

# Tables stay readable when piped or logged (rich assumes 80 columns without a terminal).
console = Console(stderr=True, width=None if sys.stderr.isatty() else 140)
out = Console(width=None if sys.stdout.isatty() else 140)


class CliError(Exception):
    """A user error: printed without a traceback, exit code 2."""


class CommandInterrupted(KeyboardInterrupt):
    """Ctrl+C, with what the command kept (printed in one line, exit :data:`INTERRUPTED`)."""


def _progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[last]}"),
        console=console,
        transient=False,
    )


def _suite(args):
    from wmrl.autoresearch.tasks.suite import TaskSuite

    return TaskSuite(cache_dir=args.cache_dir)


def _source(spec) -> str:
    return f"{spec.folder.kind}:{spec.folder.root}" if spec.folder is not None else f"{spec.package}:{spec.loader}"


def _recorded(suite, spec) -> str:
    if spec.folder is not None and spec.folder.leaderboard is not None:
        return "file"
    return "yes" if suite.lock.get(spec.id, {}).get("leaderboard") else "no"


def _sandbox(args):
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


def _ids(args, suite) -> list[str]:
    if args.ids and args.split:
        raise CliError("give task ids or --split, not both")
    ids = args.ids or [s.id for s in suite.specs(args.split)]
    for task_id in ids:
        suite.spec(task_id)  # raises a clear error for an unknown id
    return ids


# -- wmrl tasks ----------------------------------------------------------------------------------------
def cmd_tasks_list(args) -> None:
    suite = _suite(args)
    specs = suite.specs(args.split)
    if args.json:
        out.print_json(json.dumps([{"id": s.id, "split": s.split, "type": s.type, "metric": s.metric,
                                     "source": _source(s), "heavy": s.heavy} for s in specs]))
        return
    counts = Counter(s.split for s in specs)
    by_split = ", ".join(f"{counts[name]} {name}" for name in SPLITS if counts[name])
    noun = "task" if len(specs) == 1 else "tasks"
    table = Table(title=f"{len(specs)} {noun}" + (f": {by_split}" if len(counts) > 1 else ""))
    for col in ("id", "split", "type", "metric", "source", "budget", "heavy", "recorded"):
        table.add_column(col)
    for s in specs:
        table.add_row(s.id, s.split, s.type, s.metric, _plain(_source(s)), f"{s.time_budget_s:.0f}s",
                      "yes" if s.heavy else "", _recorded(suite, s))
    out.print(table)
    for problem in suite.problems:
        console.print(Text(f"warning: {problem}", style="yellow"))


def cmd_tasks_add(args) -> None:
    from wmrl.autoresearch.tasks import registry
    from wmrl.autoresearch.tasks.catalog import TASKS

    suite = _suite(args)
    if args.mlebench_data is not None:
        sources = [{"mlebench": d, "data": args.mlebench_data, "split": args.split or "heldout",
                    **({"time_budget_s": args.time_budget} if args.time_budget else {})} for d in args.dirs]
    else:
        if args.split or args.time_budget:
            raise CliError("--split and --time-budget apply to MLE-bench competitions (--mlebench-data); a task "
                           "folder sets them in its task.yaml")
        sources = list(args.dirs)
    added = registry.add(suite.cache_dir, sources, [s.id for s in TASKS])
    for spec in added:
        for note in spec.folder.notes:
            console.print(Text(f"note: {note}", style="yellow"))
    built = [suite.get(spec.id, rebuild=True) for spec in added]  # built now: a problem shows here, not mid-run
    unranked = [task.id for task in built if not task.leaderboard]
    generic = [task.id for task in built if task.spec.folder.starter is None]
    out.print(f"registered {len(added)} task(s) in {registry.registry_path(suite.cache_dir)}: "
              + ", ".join(f"{s.id} ({s.split})" for s in added), markup=False, highlight=False)
    if generic:
        out.print(f"no starter.py for {', '.join(generic)}: their prompts show a generic baseline written from the "
                  f"public files (`wmrl tasks show ID` prints it, `wmrl tasks check {' '.join(generic)}` runs it)",
                  markup=False, highlight=False)
    if unranked:
        out.print(f"no leaderboard yet for {', '.join(unranked)}: record one from the references with "
                  f"`wmrl tasks build {' '.join(unranked)} --record` (a valid submission is graded by its position)",
                  markup=False, highlight=False)


def cmd_tasks_remove(args) -> None:
    from wmrl.autoresearch.tasks import registry

    gone = registry.remove(_suite(args).cache_dir, args.names)
    if not gone:
        raise CliError(f"no registered task source matches {', '.join(args.names)} (`wmrl tasks list` shows them)")
    out.print(f"unregistered {len(gone)} source(s): " + ", ".join(map(str, gone)), markup=False, highlight=False)


def cmd_tasks_show(args) -> None:
    task = _suite(args).get(args.id)
    if args.json:
        out.print_json(json.dumps({**task.card, "leaderboard": task.leaderboard, "root": str(task.root)}))
        return
    out.print(f"[bold]{task.id}[/bold]  ({_plain(task.root)})")
    out.print_json(json.dumps({k: v for k, v in task.card.items() if k != "columns"}))
    out.print(f"leaderboard: {leaderboard_summary(task.leaderboard, task.higher_is_better)}", markup=False,
              highlight=False)
    folder = task.spec.folder
    if folder is not None:
        out.print(f"starter: {task.starter_origin}", markup=False, highlight=False)
        for note in folder.notes:
            console.print(Text(f"note: {note}", style="yellow"))
    out.print(task.description, markup=False, highlight=False)


def leaderboard_summary(scores: dict[str, float], higher_is_better: bool) -> str:
    """A leaderboard in one line: its size, best, median and worst, and its direction (``--json`` has every row).

    >>> leaderboard_summary({"a": 0.9, "b": 0.5, "c": 0.7}, True)
    '3 entries, best 0.9, median 0.7, worst 0.5 (higher is better; `--json` lists them)'
    >>> leaderboard_summary({}, True)
    'none recorded: `wmrl tasks build ID --record` scores the references'
    """
    if not scores:
        return "none recorded: `wmrl tasks build ID --record` scores the references"
    ranked = sorted(scores.values(), reverse=higher_is_better)
    median = sorted(ranked)[len(ranked) // 2]
    return (f"{len(ranked)} entries, best {ranked[0]:.6g}, median {median:.6g}, worst {ranked[-1]:.6g} "
            f"({'higher' if higher_is_better else 'lower'} is better; `--json` lists them)")


def cmd_tasks_build(args) -> None:
    suite = _suite(args)
    ids = _ids(args, suite)
    with _progress() as progress:
        bar = progress.add_task("building tasks", total=len(ids), last="")
        built = []
        for task_id in ids:
            progress.update(bar, last=task_id)
            built.append(suite.get(task_id, rebuild=args.rebuild))
            progress.advance(bar)
    console.print(f"{len(built)} tasks ready in {suite.cache_dir / 'tasks'}")
    if args.record:
        _run_references(args, suite, ids, record=True)


def cmd_tasks_check(args) -> None:
    suite = _suite(args)
    ids = _ids(args, suite)
    from wmrl.autoresearch.environments.grader import grader_self_test
    from wmrl.autoresearch.environments.references_run import Reproduction

    # Each task's grader must grade its own sample submission: that is what makes an exception it raises on a
    # submission the submission's fault (ran_no_sub) rather than an infrastructure failure.
    broken = [(task.id, why) for task in suite.build(ids) if (why := grader_self_test(task)) is not None]
    if broken:
        lines = "; ".join(f"{task_id}: {why}" for task_id, why in broken)
        raise CliError(f"{len(broken)} task grader(s) fail on their own sample submission: {lines}")
    out.print(f"{len(ids)} task graders grade their sample submission", markup=False)
    runs = _run_references(args, suite, ids, record=False)
    verdicts = [r.verdict for r in runs]
    tolerated = [(r, why) for r, (v, why) in zip(runs, verdicts, strict=True) if v is Reproduction.TOLERATED]
    bad = [(r, why) for r, (v, why) in zip(runs, verdicts, strict=True) if v is Reproduction.DIFFERS]
    graded = sum(v is Reproduction.GRADED for v, _ in verdicts)
    exact = len(runs) - len(tolerated) - len(bad) - graded
    out.print(f"{exact} exact, {len(tolerated)} within tolerance (same rank, another machine's floats), "
              f"{len(bad)} differ" + (f", {graded} graded on a task's own leaderboard" if graded else ""), markup=False)
    for r, why in tolerated:
        out.print(f"  tolerated {r.task_id}/{r.name}: {why}", markup=False)
    if bad:
        lines = "; ".join(f"{r.task_id}/{r.name}: {why}" for r, why in bad)
        raise CliError(f"{len(bad)} of {len(runs)} reference solutions did not reproduce their recorded score: {lines}")


def _run_references(args, suite, ids, record: bool):
    from wmrl.autoresearch.environments.real import SandboxEnvironment
    from wmrl.autoresearch.environments.references_run import relative_difference, run_references

    tasks = suite.build(ids)
    # Reference solutions are the kit's own trusted scripts: a weak isolation may run them (it is warned about).
    sandbox = _sandbox(args)
    _warn_if_weak(sandbox, "reference solutions are trusted, so they run anyway")
    env = SandboxEnvironment(suite, sandbox, use_log=False, allow_weak_isolation=True, allow_weak_bounds=True)
    total = sum(len(t.references()) for t in tasks)
    with _progress() as progress:
        bar = progress.add_task("recording references" if record else "running references", total=total, last="")

        def done(run) -> None:
            progress.update(bar, advance=1, last=f"{run.task_id}/{run.name}: {run.outcome.status.value}")

        runs = run_references(env, tasks, on_done=done, record=record)
    env.close()
    table = Table(title="reference solutions" + (" (recorded)" if record else ""))
    numeric = ("score", "recorded", "rel. diff", "position", "seconds")
    for col in ("task", "solution", "status", *numeric[:3], "reproduction", *numeric[3:]):
        table.add_column(col, justify="right" if col in numeric else "left")
    for r in runs:
        o = r.outcome
        fmt = lambda v: "" if v is None else f"{v:.6g}"  # noqa: E731
        if record:
            verdict, diff = "", ""
        else:
            verdict = r.verdict[0].value
            verdict = {"differs": "[red]differs[/red]", "tolerated": "[yellow]tolerated[/yellow]"}.get(verdict, verdict)
            both = o.score is not None and r.recorded is not None
            diff = f"{relative_difference(o.score, r.recorded):.1e}" if both else ""
        table.add_row(r.task_id, r.name, o.status.value, fmt(o.score), fmt(r.recorded), diff, verdict,
                      "" if record else fmt(o.position), f"{o.wall_seconds:.1f}")
    out.print(table)
    return runs


# -- wmrl exec -----------------------------------------------------------------------------------------
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


def _plain(value: object) -> Text:
    """A table cell that rich shows as it is: no markup (brackets in a path or a column name), no escapes."""
    return Text(printable(str(value)))


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


def _warn_if_weak(sandbox, consequence: str) -> None:
    """Say so when a process sandbox cannot hide the answers (``--isolation unshare|none``, or no bubblewrap) or
    cannot bound each run (no cgroup here: the sandbox logged why)."""
    if not sandbox.bounds_each_run:
        console.print(Text(f"warning: no cgroup per run here: a run's memory is bounded per process only and its CPU "
                           f"not at all; {consequence}.", style="yellow"))
    if not sandbox.hides_answers:
        console.print(
            Text(
                f"warning: --isolation {sandbox.isolation}: scripts run as you on this machine's filesystem "
                f"and can read the hidden answers; {consequence}. Install bubblewrap "
                "(apt-get install bubblewrap) or use --sandbox docker.",
                style="yellow",
            )
        )


def cmd_exec(args) -> None:
    from wmrl.autoresearch.environments.real import SandboxEnvironment

    script = read_script(args.script)
    suite = _suite(args)
    suite.spec(args.task_id)
    sandbox = _sandbox(args)
    _warn_if_weak(sandbox, "run only scripts you trust")
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
        table.add_row(key, _plain(value.value if hasattr(value, "value") else value))
    if outcome.flags:
        table.add_row("flags", _plain("; ".join(outcome.flags)))
    out.print(table)


def cmd_leak_scan(args) -> None:
    from wmrl.autoresearch.environments.leak_scan import leak_scan
    from wmrl.autoresearch.environments.real import SandboxEnvironment

    suite = _suite(args)
    ids = _ids(args, suite)
    sandbox = _sandbox(args)
    _warn_if_weak(sandbox, "the scan shows what such runs can read")
    env = SandboxEnvironment(suite, sandbox, use_log=False, allow_weak_isolation=True, allow_weak_bounds=True)
    try:
        with console.status(Text(f"scanning every file a {sandbox.name} sandbox run can read for {len(ids)} "
                                 "tasks' answers")):
            report = leak_scan(suite, sandbox, ids, roots=tuple(args.root or ["/"]), hidden=env.hidden_paths())
    except RuntimeError as exc:
        raise CliError(str(exc)) from exc
    finally:
        env.close()
    table = Table(title=f"leak scan: {report.backend} sandbox ({report.isolation}), "
                        f"{len(report.files)} files, {report.bytes_scanned / 1e9:.2f} GB")
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


# -- wmrl evaluate -------------------------------------------------------------------------------------
class _EvaluationProgress:
    """One bar per policy: its samples' generation (elapsed time), then each sample's execution as it ends; without
    a terminal (a log file) the same as one line per event."""

    def __init__(self, progress: Progress, samples: int) -> None:
        self.progress, self.samples = progress, samples
        self.bars: dict[str, int] = {}
        self.finished: dict[tuple[str, str], int] = {}

    def _say(self, text: str) -> None:
        if not console.is_terminal:
            console.print(text, markup=False, highlight=False)

    def start(self, policy, total: int) -> None:
        self.bars[policy.label] = self.progress.add_task(f"{policy.label}: generating {total} samples", total=total,
                                                         last="")
        self._say(f"{policy.label}: generating {total} samples")

    def executing(self, policy, count: int) -> None:
        self.progress.update(self.bars[policy.label], description=f"{policy.label}: executing")
        self._say(f"{policy.label}: executing {count} scripts")

    def done(self, policy, task_id: str, outcome) -> None:
        key = (policy.label, task_id)
        self.finished[key] = self.finished.get(key, 0) + 1
        position = "" if outcome.position is None else f" {outcome.position:.2f}"
        last = f"{task_id} sample {self.finished[key]}/{self.samples}: {outcome.status.value}{position}"
        self.progress.update(self.bars[policy.label], advance=1, last=last)
        self._say(f"{policy.label}: {last}")


def cmd_evaluate(args) -> None:
    from datetime import datetime

    from wmrl.algorithms.stats import describe_gain
    from wmrl.autoresearch.environments.real import SandboxEnvironment
    from wmrl.cli.evaluate import compare, resolve_policies
    from wmrl.evaluation.report import MISSING_ADVICE, shown

    suite = _suite(args)
    if args.tasks and args.split:
        raise CliError("give --tasks or --split, not both")
    task_ids = args.tasks or [s.id for s in suite.specs(args.split or "heldout")]
    for task_id in task_ids:
        suite.spec(task_id)  # an unknown id fails here, with a did-you-mean
    if args.samples < 1:
        raise CliError(f"--samples must be >= 1 (got {args.samples})")
    overrides = {key: value for key, value in (
        ("model", args.model), ("eval_temperature", args.temperature), ("max_new_tokens", args.max_new_tokens),
        ("prefill", args.prefill), ("max_turns", args.max_turns)) if value is not None}
    policies = resolve_policies(args.policies, overrides)
    out_dir = Path(args.out or Path("runs") / "evaluate" / datetime.now().strftime("%Y%m%d-%H%M%S"))
    sandbox = _sandbox(args)
    try:  # the policies' scripts are untrusted: a sandbox that cannot hide the answers is refused, as in training
        env = SandboxEnvironment(suite, sandbox, use_cache=not args.no_cache, starter_solution=args.starter,
                                 starter_view=args.starter_view, allow_weak_isolation=args.allow_weak_isolation,
                                 allow_weak_bounds=args.allow_weak_bounds)
    except ValueError as exc:
        message = str(exc)
        for key in ("allow_weak_isolation", "allow_weak_bounds"):  # the config key, as this command's flag
            message = message.replace(f"model.init_args.environment.init_args.{key}=true",
                                      "--" + key.replace("_", "-"))
        raise CliError(message.replace("model.init_args.environment.init_args.", "--")) from None
    console.print(f"{len(policies)} polic{'y' if len(policies) == 1 else 'ies'} x {len(task_ids)} task(s) x "
                  f"{args.samples} sample(s), seed {args.seed}, real execution ({sandbox.name} sandbox); "
                  f"samples and evaluation.json in {out_dir}", markup=False, highlight=False)
    try:
        with _progress() as progress:
            report = compare(policies, task_ids, args.samples, env, out_dir, seed=args.seed,
                             progress=_EvaluationProgress(progress, args.samples))
    except KeyboardInterrupt:
        done = sorted(p.name for p in out_dir.iterdir() if p.is_dir()) if out_dir.is_dir() else []
        kept = f"; the samples of {', '.join(done)} are in {out_dir}" if done else ""
        raise CommandInterrupted(f"wmrl evaluate stopped before it finished: no evaluation.json{kept}") from None
    finally:
        env.close()
    if args.json:
        out.print_json(json.dumps(report))
        return
    table = Table(title=f"held-out evaluation: {args.samples} samples per task, seed {args.seed} (real execution)")
    table.add_column("task")
    for policy in report["policies"]:
        table.add_column(f"{policy['label']}\nvalid / mean pos. / best-of-{args.samples}", justify="right")
    def cell(s: dict) -> str:
        return (f"{shown(s['valid_rate'], '.2f')} / {shown(s['mean_position'], '.3f')} / {shown(s['best_of_k'], '.3f')}"
                + (f" ({s['missing']} missing)" if s.get("missing") else ""))

    rows = {t: [] for t in task_ids}
    for policy in report["policies"]:
        for t in policy["tasks"]:
            rows[t["task_id"]].append(cell(t))
    for task_id, cells in rows.items():
        table.add_row(_plain(task_id), *cells)
    table.add_row("[bold]mean[/bold]", *(cell(p["summary"]) for p in report["policies"]))
    out.print(table)
    if any(p["summary"].get("missing") for p in report["policies"]):
        out.print(MISSING_ADVICE.strip().replace("<run dir>/samples/", "the samples folder"), markup=False)
    for diff in report["differences"]:
        position, valid = diff["mean_position"], diff["valid_rate"]
        o = position["overall"]
        said = ("no difference: every paired sample scored the same" if position["unchanged"]
                else describe_gain(o["point"], o["low"], o["high"], False))
        out.print(f"{diff['policy']} - {diff['reference']}: mean position {said}; valid rate "
                  f"{valid['overall']['point']:+.2f} [{valid['overall']['low']:+.2f}, {valid['overall']['high']:+.2f}] "
                  f"(paired over {len(task_ids) * args.samples} samples)", markup=False, highlight=False)
    for policy in report["policies"]:
        if policy["summary"]["valid_rate"] == 0:
            out.print(f"{policy['name']}: no valid submission on any task. Read its samples ({policy['samples_dir']}); "
                      "check each task's starter (`wmrl tasks show ID`, `wmrl tasks check ID`)", markup=False)
    out.print(f"written: {out_dir / 'evaluation.json'}", markup=False, highlight=False)


def cmd_report(args) -> None:
    from wmrl.report import training_logs, write_report

    try:
        logs = training_logs(Path(args.run_dir)) if Path(args.run_dir).is_dir() else []
        page = write_report(args.run_dir, args.out)
    except FileNotFoundError as exc:
        raise CliError(str(exc)) from exc
    console.print(f"read: {', '.join(str(p) for p in logs)}", markup=False, highlight=False)
    console.print(f"report written: {page} (open it in a browser)")


# -- parser --------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="wmrl",
        description="World Model RL for AutoResearch agents. Training: wmrl fit|validate|test -c CONFIG.yaml",
    )
    parser.add_argument("--cache-dir", default=None, help="task cache (default $WMRL_CACHE or ~/.cache/wmrl)")
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)

    def sandbox_args(p):
        p.add_argument("--sandbox", choices=("process", "docker"), default="process")
        p.add_argument("--isolation", choices=("auto", "bwrap", "unshare", "none"), default="auto",
                       help="process sandbox isolation (default: bubblewrap if it works here)")
        p.add_argument("--max-concurrency", type=int, default=None, help="runs at once (default: CPU cores)")

    for name, what in (("fit", "train"), ("validate", "evaluate on the held-out tasks"),
                       ("test", "evaluate on the test split")):  # run by LightningCLI (main() hands them over)
        sub.add_parser(name, help=f"{what} (LightningCLI): wmrl {name} -c CONFIG.yaml [--key value ...]; "
                                  f"`wmrl {name} --help` lists every key")
    tasks = sub.add_parser("tasks", help="the AutoResearch task suite").add_subparsers(dest="action", required=True)
    p = tasks.add_parser("list", help="list tasks")
    p.add_argument("--split", choices=SPLITS)
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_tasks_list)
    p = tasks.add_parser("add", help="register task folders (or MLE-bench competitions) in the cache dir")
    p.add_argument("dirs", nargs="+", metavar="DIR",
                   help="a task folder, a folder of them, or (with --mlebench-data) an MLE-bench competitions folder")
    p.add_argument("--mlebench-data", default=None, metavar="DATA_DIR",
                   help="MLE-bench's data dir: DIR is then a competitions folder (or one competition)")
    p.add_argument("--split", choices=SPLITS, default=None,
                   help="the competitions' split (default heldout)")
    p.add_argument("--time-budget", type=float, default=None, help="the competitions' budget per run (default 600 s)")
    p.set_defaults(fn=cmd_tasks_add)
    p = tasks.add_parser("remove", help="unregister task sources by id or path")
    p.add_argument("names", nargs="+", metavar="ID_OR_DIR")
    p.set_defaults(fn=cmd_tasks_remove)
    p = tasks.add_parser("show", help="a task's card and prompt")
    p.add_argument("id")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_tasks_show)
    for name, fn, help_ in (("build", cmd_tasks_build, "build tasks into the cache"),
                            ("check", cmd_tasks_check, "run reference solutions, compare with recorded scores")):
        p = tasks.add_parser(name, help=help_)
        p.add_argument("ids", nargs="*")
        p.add_argument("--split", choices=SPLITS)
        if name == "build":
            p.add_argument("--rebuild", action="store_true", help="rebuild even if the cache verifies")
            p.add_argument("--record", action="store_true",
                           help="run the references and record their scores as the leaderboard: a folder task's "
                                "in the cache dir; a built-in task's in the shipped lock (maintainers)")
        sandbox_args(p)
        p.set_defaults(fn=fn)

    p = sub.add_parser("exec", help="run and grade one solution script")
    p.add_argument("task_id")
    p.add_argument("script")
    p.add_argument("--json", action="store_true", help="print the outcome as JSON")
    p.add_argument("--timeout", type=float, default=None, help="override the task's time budget (s)")
    p.add_argument("--no-cache", action="store_true", help="execute even if this script was run before")
    sandbox_args(p)
    p.set_defaults(fn=cmd_exec)

    p = sub.add_parser("leak-scan", help="search every file a sandboxed script can read for the tasks' answers")
    p.add_argument("ids", nargs="*", help="tasks to scan for (default: every task, built-in and registered)")
    p.add_argument("--split", choices=SPLITS)
    p.add_argument("--report", default=None, metavar="PATH", help="write the full report (every file) as JSON")
    p.add_argument("--root", action="append", metavar="DIR",
                   help="search only under DIR, as the sandbox shows it (repeatable; default: /)")
    sandbox_args(p)
    p.set_defaults(fn=cmd_leak_scan)
    p = sub.add_parser("evaluate", help="compare policies (the base, checkpoints) on held-out tasks, real execution")
    p.add_argument("policies", nargs="+", metavar="POLICY",
                   help="`base` (the policy a fit starts from) or a checkpoint of `wmrl fit` (a .ckpt or its run dir); "
                        "the first is the reference of the paired differences")
    p.add_argument("--tasks", nargs="+", default=None, metavar="ID",
                   help="task ids (built-in, registered folders and competitions); in the fit's eval_tasks order to "
                        "reproduce its numbers")
    p.add_argument("--split", choices=SPLITS, default=None, help="every task of a split "
                   "(default: heldout)")
    p.add_argument("--samples", type=int, default=4, help="samples per task, K (default 4)")
    p.add_argument("--seed", type=int, default=EVAL_SEED, help="the sampling seed, shared by every policy (default "
                   f"{EVAL_SEED}: the fit's held-out evaluation seed)")
    p.add_argument("--out", default=None, help="output dir (default runs/evaluate/<time>)")
    p.add_argument("--model", default=None, help="the base model when no checkpoint says it")
    p.add_argument("--temperature", type=float, default=None, help="sampling temperature (default: the "
                   "checkpoint's eval_temperature)")
    p.add_argument("--max-new-tokens", type=int, default=None, help="tokens per turn (default: the checkpoint's)")
    p.add_argument("--max-turns", type=int, default=None, help="turns per sample (default: the checkpoint's)")
    p.add_argument("--prefill", choices=("none", "fence", "starter_head", "starter_estimator"), default=None,
                   help="how each turn starts (default: the checkpoint's)")
    p.add_argument("--starter", default="linear_baseline", help="the starter solution the prompts show "
                   "(environment.init_args.starter_solution of the fit; default linear_baseline)")
    p.add_argument("--starter-view", default="script", choices=("script", "score"), help="how the prompts show the "
                   "starter (environment.init_args.starter_view of the fit; default script)")
    p.add_argument("--no-cache", action="store_true", help="execute every script even if the execution log has it")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.add_argument("--allow-weak-isolation", action="store_true", help="run the policies' scripts in a sandbox "
                   "that cannot hide the answers (trusted policies only)")
    p.add_argument("--allow-weak-bounds", action="store_true", help="run them where each run cannot get its own "
                   "control group (memory and CPU bounded per process only)")
    sandbox_args(p)
    p.set_defaults(fn=cmd_evaluate)

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

