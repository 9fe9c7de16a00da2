"""Where a folder task's parts lie (:class:`FolderSource`): the ``folder`` field of a
:class:`~wmrl.autoresearch.tasks.spec.TaskSpec`. Reading and validating a folder is :mod:`wmrl.autoresearch.tasks.folder`'s work."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

TASK_FILE = "task.yaml"
SAMPLE_REFERENCE = """import shutil

shutil.copy("public/sample_submission.csv", "submission.csv")
"""


@dataclass(frozen=True)
class FolderSource:
    """Where a folder task's parts lie.

    Attributes:
        kind: ``folder`` (wmrl's layout) or ``mlebench`` (a competition).
        root: the task folder (the competition's folder for ``mlebench``).
        public_dir: copied into every sandbox as ``public/``.
        answers: the hidden answers file.
        description: the markdown overview.
        grade_script / grade_function: the author's grader (``None``: the built-in metric of the spec).
        leaderboard: a CSV with a ``score`` column, or ``None`` (then recorded from the references).
        references_dir / starter: reference solutions and the starter solution, each optional.
        id_column: the row id column of ``sample_submission.csv``.
        submission_columns: the columns a submission must have (those of ``sample_submission.csv``).
        higher_is_better: the score's direction.
        grade_timeout_s: the author's grader's time limit per submission.
        private_roots: host paths a solution may never read (the folder; a competition's data dir).
        grader_name: a competition's ``grader.name`` (MLE-bench): shown as its metric, and a hint of what its
            ``grade.py`` scores (:func:`wmrl.autoresearch.tasks.starter.infer_prediction`).
        notes: what loading noticed without refusing the task (a grader name that looks misspelt), each with
            its fix; ``wmrl tasks add`` and ``wmrl tasks show`` print them.
    """

    kind: str
    root: Path
    public_dir: Path
    answers: Path
    description: Path
    grade_script: Path | None
    grade_function: str
    leaderboard: Path | None
    references_dir: Path | None
    starter: Path | None
    id_column: str
    submission_columns: tuple[str, ...]
    higher_is_better: bool
    grade_timeout_s: float
    private_roots: tuple[Path, ...]
    grader_name: str | None = None
    notes: tuple[str, ...] = ()

    def files(self) -> list[Path]:
        """Every file the task is made of (a change in any of them rebuilds the task's card)."""
        singles = [self.answers, self.description, self.grade_script, self.leaderboard, self.starter]
        files = [p for p in singles if p is not None and p.is_file()]
        files += sorted(p for p in self.public_dir.rglob("*") if p.is_file())
        if self.references_dir is not None:
            files += sorted(self.references_dir.glob("*.py"))
        task_file = self.root / TASK_FILE
        if task_file.is_file():
            files.append(task_file)
        config = self.root / "config.yaml"
        if self.kind == "mlebench" and config.is_file():
            files.append(config)
        return files

    def fingerprint(self) -> dict[str, list[int]]:
        """``path -> [size, mtime_ns]`` of every file: cheap enough to check on every use."""
        return {str(p): [st.st_size, st.st_mtime_ns] for p in self.files() for st in (p.stat(),)}

    def leaderboard_scores(self) -> dict[str, float]:
        """The leaderboard file's scores (``lb0001`` ... in file order), or empty when there is none."""
        if self.leaderboard is None:
            return {}
        import pandas as pd

        scores = pd.read_csv(self.leaderboard)["score"].dropna().astype(float).tolist()
        return {f"lb{i:04d}": s for i, s in enumerate(scores, 1)}

    def references(self) -> dict[str, str]:
        """Reference solutions by name: ``sample_submission`` (submits the sample as it is: the floor, and a check
        of the grader end to end), ``starter`` when there is one, then each ``references/<name>.py``."""
        found = {"sample_submission": SAMPLE_REFERENCE}
        if self.starter is not None:
            found["starter"] = self.starter.read_text()
        if self.references_dir is not None:
            found.update({p.stem: p.read_text() for p in sorted(self.references_dir.glob("*.py"))})
        return found
