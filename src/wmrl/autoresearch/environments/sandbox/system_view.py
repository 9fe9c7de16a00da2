"""The system view: the host's library folders as a sandboxed script sees them -- what programs load, nothing else.

``/usr/lib`` holds more than shared libraries: vendored installations with their own ``site-packages`` and test
folders (``/usr/lib/google-cloud-sdk``), language runtimes that ship datasets (R's libraries, in formats the leak
scan does not read), documentation, static archives. Shown whole, all of it is readable by a script. The runtime
view (:mod:`~wmrl.autoresearch.environments.sandbox.runtime_view`) keeps the Python installation to code; this
module applies the same rule to the system's library folders (:data:`LIB_DIRS`): a tree of hard links holding

* ELF files (shared libraries, the dynamic loader, programs under ``lib*/``: what the interpreter, its extensions
  and the programs in ``/usr/bin`` load and run);
* the few non-ELF files that loading and running them reads (:data:`RESOURCES`): locale data, the ``gconv``
  module configuration, ``os-release``, OpenSSL's configuration and the terminal database;
* every symbolic link as it is (a link to a file the view leaves out dangles inside the sandbox).

Python trees directly under a library folder (``/usr/lib/python3.11``, ``/usr/local/lib/python3.11``) are left to
the runtime view: here they are empty folders, mount points for the view of an interpreter that imports from them,
empty for any other. Test folders are skipped whole. The view is built once per state of the library folders (its
key covers every folder's inode and modification time: a package installed or removed changes it) and cached
beside the runtime views; a build takes seconds and costs inodes, not disk.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from wmrl.autoresearch.environments.sandbox.runtime_view import (
    TEST_DIRS,
    Placer,
    cached_tree,
    default_views_dir,
    system_python_trees,
)

RULES_VERSION = 1
#: the system's library folders the view replaces, where they are real folders (merged-usr hosts link ``/lib``)
LIB_DIRS = ("/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/libx32", "/usr/local/lib", "/usr/local/lib64",
            "/lib", "/lib32", "/lib64", "/libx32")
#: non-ELF files programs read while loading and running: (first path component or None, file-name prefix or None)
RESOURCES: tuple[tuple[str | None, str | None], ...] = (
    ("locale", None),  # setlocale(): C.utf8's LC_* files, locale-archive
    (None, "gconv-modules"),  # iconv's module configuration (the modules themselves are ELF)
    (None, "os-release"),  # /etc/os-release links here; platform.freedesktop_os_release() reads it
    ("ssl", None),  # openssl.cnf, links to /etc/ssl
    ("terminfo", None),  # curses and readline's terminal descriptions
)
_ELF = b"\x7fELF"


def is_system_file(relative: str, head: bytes) -> bool:
    """Whether the file at ``relative`` (inside a library folder), whose first bytes are ``head``, is in the view.

    >>> is_system_file("x86_64-linux-gnu/libz.so.1.2.13", b"\\x7fELF\\x02")
    True
    >>> is_system_file("google-cloud-sdk/platform/bundledpythonunix/lib/python3.12/site.py", b"import sys")
    False
    >>> is_system_file("R/site-library/datasets/data/Rdata.rds", b"\\x1f\\x8b")
    False
    >>> is_system_file("locale/C.utf8/LC_CTYPE", b"\\xe0\\x95")
    True
    >>> is_system_file("x86_64-linux-gnu/gconv/gconv-modules.d/gconv-modules-extra.conf", b"# GNU")
    True
    """
    if head[:4] == _ELF:
        return True
    parts = PurePosixPath(relative).parts
    return any((first is None or parts[0] == first) and (prefix is None or parts[-1].startswith(prefix))
               for first, prefix in RESOURCES)


def _head(path: str) -> bytes:
    with contextlib.suppress(OSError), open(path, "rb") as f:
        return f.read(4)
    return b""


def lib_roots() -> tuple[str, ...]:
    """The library folders of this host that are real folders (a link is shown as a link by the mount plan)."""
    return tuple(d for d in LIB_DIRS if os.path.isdir(d) and not os.path.islink(d))


def view_key(roots: tuple[str, ...]) -> str:
    """A digest of the rules and of every folder under ``roots`` (path, inode, modification time): a file added
    or removed anywhere changes its folder's time."""
    h = hashlib.sha256(repr((RULES_VERSION, RESOURCES, sorted(TEST_DIRS), roots)).encode())
    for root in roots:
        for dirpath, dirnames, _ in os.walk(root):
            dirnames.sort()
            with contextlib.suppress(OSError):
                st = os.stat(dirpath)
                h.update(f"{dirpath}\0{st.st_ino}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:20]


def build_tree(roots: tuple[str, ...], tree: Path, copies: Path | None = None) -> int:
    """Fill ``tree`` with the view of each of ``roots`` (module docstring); returns the number of files placed."""
    files = 0
    placer = Placer(copies)
    python_trees = set(system_python_trees())
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            target_dir = str(tree) + dirpath
            os.makedirs(target_dir, mode=0o755, exist_ok=True)
            kept = []
            for name in dirnames:
                path = os.path.join(dirpath, name)
                if os.path.islink(path):
                    os.symlink(os.readlink(path), target_dir + "/" + name)
                elif path in python_trees:
                    os.makedirs(target_dir + "/" + name, mode=0o755, exist_ok=True)  # the runtime view's
                elif name not in TEST_DIRS:
                    kept.append(name)
            dirnames[:] = kept
            for name in filenames:
                source = os.path.join(dirpath, name)
                target = target_dir + "/" + name
                if os.path.islink(source):
                    os.symlink(os.readlink(source), target)
                elif is_system_file(os.path.relpath(source, root), _head(source)):
                    placer.place(source, target, root)
                else:
                    continue
                files += 1
    placer.report(tree)
    return files


@dataclass(frozen=True)
class SystemView:
    """A built system view: ``tree`` on the host holds the view of host folder ``/a`` at ``tree/a``."""

    tree: Path
    roots: tuple[str, ...]
    files: int

    def source(self, root: str) -> str:
        """The view's folder that is mounted at the host folder ``root``."""
        return str(self.tree) + root


_memo: dict[tuple[str, str], SystemView] = {}


def system_view(views_dir: str | Path | None = None) -> SystemView:
    """The cached system view of this host, built on first use (seconds)."""
    roots = lib_roots()
    base = Path(views_dir).expanduser() if views_dir is not None else default_views_dir()
    key = "system-" + view_key(roots)
    if (str(base), key) not in _memo:
        folder = cached_tree(base, key, lambda tree: build_tree(roots, tree, copies=base / "copies"),
                             {"roots": roots, "rules": RULES_VERSION})
        facts = json.loads((folder / "view.json").read_text())
        _memo[(str(base), key)] = SystemView(tree=folder / "tree", roots=tuple(facts["roots"]),
                                             files=int(facts["files"]))
    return _memo[(str(base), key)]
