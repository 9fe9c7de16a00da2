"""``wmrl evaluate``: policies (the base model, checkpoints of ``wmrl fit``) compared on the same held-out tasks,
samples and seeds, each sample's script and outcome written down (:mod:`wmrl.evaluation` keeps the records).

An AutoResearch application: each policy is sampled by a :class:`~wmrl.autoresearch.grpo.GRPOModule` in the real
environment.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from wmrl.evaluation import mean_summary, paired_differences, write_samples
from wmrl.evaluation.records import EVAL_SEED
from wmrl.types import Outcome, ShowsStarter, Source, StepRequest

#: the ``GRPOModule`` settings that decide how a policy samples, read from a checkpoint's hyperparameters
SAMPLING_SETTINGS = ("model", "lora", "dtype", "max_turns", "max_new_tokens", "observation_tokens",
                     "eval_temperature", "top_p", "prefill", "generation_batch_size", "overlap")
BASE = "base"


@dataclass(frozen=True)
class Policy:
    """One policy of a comparison.

    Attributes:
        name: as the user gave it (``base`` or a checkpoint path).
        label: its folder under the output dir (unique, ``0-base``, ``1-quickstart-last``).
        checkpoint: the ``.ckpt`` whose trainable weights are loaded (``None``: the base policy, as a fit starts).
        settings: the ``GRPOModule`` arguments it samples with (:data:`SAMPLING_SETTINGS`).
    """

    name: str
    label: str
    checkpoint: Path | None
    settings: dict[str, Any]


class PolicyError(ValueError):
    """A policy argument of ``wmrl evaluate`` that cannot be used (the message says the fix)."""


def checkpoint_path(name: str) -> Path:
    """The checkpoint a policy argument names: a ``.ckpt`` file, or a run dir's ``checkpoints/last.ckpt``."""
    path = Path(name).expanduser()
    if path.is_file():
        return path
    if path.is_dir() and (path / "checkpoints" / "last.ckpt").is_file():
        return path / "checkpoints" / "last.ckpt"
    hint = " (did you mean base?)" if difflib.get_close_matches(name, [BASE], cutoff=0.6) else ""
    raise PolicyError(f"policy {name!r}: no such checkpoint{hint}; give `base`, a checkpoint of `wmrl fit` "
                      "(runs/quickstart/checkpoints/last.ckpt) or its run dir (runs/quickstart)")


def checkpoint_settings(path: Path) -> dict[str, Any]:
    """The sampling settings a checkpoint of ``GRPOModule`` was trained with (its saved hyperparameters)."""
    import torch

    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unreadable file is the user's to fix
        raise PolicyError(f"policy {str(path)!r}: not a readable checkpoint ({type(exc).__name__}: {exc})") from None
    hparams = saved.get("hyper_parameters", {}) if isinstance(saved, dict) else {}
    cls = str(hparams.get("_class_path", "wmrl.autoresearch.grpo.GRPOModule"))
    if not cls.endswith("GRPOModule") or "model" not in hparams or "prefill" not in hparams:
        raise PolicyError(f"policy {str(path)!r}: a checkpoint of {cls}, not of an AutoResearch policy "
                          "(wmrl.autoresearch.grpo.GRPOModule); VLA checkpoints are evaluated with `wmrl validate`")
    return {k: hparams[k] for k in SAMPLING_SETTINGS if k in hparams}


def resolve_policies(names: Sequence[str], overrides: Mapping[str, Any]) -> list[Policy]:
    """The policies named on the command line, each with its sampling settings.

    A checkpoint samples as it was trained (its hyperparameters); ``base`` samples like the first checkpoint
    given (its base model, LoRA shape and settings, no trained weights: exactly the policy a fit starts from), or
    with ``GRPOModule``'s defaults when no checkpoint is given. ``overrides`` (the command's flags) apply to all.
    """
    if not names:
        raise PolicyError("name at least one policy: `base` and/or checkpoints of `wmrl fit`")
    paths = {n: None if n == BASE else checkpoint_path(n) for n in names}
    settings = {n: checkpoint_settings(p) for n, p in paths.items() if p is not None}
    reference = next(iter(settings.values()), {})
    policies = []
    for i, name in enumerate(names):
        path = paths[name]
        stem = BASE if path is None else (f"{path.parent.parent.name}-{path.stem}" if path.parent.name ==
                                          "checkpoints" else path.stem)
        chosen = {**(reference if path is None else settings[name]), **overrides}
        policies.append(Policy(name, f"{i}-{_slug(stem)}", path, chosen))
    return policies


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "policy"


def build_module(policy: Policy, environment: Any):
    """The ``GRPOModule`` that samples as ``policy`` does, its checkpoint's trainable weights loaded."""
    import torch

    from wmrl.autoresearch.grpo import GRPOModule
    from wmrl.models import LoraSettings

    settings = dict(policy.settings)
    lora = settings.pop("lora", LoraSettings())
    if isinstance(lora, Mapping):
        lora = LoraSettings(**{k: tuple(v) if isinstance(v, list) else v for k, v in lora.items()})
    module = GRPOModule(**settings, lora=lora, environment=environment, group_size=2, kl_coef=0.0)
    if policy.checkpoint is not None:
        weights = torch.load(policy.checkpoint, map_location="cpu", weights_only=True)["state_dict"]
        unexpected = module.load_state_dict(weights, strict=False).unexpected_keys
        if unexpected or not weights:
            raise PolicyError(f"policy {policy.name!r}: its weights do not fit {settings.get('model')!r} with this "
                              f"LoRA shape ({len(unexpected)} unexpected keys, e.g. {unexpected[:2]})")
    module.eval()
    return module


class EvaluationProgress(Protocol):
    """What :func:`compare` reports while it runs (``wmrl evaluate`` draws a bar per policy from it)."""

    def start(self, policy: Policy, total: int) -> None:
        """``policy`` starts generating its ``total`` samples."""

    def executing(self, policy: Policy, count: int) -> None:
        """Generation is over; ``count`` executions begin."""

    def done(self, policy: Policy, task_id: str, outcome: Outcome) -> None:
        """One sample of ``task_id`` was executed (or gated) and graded."""


class SilentProgress:
    """An :class:`EvaluationProgress` that reports nothing."""

    def start(self, policy: Policy, total: int) -> None:
        pass

    def executing(self, policy: Policy, count: int) -> None:
        pass

    def done(self, policy: Policy, task_id: str, outcome: Outcome) -> None:
        pass


class ReportingEnvironment(ShowsStarter):
    """The real environment, telling ``on_done(task_id, outcome)`` as each execution finishes (the per-sample
    progress of ``wmrl evaluate``), and ``on_start(count)`` when a turn's executions begin (generation is over)."""

    source = Source.REAL

    def __init__(self, environment: Any, on_start: Callable[[int], None], on_done: Callable[[str, Outcome], None]):
        self.environment, self.on_start, self.on_done = environment, on_start, on_done

    def step_many(self, requests: Sequence[StepRequest]) -> list[Outcome]:
        self.on_start(len(requests))
        return self.environment.execute_many(
            [(r.task_id, r.code) for r in requests], on_done=lambda i, outcome: self.on_done(requests[i].task_id, outcome))

    def prompt(self, task_id: str) -> str:
        return self.environment.prompt(task_id)

    def starter(self, task_id: str) -> str:
        return self.environment.starter(task_id)


def compare(
    policies: Sequence[Policy], task_ids: Sequence[str], samples: int, environment: Any, out_dir: str | Path,
    seed: int = EVAL_SEED, progress: EvaluationProgress | None = None,
) -> dict[str, Any]:
    """Evaluate every policy on ``task_ids`` (``samples`` each, the same ``seed``: paired samples), write each
    sample's script and outcome under ``out_dir/<label>/`` and return the comparison (also ``evaluation.json``):
    per policy and task the summary (module docstring), and each policy's paired differences from the first.
    """
    import os

    progress = progress or SilentProgress()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    evaluated = []
    for policy in policies:
        progress.start(policy, len(task_ids) * samples)
        reporting = ReportingEnvironment(environment, on_start=functools.partial(progress.executing, policy),
                                         on_done=functools.partial(progress.done, policy))
        module = build_module(policy, reporting)
        start = time.perf_counter()
        results = module.evaluate(list(task_ids), samples, seed)
        seconds = time.perf_counter() - start
        folder = write_samples(out / policy.label, {r["task_id"]: r["samples"] for r in results})
        tasks = [{k: v for k, v in r.items() if k != "samples"} for r in results]
        evaluated.append({"name": policy.name, "label": policy.label,
                          "checkpoint": None if policy.checkpoint is None else str(policy.checkpoint),
                          "settings": policy.settings, "summary": mean_summary(tasks), "tasks": tasks,
                          "samples_dir": str(folder), "seconds": round(seconds, 1)})
        del module
    reference = evaluated[0]
    differences = []
    for other in evaluated[1:]:
        before = {t["task_id"]: t["positions"] for t in reference["tasks"]}
        after = {t["task_id"]: t["positions"] for t in other["tasks"]}
        valid_before = {t["task_id"]: t["valid"] for t in reference["tasks"]}  # booleans, None for missing: the
        valid_after = {t["task_id"]: t["valid"] for t in other["tasks"]}  # bootstraps read them as 1 / 0 / left out
        differences.append({"policy": other["name"], "reference": reference["name"],
                            "mean_position": paired_differences(before, after),
                            "valid_rate": paired_differences(valid_before, valid_after)})
    machine = {"cpus": os.cpu_count(), "load_average": [round(x, 2) for x in os.getloadavg()]}
    report = {"tasks": list(task_ids), "samples": samples, "seed": seed, "policies": evaluated,
              "differences": differences, "machine": machine,
              "created": datetime.now(UTC).isoformat(timespec="seconds")}
    (out / "evaluation.json").write_text(json.dumps(report, indent=1) + "\n")
    return report
