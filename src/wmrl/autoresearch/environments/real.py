"""`SandboxEnvironment`: the real environment. Runs solutions in a sandbox, grades them on hidden answers.

    env = SandboxEnvironment()                      # process sandbox, default task cache, log + cache
    outcome = env.execute("smoke_iris", script)     # -> Outcome(status, reward, score, position, ...)

The deterministic gate (no code, syntax error) answers without running anything. Every execution is
logged; repeated (task, script, limits, sandbox) executions come from the log's cache.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from wmrl.autoresearch.contracts import ShowsStarter
from wmrl.autoresearch.environments.execution_log import ExecutionLog, cache_key
from wmrl.autoresearch.environments.grader import check_script, grade
from wmrl.autoresearch.environments.sandbox.base import ExecutionRequest, Sandbox, SandboxLimits
from wmrl.autoresearch.tasks.build import STARTER_HEADING, BuiltTask
from wmrl.autoresearch.tasks.model_choice import choice_prompt, choice_starter
from wmrl.autoresearch.tasks.suite import TaskSuite
from wmrl.types import Outcome, Source

if TYPE_CHECKING:
    from wmrl.types import StepRequest

log = logging.getLogger(__name__)
# A run the host starved (its timeout excused by CPU that other processes held) is run again this many times before
# it is recorded as missing, with the host's load named (`grader._timeout`).
STARVED_RETRIES = 2
STARTER_VIEWS = ("script", "score")  # SandboxEnvironment(starter_view=...)


class SandboxEnvironment(ShowsStarter):
    """Real execution of AutoResearch solutions.

    Args:
        suite: the task suite (default: the shipped catalogue in the default cache dir).
        sandbox: the backend (default: :class:`~wmrl.autoresearch.environments.sandbox.ProcessSandbox`).
        log_path: the execution log (default ``<cache>/executions.jsonl``); ``None`` with
            ``use_log=False`` disables logging and caching.
        use_cache: serve repeated executions from the log.
        use_log: keep the execution log at all (``False``: no logging, no cache).
        timeout_s: overrides every task's time budget (default: each task's own).
        starter_solution: the reference solution shown in the prompt as the starter and begun by the
            ``starter_head`` prefill (default ``linear_baseline``, the one in each task's description). Any
            reference solution, or ``heavy_boosting``: the heavy execution tier of ``benchmarks/speedup.py``, a
            long gradient-boosting run in the baseline's shape, so that execution costs what it does in heavy
            AutoResearch work.
        starter_view: how the prompt shows the starter. ``script`` (default): whole, as a working solution to improve
            on. ``score``: a tabular starter's head up to its model line, rewritten so that a ``finish(model)``
            helper does the fitting, scoring and writing, with the starter's measured validation score to beat
            (:mod:`wmrl.autoresearch.tasks.model_choice`): the policy chooses the estimator, which is what a small policy can
            learn to do better (``benchmarks/speedup.py --preset cpu-quality``). The starter is run once per task
            to measure its score.
        allow_weak_isolation: accept a sandbox that cannot hide the answers: ``ProcessSandbox`` with
            isolation ``unshare`` or ``none`` (what ``auto`` falls back to without bubblewrap) runs the script as
            the host user on the host filesystem, where it can read the answers and write the execution log.
            Only for scripts you trust (your own); training on a policy's scripts must not set it.
        allow_weak_bounds: accept a sandbox that cannot give each run its own control group
            (``ProcessSandbox`` on a host without cgroup v2 delegation and without a writable cgroup v1 hierarchy):
            a run's memory is then bounded per process only and its CPU not at all, so one run can take the
            host's memory or starve its neighbours into timeouts. For trusted scripts, or a machine of your own.

    Raises:
        ValueError: the sandbox cannot hide the answers and ``allow_weak_isolation`` is not set, or it cannot
            bound each run and ``allow_weak_bounds`` is not set.
    """

    source = Source.REAL

    def __init__(
        self,
        suite: TaskSuite | None = None,
        sandbox: Sandbox | None = None,
        log_path: str | Path | None = None,
        use_log: bool = True,
        use_cache: bool = True,
        timeout_s: float | None = None,
        starter_solution: str = "linear_baseline",
        starter_view: str = "script",
        allow_weak_isolation: bool = False,
        allow_weak_bounds: bool = False,
    ) -> None:
        self.suite = suite or TaskSuite()
        self.starter_solution = starter_solution
        if starter_view not in STARTER_VIEWS:
            raise ValueError(f"model.init_args.environment.init_args.starter_view: {starter_view!r} is not one of "
                             f"{', '.join(STARTER_VIEWS)}")
        self.starter_view = starter_view
        self._starter_scores: dict[str, float | None] = {}
        if sandbox is None:
            from wmrl.autoresearch.environments.sandbox import ProcessSandbox

            sandbox = ProcessSandbox()
        # Only a sandbox that keeps the task cache out of the script's reach may train; the tripwire alone is a
        # detector that ctypes or a subprocess walks past.
        if not sandbox.hides_answers and not allow_weak_isolation:
            raise ValueError(
                f"model.init_args.environment.init_args.sandbox: {type(sandbox).__name__} "
                f"({sandbox.description or sandbox.name}) "
                "runs solutions as the host user on the host filesystem, where they can read the hidden answers "
                "and forge the execution log. Install bubblewrap (apt-get install bubblewrap) or use the docker "
                "sandbox (wmrl.autoresearch.environments.sandbox.docker.DockerSandbox); pass "
                "model.init_args.environment.init_args.allow_weak_isolation=true only for trusted scripts."
            )
        if not sandbox.bounds_each_run and not allow_weak_bounds:
            raise ValueError(
                f"model.init_args.environment.init_args.sandbox: {type(sandbox).__name__} cannot give each run its "
                f"own control group here ({sandbox.no_cgroup_reason}), so a run's memory "
                "is bounded per process only and its CPU not at all. Run as root, give wmrl a delegated cgroup v2 "
                "(systemd-run --scope -p Delegate=yes ..., or WMRL_CGROUP=DIR) or use the docker sandbox; pass "
                "model.init_args.environment.init_args.allow_weak_bounds=true to accept the weaker bounds."
            )
        self.sandbox = sandbox
        self.timeout_s = timeout_s
        path = log_path if log_path is not None else self.suite.cache_dir / "executions.jsonl"
        self.log = ExecutionLog(path, use_cache=use_cache) if use_log else None

    def limits(self, task: BuiltTask) -> SandboxLimits:
        return SandboxLimits(timeout_s=self.timeout_s or task.spec.time_budget_s, memory_mb=task.spec.memory_mb)

    def hidden_paths(self) -> tuple[str, ...]:
        """What no run may read, whichever task it solves: the task cache (every built task's answers, the
        execution log and its key) and the private folders of *every* folder task of the suite (the sandboxes
        cover those that fall inside what they show: a task folder under ``/usr/lib`` or in ``site-packages``)."""
        paths = [str(self.suite.cache_dir)]
        for spec in self.suite.specs():
            if spec.folder is not None:
                paths += map(str, spec.folder.private_roots)
        return tuple(dict.fromkeys(paths))

    def request(self, task: BuiltTask, script: str, hidden: tuple[str, ...] | None = None) -> ExecutionRequest:
        """The sandbox request of one run (``hidden``: :meth:`hidden_paths`, computed once per batch)."""
        hidden = self.hidden_paths() if hidden is None else hidden
        return ExecutionRequest(
            script=script,
            public_dir=task.public_dir,
            files={"task.md": task.description.encode()},
            limits=self.limits(task),
            forbidden=tuple(dict.fromkeys((*hidden, *map(str, task.private_paths)))),
            label=task.id,
        )

    def execute(self, task_id: str, script: str | None) -> Outcome:
        """Run and grade one solution."""
        return self.execute_many([(task_id, script)])[0]

    def execute_many(
        self,
        jobs: Sequence[tuple[str, str | None]],
        on_done: Callable[[int, Outcome], None] | None = None,
    ) -> list[Outcome]:
        """Run and grade many solutions concurrently (bounded by the sandbox), results in order. A run the host
        starved is run again up to ``STARVED_RETRIES`` times; after that it is missing (infra), never a 0."""
        outcomes: list[Outcome | None] = [None] * len(jobs)
        pending: list[tuple[int, BuiltTask, str, str]] = []
        for i, (task_id, script) in enumerate(jobs):
            task = self.suite.get(task_id)
            gated = check_script(script)
            key = self._key(task, script) if gated is None else ""
            if gated is None and self.log is not None:
                gated = self.log.lookup(key)
            if gated is not None:
                outcomes[i] = gated
                if on_done is not None:
                    on_done(i, gated)
                continue
            pending.append((i, task, script, key))

        attempts = [0] * len(pending)
        again: list[int] = []

        def finished(j: int, result) -> None:
            i, task, script, key = pending[j]
            attempts[j] += 1
            if result.timeout_reason == "starved" and attempts[j] <= STARVED_RETRIES:
                again.append(j)  # the host's fault, not the script's: run it again before calling it missing
                return
            outcome = grade(task, result)
            if self.log is not None:
                cacheable = not result.timed_out or result.own_timeout
                self.log.append(key, task.id, script, outcome, result.backend, result.isolation,
                                cacheable=cacheable, cpu_seconds=result.cpu_seconds)
            outcomes[i] = outcome
            if on_done is not None:
                on_done(i, outcome)

        hidden = self.hidden_paths() if pending else ()
        batch = list(range(len(pending)))
        while batch:
            self.sandbox.run_many([self.request(pending[j][1], pending[j][2], hidden) for j in batch],
                                  on_done=lambda k, result, batch=batch: finished(batch[k], result))
            batch, again[:] = sorted(again), []
        return outcomes  # type: ignore[return-value]

    def step_many(self, requests: Sequence[StepRequest]) -> list[Outcome]:
        """The agent-loop protocol: execute each turn's parsed code (``None``: no block -> malformed)."""
        return self.execute_many([(r.task_id, r.code) for r in requests])

    def prompt(self, task_id: str) -> str:
        """The task prompt the agent reads (its starter section shows :meth:`starter`)."""
        task = self.suite.get(task_id)
        if self.starter_view == "score":
            return choice_prompt(task.description, STARTER_HEADING, self.starter(task_id),
                                 self.starter_score(task_id), task.higher_is_better)
        if self.starter_solution == "linear_baseline":
            return task.description
        head, _, _ = task.description.partition(STARTER_HEADING)
        return (f"{head}{STARTER_HEADING}\nA working solution (it writes a valid submission). Improve on it.\n\n"
                f"```python\n{self.starter(task_id).strip()}\n```\n")

    def starter(self, task_id: str) -> str:
        """The task's starter solution: the one named by ``starter_solution``."""
        try:
            starter = self.suite.get(task_id).starter_solution(self.starter_solution)
        except (KeyError, ValueError) as err:
            raise ValueError(f"model.init_args.environment.init_args.starter_solution: {err.args[0]}") from None
        if self.starter_view == "script":
            return starter
        try:
            return choice_starter(starter)
        except ValueError as err:
            raise ValueError(f"model.init_args.environment.init_args.starter_view: score: task {task_id!r}: "
                             f"{err.args[0]}; use starter_view: script for it") from None

    def starter_score(self, task_id: str) -> float | None:
        """The starter's own ``VALIDATION_SCORE``, measured by running it once (per task and environment)."""
        if task_id not in self._starter_scores:
            self._starter_scores[task_id] = self.execute(task_id, self.starter(task_id)).validation_score
        return self._starter_scores[task_id]

    def _key(self, task: BuiltTask, script: str) -> str:
        limits = self.limits(task)
        # The backend and its isolation are part of the key: an outcome seen under one sandbox is not
        # another's (limits and isolation differ), and a record from a weakly isolated run is never served to a
        # strongly isolated one.
        backend = f"{self.sandbox.name}/{self.sandbox.description}"
        return cache_key(task.id, task.data_hash, script, (limits.timeout_s, limits.memory_mb), backend)

    def close(self) -> None:
        self.sandbox.close()
