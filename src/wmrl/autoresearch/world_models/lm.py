"""`LMWorldModel`: a language model that predicts what executing a solution script would give.

It answers the agent loop's environment protocol (``step_many``) like the real sandbox, with outcomes whose
``source`` is ``world_model``: a status, a ladder reward and a simulated feedback text for the next turn.

    wm = LMWorldModel(mode="score")            # frozen SmolLM2 by default; "policy": the policy's own base
    wm.bind(policy, tokenizer)                 # share the policy's weights (LoRA disabled), as in the paper
    outcomes = wm.step_many(requests)          # -> [Outcome(source=world_model, reward, variance, feedback)]

The deterministic gate comes first: no code block -> ``malformed`` and ``compile()`` failing -> ``syntax_err``,
both 0.0 without any model call (:func:`~wmrl.autoresearch.world_models.gate.gate`). Gated outcomes have ``basis``
``exact``: the real sandbox gates the same way, so they are neither calibrated nor used as calibration pairs. Two prediction modes:

- ``generate`` (the paper): the holistic simulation prompt (task, data inventory, the code with 1-indexed line
  numbers; simulate parse -> compile -> run, first exception wins -> submission -> score) answered as JSON
  with up to two predictions ``{status, error_type, error_line, quality_bucket, env_feedback, confidence}``.
  The top prediction gives the reward, the top two the feedback.
- ``score``: one forward pass over the same simulation prompt posed as a multiple-choice question; the
  next-token probabilities of the option letters give a distribution over the discrete outcomes
  (status x quality bucket), hence an expected ladder reward and its variance, plus templated feedback.

Malformed model output never crashes: it becomes :data:`FALLBACK` (the uniform prior over the outcome classes,
with the largest variance a [0, 1] reward can have) and is counted in ``parse_failures``. A question the backend
could not answer at all (a world-model server that failed: its row is ``None``) is a missing outcome
(``infra_error``, no reward, never 0), counted in ``unanswered``.
Quality bucket -> leaderboard position (inferred from the authors' fidelity harness): low 0.05, fair 0.20,
mid 0.45, high 0.75.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from wmrl.algorithms.reward import ladder_reward
from wmrl.autoresearch.environments.executed_form import executed_form
from wmrl.autoresearch.tasks.build import STARTER_HEADING
from wmrl.autoresearch.world_models.gate import gate
from wmrl.types import BindsToPolicy, LanguageModelBackend, Outcome, ReportsMetrics, Source, Status, declares

if TYPE_CHECKING:
    from wmrl.autoresearch.tasks.suite import TaskSuite
    from wmrl.types import StepRequest

log = logging.getLogger(__name__)

BUCKET_POSITION = {"low": 0.05, "fair": 0.20, "mid": 0.45, "high": 0.75}
MAX_VARIANCE = 0.25  # the largest variance of any reward in [0, 1]


@dataclass(frozen=True)
class OutcomeClass:
    """One discrete outcome the world model can predict."""

    letter: str
    status: Status
    bucket: str | None
    text: str

    @property
    def reward(self) -> float:
        position = BUCKET_POSITION[self.bucket] if self.bucket else None
        return ladder_reward(self.status, position)  # type: ignore[return-value]


OUTCOME_CLASSES = (
    OutcomeClass("A", Status.RUNTIME_ERR, None, "it crashes with an exception"),
    OutcomeClass("B", Status.RAN_NO_SUB, None, "it runs but writes no valid submission.csv"),
    OutcomeClass("C", Status.VALID, "low", "valid submission, low score (bottom of the leaderboard)"),
    OutcomeClass("D", Status.VALID, "fair", "valid submission, fair score (below the median)"),
    OutcomeClass("E", Status.VALID, "mid", "valid submission, mid score (around the median)"),
    OutcomeClass("F", Status.VALID, "high", "valid submission, high score (top of the leaderboard)"),
)


def _prior() -> tuple[float, float]:
    rewards = [c.reward for c in OUTCOME_CLASSES]
    return sum(rewards) / len(rewards), MAX_VARIANCE


FALLBACK_REWARD, FALLBACK_VARIANCE = _prior()

SIMULATOR_SYSTEM = (
    "You are an exact simulator of a Python sandbox. Given a machine-learning task and a solution script, you "
    "predict what running `python solution.py` does: parse, compile, run line by line until the first "
    "exception, write submission.csv, and how well it would score. Most plausible-looking scripts crash: look "
    "for wrong column names, missing imports, dtype errors and unhandled missing values. Never invent numbers."
)

GENERATE_INSTRUCTIONS = """Simulate the run. Reply with JSON only, in this shape:
{"reason": "<= 300 chars", "predictions": [{"status": "runtime_err|ran_no_sub|valid|syntax_err|malformed",
 "error_type": "e.g. KeyError or null", "error_line": 12, "quality_bucket": "low|fair|mid|high|null",
 "env_feedback": "what the sandbox prints, <= 420 chars", "confidence": 0.6}]}
Give one or two predictions, most likely first."""

SCORE_INSTRUCTIONS = "What happens when the script runs? Options:\n{options}\nReply with one letter."

_STATUS_WORDS = {s.value: s for s in Status} | {"error": Status.RUNTIME_ERR, "crash": Status.RUNTIME_ERR}


def numbered(code: str, limit: int) -> str:
    """The code with 1-indexed line numbers, cut at ``limit`` characters.

    >>> numbered("a = 1\\nprint(a)\\n", 1000)
    '1: a = 1\\n2: print(a)'
    """
    text = "\n".join(f"{i}: {line}" for i, line in enumerate(code.rstrip("\n").splitlines(), 1))
    return text if len(text) <= limit else text[:limit] + "\n[... code truncated ...]"


@dataclass(frozen=True)
class Prediction:
    """One predicted outcome parsed from the model's JSON."""

    status: Status
    bucket: str | None = None
    error_type: str | None = None
    error_line: int | None = None
    feedback: str = ""
    confidence: float | None = None

    @property
    def reward(self) -> float:
        if self.status is Status.VALID:
            return ladder_reward(Status.VALID, BUCKET_POSITION[self.bucket or "fair"])  # type: ignore[return-value]
        return ladder_reward(self.status)  # type: ignore[return-value]


def parse_predictions(text: str) -> list[Prediction]:
    """The predictions in a ``generate``-mode answer, most likely first (``[]``: nothing usable).

    Tolerates prose around the JSON, single predictions without the list, trailing commas and, as a last
    resort, bare ``"status": "..."`` fields.

    >>> parse_predictions('Sure! {"predictions": [{"status": "valid", "quality_bucket": "mid"}]}')[0].bucket
    'mid'
    >>> parse_predictions("no idea")
    []
    """
    candidates: list[dict] = []
    start, end = text.find("{"), text.rfind("}")
    if start >= 0 and end > start:
        blob = re.sub(r",\s*([}\]])", r"\1", text[start : end + 1])
        try:
            data = json.loads(blob)
        except json.JSONDecodeError:
            data = None
        if isinstance(data, dict):
            found = data.get("predictions", [data])
            candidates = [p for p in (found if isinstance(found, list) else [found]) if isinstance(p, dict)]
    if not candidates:  # last resort: bare fields
        candidates = [
            {"status": s, "quality_bucket": b}
            for s, b in re.findall(r'"status"\s*:\s*"(\w+)"(?:[^{}]*?"quality_bucket"\s*:\s*"(\w+)")?', text)
        ]
    predictions = []
    for raw in candidates[:2]:
        status = _STATUS_WORDS.get(str(raw.get("status", "")).strip().lower())
        if status is None or status is Status.INFRA_ERROR:
            continue
        bucket = str(raw.get("quality_bucket") or "").strip().lower() or None
        line = raw.get("error_line")
        confidence = raw.get("confidence")
        predictions.append(
            Prediction(
                status=status,
                bucket=bucket if bucket in BUCKET_POSITION else None,
                error_type=str(raw["error_type"]) if raw.get("error_type") else None,
                error_line=int(line) if isinstance(line, int | float) else None,
                feedback=str(raw.get("env_feedback") or "")[:420],
                confidence=float(confidence) if isinstance(confidence, int | float) else None,
            )
        )
    return predictions


def _moments(probabilities: Sequence[float], rewards: Sequence[float]) -> tuple[float, float]:
    mean = sum(p * r for p, r in zip(probabilities, rewards, strict=True))
    variance = sum(p * (r - mean) ** 2 for p, r in zip(probabilities, rewards, strict=True))
    return mean, max(variance, 0.0)


class LMWorldModel(BindsToPolicy, ReportsMetrics):
    """A causal LM as the AutoResearch world model (see the module docstring).

    Args:
        model: ``"policy"`` (the default, as in the paper: the agent's own frozen base, shared through
            :meth:`bind`, LoRA disabled), the built-in ``smollm2-135m-instruct``, or a local checkpoint dir.
        mode: ``score`` (one forward pass, cheap on CPU) or ``generate`` (the paper's holistic JSON).
        suite: the task suite whose task prompts the world model reads (default: the shipped catalogue).
        max_new_tokens: ``generate`` mode answer length (paper 1024).
        temperature: ``generate`` mode sampling temperature (paper 0.7).
        top_p: ``generate`` mode nucleus sampling (paper 0.8).
        overview_chars: cap on the task text in the prompt (paper 4000).
        code_chars: cap on the numbered code in the prompt (paper 8000).
        seed: seeds ``generate`` sampling (call ``i`` of the run uses ``seed + i``).
        backend: where the language model runs, by ``class_path``: transformers in the training process
            (:class:`wmrl.generation.hf_world_model.HFWorldModelBackend`, the default, CPU or GPU; its
            ``batch_size`` and ``dtype``) or vLLM (:class:`wmrl.generation.vllm_world_model.VLLMWorldModelBackend`,
            GPU machines, ``pip install 'wmrl[vllm]'``, or vLLM's CPU build in ``.venv-vllm``: prefix caching,
            guided JSON in ``generate`` mode; with ``model: policy`` it is the policy's own engine).
    """

    source = Source.WORLD_MODEL

    def __init__(
        self,
        model: str = "policy",
        mode: Literal["score", "generate"] = "score",
        suite: TaskSuite | None = None,
        max_new_tokens: int = 384,
        temperature: float = 0.7,
        top_p: float = 0.8,
        overview_chars: int = 4000,
        code_chars: int = 8000,
        seed: int = 0,
        backend: LanguageModelBackend | None = None,
    ) -> None:
        if mode not in ("score", "generate"):
            raise ValueError(f"LMWorldModel mode must be 'score' or 'generate' (got {mode!r})")
        if backend is None:  # the default backend; any other is chosen by class_path
            from wmrl.generation.hf_world_model import HFWorldModelBackend

            backend = HFWorldModelBackend()
        if not isinstance(backend, LanguageModelBackend):
            raise TypeError(f"LMWorldModel backend must be a wmrl.types.LanguageModelBackend (load, bind, "
                            f"option_probabilities, generate, tokenizer); got {type(backend).__name__}")
        self.model_name, self.mode, self._suite = model, mode, suite
        self.max_new_tokens = max_new_tokens
        self.temperature, self.top_p = temperature, top_p
        self.overview_chars, self.code_chars = overview_chars, code_chars
        self.seed, self.backend = seed, backend
        self.parse_failures = 0
        self.unanswered = 0
        self.calls = 0
        self.seconds = 0.0

    # -- the model -------------------------------------------------------------------------------------
    def metrics(self) -> dict[str, float]:
        """What ``WorldModelReward`` logs as ``world_model/*`` (running counts): answers it could not parse, questions
        no backend answered (reported missing), and a served backend's own counts (``server_requests``, ...)."""
        own = self.backend.metrics() if declares(self.backend, ReportsMetrics) else {}
        return {**own, "parse_failures": float(self.parse_failures), "unanswered": float(self.unanswered)}

    def bind(self, policy: Any, tokenizer: Any) -> None:
        """Use the policy's weights (with its LoRA adapter disabled) when ``model == "policy"``."""
        if self.model_name == "policy":
            self.backend.bind(policy, tokenizer)

    @property
    def tokenizer(self) -> Any:
        return self.backend.tokenizer

    def _ensure_model(self) -> None:
        if self.backend.tokenizer is not None:
            return
        if self.model_name == "policy":
            raise RuntimeError(
                "LMWorldModel(model='policy') has no policy bound: use it through the WorldModelReward callback "
                "(which binds the trained policy), call bind(policy, tokenizer), or set model to a checkpoint"
            )
        self.backend.load(self.model_name)

    @property
    def suite(self) -> TaskSuite:
        if self._suite is None:
            from wmrl.autoresearch.tasks.suite import TaskSuite

            self._suite = TaskSuite()
        return self._suite

    # -- the environment protocol ----------------------------------------------------------------------
    def step_many(self, requests: Sequence[StepRequest]) -> list[Outcome]:
        """Predict the outcome of each turn's code (gated ones without a model call)."""
        outcomes, todo = gate(requests)
        if todo:
            self._ensure_model()
            start = time.perf_counter()
            predict = self._score if self.mode == "score" else self._generate
            for i, outcome in zip(todo, predict([requests[i] for i in todo]), strict=True):
                outcomes[i] = outcome
            self.seconds += time.perf_counter() - start
            self.calls += len(todo)
        return outcomes  # type: ignore[return-value]

    def simulation_prompt(self, request: StepRequest, instructions: str) -> str:
        """Task overview and data dictionary (the starter solution left out), the numbered code as it executes
        (:func:`~wmrl.autoresearch.environments.executed_form.executed_form`: no comments, docstrings or printed
        literal text, which could talk the model into a reward), the question."""
        overview = self.suite.get(request.task_id).description.split(STARTER_HEADING)[0].rstrip()
        if len(overview) > self.overview_chars:
            overview = overview[: self.overview_chars] + "\n[... task text truncated ...]"
        code = numbered(executed_form(request.code or ""), self.code_chars)
        return f"# Task\n{overview}\n\n# Solution script (solution.py)\n{code}\n\n{instructions}"

    def _chat_ids(self, user: str) -> list[int]:
        messages = [{"role": "system", "content": SIMULATOR_SYSTEM}, {"role": "user", "content": user}]
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    # -- score mode ------------------------------------------------------------------------------------
    def option_token_ids(self) -> list[int]:
        """The token of each option letter (a letter must be one token of its own)."""
        ids = []
        for c in OUTCOME_CLASSES:
            encoded = self.tokenizer(c.letter, add_special_tokens=False)["input_ids"]
            ids.append(int(encoded[0]))
        if len(set(ids)) != len(ids):
            raise ValueError("the world model's tokenizer does not give each option letter its own token")
        return ids

    def outcome_probabilities(self, requests: Sequence[StepRequest]) -> list[list[float] | None]:
        """Per request, the probability of each :data:`OUTCOME_CLASSES` entry (one forward pass per batch;
        ``None`` where the backend could not answer).

        Requests are batched per task, and a batch's shared prompt prefix (instructions, task overview, data
        dictionary: most of the prompt) runs once (:func:`wmrl.models.kv.last_token_logits`).
        """
        self._ensure_model()
        options = "\n".join(f"{c.letter}) {c.text}" for c in OUTCOME_CLASSES)
        instructions = SCORE_INSTRUCTIONS.format(options=options)
        prompts = [self._chat_ids(self.simulation_prompt(r, instructions)) for r in requests]
        # a task's overview and data dictionary are a prefix every script's prompt shares
        return self.backend.option_probabilities(prompts, self.option_token_ids(), [r.task_id for r in requests])

    def _score(self, requests: Sequence[StepRequest]) -> list[Outcome]:
        rewards = [c.reward for c in OUTCOME_CLASSES]
        outcomes = []
        for probabilities in self.outcome_probabilities(requests):
            if probabilities is None:  # no backend answer (a failed server): missing, never 0
                outcomes.append(self._unanswered())
                continue
            if not all(0.0 <= p <= 1.0 for p in probabilities):  # NaN logits
                outcomes.append(self._fallback("non-finite outcome probabilities"))
                continue
            mean, variance = _moments(probabilities, rewards)
            ranked = sorted(range(len(OUTCOME_CLASSES)), key=lambda k: -probabilities[k])
            top = OUTCOME_CLASSES[ranked[0]]
            lines = [f"Simulated execution (world model): {OUTCOME_CLASSES[k].text} (p={probabilities[k]:.2f})"
                     for k in ranked[:2]]
            outcomes.append(
                Outcome(
                    status=top.status,
                    reward=min(max(mean, 0.0), 1.0),
                    position=BUCKET_POSITION[top.bucket] if top.bucket else None,
                    feedback="\n".join(lines),
                    source=Source.WORLD_MODEL,
                    variance=variance,
                )
            )
        return outcomes

    # -- generate mode ---------------------------------------------------------------------------------
    def _generate(self, requests: Sequence[StepRequest]) -> list[Outcome]:
        prompts = [self._chat_ids(self.simulation_prompt(r, GENERATE_INSTRUCTIONS)) for r in requests]
        texts = self.backend.generate(prompts, self.max_new_tokens, self.temperature, self.top_p,
                                      seed=self.seed + self.calls)
        return [self._unanswered() if text is None else self.outcome_from_text(text) for text in texts]

    def outcome_from_text(self, text: str) -> Outcome:
        """The outcome a ``generate``-mode answer describes (:data:`FALLBACK` when it cannot be parsed)."""
        predictions = parse_predictions(text)
        if not predictions:
            return self._fallback("unparseable world-model answer")
        top = predictions[0]
        weights = [p.confidence if p.confidence is not None and p.confidence > 0 else 1.0 for p in predictions]
        total = sum(weights)
        _, variance = _moments([w / total for w in weights], [p.reward for p in predictions])
        feedback = "\n\n".join(
            p.feedback or f"Simulated execution (world model): {p.status.value}"
            + (f" ({p.error_type} at line {p.error_line})" if p.error_type else "")
            for p in predictions
        )
        return Outcome(
            status=top.status,
            reward=top.reward,
            position=BUCKET_POSITION[top.bucket or "fair"] if top.status is Status.VALID else None,
            feedback=feedback,
            source=Source.WORLD_MODEL,
            error=top.error_type,
            variance=variance,
        )

    def _unanswered(self) -> Outcome:
        self.unanswered += 1
        return Outcome(
            status=Status.INFRA_ERROR,
            reward=None,
            feedback="Simulated execution (world model): no answer (the world-model backend failed).",
            source=Source.WORLD_MODEL,
            error="world_model: unanswered (the backend's server failed; see the log's warning)",
        )

    def _fallback(self, why: str) -> Outcome:
        self.parse_failures += 1
        return Outcome(
            status=Status.RUNTIME_ERR,
            reward=FALLBACK_REWARD,
            feedback="Simulated execution (world model): the outcome could not be predicted.",
            source=Source.WORLD_MODEL,
            error=f"world_model: {why}",
            variance=FALLBACK_VARIANCE,
        )
