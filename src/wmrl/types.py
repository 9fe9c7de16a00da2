"""Typed records that flow through wmrl, and the contracts of its plug-ins (stdlib and torch only).

An :class:`Outcome` is what an environment (the real sandbox or a world model) says about one executed turn. Its
``reward`` follows the ladder of docs/concepts.md; ``None`` means *missing* (an infrastructure failure),
which is excluded from its group and never counted as 0.

The contracts (at the end), the plug-in points the core itself uses, listed in ``__all__``: an :class:`Environment`
answers :class:`StepRequest` s with outcomes; a :class:`WorldModel` is an environment whose ``source`` is
``Source.WORLD_MODEL``, with optional capabilities the callbacks use when a world model has them
(:class:`LearnsFromAnchors`, :class:`GradesTrajectories`, :class:`BindsToPolicy`, :class:`BindsToEnvironment`,
:class:`Checkpointable`, :class:`ReportsMetrics`, :class:`KnowsItsAgreement`, :class:`KnowsItsSeparation`). A
language-model world model runs its model on a :class:`LanguageModelBackend`; a language policy is a
:class:`LanguagePolicy` (an :class:`AdapterPolicy` with LoRA) sampled by a :class:`GenerationEngine`. Each
domain adds the contracts of its own plug-ins in its wing (``contracts`` there). They are runtime-checkable
protocols (the engine excepted, a base class: see :class:`GenerationEngine`): a class fills a role by having
the members, no base class needed; the modules check their plug-ins at construction and name the config key
and the missing members (:func:`missing_members`); ``wmrl.testing.check_world_model`` checks a world model. The
optional capabilities (:data:`CAPABILITIES`) are declared: a plug-in lists them among its bases, and one that only has their members is
told so and not used that way (:func:`declares`).
"""

from __future__ import annotations

import abc
import enum
import math
import sys
import typing
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    import torch



class Status(str, enum.Enum):
    """What happened to one solution script, from worst to best on the reward ladder."""

    MALFORMED = "malformed"  # no code block / empty script: 0.0
    SYNTAX_ERR = "syntax_err"  # compile() fails: 0.0
    TIMEOUT = "timeout"  # ran past its time budget: 0.0
    FLAGGED = "flagged"  # tripwire: read answers / bundled data, wrote outside the work dir: 0.0
    RUNTIME_ERR = "runtime_err"  # exception or killed by a limit: 0.1
    RAN_NO_SUB = "ran_no_sub"  # exited 0 without a valid submission: 0.2
    VALID = "valid"  # graded submission: 0.5 + 0.5 * position
    INFRA_ERROR = "infra_error"  # sandbox or grader failed: reward missing (None)


class Source(str, enum.Enum):
    """Who produced an outcome."""

    REAL = "real"
    WORLD_MODEL = "world_model"


class Basis(str, enum.Enum):
    """How a world model reached an outcome: only a ``predicted`` one is a prediction, which the corrections
    calibrate and pair with the real reward. (Real outcomes keep the default; nothing reads it there.)"""

    PREDICTED = "predicted"  # the model's prediction
    EXACT = "exact"  # decided without a model, as the real environment decides it (the deterministic gate)
    PRIOR = "prior"  # a model that has learned nothing yet answered its prior


@dataclass(frozen=True)
class Outcome:
    """The result of executing (or simulating) one solution script.

    Attributes:
        status: see :class:`Status`.
        reward: ladder reward in [0, 1]; ``None`` if and only if ``status`` is ``infra_error``.
        score: the task metric on the hidden answers (valid submissions only).
        position: leaderboard percentile of ``score`` in [0, 1] (valid submissions only).
        feedback: the text an agent sees next, like a real sandbox would print it.
        wall_seconds: wall-clock of the execution (of the original run when served from the cache).
        source: ``real`` or ``world_model``.
        validation_score: the script's self-reported ``VALIDATION_SCORE=<float>``, a feature, never the reward.
        stdout_tail / stderr_tail: bounded tails of the script's output.
        flags: tripwire reasons (``flagged`` outcomes) or containment notes.
        error: short machine-readable error (exception type, ``infra`` detail, submission problem).
        cached: served from the execution cache instead of being re-executed.
        variance: world-model predictions only: the variance of the predicted reward (its uncertainty).
        basis: world-model outcomes only: a prediction, an exact answer or a prior (:class:`Basis`).
    """

    status: Status
    reward: float | None
    score: float | None = None
    position: float | None = None
    feedback: str = ""
    wall_seconds: float = 0.0
    source: Source = Source.REAL
    validation_score: float | None = None
    stdout_tail: str = ""
    stderr_tail: str = ""
    flags: tuple[str, ...] = ()
    error: str | None = None
    cached: bool = False
    variance: float | None = None
    basis: Basis = Basis.PREDICTED

    def __post_init__(self) -> None:
        if not isinstance(self.status, Status):
            object.__setattr__(self, "status", Status(self.status))
        if not isinstance(self.basis, Basis):
            object.__setattr__(self, "basis", Basis(self.basis))
        if not isinstance(self.source, Source):
            object.__setattr__(self, "source", Source(self.source))
        object.__setattr__(self, "flags", tuple(self.flags))
        if (self.reward is None) != (self.status is Status.INFRA_ERROR):
            raise ValueError(
                f"Outcome.reward must be None exactly for infra_error (status={self.status.value}, "
                f"reward={self.reward})"
            )
        if self.reward is not None and not (0.0 <= self.reward <= 1.0 and math.isfinite(self.reward)):
            raise ValueError(f"Outcome.reward must lie in [0, 1] (got {self.reward})")
        if self.position is not None and not 0.0 <= self.position <= 1.0:
            raise ValueError(f"Outcome.position must lie in [0, 1] (got {self.position})")

    @property
    def missing(self) -> bool:
        """True for infrastructure failures: excluded from their group, never scored."""
        return self.reward is None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = self.status.value
        d["source"] = self.source.value
        d["basis"] = self.basis.value
        d["flags"] = list(self.flags)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Outcome:
        return cls(**{**d, "flags": tuple(d.get("flags", ()))})




# -- rollouts ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Turn:
    """One agent turn: what the policy wrote, the code parsed from it, and the environment's answer.

    Attributes:
        response: the policy's text for this turn (analysis + one fenced python block).
        code: the python block parsed from ``response`` (``None``: no complete block, a ``malformed`` turn).
        outcome: the environment's outcome for ``code``.
        response_tokens: number of tokens the policy generated this turn.
        finish_reason: ``stop`` (EOS / the code block closed) or ``length``.
    """

    response: str
    code: str | None
    outcome: Outcome
    response_tokens: int
    finish_reason: str


@dataclass(frozen=True)
class Trajectory:
    """All turns of one rollout of one task.

    ``reward`` is the maximum turn reward (docs/concepts.md); ``None`` (missing) when any turn's outcome is
    missing: the rollout then stops and is excluded from its group, never scored 0.
    """

    task_id: str
    group: int
    turns: tuple[Turn, ...]
    source: Source = Source.REAL

    @property
    def reward(self) -> float | None:
        if not self.turns or any(t.outcome.missing for t in self.turns):
            return None
        return max(t.outcome.reward for t in self.turns)  # type: ignore[type-var]

    @property
    def best(self) -> Outcome | None:
        graded = [t.outcome for t in self.turns if not t.outcome.missing]
        return max(graded, key=lambda o: o.reward) if graded else None  # type: ignore[arg-type, return-value]


@dataclass
class RewardCorrections:
    """What the reward corrections did to a batch, for the hooks after them.

    Attributes:
        calibrating: a calibration hook (``on_calibrate``) runs on this batch, so ``wm_calibrated`` is the
            world-model reward to set against the real one (NaN while the calibration has no map yet). False: no
            calibration in the run, and the raw ``wm_rewards`` are compared instead. The module sets it before
            the calibration hook, from whether any callback implements that hook.
    """

    calibrating: bool = False


@dataclass(frozen=True)
class RolloutBatch:
    """The rollouts of one training step, as the RL hooks and the loss see them.

    Shapes: ``N = groups x group_size`` trajectories, ``L`` = padded token length (prompt + all turns).
    Tokens are right-padded. The reward hooks may edit ``rewards`` / ``graded`` / ``wm_calibrated`` and the
    ``corrections`` flags in place; the advantage hooks may edit ``advantages`` in place; nothing else changes
    after the rollout.

    Attributes:
        trajectories: ``[N]`` the turns, outcomes and texts.
        group_ids: ``[N]`` long, the group of each trajectory (rows of a group share a task).
        input_ids: ``[N, L]`` long, prompt, responses and observations.
        attention_mask: ``[N, L]`` bool, real tokens.
        response_mask: ``[N, L]`` bool, tokens the policy generated (the loss's tokens); observations,
            prompts and padding are False.
        old_logprobs: ``[N, L]`` float, behaviour log-probs of response tokens (0 elsewhere).
        rewards: ``[N]`` float, trajectory rewards (NaN where missing).
        graded: ``[N]`` bool, the reward exists (not an infrastructure failure).
        is_real: ``[N]`` bool, the reward came from real execution (anchors); else from a world model.
        advantages: ``[N]`` float, group-normalised advantages (filled before the advantage hooks).
        used: ``[N]`` bool, rows that carry gradient (graded, in a group with >= 2 graded rows).
        wm_rewards: ``[N]`` float, the raw world-model reward of each trajectory (world-model rows: their
            reward as rolled out; anchor rows: the side-grade, filled by ``WorldModelReward``); NaN where none,
            and where every turn was decided by the deterministic gate (an exact 0.0, not a prediction).
        wm_calibrated: ``[N]`` float, ``wm_rewards`` after the debiasing map (filled by ``OnlineDebiasing``
            once its map is fitted); NaN before.
        corrections: what the reward hooks did (:class:`RewardCorrections`), read by the hooks after
            them; the reward hooks set its flags in place.
    """

    trajectories: tuple[Trajectory, ...]
    group_ids: torch.Tensor
    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    response_mask: torch.Tensor
    old_logprobs: torch.Tensor
    rewards: torch.Tensor
    graded: torch.Tensor
    is_real: torch.Tensor
    advantages: torch.Tensor
    used: torch.Tensor
    wm_rewards: torch.Tensor
    wm_calibrated: torch.Tensor
    corrections: RewardCorrections = field(default_factory=RewardCorrections)

    def __post_init__(self) -> None:
        n = len(self.trajectories)
        length = self.input_ids.shape[1] if self.input_ids.dim() == 2 else -1
        for name in ("group_ids", "rewards", "graded", "is_real", "advantages", "used", "wm_rewards",
                     "wm_calibrated"):
            shape = tuple(getattr(self, name).shape)
            if shape != (n,):
                raise ValueError(f"RolloutBatch.{name} must have shape ({n},) (N trajectories); got {shape}")
        for name in ("input_ids", "attention_mask", "response_mask", "old_logprobs"):
            shape = tuple(getattr(self, name).shape)
            if shape != (n, length):
                raise ValueError(f"RolloutBatch.{name} must have shape ({n}, {length}) (N, L); got {shape}")

    def __len__(self) -> int:
        return len(self.trajectories)


@dataclass
class RolloutPlan:
    """Which environment serves each group of a step (``on_rollout_plan`` hooks may re-route groups).

    Routing is group-pure: every rollout of a group meets the same environment, so GRPO's within-group
    normalisation sees one reward scale.

    Attributes:
        task_ids: ``[G]`` the task of each group.
        group_size: rollouts per group.
        environments: ``[G]`` the environment name serving each group (``"real"`` or ``"world_model"``).
    """

    task_ids: list[str]
    group_size: int
    environments: list[str]

    def __post_init__(self) -> None:
        if len(self.environments) != len(self.task_ids):
            raise ValueError(
                f"RolloutPlan.environments must have one entry per group: expected {len(self.task_ids)}, "
                f"got {len(self.environments)}"
            )

    @property
    def anchor_mask(self) -> list[bool]:
        """``[G]`` groups executed for real."""
        return [e == "real" for e in self.environments]


# -- the contracts -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StepRequest:
    """One turn to answer: the task, the parsed code (``None``: no block), the full response, the history."""

    task_id: str
    code: str | None
    response: str
    history: tuple[Turn, ...] = ()


@runtime_checkable
class Environment(Protocol):
    """What a rollout needs from an environment (the real one or a world model): one outcome per request, in order;
    a missing outcome (infrastructure failure) has ``reward=None``, never 0."""

    source: Source

    def step_many(self, requests: Sequence[StepRequest]) -> list[Outcome]: ...


@runtime_checkable
class WorldModel(Environment, Protocol):
    """A world model (``WorldModelReward(world_model=...)``): an environment whose ``source`` is
    ``Source.WORLD_MODEL``; what else it can do is declared by the small capability protocols below."""


@runtime_checkable
class LearnsFromAnchors(Protocol):
    """A world model that learns from the anchors' real outcomes (after they were side-graded). ``gather``
    all-gathers a tensor across ranks; returns whether it refit."""

    def observe(self, requests: Sequence[StepRequest], outcomes: Sequence[Outcome],
                gather: Callable[[torch.Tensor], torch.Tensor] | None = None) -> bool: ...


@runtime_checkable
class GradesTrajectories(Protocol):
    """A world model that grades whole trajectories (e.g. a progress model of an embodied episode) instead of single
    turns."""

    def grade_trajectories(self, trajectories: Sequence[Trajectory]) -> list[float | None]: ...


@runtime_checkable
class BindsToEnvironment(Protocol):
    """A world model bound to the run's real environment when training starts (``WorldModelReward`` binds it), to
    read what that environment shows the policy (e.g. each task's starting point)."""

    def bind_environment(self, environment: Environment) -> None: ...


@runtime_checkable
class BindsToPolicy(Protocol):
    """A world model that shares the policy's weights (``LMWorldModel(model="policy")``)."""

    def bind(self, policy: Any, tokenizer: Any) -> None: ...


@runtime_checkable
class Checkpointable(Protocol):
    """State saved in checkpoints and restored on resume."""

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...


@runtime_checkable
class ReportsMetrics(Protocol):
    """A world model with counters of its own, logged each step as ``world_model/<name>`` (``parse_failures``:
    answers it could not parse, logged as the step's increase; ``examples`` / ``refits`` of a learned model)."""

    def metrics(self) -> dict[str, float]: ...


@runtime_checkable
class KnowsItsAgreement(Protocol):
    """A world model that says how well it ranked outcomes before the run: ``(correlation, dof)``, the pooled
    within-task correlation of its rewards with the real ones on tasks it was not fitted on, and the degrees of
    freedom behind it (``None``: nothing measured). ``VarianceFusion`` pools it with the anchors' agreement."""

    def agreement_prior(self) -> tuple[float, float] | None: ...


@runtime_checkable
class KnowsItsSeparation(Protocol):
    """A world model that says, before a group is rolled out, how far apart its rewards lie for the scripts a task's
    prompt offers (the standard deviation of its predictions over them; ``None``: it cannot say for this task). A
    task it separates little is one whose world-model advantages are mostly its own errors (group normalisation
    scales small differences up): ``AnchorRouting(selection="least_separated")`` executes those groups first."""

    def separation(self, task_id: str) -> float | None: ...


@runtime_checkable
class PlansSteps(Protocol):
    """A data module that says a training step's tasks before its loader yields them (asynchronous rollouts play
    the next step ahead: ``max_staleness: 1``); what it says must be what the loader then yields."""

    def tasks_of_step(self, step: int) -> list[str]: ...


@runtime_checkable
class KnowsContext(Protocol):
    """A generation engine that knows its policy's context (``None``: it does not say): a rollout loop refuses a
    first prompt that would not fit, before generating."""

    @property
    def context_length(self) -> int | None: ...


@runtime_checkable
class LanguageModelBackend(Protocol):
    """Where a language-model world model runs its language model:
    transformers in the training process (:class:`wmrl.generation.hf_world_model.HFWorldModelBackend`, the
    default), a vLLM engine (:class:`wmrl.generation.vllm_world_model.VLLMWorldModelBackend`) or OpenAI-compatible
    servers (:class:`wmrl.generation.served_world_model.ServedWorldModelBackend`), chosen by ``class_path``.
    ``tokenizer`` is ``None`` until :meth:`load` or :meth:`bind`; prompts are token ids; both questions are asked of
    the frozen model (a policy's LoRA adapter disabled). A backend that could not answer a prompt (a server that
    failed) gives ``None`` for it: the world model reports that outcome missing, never 0."""

    tokenizer: Any

    def load(self, model: str) -> None:
        """Load a model of its own (a built-in name or a local checkpoint dir) and its tokenizer."""
        ...

    def bind(self, policy: Any, tokenizer: Any) -> None:
        """Answer with the policy's own frozen base (the paper's world model)."""
        ...

    def option_probabilities(self, prompts: Sequence[Sequence[int]], option_ids: Sequence[int],
                             prefix_groups: Sequence[str]) -> list[list[float] | None]:
        """Per prompt, the next-token probability of each option token, renormalised over the options (NaN rows
        for non-finite logits, ``None`` where unanswered). Prompts with the same ``prefix_groups`` entry share a
        long prefix."""
        ...

    def generate(self, prompts: Sequence[Sequence[int]], max_new_tokens: int, temperature: float, top_p: float,
                 seed: int) -> list[str | None]:
        """One sampled answer per prompt (a ``generate``-mode world model's JSON; ``None`` where unanswered)."""
        ...


# -- a language policy and its generation -----------------------------------------------------------------------
@runtime_checkable
class LanguagePolicy(Protocol):
    """A language policy (a module's ``policy=(model, tokenizer)``, else loaded from ``model.init_args.model``):
    a causal language model whose forward takes ``input_ids`` / ``attention_mask`` and returns ``.logits``
    ``[B, L, V]``."""

    def parameters(self, recurse: bool = True) -> Any: ...

    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...


@runtime_checkable
class AdapterPolicy(LanguagePolicy, Protocol):
    """A policy with a LoRA adapter (a peft model): its base weights, with the adapter disabled, are the frozen
    reference policy and the policy-sharing world model (:func:`wmrl.models.is_peft_model`)."""

    peft_config: dict

    def disable_adapter(self) -> Any: ...


FinishReason = Literal["stop", "length"]


@dataclass(frozen=True)
class SamplingParams:
    """How to sample one turn.

    Attributes:
        max_new_tokens: per turn.
        temperature: 1.0 for training (the paper), 0.8 for evaluation; 0 means greedy.
        top_p: nucleus sampling.
        stop_after_code_block: stop a sequence once it has closed a fenced python block (```python ... ```).
        seed: seeds sampling for reproducible rollouts (``None``: the global RNG).
        code_block_open: the prompt already opened the python block (a prefilled turn), so the first closing
            fence of the continuation ends it.
    """

    max_new_tokens: int = 512
    temperature: float = 1.0
    top_p: float = 1.0
    stop_after_code_block: bool = True
    seed: int | None = None
    code_block_open: bool = False

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1 (got {self.max_new_tokens})")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0 (got {self.temperature})")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1] (got {self.top_p})")


@dataclass(frozen=True)
class Generation:
    """One sampled continuation.

    Attributes:
        token_ids: the new tokens (length T <= max_new_tokens), without padding; includes EOS if produced.
        logprobs: behaviour log-prob of each new token (length T); see :class:`GenerationEngine`.
        text: ``token_ids`` decoded (special tokens skipped).
        finish_reason: ``stop`` (EOS or the code block closed) or ``length``.
    """

    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    text: str
    finish_reason: FinishReason

    def __post_init__(self) -> None:
        if len(self.token_ids) != len(self.logprobs):
            raise ValueError(
                f"Generation.logprobs must have one entry per token: expected {len(self.token_ids)}, "
                f"got {len(self.logprobs)}"
            )


class GenerationEngine(abc.ABC):
    """Samples from the *current* policy (``model.init_args.engine``: :class:`~wmrl.generation.hf.HFGenerationEngine`
    or :class:`~wmrl.generation.vllm.VLLMGenerationEngine`). The one contract that is a base class, not a Protocol:
    ``model.init_args.engine`` is a ``class_path`` that jsonargparse resolves with ``issubclass``, which a Protocol
    with attributes refuses; engines subclass it (for the defaults below too).

    ``logprobs`` are the log-probabilities of the sampled tokens under the policy's logits scaled by the
    sampling temperature (what the sampler drew from, before top-p truncation), so that they serve as GRPO's
    old log-probs for the same temperature-scaled policy in the loss.

    What a trainer must know of an engine (class attributes): ``exact_with_top_p``: its log-probs are the full
    distribution's even when ``top_p < 1`` truncates sampling (the transformers engine's are; vLLM's are taken
    after truncation); ``runs_under_fsdp``: it works while the policy's weights are sharded; ``holds_own_weights``: see below.
    """

    exact_with_top_p: bool = True
    runs_under_fsdp: bool = True
    #: samples from weights of its own, which change only at :meth:`sync_weights` (vLLM's engine), so it can play
    #: the next step's rollouts while the update changes the policy (``max_staleness: 1``)
    holds_own_weights: bool = False
    #: token positions its forward passes computed, padding included (a running count; the module logs the
    #: increase per step as ``tokens/generate``, what a compute floor is measured against); 0 where unknown
    tokens_run: int = 0
    #: forward passes its model ran (a prefill, a decoding step; a running count logged as ``passes/generate``:
    #: each reads every weight once, what a memory floor is measured against); 0 where unknown
    passes_run: int = 0

    @abc.abstractmethod
    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Generation]:
        """One continuation per prompt (prompts are token ids, chat template already applied)."""

    def sync_weights(self) -> None:
        """Make the engine sample from the policy's current weights (a no-op when it shares them)."""

    def close(self) -> None:
        """Release what the engine holds outside this process's Python objects (vLLM: its engine processes and
        their memory). The module calls it at the end of ``fit``, ``validate`` and ``test``; a later
        :meth:`generate` starts again. A no-op for an engine that shares the policy's weights."""

    def metrics(self) -> dict[str, float]:
        """What the last :meth:`sync_weights` measured, logged with the step (e.g. ``canary/engine_change``)."""
        return {}


def missing_members(plugin: Any, protocol: type) -> str:
    """The members of ``protocol`` (a runtime-checkable Protocol) that ``plugin`` lacks, for the error that refuses
    it ("nothing" if none).

    >>> missing_members(object(), Environment)
    'source, step_many'
    """
    return ", ".join(sorted(name for name in _members(protocol) if name not in dir(plugin))) or "nothing"


#: the optional capabilities a plug-in declares by listing them among its bases (:func:`declares`)
#: (each wing adds its own: ``wmrl.<wing>.contracts.CAPABILITIES``)
CAPABILITIES: tuple[type, ...] = (LearnsFromAnchors, GradesTrajectories, BindsToPolicy, BindsToEnvironment,
                                  ReportsMetrics, KnowsItsAgreement, KnowsItsSeparation, KnowsContext)
_undeclared: set[tuple[type, type]] = set()


def declares(plugin: Any, capability: type) -> bool:
    """Whether ``plugin``'s class declares ``capability`` (one of :data:`CAPABILITIES`): lists it, or a contract
    built on it, among its bases (``class MyWorldModel(LearnsFromAnchors, ReportsMetrics): ...``).

    A capability is declared, never inferred from a method's name: a ``metrics()`` or ``observe()`` written for
    something else must not switch on what the kit does with a :class:`ReportsMetrics` or
    :class:`LearnsFromAnchors` plug-in. A plug-in that has the capability's members without declaring it is treated
    as lacking it, with a warning (once per class) that names the base to add."""
    if capability in type(plugin).__mro__:
        return True
    key = (type(plugin), capability)
    if key not in _undeclared and undeclared(plugin, (capability,)):
        import warnings

        _undeclared.add(key)
        cls = type(plugin)
        warnings.warn(f"{cls.__module__}.{cls.__qualname__} has the members of {capability.__name__} "
                      f"({', '.join(sorted(_members(capability)))}) but does not declare it, so the kit does not use "
                      f"them: add {capability.__name__} (from {capability.__module__}) to the class's bases",
                      stacklevel=2)
    return False


def undeclared(plugin: Any, capabilities: Sequence[type] = CAPABILITIES) -> list[type]:
    """The ``capabilities`` whose members ``plugin`` has without declaring them (what :func:`declares` warns of)."""
    mro = type(plugin).__mro__
    return [c for c in capabilities if c not in mro and isinstance(plugin, c)]


def _members(protocol: type) -> set[str]:
    return set(protocol.__protocol_attrs__ if sys.version_info >= (3, 12) else typing._get_protocol_attrs(protocol))


#: the records and every plug-in contract (``tests/core/test_no_probing.py`` checks the shipped plug-ins against them)
__all__ = [
    # records
    "Basis", "Outcome", "RewardCorrections", "RolloutBatch", "RolloutPlan", "Source", "Status", "StepRequest", "Trajectory", "Turn",
    # environments and world models
    "Environment", "WorldModel", "LearnsFromAnchors", "GradesTrajectories", "BindsToPolicy", "BindsToEnvironment",
    "Checkpointable", "ReportsMetrics", "KnowsItsAgreement", "KnowsItsSeparation", "PlansSteps", "KnowsContext",
    "LanguageModelBackend",
    # policies, generation
    "LanguagePolicy", "AdapterPolicy", "GenerationEngine", "SamplingParams", "Generation", "FinishReason",
    # what refuses a plug-in that lacks a member; which optional capabilities a plug-in declares
    "missing_members", "CAPABILITIES", "declares", "undeclared",
]
