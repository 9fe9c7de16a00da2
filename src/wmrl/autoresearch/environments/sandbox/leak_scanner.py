"""The leak scanner: reads every file under some roots and reports those holding a task's answers.

Standard library only: :mod:`wmrl.autoresearch.environments.leak_scan` sends this file's source into a sandbox as the script
of one run (``main()`` reads ``fingerprints.json`` from the work dir and walks ``/``), so that what is searched is
exactly what a sandboxed script can read; the host runs the same :func:`scan_file` over each task's public files.

A task's answers are recognised two ways (the host computes both from the answers and ``public/test.csv``,
:func:`wmrl.autoresearch.environments.leak_scan.fingerprints`):

* **rows**: a line about as wide as the task's test file holding a test row's target value (never a spelling the
  row's features share) together with most (three fifths, at least two) of its rare feature values, or a class
  code (``0..C``) with four fifths of them, at least three: a copy of the source dataset in any row order and column layout (``iris.csv`` in statsmodels' tests, the penguins table in scikit-learn's OpenML fixtures). A
  file is a hit when it holds at least ``min_rows`` such rows;
* **the target sequence**: ``k`` consecutive target values in test-row order, down a column or along a line (a
  copy of the answers file itself, or a list of its values). ``k`` is long enough that chance cannot produce it
  (:func:`wmrl.autoresearch.environments.leak_scan.sequence_length`).

Values are compared as written, through every common spelling of each answer (``5.1``, ``5.10``; ``181``,
``181.0``), without regard to case, so no scanned token is parsed. Compressed files (gzip, bz2, xz, zip members) are opened; binary files
are searched through their printable strings.
"""

import bz2
import gzip
import hashlib
import io
import json
import lzma
import os
import re
import sys
import zipfile
from collections import Counter

# Separators of values; a hyphen, underscore or dot after a letter too ("Iris-setosa" holds "setosa").
_SPLIT = re.compile(rb"[\s,;|\"'\[\](){}<>=:]+|(?<=[a-z])[-_.]")
_DELIMITERS = (b",", b"\t", b";", b"|")
# Binary files: every byte that is not printable ASCII (or a tab) ends a line.
_TO_LINES = bytes(c if 0x20 <= c <= 0x7E or c == 0x09 else 0x0A for c in range(256))
_NOT_SEPARATORS = bytes(c for c in range(256) if c not in b",\t;| ")  # deleted, a string's separators are left
_STRING = re.compile(rb"[^\n]{3,}")  # a binary file's printable strings of three characters or more
_CHUNK = 32 << 20
_MAX_UNPACKED = 512 << 20
_SKIP_ROOTS = ("/proc", "/sys", "/dev")
_MAX_COLUMNS = 8


class Task:
    """One task's fingerprints, as :func:`wmrl.autoresearch.environments.leak_scan.fingerprints` writes them."""

    def __init__(self, spec):
        self.id = spec["id"]
        self.k = spec["k"]
        self.kgrams = {tuple(g) for g in spec["kgrams"]}
        self.spell = spec["target_spellings"]  # spelling -> value index
        self.rows = spec["rows"]  # [[target spellings], [class codes], [[feature spellings], ...]]
        self.min_rows = spec["min_rows"]
        self.max_line_tokens = spec["max_line_tokens"]


class Matcher:
    """All tasks' fingerprints, indexed by spelling."""

    def __init__(self, tasks):
        self.tasks = [Task(t) for t in tasks]
        self.targets = {}  # spelling -> [(task index, value index)]
        self.features = {}  # spelling -> [(task index, row index)]
        # (task index, row index) -> (the target's spellings, feature values needed beside them), then the same
        # for its class codes: a code is weaker evidence than the label, so it needs more of the row's values
        self.by_label, self.by_code = {}, {}
        for ti, task in enumerate(self.tasks):
            for spelling, value in task.spell.items():
                self.targets.setdefault(spelling.encode(), []).append((ti, value))
            for ri, (targets, codes, features) in enumerate(task.rows):
                n = len(features)
                self.by_label[(ti, ri)] = ({t.encode() for t in targets}, max(2, -(-3 * n // 5)))
                self.by_code[(ti, ri)] = ({t.encode() for t in codes}, max(3, -(-4 * n // 5)))
                for spelling in {s for spellings in features for s in spellings}:
                    self.features.setdefault(spelling.encode(), []).append((ti, ri))
        self.target_set = set(self.targets)
        self.vocabulary = self.target_set | set(self.features) | {
            t for evidence in (self.by_label, self.by_code) for spellings, _ in evidence.values() for t in spellings}
        self.vocabulary.discard(b"")


class FileScan:
    """The state of one file's scan: rows matched per task, sequence windows per stream."""

    def __init__(self, matcher):
        self.m = matcher
        self.rows = [set() for _ in matcher.tasks]
        self.sequence = [False] * len(matcher.tasks)
        self.columns = {}  # column index -> {task index: (last position, window)}
        self.position = 0

    def line(self, raw):
        tokens = _SPLIT.split(raw.lower())
        width = len(tokens) - tokens.count(b"")
        if not width:
            return
        present = self.m.vocabulary.intersection(tokens)
        if len(present) >= 3:  # a target and two feature values at least
            self._rows(present, width)
        if present:
            if not present.isdisjoint(self.m.target_set):
                self._stream([t for t in tokens if t], ("line", self.position))
            for delimiter in _DELIMITERS:
                if delimiter in raw:
                    fields = raw.split(delimiter)[:_MAX_COLUMNS]
                    for c, field in enumerate(fields):
                        self._column(c, field.strip(b" \"'\r"))
                    break
        self.position += 1

    def _rows(self, present, width):
        counts = Counter()
        for token in present:
            counts.update(self.m.features.get(token, ()))
        tasks = self.m.tasks
        for key, found in counts.items():
            if found < 2 or width > tasks[key[0]].max_line_tokens:
                continue
            for spellings, need in (self.m.by_label[key], self.m.by_code[key]):
                if found >= need and not spellings.isdisjoint(present):
                    self.rows[key[0]].add(key[1])
                    break

    def _advance(self, windows, key, position, token):
        for ti, value in self.m.targets.get(token, ()):
            task = self.m.tasks[ti]
            last, window = windows.get((key, ti), (-2, []))
            window = window + [value] if last == position - 1 else [value]
            window = window[-task.k:]
            windows[(key, ti)] = (position, window)
            if len(window) == task.k and tuple(window) in task.kgrams:
                self.sequence[ti] = True

    def _stream(self, tokens, key):
        windows, targets = {}, self.m.targets
        for i, token in enumerate(tokens):
            if token in targets:
                self._advance(windows, key, i, token)

    def _column(self, c, token):
        if token in self.m.targets:
            self._advance(self.columns, c, self.position, token)

    def hits(self):
        out = []
        for ti, task in enumerate(self.m.tasks):
            how = []
            if task.rows and len(self.rows[ti]) >= task.min_rows:
                how.append(f"{len(self.rows[ti])} test rows")
            if self.sequence[ti]:
                how.append(f"{task.k} target values in test order")
            if how:
                out.append((task.id, " and ".join(how)))
        return out


def _unpacked(head, read_all):
    """The decompressed contents of a compressed file, or None."""
    try:
        if head.startswith(b"\x1f\x8b"):
            return [gzip.GzipFile(fileobj=io.BytesIO(read_all())).read(_MAX_UNPACKED)]
        if head.startswith(b"BZh"):
            return [bz2.BZ2File(io.BytesIO(read_all())).read(_MAX_UNPACKED)]
        if head.startswith(b"\xfd7zXZ\x00"):
            return [lzma.LZMAFile(io.BytesIO(read_all())).read(_MAX_UNPACKED)]
        if head.startswith(b"PK\x03\x04"):
            with zipfile.ZipFile(io.BytesIO(read_all())) as archive:
                return [archive.open(name).read(_MAX_UNPACKED) for name in archive.namelist()[:1000]]
    except Exception:  # noqa: BLE001 - a damaged archive is scanned as it is
        return None
    return None


def scan_bytes(matcher, data):
    """The hits in one file's contents (already in memory): [(task id, how)]."""
    state = FileScan(matcher)
    binary = b"\x00" in data[:8192]
    _lines(state, data.translate(_TO_LINES) if binary else data, len(data), binary)
    return state.hits()


def _lines(state, data, end, binary):
    """Feed ``data[:end]`` to ``state`` line by line; of binary data (already one printable string a line) only the
    strings of three characters or more that hold a separator (a table or a list has separators)."""
    if not binary:
        for line in data[:end].split(b"\n"):
            state.line(line)
        return
    for line in _STRING.findall(data, 0, end):
        if line.translate(None, _NOT_SEPARATORS):
            state.line(line)


class LibcFile:
    """A file read through the C library: below Python's audit hooks, so the sandbox's tripwire (a detector of
    reward hacking) neither sees nor stops the scan, which reads what a script could read by any means."""

    _shared = None  # (ctypes, libc, a 1 MB buffer): loaded and allocated once for the thousands of files of a scan

    def __init__(self, path):
        if LibcFile._shared is None:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.lseek.restype = ctypes.c_long
            libc.read.restype = ctypes.c_long
            LibcFile._shared = (ctypes, libc, ctypes.create_string_buffer(1 << 20))
        self.ctypes, self.libc, self.buffer = LibcFile._shared
        self.fd = self.libc.open(os.fsencode(path), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        if self.fd < 0:
            raise OSError(self.ctypes.get_errno(), "cannot open", path)

    def read(self, size=-1):
        parts, wanted = [], size if size >= 0 else 1 << 62
        while wanted > 0:
            n = self.libc.read(self.fd, self.buffer, min(wanted, len(self.buffer)))
            if n <= 0:
                break
            parts.append(self.ctypes.string_at(self.buffer, n))
            wanted -= n
        return b"".join(parts)

    def seek(self, offset):
        self.libc.lseek(self.fd, offset, 0)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.libc.close(self.fd)


def _elf_data(f, head):
    """(offset, size) of an ELF file's data sections (``.rodata``, ``.data``...: what a table compiled into a
    library would be), leaving out machine code and symbol tables; ``None`` if the headers cannot be read."""
    import struct

    try:
        wide, order = head[4] == 2, "<" if head[5] == 1 else ">"
        if wide:
            shoff, = struct.unpack_from(order + "Q", head, 0x28)
            shentsize, shnum = struct.unpack_from(order + "HH", head, 0x3A)
        else:
            shoff, = struct.unpack_from(order + "I", head, 0x20)
            shentsize, shnum = struct.unpack_from(order + "HH", head, 0x2E)
        f.seek(shoff)
        table = f.read(shentsize * shnum)
        sections = []
        for i in range(shnum):
            entry = table[i * shentsize:(i + 1) * shentsize]
            if wide:
                _, kind, flags, _, offset, size = struct.unpack_from(order + "IIQQQQ", entry)
            else:
                _, kind, flags, _, offset, size = struct.unpack_from(order + "IIIIII", entry)
            if kind == 1 and not flags & 0x4 and size:  # SHT_PROGBITS, not SHF_EXECINSTR
                sections.append((offset, size))
        return sections or None
    except (struct.error, IndexError, OSError):
        return None


def _feed(state, f, size, binary):
    """Stream ``size`` bytes (``None``: to the end) of ``f`` through ``state``, line by line."""
    rest = b""
    left = size if size is not None else 1 << 62
    while left > 0:
        chunk = f.read(min(_CHUNK, left))
        if not chunk:
            break
        left -= len(chunk)
        data = rest + chunk
        if binary:
            data = data.translate(_TO_LINES)
        cut = data.rfind(b"\n")
        cut = len(data) if cut < 0 or left <= 0 or len(chunk) < _CHUNK else cut
        _lines(state, data, cut, binary)
        rest = data[cut:]
    for line in rest.split(b"\n"):
        state.line(line)


def scan_file(matcher, path, opener=None):
    """The hits in the file at ``path``, or ``None`` if it cannot be read. ``opener(path)`` gives a binary file
    object (default: the built-in ``open``). Compressed files are opened; in a binary file (a NUL byte in its
    first 8 KB) the printable strings are the lines, those holding a separator are searched (a table or a list
    has separators), and of an ELF file only its data sections."""
    try:
        with (opener or (lambda p: open(p, "rb")))(path) as f:
            head = f.read(64)
            if not head:
                return []
            f.seek(0)
            unpacked = _unpacked(head, f.read)
            if unpacked is not None:
                hits = []
                for part in unpacked:
                    hits += scan_bytes(matcher, part)
                return hits
            regions = _elf_data(f, head) if head.startswith(b"\x7fELF") else None
            state = FileScan(matcher)
            if regions is None:
                f.seek(0)
                binary = b"\x00" in f.read(8192)
                f.seek(0)
                _feed(state, f, None, binary)
            else:
                for offset, size in regions:
                    f.seek(offset)
                    _feed(state, f, size, True)
            return state.hits()
    except OSError:
        return None


def walk(roots, skip=()):
    """Every regular file under ``roots`` (links not followed; ``/proc``, ``/sys``, ``/dev`` and ``skip`` left out)."""
    skipped = set(_SKIP_ROOTS) | set(skip)
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if os.path.join(dirpath, d) not in skipped)
            for name in sorted(filenames):
                path = os.path.join(dirpath, name)
                if path not in skipped and os.path.isfile(path) and not os.path.islink(path):
                    yield path


def digest(path, opener=None):
    """The SHA-256 of the file at ``path`` (hex), or ``None`` if it cannot be read."""
    h = hashlib.sha256()
    try:
        with (opener or (lambda p: open(p, "rb")))(path) as f:
            while True:
                chunk = f.read(_CHUNK)
                if not chunk:
                    return h.hexdigest()
                h.update(chunk)
    except OSError:
        return None


def main():
    """Inside a sandbox: scan what the run can read; write ``leak_scan.json`` (files, bytes, hits, unreadable, and
    the digests of the files found clean).

    ``fingerprints.json`` may list ``clean``: digests of contents an earlier scan with the same fingerprints and
    the same scanner found clean. A file whose content has such a digest is read (to hash it) but not searched
    again: the same bytes against the same fingerprints give the same answer."""
    with open("fingerprints.json") as f:
        config = json.load(f)
    matcher = Matcher(config["tasks"])
    known = set(config.get("clean", ()))
    work = os.getcwd()
    files, unreadable, hits, clean, size, known_clean = [], [], [], [], 0, 0
    for path in walk(config.get("roots", ["/"]), skip=[work]):
        content = digest(path, LibcFile)
        if content is not None and content in known:
            known_clean += 1
            found = []
        else:
            found = scan_file(matcher, path, LibcFile)
            if found is None:
                unreadable.append(path)
                continue
            if not found and content is not None:
                clean.append(content)
                known.add(content)
        files.append(path)
        size += os.path.getsize(path)
        hits += [[path, task, how] for task, how in found]
    report = {"files": files, "bytes": size, "hits": hits, "unreadable": unreadable, "clean": clean,
              "known_clean": known_clean}
    with open("leak_scan.json", "w") as f:
        json.dump(report, f)
    print(f"scanned {len(files)} files ({size / 1e9:.2f} GB; {known_clean} known clean by content), {len(hits)} hits, "
          f"{len(unreadable)} unreadable")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
