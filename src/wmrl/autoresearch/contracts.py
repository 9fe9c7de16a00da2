"""The AutoResearch wing's plug-in contracts, beside the core's (:mod:`wmrl.types`): the real environment that also
writes each task's prompt (:class:`TaskEnvironment`) and may show a starter solution (:class:`ShowsStarter`), a
world model that reads scripts against that starter (:class:`ComparesWithStarter`), and a task author's grader
(:class:`TaskGrader`). Runtime-checkable protocols, as the core's; :data:`CAPABILITIES` are the wing's optional
capabilities, declared among a plug-in's bases (:func:`wmrl.types.declares`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from wmrl.types import BindsToEnvironment, Environment, declares


@runtime_checkable
class TaskEnvironment(Environment, Protocol):
    """The AutoResearch real environment (``model.init_args.environment``): it also writes each task's first
    prompt, the task card the agent starts from (:class:`~wmrl.autoresearch.environments.real.SandboxEnvironment`)."""

    def prompt(self, task_id: str) -> str: ...


@runtime_checkable
class TaskGrader(Protocol):
    """A task author's grader (the ``grade`` function a folder task's ``grade.py`` names, MLE-bench's convention):
    the submission (a DataFrame) against the hidden answers (a DataFrame, or a list of records for ``.jsonl``
    answers) -> the score; raises ``InvalidSubmissionError`` for a submission it refuses. Run in a process of its
    own by :mod:`wmrl.autoresearch.tasks.grade_runner`."""

    def __call__(self, submission: Any, answers: Any) -> float: ...


@runtime_checkable
class ShowsStarter(Protocol):
    """An environment that shows the agent a starter solution per task (the real sandbox environment)."""

    def starter(self, task_id: str) -> str: ...


@runtime_checkable
class ComparesWithStarter(BindsToEnvironment, Protocol):
    """A world model that reads scripts against the starter solution the agent is shown: bound to the run's real
    environment at setup (:class:`~wmrl.types.BindsToEnvironment`), it compares with that environment's starters
    when the environment shows one (:class:`ShowsStarter`)."""

    def compare_with(self, starter: Callable[[str], str]) -> None: ...

    def bind_environment(self, environment: Environment) -> None:
        if declares(environment, ShowsStarter):
            self.compare_with(environment.starter)  # the starter the agent is shown, not always the baseline


#: the wing's optional capabilities (:func:`wmrl.types.declares`)
CAPABILITIES: tuple[type, ...] = (ShowsStarter, ComparesWithStarter)

__all__ = ["CAPABILITIES", "ComparesWithStarter", "ShowsStarter", "TaskEnvironment", "TaskGrader"]
