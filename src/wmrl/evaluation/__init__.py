"""Held-out evaluation for both domains: the records (:mod:`wmrl.evaluation.records`: each sample's script and
outcome, per-task summaries, paired differences), the held-out log every RL module keeps
(:mod:`wmrl.evaluation.heldout`: ``heldout.jsonl``, the starting evaluation) and the end-of-fit reports
(:mod:`wmrl.evaluation.report`). The records are re-exported here."""

from wmrl.evaluation.records import (
    SUMMARY_KEYS,
    mean_summary,
    paired_differences,
    sample_record,
    task_line,
    task_summary,
    write_samples,
)

__all__ = ["SUMMARY_KEYS", "mean_summary", "paired_differences", "sample_record", "task_line", "task_summary", "write_samples"]
