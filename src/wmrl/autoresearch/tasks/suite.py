"""`TaskSuite`: the catalogue, built on first use into the cache, checked against the shipped lock.

The lock (``suite.lock.json``, next to this file) records, per task, the sha256 of its data files and the
score of every reference solution (its leaderboard) as measured when the task was recorded with
``wmrl tasks build --record``. A build that produces other data is an error (a package changed the data);
a reference solution that no longer reproduces its recorded score is caught by the test suite.

Besides the built-in tasks the catalogue holds the user's folder tasks and MLE-bench competitions
(:mod:`wmrl.autoresearch.tasks.registry`). Their recorded leaderboards go to ``<cache dir>/registry/lock.json``, never into
wmrl's package; their data may change (the author edits the folder): the task's card is then rebuilt, and a
leaderboard recorded on other data is not used.
"""

from __future__ import annotations

import contextlib
import difflib
import fcntl
import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

from wmrl.autoresearch.tasks.build import (
    DATA_FILES,
    BuiltTask,
    StaleTaskCache,
    TaskCacheError,
    materialise,
    verify,
)
from wmrl.autoresearch.tasks.spec import SPLITS, TaskSpec
from wmrl.paths import cache_dir as cache_root

log = logging.getLogger(__name__)

LOCK_PATH = Path(__file__).with_name("suite.lock.json")
USER_LOCK = "registry/lock.json"  # under the cache dir: the recorded leaderboards of folder tasks


class UnknownTaskError(KeyError):
    def __str__(self) -> str:  # KeyError quotes its message; this one reads as a sentence
        return str(self.args[0])


class TaskSuite:
    """The offline AutoResearch suite.

    Args:
        cache_dir: where tasks are built (default :func:`~wmrl.paths.default_cache_dir`).
        lock_path: the recorded data hashes and leaderboards (default: the one shipped with wmrl).
        specs: the catalogue (default :data:`wmrl.autoresearch.tasks.catalog.TASKS` plus every folder task of
            :mod:`wmrl.autoresearch.tasks.registry`); tests pass their own.
    """

    def __init__(
        self,
        cache_dir: str | Path | None = None,
        lock_path: str | Path | None = None,
        specs: tuple[TaskSpec, ...] | None = None,
    ) -> None:
        self.cache_dir = cache_root(cache_dir)
        self.lock_path = Path(lock_path) if lock_path is not None else LOCK_PATH
        self._fixed = specs is not None
        if specs is None:
            from wmrl.autoresearch.tasks.catalog import TASKS

            specs = TASKS
        self._builtin = {s.id: s for s in specs}
        if len(self._builtin) != len(specs):
            raise ValueError("task ids must be unique")
        self.lock: dict[str, dict] = self._read_lock()
        self.problems: list[str] = []  # folder-task sources that failed to load (named in unknown-task errors)

    @property
    def _specs(self) -> dict[str, TaskSpec]:
        """The catalogue now: the built-in tasks, then the folder tasks (read again when a source changes)."""
        if self._fixed:
            return self._builtin
        from wmrl.autoresearch.tasks.registry import discover

        folder, self.problems = discover(self.cache_dir)
        specs = dict(self._builtin)
        for spec in folder:
            if spec.id in specs:
                self.problems.append(f"{spec.folder.root}: id {spec.id!r} is a built-in task's; set another id")
                continue
            specs[spec.id] = spec
        return specs

    # -- the catalogue ---------------------------------------------------------------------------------
    def specs(self, split: str | None = None) -> list[TaskSpec]:
        if split is not None and split not in SPLITS:
            raise ValueError(f"unknown split {split!r}: choose one of {', '.join(SPLITS)}")
        return [s for s in self._specs.values() if split is None or s.split == split]

    def spec(self, task_id: str) -> TaskSpec:
        specs = self._specs
        try:
            return specs[task_id]
        except KeyError:
            close = difflib.get_close_matches(task_id, specs, n=3)
            hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            broken = (f" {len(self.problems)} task source(s) could not be loaded: " + "; ".join(self.problems)
                      if self.problems else "")
            raise UnknownTaskError(
                f"unknown task {task_id!r}.{hint} `wmrl tasks list` shows the {len(specs)} tasks; "
                f"`wmrl tasks add DIR` registers a task folder.{broken}"
            ) from None

    def task_root(self, task_id: str) -> Path:
        return self.cache_dir / "tasks" / task_id

    # -- building --------------------------------------------------------------------------------------
    def get(self, task_id: str, rebuild: bool = False) -> BuiltTask:
        """The built task, building it on first use and rebuilding a corrupted cache."""
        spec = self.spec(task_id)
        root = self.task_root(task_id)
        if spec.folder is not None:
            return self._get_folder(spec, root, rebuild)
        recorded = self.lock.get(task_id, {}).get("data_sha256")
        with self._build_lock(task_id):
            sha = None
            if not rebuild and root.exists():
                try:
                    sha = verify(root)
                    if recorded and any(sha[f] != recorded[f] for f in DATA_FILES):
                        raise TaskCacheError("its data differ from the recorded build")
                except StaleTaskCache as exc:
                    log.info("task cache %s is out of date (%s); rebuilding it", root, exc)
                    sha = None
                except TaskCacheError as exc:
                    log.warning("task cache %s is corrupted (%s); rebuilding it", root, exc)
                    sha = None
            if sha is None:
                sha = materialise(spec, root)
                if recorded:
                    bad = [f for f in DATA_FILES if sha[f] != recorded[f]]
                    if bad:
                        raise TaskCacheError(
                            f"task {task_id}: building from {spec.package} gives other data than recorded "
                            f"({', '.join(bad)}). The suite was recorded with {spec.package}=={spec.version}; "
                            f"install the pinned versions (pip install -c constraints.txt -e .) or re-record "
                            f"the task with `wmrl tasks build {task_id} --record`."
                        )
        return load_built(spec, root, sha, self.lock.get(task_id, {}).get("leaderboard", {}))

    def build(
        self,
        task_ids: list[str] | None = None,
        split: str | None = None,
        rebuild: bool = False,
        on_built: Callable[[BuiltTask], None] | None = None,
    ) -> list[BuiltTask]:
        ids = task_ids or [s.id for s in self.specs(split)]
        built = []
        for task_id in ids:
            task = self.get(task_id, rebuild=rebuild)
            built.append(task)
            if on_built is not None:
                on_built(task)
        return built

    def _get_folder(self, spec: TaskSpec, root: Path, rebuild: bool) -> BuiltTask:
        from wmrl.autoresearch.tasks.folder_task import materialise_folder, verify_folder

        with self._build_lock(spec.id):
            sha = None
            if not rebuild:
                try:
                    sha = verify_folder(spec, root)
                except StaleTaskCache as exc:
                    log.info("folder task %s: rebuilding its card in %s (%s)", spec.id, root, exc)
            if sha is None:
                sha = materialise_folder(spec, root)
        leaderboard = spec.folder.leaderboard_scores()
        recorded = self.lock.get(spec.id, {})
        if not leaderboard and recorded.get("leaderboard"):
            if recorded.get("data_sha256") == sha:
                leaderboard = recorded["leaderboard"]
            else:
                log.warning("task %s: its leaderboard was recorded on other data (the folder changed); run "
                            "`wmrl tasks build %s --record` again", spec.id, spec.id)
        return load_built(spec, root, sha, leaderboard)

    # -- the lock --------------------------------------------------------------------------------------
    @property
    def user_lock_path(self) -> Path:
        return self.cache_dir / USER_LOCK

    def _read_lock(self) -> dict[str, dict]:
        """The shipped lock, with the folder tasks' recorded leaderboards (the cache dir's) for other ids."""
        lock = {}
        for path in (self.user_lock_path, self.lock_path):  # a built-in id's record is always the shipped one
            if not path.exists():
                continue
            try:
                lock.update(json.loads(path.read_text())["tasks"])
            except (json.JSONDecodeError, KeyError) as exc:
                raise ValueError(f"{path} is not a valid suite lock ({exc})") from exc
        return lock

    def record(self, task: BuiltTask, leaderboard: dict[str, float], seconds: dict[str, float]) -> None:
        """Record a task's data hashes and reference scores: a built-in task's in the shipped lock (maintainers
        only), a folder task's in the cache dir (``registry/lock.json``)."""
        folder = task.spec.folder is not None
        entry = {
            "data_sha256": dict(task.data_sha256) if folder else {f: task.data_sha256[f] for f in DATA_FILES},
            "leaderboard": dict(sorted(leaderboard.items())),
            "reference_seconds": {k: round(v, 2) for k, v in sorted(seconds.items())},
        }
        self.lock[task.id] = entry
        path = self.user_lock_path if folder else self.lock_path
        tasks = json.loads(path.read_text())["tasks"] if path.exists() else {}
        tasks[task.id] = entry
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"version": 1, "tasks": dict(sorted(tasks.items()))}, indent=1) + "\n")

    @contextlib.contextmanager
    def _build_lock(self, task_id: str) -> Iterator[None]:
        """Serialise builds of one task across processes (DDP ranks building the same task)."""
        lock_dir = self.cache_dir / "tasks"
        lock_dir.mkdir(parents=True, exist_ok=True)
        with open(lock_dir / f".{task_id}.lock", "w") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)


def load_built(spec: TaskSpec, root: Path, data_sha256: dict[str, str], leaderboard: dict[str, float]) -> BuiltTask:
    """The verified task at ``root``: a :class:`~wmrl.autoresearch.tasks.folder_task.FolderTask` for a folder task (its data stay in
    the folder), else a :class:`~wmrl.autoresearch.tasks.build.BuiltTask`."""
    card = json.loads((root / "task.json").read_text())
    labels = tuple(card["labels"]) if card.get("labels") is not None else None
    if spec.folder is not None:
        from wmrl.autoresearch.tasks.folder_task import FolderTask

        return FolderTask(spec, root, data_sha256, dict(card["columns"]), labels, dict(leaderboard))
    return BuiltTask(spec, root, data_sha256, dict(card["columns"]), labels, dict(leaderboard))
