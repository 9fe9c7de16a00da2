"""`SandboxEnvironment`: the real environment. Runs solutions in a sandbox, grades them on hidden answers.

    env = SandboxEnvironment()                      # process sandbox, default task cache, log + cache
    outcome = env.execute("smoke_iris", script)     # -> Outcome(status, reward, score, position, ...)

The deterministic gate (no code, syntax error) answers without running anything. Every execution is
logged; repeated (task, script, limits) executions come from the log's cache.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from wmrl.environments.execution_log import ExecutionLog, cache_key
from wmrl.environments.grader import check_script, grade
from wmrl.environments.sandbox.base import ExecutionRequest, Sandbox, SandboxLimits
from wmrl.tasks.build import BuiltTask
from wmrl.tasks.suite import TaskSuite
from wmrl.types import Outcome, Source

if TYPE_CHECKING:
    from wmrl.rollout.agent import StepRequest

log = logging.getLogger(__name__)


class SandboxEnvironment:
    """Real execution of AutoResearch solutions.

    Args:
        suite: the task suite (default: the shipped catalogue in the default cache dir).
        sandbox: the backend (default: :class:`~wmrl.environments.sandbox.ProcessSandbox`).
        log_path: the execution log (default ``<cache>/executions.jsonl``); ``None`` with
            ``use_log=False`` disables logging and caching.
        use_cache: serve repeated executions from the log.
        timeout_s: overrides every task's time budget (default: each task's own).
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
    ) -> None:
        self.suite = suite or TaskSuite()
        if sandbox is None:
            from wmrl.environments.sandbox import ProcessSandbox

            sandbox = ProcessSandbox()
        self.sandbox = sandbox
        self.timeout_s = timeout_s
        path = log_path if log_path is not None else self.suite.cache_dir / "executions.jsonl"
        self.log = ExecutionLog(path, use_cache=use_cache) if use_log else None

    def limits(self, task: BuiltTask) -> SandboxLimits:
        return SandboxLimits(timeout_s=self.timeout_s or task.spec.time_budget_s, memory_mb=task.spec.memory_mb)

    def request(self, task: BuiltTask, script: str) -> ExecutionRequest:
        return ExecutionRequest(
            script=script,
            public_dir=task.public_dir,
            files={"task.md": task.description.encode()},
            limits=self.limits(task),
            forbidden=(str(self.suite.cache_dir),),
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
        """Run and grade many solutions concurrently (bounded by the sandbox), results in order."""
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

        def finished(j: int, result) -> None:
            i, task, script, key = pending[j]
            outcome = grade(task, result)
            if self.log is not None:
                self.log.append(key, task.id, script, outcome, result.backend, result.isolation)
            outcomes[i] = outcome
            if on_done is not None:
                on_done(i, outcome)

        self.sandbox.run_many([self.request(task, script) for _, task, script, _ in pending], on_done=finished)
        return outcomes  # type: ignore[return-value]

    def step_many(self, requests: Sequence[StepRequest]) -> list[Outcome]:
        """The agent-loop protocol: execute each turn's parsed code (``None``: no block -> malformed)."""
        return self.execute_many([(r.task_id, r.code) for r in requests])

    def prompt(self, task_id: str) -> str:
        """The task prompt the agent reads."""
        return self.suite.get(task_id).description

    def starter(self, task_id: str) -> str:
        """The task's starter solution (the linear baseline shown in its prompt)."""
        return self.suite.get(task_id).starter

    def _key(self, task: BuiltTask, script: str) -> str:
        limits = self.limits(task)
        return cache_key(task.id, task.data_hash, script, (limits.timeout_s, limits.memory_mb))

    def close(self) -> None:
        self.sandbox.close()
