"""The execution log: every real execution, appended as one JSON line, doubling as an execution cache.

A record holds the task, the script and its hash, the outcome, the wall seconds, the sandbox and the
package versions. It is the world model's calibration and evaluation data later, so nothing is dropped:
infrastructure failures are logged too (and never served from the cache, so they are retried).

Identical (task data, script, limits) executions are served from the cache: the outcome comes back with
``cached=True`` and the wall seconds of the original run, which is what the execution really costs.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import platform
import threading
import time
from functools import cache
from importlib import metadata
from pathlib import Path

from wmrl.types import Outcome

log = logging.getLogger(__name__)

_PACKAGES = ("numpy", "pandas", "scikit-learn", "scipy", "statsmodels", "lifelines", "wmrl")


@cache
def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def script_sha256(script: str) -> str:
    return hashlib.sha256(script.encode("utf-8")).hexdigest()


def cache_key(task_id: str, data_hash: str, script: str, limits: tuple) -> str:
    blob = json.dumps([task_id, data_hash, script_sha256(script), list(limits)])
    return hashlib.sha256(blob.encode()).hexdigest()


class ExecutionLog:
    """Append-only JSONL log of real executions with an in-memory cache index.

    Args:
        path: the JSONL file (created if missing). Safe to share between processes (appends are locked).
        use_cache: serve repeated (task, script, limits) executions from the log.
    """

    def __init__(self, path: str | Path, use_cache: bool = True) -> None:
        self.path = Path(path).expanduser()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.use_cache = use_cache
        self._lock = threading.Lock()
        self._cache: dict[str, Outcome] = {}
        self._offset = 0
        self._refresh()

    def _refresh(self) -> None:
        """Index records appended since the last read (also by other processes)."""
        if not self.path.exists():
            return
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            for lineno, line in enumerate(f, 1):
                if not line.endswith(b"\n"):
                    break  # a record being written by another process: read it next time
                self._offset += len(line)
                try:
                    record = json.loads(line)
                    outcome = Outcome.from_dict(record["outcome"])
                except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                    log.warning("%s: skipping unreadable record near line %d (%s)", self.path, lineno, exc)
                    continue
                if not outcome.missing and "key" in record:
                    self._cache[record["key"]] = outcome

    def lookup(self, key: str) -> Outcome | None:
        if not self.use_cache:
            return None
        with self._lock:
            if key not in self._cache:
                self._refresh()
            hit = self._cache.get(key)
        if hit is None:
            return None
        return Outcome.from_dict({**hit.to_dict(), "cached": True})

    def append(self, key: str, task_id: str, script: str, outcome: Outcome, backend: str, isolation: str) -> None:
        record = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "key": key,
            "task_id": task_id,
            "script_sha256": script_sha256(script),
            "script": script,
            "outcome": outcome.to_dict(),
            "wall_seconds": round(outcome.wall_seconds, 4),
            "backend": backend,
            "isolation": isolation,
            "packages": package_versions(),
        }
        line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
        with self._lock, open(self.path, "ab") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                f.write(line)
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)
            if not outcome.missing:
                self._cache[key] = outcome

    def records(self) -> list[dict]:
        """All records, oldest first (unreadable lines skipped)."""
        out = []
        with open(self.path, encoding="utf-8") as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
        return out
