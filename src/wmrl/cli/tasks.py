"""``wmrl tasks list|add|remove|show|build|check``: the AutoResearch task suite from the command line (the built-in
catalogue, registered task folders and MLE-bench competitions; docs/tasks.md)."""

from __future__ import annotations

import json
from collections import Counter

from rich.table import Table
from rich.text import Text

from wmrl.autoresearch.tasks.spec import SPLITS
from wmrl.cli import common
from wmrl.cli.common import CliError, console, out


def add_parsers(sub) -> None:
    """``wmrl tasks ...`` on the top-level parser's subcommands."""
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
        common.add_sandbox_args(p)
        p.set_defaults(fn=fn)


def _source(spec) -> str:
    return f"{spec.folder.kind}:{spec.folder.root}" if spec.folder is not None else f"{spec.package}:{spec.loader}"


def _recorded(suite, spec) -> str:
    if spec.folder is not None and spec.folder.leaderboard is not None:
        return "file"
    return "yes" if suite.lock.get(spec.id, {}).get("leaderboard") else "no"


def cmd_tasks_list(args) -> None:
    suite = common.suite(args)
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
        table.add_row(s.id, s.split, s.type, s.metric, common.plain(_source(s)), f"{s.time_budget_s:.0f}s",
                      "yes" if s.heavy else "", _recorded(suite, s))
    out.print(table)
    for problem in suite.problems:
        console.print(Text(f"warning: {problem}", style="yellow"))


def cmd_tasks_add(args) -> None:
    from wmrl.autoresearch.tasks import registry
    from wmrl.autoresearch.tasks.catalog import TASKS

    suite = common.suite(args)
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

    gone = registry.remove(common.suite(args).cache_dir, args.names)
    if not gone:
        raise CliError(f"no registered task source matches {', '.join(args.names)} (`wmrl tasks list` shows them)")
    out.print(f"unregistered {len(gone)} source(s): " + ", ".join(map(str, gone)), markup=False, highlight=False)


def cmd_tasks_show(args) -> None:
    task = common.suite(args).get(args.id)
    if args.json:
        out.print_json(json.dumps({**task.card, "leaderboard": task.leaderboard, "root": str(task.root)}))
        return
    out.print(f"[bold]{task.id}[/bold]  ({common.plain(task.root)})")
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
    suite = common.suite(args)
    ids = common.task_ids(args, suite)
    with common.progress() as progress:
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
    suite = common.suite(args)
    ids = common.task_ids(args, suite)
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
    sandbox = common.sandbox(args)
    common.warn_if_weak(sandbox, "reference solutions are trusted, so they run anyway")
    env = SandboxEnvironment(suite, sandbox, use_log=False, allow_weak_isolation=True, allow_weak_bounds=True)
    total = sum(len(t.references()) for t in tasks)
    with common.progress() as progress:
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
