"""Sandbox throughput: executions per second and per-run overhead, process vs docker, on the smoke tasks.

    python benchmarks/sandbox_throughput.py [--backends process docker] [--repeats 3] [--concurrency 2]

Per backend it measures (1) the per-run overhead: ``pass`` run serially, so only the sandbox's own cost and
the interpreter start remain; (2) the import floor: ``import pandas, sklearn``; (3) throughput: every reference
solution of the smoke tasks run ``--repeats`` times at ``--concurrency``, executions per second and mean seconds
per execution. Nothing is cached (the environment's log is off). Prints a markdown table.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

from wmrl.autoresearch.environments.real import SandboxEnvironment
from wmrl.autoresearch.environments.sandbox import ExecutionRequest, make_sandbox
from wmrl.autoresearch.tasks.suite import TaskSuite


def serial_seconds(sandbox, script: str, n: int) -> list[float]:
    seconds = []
    for i in range(n):
        start = time.perf_counter()
        result = sandbox.run(ExecutionRequest(script=f"{script}\n# {i}\n"))
        seconds.append(time.perf_counter() - start)
        if result.exit_code != 0 or result.infra_error:
            raise RuntimeError(f"{sandbox.name}: {script!r} failed: {result.infra_error or result.stderr_tail}")
    return seconds


def throughput(env: SandboxEnvironment, repeats: int) -> tuple[int, float, float, dict]:
    tasks = env.suite.build(split="smoke")
    jobs = [(t.id, s + f"\n# repeat {r}\n") for r in range(repeats) for t in tasks for s in t.references().values()]
    start = time.perf_counter()
    outcomes = env.execute_many(jobs)
    wall = time.perf_counter() - start
    statuses: dict[str, int] = {}
    for o in outcomes:
        statuses[o.status.value] = statuses.get(o.status.value, 0) + 1
    return len(jobs), wall, statistics.mean(o.wall_seconds for o in outcomes), statuses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", nargs="+", default=["process", "docker"])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--serial-runs", type=int, default=10)
    args = parser.parse_args()

    suite = TaskSuite()
    rows = []
    for backend in args.backends:
        try:
            sandbox = make_sandbox(backend, max_concurrency=args.concurrency)
        except (ImportError, RuntimeError) as exc:
            print(f"skipping {backend}: {exc}")
            continue
        overhead = serial_seconds(sandbox, "pass", args.serial_runs)
        imports = serial_seconds(sandbox, "import pandas, sklearn", args.serial_runs)
        env = SandboxEnvironment(suite, sandbox, use_log=False)
        n, wall, mean_exec, statuses = throughput(env, args.repeats)
        sandbox.close()
        rows.append(
            (backend, getattr(sandbox, "description", backend), statistics.median(overhead),
             statistics.median(imports), n, wall, n / wall, mean_exec, statuses)
        )

    print(f"\nmachine: {platform.machine()}, {platform.processor() or 'cpu'}, python {platform.python_version()}, "
          f"concurrency {args.concurrency}\n")
    print("| backend | isolation | run overhead (s, median) | import pandas+sklearn (s) | executions | wall (s) "
          "| executions/s | mean s/execution | statuses |")
    print("|---|---|---|---|---|---|---|---|---|")
    for b, iso, ov, imp, n, wall, eps, mean_exec, st in rows:
        print(f"| {b} | {iso} | {ov:.3f} | {imp:.3f} | {n} | {wall:.1f} | {eps:.2f} | {mean_exec:.2f} | {st} |")


if __name__ == "__main__":
    main()
