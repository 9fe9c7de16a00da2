"""Where folder tasks come from: the registry in the cache dir, ``$WMRL_TASK_PATH``, entry points, a config.

A *source* is a path (a task folder, or a folder of task folders) or an MLE-bench mapping
``{"mlebench": <competitions dir>, "data": <data dir>, "split": "heldout", "time_budget_s": 600}`` (the
competitions dir may also be one competition's folder). Sources are gathered, in this order, from:

1. the registry, ``<cache dir>/registry.json``, written by ``wmrl tasks add`` (user-writable; never wmrl's
   package, which may be read-only);
2. ``$WMRL_TASK_PATH``: task folders or folders of them, separated by ``os.pathsep``;
3. the ``wmrl.autoresearch.tasks`` entry-point group: a pip-installed package contributes a collection with
   ``[project.entry-points."wmrl.autoresearch.tasks"] mytasks = "mypkg:task_sources"``, where the object is a source, a list
   of sources, or a callable returning them;
4. the sources a config names (``data.init_args.task_dirs``), for the rest of the process (:func:`use`).

Every :class:`~wmrl.autoresearch.tasks.suite.TaskSuite` built without an explicit catalogue reads them when it is asked
for a task, so the environment, the world models and the data module of one run see the same tasks whichever
is built first.
"""

from __future__ import annotations

import functools
import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from wmrl.autoresearch.tasks.folder import is_task_folder, load_folder
from wmrl.autoresearch.tasks.folder_checks import TaskFolderError
from wmrl.autoresearch.tasks.mlebench import DEFAULT_BUDGET_S, is_competition, load_competition
from wmrl.autoresearch.tasks.spec import TaskSpec

log = logging.getLogger(__name__)

REGISTRY_FILE = "registry.json"
ENV_VAR = "WMRL_TASK_PATH"
ENTRY_POINT_GROUP = "wmrl.autoresearch.tasks"
Source = str | dict[str, Any]

_session: list[Source] = []
_memo: dict[str, tuple[tuple, list[TaskSpec]]] = {}
_warned: set[str] = set()


def normalise(source: Source) -> Source:
    """An absolute path, or a checked MLE-bench mapping with absolute paths (``ValueError`` naming the key)."""
    if isinstance(source, (str, os.PathLike)):
        return str(Path(source).expanduser().resolve())
    if isinstance(source, dict):
        unknown = set(source) - {"mlebench", "data", "split", "time_budget_s"}
        if unknown or "mlebench" not in source or "data" not in source:
            raise ValueError(f"task source {source!r}: an MLE-bench source is {{mlebench: <competitions dir>, "
                             f"data: <data dir>, split: heldout, time_budget_s: 600}}"
                             + (f"; unknown keys {sorted(unknown)}" if unknown else ""))
        out = {"mlebench": str(Path(source["mlebench"]).expanduser().resolve()),
               "data": str(Path(source["data"]).expanduser().resolve()),
               "split": str(source.get("split", "heldout"))}
        if "time_budget_s" in source:
            out["time_budget_s"] = float(source["time_budget_s"])
        return out
    raise ValueError(f"task source {source!r}: give a folder path or an MLE-bench mapping")


def _stamp(source: Source) -> tuple:
    root = Path(source if isinstance(source, str) else source["mlebench"])
    names = ("task.yaml", "config.yaml", "starter.py")  # a starter.py added or removed changes the spec
    paths = [root, *(root / name for name in names)]
    if root.is_dir():
        paths += [p / name for p in root.iterdir() if p.is_dir() for name in names]
    return tuple(p.stat().st_mtime_ns if p.exists() else 0 for p in paths)


def load_source(source: Source) -> list[TaskSpec]:
    """The tasks of one source; a :class:`TaskFolderError` lists every problem of every folder in it."""
    source = normalise(source)
    key = json.dumps(source, sort_keys=True)
    stamp = _stamp(source)
    if key in _memo and _memo[key][0] == stamp:
        return list(_memo[key][1])
    if isinstance(source, str):
        root = Path(source)
        if is_task_folder(root):
            folders, load = [root], load_folder
        elif root.is_dir() and (children := sorted(p for p in root.iterdir() if is_task_folder(p))):
            folders, load = children, load_folder
        else:
            raise TaskFolderError(root, [f"{root}: neither a task folder (no task.yaml) nor a folder of task folders"
                                         + ("" if root.is_dir() else " (it does not exist)")
                                         + "; for MLE-bench competitions pass --mlebench-data"])
    else:
        root = Path(source["mlebench"])
        folders = [root] if is_competition(root) else sorted(p for p in root.iterdir() if is_competition(p)) \
            if root.is_dir() else []
        if not folders:
            raise TaskFolderError(root, [f"{root}: no MLE-bench competition (a folder with config.yaml) here"])

        def load(path: Path) -> TaskSpec:
            return load_competition(path, source["data"], source["split"], source.get("time_budget_s", DEFAULT_BUDGET_S))
    specs, problems = [], []
    for folder in folders:
        try:
            specs.append(load(folder))
        except TaskFolderError as exc:
            problems += exc.problems
    if problems:
        raise TaskFolderError(root, problems)
    _memo[key] = (stamp, specs)
    return list(specs)


def registry_path(cache_dir: Path) -> Path:
    return Path(cache_dir) / REGISTRY_FILE


def read_registry(cache_dir: Path) -> list[Source]:
    path = registry_path(cache_dir)
    if not path.is_file():
        return []
    try:
        return list(json.loads(path.read_text())["sources"])
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ValueError(f"{path} is not a wmrl task registry ({exc}); fix it or delete it and `wmrl tasks add` "
                         "the folders again") from None


def _write_registry(cache_dir: Path, sources: list[Source]) -> None:
    path = registry_path(cache_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"version": 1, "sources": sources}, indent=1) + "\n")
    os.replace(tmp, path)


def add(cache_dir: Path, sources: Iterable[Source], builtin_ids: Iterable[str]) -> list[TaskSpec]:
    """Validate ``sources`` and register them; nothing is written unless all of them load.

    Raises :class:`TaskFolderError` with every problem of every source, including ids that clash with a
    built-in or an already registered task."""
    sources = [normalise(s) for s in sources]
    problems, added = [], []
    for source in sources:
        try:
            added += load_source(source)
        except TaskFolderError as exc:
            problems += exc.problems
    existing = {s.id: s for s in discover(cache_dir, [x for x in read_registry(cache_dir) if x not in sources],
                                          strict=False)[0]}
    taken = {**{i: "a built-in task" for i in builtin_ids},
             **{i: f"the registered {s.folder.root}" for i, s in existing.items()}}
    seen: dict[str, TaskSpec] = {}
    for spec in added:
        if spec.id in taken:
            problems.append(f"{spec.folder.root}: id {spec.id!r} is already {taken[spec.id]}; set another id")
        elif spec.id in seen:
            problems.append(f"{spec.folder.root}: id {spec.id!r} is also {seen[spec.id].folder.root}'s; ids must differ")
        seen[spec.id] = spec
    if problems:
        raise TaskFolderError("wmrl tasks add", problems)
    registry = read_registry(cache_dir)
    _write_registry(cache_dir, registry + [s for s in sources if s not in registry])
    return added


def remove(cache_dir: Path, names: Iterable[str]) -> list[Source]:
    """Unregister sources by path or by the id of a task they hold; the removed sources."""
    registry = read_registry(cache_dir)
    names = set(names)
    gone = []
    for source in registry:
        path = source if isinstance(source, str) else source["mlebench"]
        try:
            ids = {s.id for s in load_source(source)}
        except (TaskFolderError, OSError):
            ids = set()
        if path in {str(Path(n).expanduser().resolve()) for n in names} or ids & names:
            gone.append(source)
    _write_registry(cache_dir, [s for s in registry if s not in gone])
    return gone


def use(sources: Iterable[Source]) -> None:
    """Make ``sources`` (a config's ``task_dirs``) visible to every task suite of this process."""
    for source in sources:
        source = normalise(source)
        if source not in _session:
            _session.append(source)


@functools.cache
def _entry_point_sources() -> list[tuple[str, Source]]:
    """The ``wmrl.autoresearch.tasks`` entry points' sources (read once per process)."""
    from importlib.metadata import entry_points

    found = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            value = ep.load()
            value = value() if callable(value) else value
        except Exception as exc:  # noqa: BLE001 - one broken plug-in must not hide the other tasks
            log.warning("wmrl.autoresearch.tasks entry point %r could not be loaded (%s: %s); its tasks are skipped",
                        ep.name, type(exc).__name__, exc)
            continue
        values = value if isinstance(value, (list, tuple)) else [value]
        found += [(f"entry point {ep.name}", v if isinstance(v, dict) else str(v)) for v in values]
    return found


def sources(cache_dir: Path) -> list[tuple[str, Source]]:
    """Every source with where it came from, in precedence order (see the module docstring)."""
    found = [(f"{registry_path(cache_dir)}", s) for s in read_registry(cache_dir)]
    found += [(f"${ENV_VAR}", p) for p in os.environ.get(ENV_VAR, "").split(os.pathsep) if p.strip()]
    found += list(_entry_point_sources())
    found += [("data.init_args.task_dirs", s) for s in _session]
    return found


def discover(
    cache_dir: Path, only: list[Source] | None = None, strict: bool = True
) -> tuple[list[TaskSpec], list[str]]:
    """The folder tasks of every source and the problems of those that failed to load.

    A source a config names (``data.init_args.task_dirs``) that fails raises (``strict``); a registered or
    environment source that fails is skipped with a warning, so one broken folder cannot stop every run.
    """
    gathered = [("registry", s) for s in only] if only is not None else sources(cache_dir)
    specs: dict[str, TaskSpec] = {}
    problems: list[str] = []
    for origin, source in gathered:
        try:
            loaded = load_source(source)
        except (TaskFolderError, ValueError, OSError) as exc:
            if strict and origin == "data.init_args.task_dirs":
                raise
            problems.append(f"{origin}: {exc}")
            if str(exc) not in _warned:
                _warned.add(str(exc))
                log.warning("task source %s (from %s) is skipped: %s", source, origin, exc)
            continue
        for spec in loaded:
            if spec.id in specs and specs[spec.id].folder.root != spec.folder.root:
                log.warning("task %r of %s is shadowed by the one in %s (from an earlier source)", spec.id,
                            spec.folder.root, specs[spec.id].folder.root)
            specs.setdefault(spec.id, spec)
    return list(specs.values()), problems
