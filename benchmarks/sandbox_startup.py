"""Start-up cost of one sandbox run: the code before a change against this tree's, paired, on both backends.

    python benchmarks/sandbox_startup.py --before /path/to/old/checkout/src [--runs 20] [--backends process docker]

For each backend two worker processes hold one sandbox each: one imports wmrl from ``--before`` (e.g. an
export of ``main``), one from this tree. They run the same script alternately (before, after, before, ...), so
both see the same machine load, and each run is timed from the call to the result (``sandbox.run``: making the
work dir, the mounts, the namespaces, the interpreter, the script, collecting, cleaning up). Scripts:

* ``pass``: the sandbox's own cost and the interpreter's start;
* ``import numpy, pandas, sklearn``: the import floor of a typical solution, read through the sandbox's view.

Per script: the mean of each side with a 95% bootstrap interval, and the paired difference after - before with
its interval. The one-off cost of making a sandbox (probing the host, building or loading the runtime view) is
timed too. Writes ``benchmarks/results/sandbox_startup.json`` and prints a markdown table; record the machine's
load beside it (it is in the JSON).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from wmrl.algorithms.stats import bootstrap_mean, paired_gain

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = {"pass": "pass\n", "import numpy, pandas, sklearn": "import numpy, pandas, sklearn\n"}

WORKER = r"""
import json, sys, time
start = time.perf_counter()
from wmrl.autoresearch.environments.sandbox import ExecutionRequest, make_sandbox
from wmrl.autoresearch.environments.sandbox.base import SandboxLimits
backend = sys.argv[1]
sandbox = make_sandbox(backend, max_concurrency=1, **({"isolation": "bwrap"} if backend == "process" else {}))
print(json.dumps({"ready": time.perf_counter() - start, "isolation": sandbox.description}), flush=True)
for line in sys.stdin:
    script = json.loads(line)
    began = time.perf_counter()
    result = sandbox.run(ExecutionRequest(script=script, limits=SandboxLimits(timeout_s=120, memory_mb=4096)))
    seconds = time.perf_counter() - began
    ok = result.exit_code == 0 and result.infra_error is None
    print(json.dumps({"seconds": seconds, "ok": ok, "why": result.infra_error or result.stderr_tail[-300:]}), flush=True)
sandbox.close()
"""


class Worker:
    """One sandbox in a process of its own, importing wmrl from ``src``."""

    def __init__(self, src: Path, backend: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(src)}
        self.proc = subprocess.Popen([sys.executable, "-c", WORKER, backend], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env, cwd=src.parent)
        self.ready = json.loads(self.proc.stdout.readline())

    def run(self, script: str, i: int) -> float:
        self.proc.stdin.write(json.dumps(f"{script}# {i}\n") + "\n")
        self.proc.stdin.flush()
        answer = json.loads(self.proc.stdout.readline())
        if not answer["ok"]:
            raise RuntimeError(f"the run failed: {answer['why']}")
        return answer["seconds"]

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def measure(before_src: Path, backend: str, runs: int) -> dict:
    before, after = Worker(before_src, backend), Worker(ROOT / "src", backend)
    out = {"construction_s": {"before": before.ready["ready"], "after": after.ready["ready"]},
           "isolation": {"before": before.ready["isolation"], "after": after.ready["isolation"]}, "scripts": {}}
    try:
        for name, script in SCRIPTS.items():
            pairs = [(before.run(script, i), after.run(script, i)) for i in range(runs)]
            b, a = [p[0] for p in pairs], [p[1] for p in pairs]
            out["scripts"][name] = {
                "before": bootstrap_mean({name: b}), "after": bootstrap_mean({name: a}),
                "difference": paired_gain({name: b}, {name: a}), "before_runs": b, "after_runs": a,
            }
    finally:
        before.close()
        after.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", required=True, type=Path, help="the src/ folder of the code before the change")
    parser.add_argument("--backends", nargs="+", default=["process", "docker"])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "sandbox_startup.json")
    args = parser.parse_args()
    load_before = os.getloadavg()
    started = time.time()
    results = {backend: measure(args.before.resolve(), backend, args.runs) for backend in args.backends}
    record = {"date": time.strftime("%Y-%m-%d %H:%M"), "machine": platform.platform(), "cpus": os.cpu_count(),
              "load_average_before": load_before, "load_average_after": os.getloadavg(),
              "seconds": round(time.time() - started, 1), "runs_per_script": args.runs, "backends": results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1))
    print("| backend | script | before (s) | after (s) | after - before (s), 95% CI |")
    print("|---|---|---|---|---|")
    for backend, r in results.items():
        for name, s in r["scripts"].items():
            (b, bl, bh), (a, al, ah), (d, dl, dh) = s["before"], s["after"], s["difference"]
            print(f"| {backend} | `{name}` | {b:.3f} [{bl:.3f}, {bh:.3f}] | {a:.3f} [{al:.3f}, {ah:.3f}] "
                  f"| {d:+.3f} [{dl:+.3f}, {dh:+.3f}] |")
        c = r["construction_s"]
        print(f"| {backend} | making the sandbox | {c['before']:.2f} | {c['after']:.2f} | |")
    print(f"load average {record['load_average_before']} -> {record['load_average_after']} on {record['cpus']} CPUs")


if __name__ == "__main__":
    main()
