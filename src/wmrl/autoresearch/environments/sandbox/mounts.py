"""The mount plan: the one filesystem both sandbox backends show a script, outside its work dir.

An allowlist, top to bottom:

* the system: ``/etc``, and of ``/usr`` only its programs (``bin``, ``sbin``, ``libexec``, ``local/bin``), the
  time zone database (``share/zoneinfo``) and its library folders (``lib*``, ``local/lib*``) as the system view
  shows them (:mod:`~wmrl.autoresearch.environments.sandbox.system_view`: what programs load, nothing else);
  ``/bin``, ``/lib``... as the host has them (links into ``/usr`` on merged-usr systems). ``/usr/share`` and
  ``/usr/local/share`` (where a registered task folder may live), ``/opt``, ``/home``, ``/root``, ``/srv``,
  ``/var`` are not there;
* the Python installation, as its runtime view (:mod:`wmrl.autoresearch.environments.sandbox.runtime_view`): code and
  package metadata, no data files, no ``tests/`` trees; Python trees under ``/usr`` that the interpreter does not
  import from are covered whole;
* per run, a cover over every task folder, answers folder and task cache that still falls inside what is shown
  (:meth:`MountPlan.covers`): the answers of every task are hidden by the OS wherever the task lives (a task
  folder shipped inside ``site-packages`` by a ``wmrl.autoresearch.tasks`` entry-point package, one under ``/usr/lib``).

The plan is data (:class:`Mount`); :mod:`~wmrl.autoresearch.environments.sandbox.process` turns it into bubblewrap
arguments and :mod:`~wmrl.autoresearch.environments.sandbox.docker` into docker mounts, so both backends show the same tree.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from wmrl.autoresearch.environments.sandbox.runtime_view import RuntimeView
from wmrl.autoresearch.environments.sandbox.system_view import SystemView, system_view

# What of /usr a script sees: programs, library folders (through the system view) and the time zone database.
USR_SHOWN = ("bin", "sbin", "lib", "lib32", "lib64", "libx32", "libexec", "local/bin", "local/sbin", "local/lib",
             "local/lib64", "share/zoneinfo")
TOP_LEVEL = ("/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")


@dataclass(frozen=True)
class Mount:
    """One step of the plan. ``bind``: ``source`` read-only at ``target``; ``link``: a symbolic link at ``target``
    pointing to ``source``; ``cover``: an empty read-only folder over the folder ``target``; ``null``: an empty
    file over the file ``target``."""

    kind: Literal["bind", "link", "cover", "null"]
    target: str
    source: str = ""


def _under(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def system_mounts(libraries: SystemView) -> list[Mount]:
    """``/etc``, the allowed parts of ``/usr``, and the top-level folders as the host has them; the library
    folders from the system view ``libraries``."""
    mounts = [Mount("bind", "/etc", "/etc")] if os.path.isdir("/etc") else []
    for path in [f"/usr/{sub}" for sub in USR_SHOWN] + list(TOP_LEVEL):
        if os.path.islink(path):
            mounts.append(Mount("link", path, os.readlink(path)))
        elif path in libraries.roots:
            mounts.append(Mount("bind", path, libraries.source(path)))
        elif os.path.isdir(path):
            mounts.append(Mount("bind", path, path))
    return mounts


@dataclass(frozen=True)
class MountPlan:
    """The system and the runtime view; :meth:`covers` adds a run's covers of hidden paths."""

    system: tuple[Mount, ...]
    view: RuntimeView

    @classmethod
    def for_view(cls, view: RuntimeView, views_dir: str | os.PathLike | None = None) -> MountPlan:
        """The plan around ``view``, the system view taken from ``views_dir`` (default: where views are cached)."""
        return cls(system=tuple(system_mounts(system_view(views_dir))), view=view)

    def python(self) -> list[Mount]:
        """The view's folders at the installation's paths, then the Python trees that are hidden whole."""
        mounts = [Mount("bind", root, self.view.source(root)) for root in self.view.roots]
        mounts += [Mount("cover", tree) for tree in self.view.hidden if self.shows(tree)]
        return mounts

    def shows(self, path: str) -> bool:
        """Whether ``path`` exists inside the sandbox (before per-run covers)."""
        path = os.path.normpath(path)
        if _under(path, self.view.roots):
            return self.view.shows(path)
        if _under(path, self.view.hidden):
            return path in self.view.hidden
        return any(_under(path, (m.target,)) for m in self.system if m.kind == "bind") and os.path.lexists(
            self._host(path))

    def covers(self, hidden: Iterable[str]) -> list[Mount]:
        """Covers for the host paths in ``hidden`` (task folders, answers, task caches) that the sandbox would
        otherwise show: an empty folder over a folder, an empty file over a file. Paths the sandbox does not
        show need nothing."""
        mounts = []
        for path in sorted({os.path.normpath(os.path.realpath(p)) for p in hidden}):
            if any(m.target != path and _under(path, (m.target,)) for m in mounts):
                continue  # inside a folder covered already
            if self.shows(path):
                mounts.append(Mount("cover" if os.path.isdir(self._host(path)) else "null", path))
        return mounts

    def _host(self, path: str) -> str:
        """Where ``path`` inside the sandbox lies on the host (in a view, or at the same path)."""
        if _under(path, self.view.roots):
            return self.view.source(path)
        binds = [m for m in self.system if m.kind == "bind" and _under(path, (m.target,))]
        deepest = max(binds, key=lambda m: len(m.target), default=None)
        return path if deepest is None else deepest.source + path[len(deepest.target):]
