"""The leak scan: evidence that no file a sandboxed script can read holds any task's answers.

    wmrl leak-scan [IDS...] [--split S] [--sandbox docker] [--report scan.json]

For every task (built-in, held-out and registered), its answers become fingerprints (:func:`fingerprints`): its
test rows (target value with the distinctive feature values of the row) and its target values in test-row order.
One run of the chosen sandbox, with the same view and covers as any solution's run, reads every file under ``/``
(``/proc``, ``/sys``, ``/dev`` and its own work dir aside) through the C library and searches it
(:mod:`wmrl.autoresearch.environments.sandbox.leak_scanner`); the host searches each task's public files the same way (those
reach that task's runs only). The report lists, per task, the files searched and the hits; any hit fails the
scan, naming the file.

A scan remembers the contents it found clean (their SHA-256, in the suite's cache under ``leak-scan/``, keyed by
the fingerprints and the scanner's source): the next scan with the same tasks reads every file again, to hash it,
and searches only contents it has not cleared. The two backends' views hold the same files, so the second scan
costs little more than reading them; ``fresh=True`` (``wmrl leak-scan --fresh``) searches everything again.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from wmrl.autoresearch.environments.sandbox import leak_scanner
from wmrl.autoresearch.environments.sandbox.base import ExecutionRequest, Sandbox, SandboxLimits
from wmrl.autoresearch.tasks.build import BuiltTask
from wmrl.autoresearch.tasks.suite import TaskSuite

# Values too common to identify a row on their own (small integers, flags, empty cells).
_COMMON_WORDS = {"", "nan", "na", "none", "null", "true", "false", "yes", "no", "y", "n", "t", "f"}
_MAX_ROWS = 2000
_CHANCE_BITS = 40
_MIN_ROW_VALUES = 2  # rare feature values a row needs to be recognised (besides its target)  # a target sequence by chance: at most 2^-40 per position of a scanned stream


def spellings(value: object) -> list[str]:
    """The ways ``value`` is commonly written in a file (numbers: each rounding that reads back as the value).

    >>> spellings(5.1)
    ['5.1', '5.10', '5.100', '5.1000', '5.10000', '5.100000']
    >>> spellings(0.28)[:2]
    ['0.28', '0.280']
    >>> spellings(0.28)[-1]
    '.280000'
    >>> spellings(181.0)[:3]
    ['181', '181.0', '181.00']
    >>> spellings(" Adelie ")  # the scanner compares lower case
    ['adelie']
    """
    if isinstance(value, str):
        text = value.strip().lower()
        return [text] if text else []
    try:
        number = float(value)
    except (TypeError, ValueError):
        return []
    if not math.isfinite(number):
        return []
    found = [str(int(number))] if number.is_integer() and abs(number) < 1e15 else []
    for digits in range(1, 7):
        text = f"{number:.{digits}f}"
        if abs(float(text) - number) <= 1e-9 * max(1.0, abs(number)):
            found.append(text)
    for text in (repr(number), f"{number:g}", f"{number:.10g}"):
        if "e" not in text and "inf" not in text:
            found.append(text)
    # without the leading zero, as some files write fractions (".28" in scikit-learn's wine_data.csv)
    found += [t.replace("0.", ".", 1) for t in found if t.startswith(("0.", "-0.")) and len(t) > 2]
    return list(dict.fromkeys(found))


def distinctive(value: object) -> bool:
    """Whether ``value`` can help identify a row: not empty, not a flag, not a small integer.

    >>> distinctive(39.1), distinctive(3), distinctive("MALE"), distinctive("yes")
    (True, False, True, False)
    """
    texts = spellings(value)
    if not texts or texts[0].lower() in _COMMON_WORDS:
        return False
    if isinstance(value, str):
        return len(texts[0]) > 2
    number = float(value)
    return not (number.is_integer() and -100 < number < 1000)


def sequence_length(values: list[str]) -> int:
    """How many consecutive target values make a match that chance cannot explain: enough that their
    information (the empirical entropy of the values, in bits each) passes ``2^40`` times the test set's size.

    >>> sequence_length(["a", "b"] * 50)  # two balanced classes: one bit a value
    47
    >>> sequence_length([str(v) for v in range(1000)])  # distinct values: a short run suffices
    8
    """
    n = len(values)
    counts = Counter(values)
    entropy = -sum(c / n * math.log2(c / n) for c in counts.values()) if n else 0.0
    needed = (_CHANCE_BITS + math.log2(max(n, 2))) / max(entropy, 0.05)
    return max(1, min(n, max(8, math.ceil(needed))))


def fingerprints(task: BuiltTask) -> dict:
    """The task's answers as the scanner looks for them (see :mod:`wmrl.autoresearch.environments.sandbox.leak_scanner`)."""
    import pandas as pd

    folder = task.spec.folder
    id_column = folder.id_column if folder is not None else "id"
    try:
        answers = pd.read_csv(task.answers_path, dtype={id_column: str})
    except (ValueError, OSError, pd.errors.ParserError) as exc:  # answers that are no table (.jsonl): not searchable
        return {"id": task.id, "k": 0, "kgrams": [], "target_spellings": {}, "rows": [], "min_rows": 0,
                "max_line_tokens": 0, "unsearchable": f"{task.answers_path}: {type(exc).__name__}: {exc}"}
    target = task.spec.target[0] if task.spec.target[0] in answers.columns else answers.columns[1]
    values = answers[target].tolist()
    spelled = [spellings(v) for v in values]
    vocabulary: dict[str, int] = {}
    sequence: list[int] = []
    for texts in spelled:
        index = vocabulary.setdefault(texts[0], len(vocabulary)) if texts else -1
        sequence.append(index)
    spell = {text: vocabulary[texts[0]] for texts in spelled if texts for text in texts}
    k = sequence_length([str(i) for i in sequence])
    kgrams = {tuple(sequence[i:i + k]) for i in range(len(sequence) - k + 1) if -1 not in sequence[i:i + k]}
    rows = _row_fingerprints(task, answers, id_column, target)
    return {
        "id": task.id,
        "k": k,
        "kgrams": sorted(kgrams),
        "target_spellings": spell,
        "rows": rows,
        "min_rows": min(len(rows), max(3, min(20, math.ceil(0.1 * len(rows))))),
        # a table row is about as wide as the test file: a line with many more values (an SVG path, a long list)
        # holds a row's numbers by chance
        "max_line_tokens": 2 * (_width(task) + 1) + 4,
    }


def _width(task: BuiltTask) -> int:
    """The number of columns of the task's public test file (0 without one)."""
    path = task.public_dir / "test.csv"
    if not path.is_file():
        return 0
    with open(path, newline="") as f:
        return len(next(csv.reader(f), []))


def _row_fingerprints(task: BuiltTask, answers, id_column: str, target: str) -> list:
    """Per test row (up to ``_MAX_ROWS``, evenly spread): its target's spellings, the class codes it may be written
    as (weaker evidence: a line needs more of the row's values with a code than with the label), and the spellings
    of each of its distinctive, rare feature values (rows with fewer than ``_MIN_ROW_VALUES`` are left out: they
    identify nothing)."""
    import pandas as pd

    test_path = task.public_dir / "test.csv"
    if not test_path.is_file():
        return []
    test = pd.read_csv(test_path, dtype={id_column: str})
    if id_column not in test.columns:
        return []
    merged = test.merge(answers[[id_column, target]], on=id_column, how="inner", suffixes=("", "__answer"))
    answer_column = target if target not in test.columns else f"{target}__answer"
    features = [c for c in test.columns if c not in (id_column, target)]
    codes = _class_codes(answers[target]) if task.labels else {}
    all_values = merged[features].to_numpy(dtype=object)
    step = max(1, len(merged) // _MAX_ROWS)
    rows = []
    # A value identifies a row only if few test rows share it (at most 5 %, or 3 rows).
    rare = {c: merged[c].map(merged[c].value_counts()) <= max(3, 0.05 * len(merged)) for c in features}
    for position, (i, row) in enumerate(merged.iterrows()):
        if position % step:
            continue
        chosen = [spellings(row[c]) for c in features if pd.notna(row[c]) and rare[c][i] and distinctive(row[c])][:8]
        # The target only counts as evidence where no feature of the row is written the same way (a yes/no target
        # beside yes/no features would make every copy of the features a "hit", the task's own test.csv included).
        own = {text for value in all_values[position] if pd.notna(value) for text in spellings(value)}
        targets = [t for t in spellings(row[answer_column]) if t not in own]
        coded = [t for t in codes.get(str(row[answer_column]), []) if t not in own and t not in targets]
        if len(chosen) >= _MIN_ROW_VALUES and (targets or coded):
            rows.append([targets, coded, chosen])
    return rows if len(rows) >= 3 else []  # fewer rows identify nothing reliably: the target sequence remains


def _class_codes(labels) -> dict[str, list[str]]:
    """The integer codes another copy of a dataset may write a class label as: any of ``0..C`` (datasets number
    their classes in an order of their own: statsmodels' iris writes ``0, 1, 2`` for scikit-learn's species names,
    scikit-learn's ``wine_data.csv`` ``0, 1, 2`` for the cultivars). A code on the line of a test row's features
    reveals the row's class to a script that maps codes to labels through the training rows.

    >>> _class_codes(["b", "a", "c", "a"])["a"]
    ['0', '1', '2', '3']
    """
    classes = sorted({str(v) for v in labels})
    if len(classes) > 50:
        return {}
    codes = [str(i) for i in range(len(classes) + 1)]
    return {c: codes for c in classes}


@dataclass
class TaskReport:
    """One task's part of the scan: what was searched and what was found."""

    task_id: str
    files_scanned: int
    public_files: list[str]
    row_fingerprints: int
    sequence_length: int
    hits: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class LeakReport:
    """The scan of one sandbox: the files a run can read, and per task its hits."""

    backend: str
    isolation: str
    files: list[str]
    bytes_scanned: int
    unreadable: list[str]
    tasks: dict[str, TaskReport]
    known_clean: int = 0  # of ``files``: read and hashed, their content cleared by an earlier scan

    @property
    def hits(self) -> list[tuple[str, str, str]]:
        """(task, file, how) of every hit."""
        return [(t.task_id, path, how) for t in self.tasks.values() for path, how in t.hits]

    @property
    def clean(self) -> bool:
        return not self.hits

    def to_dict(self) -> dict:
        return {
            "backend": self.backend, "isolation": self.isolation, "clean": self.clean, "files": self.files,
            "bytes_scanned": self.bytes_scanned, "unreadable": self.unreadable, "known_clean": self.known_clean,
            "tasks": {i: {**t.__dict__, "hits": [list(h) for h in t.hits]} for i, t in self.tasks.items()},
        }


def leak_scan(
    suite: TaskSuite,
    sandbox: Sandbox,
    task_ids: list[str],
    roots: tuple[str, ...] = ("/",),
    hidden: tuple[str, ...] = (),
    timeout_s: float = 7200.0,
    fresh: bool = False,
) -> LeakReport:
    """Scan what a run of ``sandbox`` can read under ``roots`` (and each task's public files, on the host) for the
    answers of ``task_ids``. ``hidden``: the paths every run has covered (``SandboxEnvironment.hidden_paths``).
    ``fresh``: search every file, even a content an earlier scan of the same tasks cleared.

    Raises:
        RuntimeError: the scan run failed (the sandbox's error or the scanner's output is quoted).
    """
    tasks = suite.build(task_ids)
    prints = [fingerprints(t) for t in tasks]
    cleared = _cleared_contents(suite, prints)
    known = _read_cleared(cleared)
    config = {"tasks": prints, "roots": list(roots), "clean": [] if fresh else sorted(known)}
    request = ExecutionRequest(
        script=Path(leak_scanner.__file__).read_text(),
        files={"fingerprints.json": json.dumps(config).encode()},
        limits=SandboxLimits(timeout_s=timeout_s, memory_mb=4096, max_collect_mb=512),
        collect=("leak_scan.json",),
        forbidden=hidden,
        label="leak-scan",
    )
    result = sandbox.run(request)
    if result.infra_error or result.exit_code != 0 or "leak_scan.json" not in result.files:
        why = result.infra_error or f"exit code {result.exit_code}, tripwires {list(result.tripwires)}"
        raise RuntimeError(f"the leak scan run failed ({why}): {result.stderr_tail[-2000:]}")
    found = json.loads(result.files["leak_scan.json"])
    if found["clean"]:
        _write_cleared(cleared, known | set(found["clean"]))
    reports = {}
    for task, spec in zip(tasks, prints, strict=True):
        public = sorted(str(p) for p in task.public_dir.rglob("*") if p.is_file())
        # A task's own public rows may repeat test rows (datasets have duplicates): only copies of the answers count.
        matcher = leak_scanner.Matcher([{**spec, "rows": []}])
        hits = [(path, how) for path, task_id, how in found["hits"] if task_id == task.id]
        for path in public:
            hits += [(path, how) for _, how in leak_scanner.scan_file(matcher, path) or []]
        reports[task.id] = TaskReport(task.id, len(found["files"]) + len(public), public, len(spec["rows"]),
                                      spec["k"], hits)
    return LeakReport(result.backend, result.isolation, found["files"], found["bytes"], found["unreadable"], reports,
                      found["known_clean"])


def _cleared_contents(suite: TaskSuite, prints: list[dict]) -> Path:
    """Where the contents cleared for these fingerprints are kept: one file per (fingerprints, scanner source)."""
    key = hashlib.sha256(json.dumps(prints, sort_keys=True).encode())
    key.update(Path(leak_scanner.__file__).read_bytes())
    return suite.cache_dir / "leak-scan" / f"cleared-{key.hexdigest()[:24]}.json"


def _read_cleared(path: Path) -> set[str]:
    try:
        return set(json.loads(path.read_text()))
    except (OSError, ValueError):
        return set()


def _write_cleared(path: Path, digests: set[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(sorted(digests)))
    os.replace(tmp, path)
