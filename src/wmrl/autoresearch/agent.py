"""The multi-turn AutoResearch agent loop.

Each turn the policy writes a short analysis and one fenced python block; the environment (the real sandbox or
a world model) answers with feedback that becomes the next user turn. Observation tokens are masked from the
loss; only tokens the policy sampled carry gradient. The trajectory reward is the best turn's.

Token layout of one rollout (``R`` = response tokens, the only ones in ``response_mask``)::

    [chat(system, task prompt) + assistant header] R1 [end of turn + user(feedback 1) + assistant header] R2 ...

The bridge between turns is rendered by the tokenizer's chat template and tokenized on its own, so the
sampled tokens are kept exactly as sampled (their behaviour log-probs stay valid).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Literal

import torch

from wmrl.generation.engine import OPEN_FENCE, GenerationEngine, SamplingParams
from wmrl.rollout.batch import TokenRows, rollout_batch
from wmrl.types import (
    Environment,
    KnowsContext,
    Outcome,
    RolloutBatch,
    Source,
    StepRequest,
    Trajectory,
    Turn,
    declares,
)

SYSTEM_PROMPT = (
    "You are an expert machine-learning engineer. You solve a prediction task by writing one complete, "
    "runnable Python script. Reply with two to four sentences of analysis, then exactly one ```python code "
    "block holding the whole script. The script reads public/train.csv and public/test.csv, writes "
    "submission.csv with columns id,prediction, and may print VALIDATION_SCORE=<float>. Keep it compact."
)
FEEDBACK_TEMPLATE = (
    "Execution result of your script:\n{feedback}\n\n"
    "Write an improved complete script in one ```python code block."
)
Prefill = Literal["none", "fence", "starter_head", "starter_estimator"]
PREFILLS = ("none", "fence", "starter_head", "starter_estimator")
_ESTIMATOR_SLOT = re.compile(r"make_pipeline\(\s*preprocess\s*,")
FENCE = OPEN_FENCE + "\n"  # the opening of a turn's code block (the ``fence`` prefill)
_CODE_BLOCK = re.compile(r"```(?:python|py|python3)?[ \t]*\n(.*?)```", re.DOTALL)


def extract_code(text: str) -> str | None:
    """The first complete fenced python block of ``text`` (``None`` if there is none).

    >>> extract_code("Plan.\\n```python\\nprint(1)\\n```\\nmore")
    'print(1)\\n'
    >>> extract_code("```python\\nprint(1)\\n") is None  # cut off before the block closed
    True
    """
    match = _CODE_BLOCK.search(text)
    return match.group(1) if match else None


def starter_head(starter: str) -> str:
    r"""The part of a starter solution a ``starter_head`` turn begins with: everything before its model.

    Up to (not including) the first ``model =`` line at any indentation: for a tabular starter the imports,
    data loading, feature function and validation split; for a forecast starter also the helper functions and
    the ``def forecast(...)`` signature, so the policy writes the model inside it, then the validation and the
    submission. Starters without a model line (survival) give their imports and data loading (up to the first
    blank line after the last ``read_csv``).

    >>> starter_head("import pandas as pd\nX = pd.read_csv('a')\n\nmodel = f()\nmodel.fit(X)\n")
    "import pandas as pd\nX = pd.read_csv('a')\n\n"
    >>> starter_head("def forecast(y):\n    t = y[-4:]\n    model = f(t)\n    return model\n")
    'def forecast(y):\n    t = y[-4:]\n'
    """
    lines = starter.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.lstrip().startswith(("model =", "model=")):
            return "".join(lines[:i])
    reads = [i for i, line in enumerate(lines) if "read_csv(" in line]
    if not reads:
        return ""
    end = next((i for i in range(reads[-1], len(lines)) if not lines[i].strip()), len(lines))
    return "".join(lines[: end + 1])


def estimator_head(starter: str) -> str:
    r"""The part of a starter a ``starter_estimator`` turn begins with: :func:`starter_head` and its model line up to
    the estimator (``model = make_pipeline(preprocess,``, without the space: a BPE tokenizer spells the estimator's
    name with its leading space, `` RandomForestClassifier``, and a prefill ending in a space left SmolLM2-135M off
    its usual tokens), so that the first tokens the policy samples name the estimator. A model line of another shape
    gives the :func:`starter_head`.

    >>> estimator_head("x = 1\nmodel = make_pipeline(preprocess, Ridge())\nfinish(model)\n")
    'x = 1\nmodel = make_pipeline(preprocess,'
    >>> estimator_head("x = 1\nmodel = Ridge()\n")
    'x = 1\n'
    """
    head = starter_head(starter)
    line = starter[len(head):].partition("\n")[0]
    match = _ESTIMATOR_SLOT.search(line) if line.lstrip().startswith(("model =", "model=")) else None
    return head + line[: match.end()] if match else head


def response_prefill(mode: Prefill, starter: str | None) -> str:
    """The text an assistant turn starts with (see :class:`AgentSettings`)."""
    if mode == "none":
        return ""
    if mode == "fence" or not starter:
        return FENCE
    return FENCE + (estimator_head(starter) if mode == "starter_estimator" else starter_head(starter))


@dataclass(frozen=True)
class AgentSettings:
    """The agent's turn structure.

    Attributes:
        max_turns: turns per rollout (paper: 4, forced; CPU default: 1).
        max_new_tokens: policy tokens per turn (paper: 4096; CPU: 512).
        observation_tokens: cap on each feedback turn, head + tail kept (paper: 1024).
        temperature / top_p: sampling (paper: 1.0 for training, 0.8 for evaluation).
        system_prompt: the system message.
        prefill: how each assistant turn starts, before the policy's first sampled token (see
            :func:`response_prefill`): ``none``; ``fence`` (the opening of the python block); ``starter_head``
            (the block opened with the starter's imports and data loading, up to its model definition);
            ``starter_estimator`` (that and the model line up to its estimator, :func:`estimator_head`: with the
            ``score`` starter view of the real environment the policy's first tokens choose the estimator). The
            prefill is part of the prompt (no loss) and of the turn's text (the code parsed and executed).
        overlap: real executions run in a background thread while world models answer their turns (executions
            are the slow path; on a GPU machine the world model's forward passes cost the CPU little).
    """

    max_turns: int = 1
    max_new_tokens: int = 512
    observation_tokens: int = 1024
    temperature: float = 1.0
    top_p: float = 1.0
    system_prompt: str = SYSTEM_PROMPT
    prefill: Prefill = "none"
    overlap: bool = True

    def __post_init__(self) -> None:
        if self.max_turns < 1:
            raise ValueError(f"max_turns must be >= 1 (got {self.max_turns})")
        if self.observation_tokens < 16:
            raise ValueError(f"observation_tokens must be >= 16 (got {self.observation_tokens})")
        if self.prefill not in PREFILLS:
            raise ValueError(f"prefill must be one of {', '.join(PREFILLS)} (got {self.prefill!r})")


@dataclass
class RolloutState:
    """A rollout being built: token ids with their loss mask and behaviour log-probs."""

    task_id: str
    group: int
    environment: Environment
    messages: list[dict]
    token_ids: list[int]
    response_mask: list[bool]
    logprobs: list[float]
    turns: list[Turn] = field(default_factory=list)
    done: bool = False
    prefill: str = ""

    def trajectory(self) -> Trajectory:
        return Trajectory(self.task_id, self.group, tuple(self.turns), self.environment.source)


class PromptTooLong(ValueError):
    """A task's first turn does not fit the policy's context (the message names the task, the sizes and fixes)."""


class AgentLoop:
    """Runs rollouts turn by turn: all active rollouts generate together, then every environment answers its
    rollouts' turns in one batch (so real executions run concurrently)."""

    def __init__(self, tokenizer, engine: GenerationEngine, settings: AgentSettings | None = None) -> None:
        self.tokenizer = tokenizer
        self.engine = engine
        self.settings = settings or AgentSettings()
        self.timings: dict[str, float] = {}

    def _render(self, messages: list[dict], generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def truncate_observation(self, text: str) -> str:
        """Keep the head and tail of a long feedback within ``observation_tokens`` tokens."""
        ids = self._encode(text)
        cap = self.settings.observation_tokens
        if len(ids) <= cap:
            return text
        head, tail = ids[: cap // 2], ids[-(cap - cap // 2) :]
        omitted = len(ids) - len(head) - len(tail)
        return (
            self.tokenizer.decode(head) + f"\n[... {omitted} tokens omitted ...]\n" + self.tokenizer.decode(tail)
        )

    def start(
        self, task_id: str, group: int, prompt: str, environment: Environment, starter: str | None = None
    ) -> RolloutState:
        """A new rollout of ``task_id``; ``starter`` (the task's starter solution) feeds the prefill."""
        messages = [{"role": "system", "content": self.settings.system_prompt}, {"role": "user", "content": prompt}]
        prefill = response_prefill(self.settings.prefill, starter)
        ids = self._encode(self._render(messages, generation_prompt=True) + prefill)
        self._check_fits(task_id, len(ids))
        return RolloutState(task_id, group, environment, messages, ids, [False] * len(ids), [0.0] * len(ids),
                            prefill=prefill)

    def _check_fits(self, task_id: str, prompt_tokens: int) -> None:
        """Refuse a first turn that does not fit the policy's context (the engine's ``context_length``, where it
        has one) with its response: a model past its context reads a prompt it was never trained on, and an engine
        that cuts the prompt drops the task card or the starter without a word."""
        context = self.engine.context_length if declares(self.engine, KnowsContext) else None
        needed = prompt_tokens + self.settings.max_new_tokens
        if context is None or needed <= context:
            return
        raise PromptTooLong(
            f"task {task_id!r}: the first turn's prompt is {prompt_tokens:,} tokens (system prompt, task card, "
            f"starter and prefill) and a turn may add max_new_tokens = {self.settings.max_new_tokens:,}: "
            f"{needed:,} > the policy's context of {context:,} tokens. Leave the task out (data.init_args.tasks, "
            "eval_tasks; wide tables give long cards), give it a shorter starter (the environment's "
            "starter_solution), lower model.init_args.max_new_tokens, or use a policy with a longer context"
        )

    def _bridge(self, state: RolloutState, response_text: str, ended_with_eos: bool, feedback: str) -> list[int]:
        """Tokens between a response and the next response: end of turn, feedback as user, assistant header."""
        with_answer = [*state.messages, {"role": "assistant", "content": response_text}]
        closed = self._render(with_answer, generation_prompt=False)
        full = self._render([*with_answer, {"role": "user", "content": feedback}], generation_prompt=True)
        # Templates may trim the content: find the response as rendered, else bridge from the end of `closed`.
        text = response_text
        pos = closed.rfind(text) if text else -1
        if pos < 0 and text.strip():
            text = text.strip()
            pos = closed.rfind(text)
        cut = pos + len(text) if pos >= 0 else len(closed)
        bridge = full[cut:] if full.startswith(closed[:cut]) else full[len(closed) :]
        eos = self.tokenizer.eos_token or ""
        if ended_with_eos and eos and bridge.startswith(eos):
            bridge = bridge[len(eos) :]
        return self._encode(bridge)

    def run(self, states: list[RolloutState], seed: int | None = None) -> dict[str, float]:
        """Play every rollout to its last turn (or until its environment fails), in place.

        Returns the wall seconds spent generating (``generate``), in real environments (``env``), in world
        models (``world_model``), and how many of the real environments' seconds ran hidden behind world-model
        work (``overlapped``, with :attr:`AgentSettings.overlap`).
        """
        s = self.settings
        self.timings = {"generate": 0.0, "env": 0.0, "world_model": 0.0, "overlapped": 0.0}
        for turn in range(s.max_turns):
            active = [st for st in states if not st.done]
            if not active:
                break
            params = SamplingParams(
                max_new_tokens=s.max_new_tokens,
                temperature=s.temperature,
                top_p=s.top_p,
                seed=None if seed is None else seed * 1000 + turn,
                code_block_open=s.prefill != "none",
            )
            start = time.perf_counter()
            generations = self.engine.generate([st.token_ids for st in active], params)
            self.timings["generate"] += time.perf_counter() - start
            requests = []
            texts = []
            for st, gen in zip(active, generations, strict=True):
                st.token_ids.extend(gen.token_ids)
                st.response_mask.extend([True] * len(gen.token_ids))
                st.logprobs.extend(gen.logprobs)
                text = st.prefill + gen.text
                texts.append(text)
                requests.append(StepRequest(st.task_id, extract_code(text), text, tuple(st.turns)))
            outcomes = self._answer(active, requests)
            last = turn == s.max_turns - 1
            eos_id = self.tokenizer.eos_token_id
            for st, gen, req, outcome, text in zip(active, generations, requests, outcomes, texts, strict=True):
                st.turns.append(Turn(text, req.code, outcome, len(gen.token_ids), gen.finish_reason))
                if outcome.missing or last:
                    st.done = True
                    continue
                feedback = FEEDBACK_TEMPLATE.format(feedback=self.truncate_observation(outcome.feedback))
                ended_with_eos = bool(gen.token_ids) and gen.token_ids[-1] == eos_id
                bridge = self._bridge(st, text, ended_with_eos, feedback)
                st.messages += [{"role": "assistant", "content": text}, {"role": "user", "content": feedback}]
                bridge += self._encode(st.prefill) if st.prefill else []
                st.token_ids.extend(bridge)
                st.response_mask.extend([False] * len(bridge))
                st.logprobs.extend([0.0] * len(bridge))
        return self.timings

    def _answer(self, active: list[RolloutState], requests: list[StepRequest]) -> list[Outcome]:
        """Each environment answers all of its rollouts' turns in one call; with ``overlap`` the real
        environments run in background threads while the world models answer in this one."""
        outcomes: list[Outcome | None] = [None] * len(active)
        by_env: dict[int, list[int]] = {}
        for i, st in enumerate(active):
            by_env.setdefault(id(st.environment), []).append(i)

        def answer(indices: list[int]) -> float:
            env = active[indices[0]].environment
            start = time.perf_counter()
            answered = env.step_many([requests[i] for i in indices])
            for i, outcome in zip(indices, answered, strict=True):
                outcomes[i] = outcome
            seconds = time.perf_counter() - start
            self.timings["env" if env.source is Source.REAL else "world_model"] += seconds
            return seconds

        groups = list(by_env.values())
        real = [g for g in groups if active[g[0]].environment.source is Source.REAL]
        simulated = [g for g in groups if active[g[0]].environment.source is not Source.REAL]
        if not (self.settings.overlap and real and simulated):
            for indices in groups:
                answer(indices)
            return outcomes  # type: ignore[return-value]
        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=len(real), thread_name_prefix="wmrl-exec") as pool:
            running = [pool.submit(answer, indices) for indices in real]
            simulated_seconds = sum(answer(indices) for indices in simulated)
            executed = sum(future.result() for future in running)  # re-raises an environment's error
        wall = time.perf_counter() - start
        self.timings["overlapped"] += min(executed, max(0.0, executed + simulated_seconds - wall))
        return outcomes  # type: ignore[return-value]


def collate(states: Sequence[RolloutState], pad_token_id: int) -> RolloutBatch:
    """Right-pad finished agent rollouts (:class:`RolloutState`) into the batch the RL hooks see."""
    n = len(states)
    length = max(len(s.token_ids) for s in states)
    tokens = TokenRows(torch.full((n, length), pad_token_id, dtype=torch.long), torch.zeros((n, length), dtype=torch.bool),
                       torch.zeros((n, length), dtype=torch.bool), torch.zeros((n, length), dtype=torch.float32))
    for i, s in enumerate(states):
        k = len(s.token_ids)
        tokens.input_ids[i, :k] = torch.tensor(s.token_ids)
        tokens.attention_mask[i, :k] = True
        tokens.response_mask[i, :k] = torch.tensor(s.response_mask)
        tokens.old_logprobs[i, :k] = torch.tensor(s.logprobs)
    return rollout_batch([s.trajectory() for s in states], [s.group for s in states], tokens)
