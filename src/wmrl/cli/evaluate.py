"""``wmrl evaluate``: policies (the base model, checkpoints of ``wmrl fit``) compared on the same held-out tasks,
samples and seeds, each sample's script and outcome written down (:mod:`wmrl.evaluation` keeps the records).

An AutoResearch application: each policy is sampled by a :class:`~wmrl.autoresearch.module.GRPOModule` in the real
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

from wmrl.autoresearch.contracts import ShowsStarter
from wmrl.evaluation import mean_summary, paired_differences, write_samples
from wmrl.evaluation.records import EVAL_SEED
from wmrl.types import Outcome, Source, StepRequest

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
    cls = str(hparams.get("_class_path", "wmrl.autoresearch.module.GRPOModule"))
    if not cls.endswith("GRPOModule") or "model" not in hparams or "prefill" not in hparams:
        raise PolicyError(f"policy {str(path)!r}: a checkpoint of {cls}, not of an AutoResearch policy "
                          "(wmrl.autoresearch.module.GRPOModule); VLA checkpoints are evaluated with `wmrl validate`")
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

    from wmrl.autoresearch.module import GRPOModule
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


# -- the command ---------------------------------------------------------------------------------------
def add_parsers(sub) -> None:
    """``wmrl evaluate`` on the top-level parser's subcommands."""
    from wmrl.autoresearch.tasks.spec import SPLITS
    from wmrl.cli.common import add_sandbox_args

    p = sub.add_parser("evaluate", help="compare policies (the base, checkpoints) on held-out tasks, real execution")
    p.add_argument("policies", nargs="+", metavar="POLICY",
                   help="`base` (the policy a fit starts from) or a checkpoint of `wmrl fit` (a .ckpt or its run dir); "
                        "the first is the reference of the paired differences")
    p.add_argument("--tasks", nargs="+", default=None, metavar="ID",
                   help="task ids (built-in, registered folders and competitions); in the fit's eval_tasks order to "
                        "reproduce its numbers")
    p.add_argument("--split", choices=SPLITS, default=None, help="every task of a split "
                   "(default: heldout)")
    p.add_argument("--samples", type=int, default=4, help="samples per task, K (default 4)")
    p.add_argument("--seed", type=int, default=EVAL_SEED, help="the sampling seed, shared by every policy (default "
                   f"{EVAL_SEED}: the fit's held-out evaluation seed)")
    p.add_argument("--out", default=None, help="output dir (default runs/evaluate/<time>)")
    p.add_argument("--model", default=None, help="the base model when no checkpoint says it")
    p.add_argument("--temperature", type=float, default=None, help="sampling temperature (default: the "
                   "checkpoint's eval_temperature)")
    p.add_argument("--max-new-tokens", type=int, default=None, help="tokens per turn (default: the checkpoint's)")
    p.add_argument("--max-turns", type=int, default=None, help="turns per sample (default: the checkpoint's)")
    p.add_argument("--prefill", choices=("none", "fence", "starter_head", "starter_estimator"), default=None,
                   help="how each turn starts (default: the checkpoint's)")
    p.add_argument("--starter", default="linear_baseline", help="the starter solution the prompts show "
                   "(environment.init_args.starter_solution of the fit; default linear_baseline)")
    p.add_argument("--starter-view", default="script", choices=("script", "score"), help="how the prompts show the "
                   "starter (environment.init_args.starter_view of the fit; default script)")
    p.add_argument("--no-cache", action="store_true", help="execute every script even if the execution log has it")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.add_argument("--allow-weak-isolation", action="store_true", help="run the policies' scripts in a sandbox "
                   "that cannot hide the answers (trusted policies only)")
    p.add_argument("--allow-weak-bounds", action="store_true", help="run them where each run cannot get its own "
                   "control group (memory and CPU bounded per process only)")
    add_sandbox_args(p)
    p.set_defaults(fn=cmd_evaluate)


class _EvaluationProgress:
    """One bar per policy: its samples' generation (elapsed time), then each sample's execution as it ends; without
    a terminal (a log file) the same as one line per event."""

    def __init__(self, progress, samples: int) -> None:
        self.progress, self.samples = progress, samples
        self.bars: dict[str, int] = {}
        self.finished: dict[tuple[str, str], int] = {}

    def _say(self, text: str) -> None:
        from wmrl.cli.common import console

        if not console.is_terminal:
            console.print(text, markup=False, highlight=False)

    def start(self, policy, total: int) -> None:
        self.bars[policy.label] = self.progress.add_task(f"{policy.label}: generating {total} samples", total=total,
                                                         last="")
        self._say(f"{policy.label}: generating {total} samples")

    def executing(self, policy, count: int) -> None:
        self.progress.update(self.bars[policy.label], description=f"{policy.label}: executing")
        self._say(f"{policy.label}: executing {count} scripts")

    def done(self, policy, task_id: str, outcome) -> None:
        key = (policy.label, task_id)
        self.finished[key] = self.finished.get(key, 0) + 1
        position = "" if outcome.position is None else f" {outcome.position:.2f}"
        last = f"{task_id} sample {self.finished[key]}/{self.samples}: {outcome.status.value}{position}"
        self.progress.update(self.bars[policy.label], advance=1, last=last)
        self._say(f"{policy.label}: {last}")


def cmd_evaluate(args) -> None:
    """``wmrl evaluate``: the policies sampled on the same tasks and seeds, every script executed for real, the table
    and the paired differences to the first policy (``--json``: the comparison itself)."""
    from wmrl.cli import common
    from wmrl.cli.common import CliError, CommandInterrupted, console, out

    suite = common.suite(args)
    if args.tasks and args.split:
        raise CliError("give --tasks or --split, not both")
    task_ids = args.tasks or [s.id for s in suite.specs(args.split or "heldout")]
    for task_id in task_ids:
        suite.spec(task_id)  # an unknown id fails here, with a did-you-mean
    if args.samples < 1:
        raise CliError(f"--samples must be >= 1 (got {args.samples})")
    overrides = {key: value for key, value in (
        ("model", args.model), ("eval_temperature", args.temperature), ("max_new_tokens", args.max_new_tokens),
        ("prefill", args.prefill), ("max_turns", args.max_turns)) if value is not None}
    policies = resolve_policies(args.policies, overrides)
    out_dir = Path(args.out or Path("runs") / "evaluate" / datetime.now().strftime("%Y%m%d-%H%M%S"))
    sandbox = common.sandbox(args)
    env = _evaluation_environment(args, suite, sandbox)
    console.print(f"{len(policies)} polic{'y' if len(policies) == 1 else 'ies'} x {len(task_ids)} task(s) x "
                  f"{args.samples} sample(s), seed {args.seed}, real execution ({sandbox.name} sandbox); "
                  f"samples and evaluation.json in {out_dir}", markup=False, highlight=False)
    try:
        with common.progress() as progress:
            report = compare(policies, task_ids, args.samples, env, out_dir, seed=args.seed,
                             progress=_EvaluationProgress(progress, args.samples))
    except KeyboardInterrupt:
        done = sorted(p.name for p in out_dir.iterdir() if p.is_dir()) if out_dir.is_dir() else []
        kept = f"; the samples of {', '.join(done)} are in {out_dir}" if done else ""
        raise CommandInterrupted(f"wmrl evaluate stopped before it finished: no evaluation.json{kept}") from None
    finally:
        env.close()
    if args.json:
        out.print_json(json.dumps(report))
        return
    _print_comparison(report, task_ids, args.samples, args.seed)
    out.print(f"written: {out_dir / 'evaluation.json'}", markup=False, highlight=False)


def _evaluation_environment(args, suite, sandbox):
    """The real environment the policies' scripts run in: a sandbox that cannot hide the answers is refused, as in
    training (the scripts are untrusted), unless this command's flags allow it."""
    from wmrl.autoresearch.environments.real import SandboxEnvironment
    from wmrl.cli.common import CliError

    try:
        return SandboxEnvironment(suite, sandbox, use_cache=not args.no_cache, starter_solution=args.starter,
                                  starter_view=args.starter_view, allow_weak_isolation=args.allow_weak_isolation,
                                  allow_weak_bounds=args.allow_weak_bounds)
    except ValueError as exc:
        message = str(exc)
        for key in ("allow_weak_isolation", "allow_weak_bounds"):  # the config key, as this command's flag
            message = message.replace(f"model.init_args.environment.init_args.{key}=true",
                                      "--" + key.replace("_", "-"))
        raise CliError(message.replace("model.init_args.environment.init_args.", "--")) from None


def _print_comparison(report: dict, task_ids: list[str], samples: int, seed: int) -> None:
    """The comparison's table (per task and policy: valid rate, mean position, best-of-k), the paired differences
    to the first policy, and a note for a policy that submitted nothing valid."""
    from rich.table import Table

    from wmrl.algorithms.stats import describe_gain
    from wmrl.cli.common import out, plain
    from wmrl.evaluation.report import MISSING_ADVICE, shown

    table = Table(title=f"held-out evaluation: {samples} samples per task, seed {seed} (real execution)")
    table.add_column("task")
    for policy in report["policies"]:
        table.add_column(f"{policy['label']}\nvalid / mean pos. / best-of-{samples}", justify="right")

    def cell(s: dict) -> str:
        return (f"{shown(s['valid_rate'], '.2f')} / {shown(s['mean_position'], '.3f')} / {shown(s['best_of_k'], '.3f')}"
                + (f" ({s['missing']} missing)" if s.get("missing") else ""))

    rows: dict[str, list[str]] = {t: [] for t in task_ids}
    for policy in report["policies"]:
        for t in policy["tasks"]:
            rows[t["task_id"]].append(cell(t))
    for task_id, cells in rows.items():
        table.add_row(plain(task_id), *cells)
    table.add_row("[bold]mean[/bold]", *(cell(p["summary"]) for p in report["policies"]))
    out.print(table)
    if any(p["summary"].get("missing") for p in report["policies"]):
        out.print(MISSING_ADVICE.strip().replace("<run dir>/samples/", "the samples folder"), markup=False)
    for diff in report["differences"]:
        position, valid = diff["mean_position"], diff["valid_rate"]
        o = position["overall"]
        said = ("no difference: every paired sample scored the same" if position["unchanged"]
                else describe_gain(o["point"], o["low"], o["high"], False))
        out.print(f"{diff['policy']} - {diff['reference']}: mean position {said}; valid rate "
                  f"{valid['overall']['point']:+.2f} [{valid['overall']['low']:+.2f}, {valid['overall']['high']:+.2f}] "
                  f"(paired over {len(task_ids) * samples} samples)", markup=False, highlight=False)
    for policy in report["policies"]:
        if policy["summary"]["valid_rate"] == 0:
            out.print(f"{policy['name']}: no valid submission on any task. Read its samples ({policy['samples_dir']}); "
                      "check each task's starter (`wmrl tasks show ID`, `wmrl tasks check ID`)", markup=False)
