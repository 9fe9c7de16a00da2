"""The execution log: every real execution, appended as one JSON line, doubling as an execution cache.

A record holds the task, the script and its hash, the outcome, the wall seconds, the sandbox and the
package versions. It is the world model's calibration and evaluation data later, so nothing is dropped:
infrastructure failures are logged too (and never served from the cache, so they are retried).

Identical (task data, script, limits, sandbox) executions are served from the cache: the outcome comes back
with ``cached=True`` and the wall seconds of the original run, which is what the execution really costs. A
timeout is cached only when the script used its CPU budget itself (``ExecutionResult.own_timeout``): one that
slept past its deadline, or ran where CPU time is not counted, is logged with ``"cacheable": false`` and run
again next time, so a timeout caused by a busy host is never served to a later run.

A record served from the cache becomes a reward, so every record carries an HMAC (``mac``) under a secret key
kept beside the log (``.log_key``, mode 0600, made on first use). A line appended by anything that lacks the
key - a solution that reached the log file, an older kit's log - still parses for :meth:`ExecutionLog.records`
(the learned world model's data), but it is never served from the cache; such lines are counted in
``ExecutionLog.unverified`` and reported once per read. The key only protects the log from what cannot read
it: the bubblewrap and docker sandboxes cannot see the cache dir at all, while a run with weak isolation
(``ProcessSandbox(isolation="unshare" | "none")``, the host user on the host filesystem) could read the key as
well as the answers, which is why training refuses those isolations
(:class:`~wmrl.autoresearch.environments.real.SandboxEnvironment`).
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import json
import logging
import os
import platform
import secrets
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


def cache_key(task_id: str, data_hash: str, script: str, limits: tuple, backend: str = "") -> str:
    """The cache key of one execution. ``backend`` names the sandbox and its isolation (``process/bwrap+uid``):
    an outcome observed under one backend is not served to another, whose limits and isolation differ."""
    blob = json.dumps([task_id, data_hash, script_sha256(script), list(limits), backend])
    return hashlib.sha256(blob.encode()).hexdigest()


KEY_NAME = ".log_key"


def log_key(path: Path) -> bytes:
    """The secret key at ``path``, made there (mode 0600, exclusively) if it does not exist yet."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        for _ in range(200):
            key = path.read_bytes().strip()
            if key:
                if path.stat().st_mode & 0o077:
                    log.warning("%s is readable by other users: chmod 600 it (it authenticates the cache)", path)
                return key
            time.sleep(0.01)  # another process has just created it and is writing it
        raise RuntimeError(f"{path} is empty: delete it and a new key will be made") from None
    key = secrets.token_hex(32).encode()
    with os.fdopen(fd, "wb") as f:
        f.write(key)
    return key


def _mac(key: bytes, record: dict) -> str:
    body = json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hmac.new(key, body.encode("utf-8"), hashlib.sha256).hexdigest()


class ExecutionLog:
    """Append-only JSONL log of real executions with an in-memory cache index.

    Args:
        path: the JSONL file (created if missing). Safe to share between processes (appends are locked).
        use_cache: serve repeated (task, script, limits, sandbox) executions from the log.
        key_path: the secret that authenticates records (default ``.log_key`` beside ``path``); only records
            whose MAC verifies under it are served from the cache.

    Attributes:
        unverified: records read so far whose MAC is missing or wrong (never served from the cache).
    """

    def __init__(self, path: str | Path, use_cache: bool = True, key_path: str | Path | None = None) -> None:
        self.path = Path(path).expanduser()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.use_cache = use_cache
        self._key = log_key(Path(key_path).expanduser() if key_path is not None else self.path.parent / KEY_NAME)
        self._lock = threading.Lock()
        self._cache: dict[str, Outcome] = {}
        self._offset = 0
        self.unverified = 0
        self._refresh()

    def verified(self, record: dict) -> bool:
        """Whether ``record`` (as read from the log, ``mac`` included) was written with this log's key."""
        mac = record.get("mac")
        body = {k: v for k, v in record.items() if k != "mac"}
        return isinstance(mac, str) and hmac.compare_digest(mac, _mac(self._key, body))

    def _refresh(self) -> None:
        """Index records appended since the last read (also by other processes)."""
        if not self.path.exists():
            return
        unverified = 0
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            for lineno, line in enumerate(f, 1):
                if not line.endswith(b"\n"):
                    break  # a record being written by another process: read it next time
                self._offset += len(line)
                try:
                    record = json.loads(line)
                    outcome = Outcome.from_dict(record["outcome"])
                except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
                    log.warning("%s: skipping unreadable record near line %d (%s)", self.path, lineno, exc)
                    continue
                if not self.verified(record):
                    unverified += 1  # forged, damaged or from a log without keys: never a reward
                    continue
                if not outcome.missing and "key" in record and record.get("cacheable", True):
                    self._cache[record["key"]] = outcome
        if unverified:
            self.unverified += unverified
            log.warning(
                "%s: %d record(s) whose MAC does not verify under %s are not served from the cache "
                "(written without the key: an older log, or forged)", self.path, unverified, KEY_NAME,
            )

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

    def append(
        self,
        key: str,
        task_id: str,
        script: str,
        outcome: Outcome,
        backend: str,
        isolation: str,
        cacheable: bool = True,
        cpu_seconds: float | None = None,
    ) -> None:
        """Log one execution. ``cacheable=False`` keeps it out of the cache (in this process and in every process
        that reads the log later): a timeout the script did not cause by using its CPU budget."""
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
        if cpu_seconds is not None:
            record["cpu_seconds"] = round(cpu_seconds, 4)
        if not cacheable:
            record["cacheable"] = False
        record["mac"] = _mac(self._key, record)
        line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
        with self._lock, open(self.path, "ab") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                f.write(line)
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)
            if not outcome.missing and cacheable:
                self._cache[key] = outcome

    def records(self, verified_only: bool = False) -> list[dict]:
        """All records, oldest first (unreadable lines skipped; with ``verified_only``, also those whose MAC
        does not verify)."""
        out = []
        with open(self.path, encoding="utf-8") as f:
            for line in f:
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if not verified_only or (isinstance(record, dict) and self.verified(record)):
                    out.append(record)
        return out
