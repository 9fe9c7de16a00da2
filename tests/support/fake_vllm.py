"""An in-process stand-in for vLLM 0.32's offline API, backed by a real transformers model (CPU, no vllm).

It mirrors the parts wmrl uses, with vLLM's shapes and semantics as documented for the V1 engine:

- ``LLM(model=<checkpoint dir>, **engine_kwargs)`` loads the checkpoint with transformers and records its kwargs;
  ``LLM.generate(prompts, sampling_params, *, use_tqdm, lora_request)`` takes ``{"prompt_token_ids": [...]}``
  prompts and one ``SamplingParams`` or one per prompt, and returns one ``RequestOutput`` per prompt;
- ``RequestOutput.prompt_logprobs``: ``[None, {token: Logprob}, ...]`` (the prompt's own token always included);
  ``CompletionOutput.token_ids / .text / .logprobs`` (one ``{token: Logprob}`` per sampled token: the sampled
  token plus the top ``logprobs``) ``/ .finish_reason`` (``stop`` | ``length``) ``/ .stop_reason`` (the stop
  string, a stop token id, or ``None`` at EOS);
- the sampler order of ``vllm.v1.sample.sampler.Sampler``: raw log-probs (``logprobs_mode="raw_logprobs"``, the
  default) are taken before anything; then the ``allowed_token_ids`` mask, temperature, top-p, and the
  ``processed_logprobs`` are those of the distribution actually sampled from (greedy: before temperature);
- stop strings are searched in the detokenized output only; the text is cut after the stop string
  (``include_stop_str_in_output``) while ``token_ids`` keep every sampled token;
- LoRA adapters are loaded from ``LoRARequest.lora_path`` with peft and cached **by ``lora_int_id``** as vLLM does
  (reusing an id serves the adapter first loaded under it);
- ``structured_outputs=StructuredOutputsParams(json=schema)``: the answer is an instance of the schema (drawn with
  the request seed), standing in for the grammar-constrained decoding a tiny random model cannot do.

- ``LLM.llm_engine.engine_core.shutdown(timeout=...)`` ends the engine (its processes, in vLLM); a shut-down engine
  refuses requests.

``STALE_ADAPTERS = True`` makes every engine ignore adapters (the silent bug the canary must catch).
"""

from __future__ import annotations

import copy
import json
import random
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

__version__ = "0.32.0"
MAX_LOGPROBS = 20  # vLLM's default max_logprobs
STALE_ADAPTERS = False
MODEL_OVERRIDES: dict[
    str, tuple[Any, Any]
] = {}  # checkpoint dir -> (model, tokenizer) used instead of loading
ENGINES: list[LLM] = []


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list[int]
    cumulative_logprob: float | None
    logprobs: list[dict[int, Logprob]] | None
    finish_reason: str | None = None
    stop_reason: int | str | None = None


@dataclass
class RequestOutput:
    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    prompt_logprobs: list[dict[int, Logprob] | None] | None
    outputs: list[CompletionOutput]
    finished: bool = True
    num_cached_tokens: int | None = 0  # the fake has no prefix cache


@dataclass
class StructuredOutputsParams:
    json: Any = None
    regex: str | None = None
    choice: list[str] | None = None
    grammar: str | None = None

    def __post_init__(self) -> None:
        given = [k for k in ("json", "regex", "choice", "grammar") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"You can only use one kind of structured outputs constraint but got {given}")


@dataclass
class SamplingParams:
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False
    max_tokens: int | None = 16
    logprobs: int | None = None
    prompt_logprobs: int | None = None
    skip_special_tokens: bool = True
    include_stop_str_in_output: bool = False
    allowed_token_ids: list[int] | None = None
    structured_outputs: StructuredOutputsParams | None = None

    def __post_init__(self) -> None:
        if self.n != 1:
            raise ValueError("fake vllm: only n=1 is modelled")
        if self.temperature < 0:
            raise ValueError(f"temperature must be non-negative, got {self.temperature}.")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}.")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {self.max_tokens}.")
        if isinstance(self.stop, str):
            self.stop = [self.stop]


@dataclass
class LoRARequest:
    lora_name: str
    lora_int_id: int
    lora_path: str = ""

    def __post_init__(self) -> None:
        if self.lora_int_id < 1:
            raise ValueError(f"id must be > 0, got {self.lora_int_id}")


class EngineCoreClient:
    """What ``LLM.llm_engine.engine_core`` offers wmrl: shutting the engine down."""

    def __init__(self) -> None:
        self.shutdowns: list[float | None] = []

    def shutdown(self, timeout: float | None = None) -> None:
        self.shutdowns.append(timeout)


class LLM:
    """The offline engine (see the module docstring)."""

    def __init__(self, model: str, **kwargs: Any) -> None:
        self.model_path = model
        self.kwargs = dict(kwargs)
        self.logprobs_mode = kwargs.get("logprobs_mode", "raw_logprobs")
        if str(model) in MODEL_OVERRIDES:
            self.model, self.tokenizer = MODEL_OVERRIDES[str(model)]
        else:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            self.model = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32)
            self.tokenizer = AutoTokenizer.from_pretrained(kwargs.get("tokenizer") or model)
        self.model.eval()
        self.adapters: dict[int, Any] = {}
        self.calls: list[dict[str, Any]] = []
        self.eos = self.tokenizer.eos_token_id
        self._generator = torch.Generator().manual_seed(int(kwargs.get("seed", 0)))
        self.llm_engine = types.SimpleNamespace(engine_core=EngineCoreClient())
        ENGINES.append(self)

    # -- the public API -------------------------------------------------------------------------------
    def generate(
        self, prompts, sampling_params=None, *, use_tqdm=True, lora_request=None
    ) -> list[RequestOutput]:
        prompts = prompts if isinstance(prompts, list) else [prompts]
        params = sampling_params if sampling_params is not None else SamplingParams()
        params = params if isinstance(params, list) else [params] * len(prompts)
        if len(params) != len(prompts):
            raise ValueError("The lengths of prompts and sampling_params must be the same.")
        if self.llm_engine.engine_core.shutdowns:
            raise RuntimeError("fake vllm: the engine was shut down")
        if lora_request is not None and not self.kwargs.get("enable_lora"):
            raise ValueError(f"LoRA is not enabled! (lora_request={lora_request})")
        self.calls.append({"prompts": prompts, "params": params, "lora_request": lora_request})
        model = self._model_for(lora_request)
        outputs = []
        for index, (prompt, p) in enumerate(zip(prompts, params, strict=True)):
            ids = (
                list(prompt["prompt_token_ids"])
                if isinstance(prompt, dict)
                else self.tokenizer.encode(prompt)
            )
            for k in (p.logprobs, p.prompt_logprobs):
                if k is not None and k > MAX_LOGPROBS:
                    raise ValueError(
                        f"Requested sample logprobs of {k}, which is greater than max allowed: {MAX_LOGPROBS}"
                    )
            with torch.no_grad():
                outputs.append(self._request(model, str(index), ids, p))
        return outputs

    # -- internals ------------------------------------------------------------------------------------
    def _model_for(self, lora_request: LoRARequest | None) -> Any:
        if lora_request is None or STALE_ADAPTERS:
            return self.model
        if lora_request.lora_int_id not in self.adapters:
            from peft import PeftModel

            if len(self.adapters) >= self.kwargs.get("max_loras", 1) + 8:  # an LRU cache, roughly
                self.adapters.pop(next(iter(self.adapters)))
            adapted = PeftModel.from_pretrained(copy.deepcopy(self.model), lora_request.lora_path)
            config = next(iter(adapted.peft_config.values()))
            if config.r > self.kwargs.get("max_lora_rank", 16):
                raise ValueError(
                    f"LoRA rank {config.r} is greater than max_lora_rank "
                    f"{self.kwargs.get('max_lora_rank', 16)}."
                )
            self.adapters[lora_request.lora_int_id] = adapted.eval()
        return self.adapters[lora_request.lora_int_id]

    @staticmethod
    def _decoder(model: Any, ids: list[int]):
        """Yields the next-token logits after ``ids``, then after each token sent in (a KV cache when the model
        has one: transformers models; a full forward pass per token otherwise)."""
        if not hasattr(model, "config"):  # a scripted test model
            while True:
                token = yield model(input_ids=torch.tensor([ids])).logits[0, -1].float()
                ids = [*ids, token]
        out = model(input_ids=torch.tensor([ids]), use_cache=True, logits_to_keep=1)
        while True:
            token = yield out.logits[0, -1].float()
            out = model(
                input_ids=torch.tensor([[token]]), past_key_values=out.past_key_values, use_cache=True
            )

    def _request(self, model: Any, request_id: str, ids: list[int], p: SamplingParams) -> RequestOutput:
        prompt_logprobs = (
            self._prompt_logprobs(model, ids, p.prompt_logprobs) if p.prompt_logprobs is not None else None
        )
        generator = torch.Generator().manual_seed(p.seed) if p.seed is not None else self._generator
        if p.structured_outputs is not None:
            return RequestOutput(
                request_id, None, ids, prompt_logprobs, [self._structured(p, random.Random(p.seed))]
            )
        tokens: list[int] = []
        logprobs: list[dict[int, Logprob]] | None = [] if p.logprobs is not None else None
        finish, stop_reason, text = "length", None, ""
        stops = p.stop or []
        decoder = self._decoder(model, ids)
        raw = next(decoder)
        for step in range(p.max_tokens or 16):
            if step:
                raw = decoder.send(tokens[-1])
            token, processed = self._sample(raw, p, generator)
            if logprobs is not None:
                source = raw.log_softmax(-1) if self.logprobs_mode == "raw_logprobs" else processed
                logprobs.append(self._entry(source, token, p.logprobs))
            tokens.append(token)
            text = self.tokenizer.decode(tokens, skip_special_tokens=p.skip_special_tokens)
            if token == self.eos and not p.ignore_eos:
                finish = "stop"
                break
            if p.stop_token_ids and token in p.stop_token_ids:
                finish, stop_reason = "stop", token
                break
            hit = min(((text.find(s), s) for s in stops if s in text), default=None)
            if hit is not None:
                at, stop = hit
                text = text[: at + len(stop)] if p.include_stop_str_in_output else text[:at]
                finish, stop_reason = "stop", stop
                break
        cumulative = (
            sum(e[t].logprob for e, t in zip(logprobs, tokens, strict=True)) if logprobs is not None else None
        )
        return RequestOutput(
            request_id,
            None,
            ids,
            prompt_logprobs,
            [CompletionOutput(0, text, tokens, cumulative, logprobs, finish, stop_reason)],
        )

    @staticmethod
    def _sample(raw: torch.Tensor, p: SamplingParams, generator: torch.Generator) -> tuple[int, torch.Tensor]:
        logits = raw.clone()
        if p.allowed_token_ids is not None:
            mask = torch.full_like(logits, float("-inf"))
            mask[p.allowed_token_ids] = 0.0
            logits = logits + mask
        if p.temperature < 1e-5:  # greedy: the processed log-probs are those before temperature
            return int(logits.argmax()), logits.log_softmax(-1)
        logits = logits / p.temperature
        if p.top_p < 1:
            sorted_logits, order = logits.sort(descending=False)
            cumulative = sorted_logits.softmax(-1).cumsum(-1)
            drop = cumulative <= 1 - p.top_p
            drop[-1] = False
            sorted_logits[drop] = float("-inf")
            logits = torch.empty_like(logits).scatter_(0, order, sorted_logits)
        processed = logits.log_softmax(-1)
        return int(torch.multinomial(processed.exp(), 1, generator=generator)), processed

    def _entry(self, logprobs: torch.Tensor, token: int, k: int) -> dict[int, Logprob]:
        entry = {}
        if k > 0:
            values, ids = logprobs.topk(k)
            for rank, (value, i) in enumerate(zip(values.tolist(), ids.tolist(), strict=True), 1):
                entry[int(i)] = Logprob(float(value), rank, self.tokenizer.decode([int(i)]))
        if token not in entry:
            rank = int((logprobs > logprobs[token]).sum()) + 1
            entry[token] = Logprob(float(logprobs[token]), rank, self.tokenizer.decode([token]))
        return entry

    def _prompt_logprobs(self, model: Any, ids: list[int], k: int) -> list[dict[int, Logprob] | None]:
        logits = model(input_ids=torch.tensor([ids])).logits[0, :-1].float().log_softmax(-1)
        return [None] + [self._entry(row, token, k) for row, token in zip(logits, ids[1:], strict=True)]

    def _structured(self, p: SamplingParams, rng: random.Random) -> CompletionOutput:
        schema = p.structured_outputs.json
        schema = json.loads(schema) if isinstance(schema, str) else schema
        text = json.dumps(instance_of(schema, rng))
        tokens = self.tokenizer.encode(text, add_special_tokens=False)
        return CompletionOutput(0, text, tokens, None, None, "stop", None)


def instance_of(schema: dict, rng: random.Random) -> Any:
    """A value that satisfies the (simple) JSON schema: enums, objects, arrays, strings, numbers, nullables."""
    if "enum" in schema:
        return rng.choice(schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = rng.choice(kind)
    if kind == "object":
        return {key: instance_of(sub, rng) for key, sub in schema.get("properties", {}).items()}
    if kind == "array":
        count = rng.randint(schema.get("minItems", 0), schema.get("maxItems", 3))
        return [instance_of(schema["items"], rng) for _ in range(count)]
    if kind == "string":
        return "simulated"[: schema.get("maxLength", 9)]
    if kind == "integer":
        return rng.randint(1, 40)
    if kind == "number":
        return round(rng.uniform(schema.get("minimum", 0), schema.get("maximum", 1)), 3)
    if kind == "null":
        return None
    raise ValueError(f"fake vllm: unsupported schema {schema}")


def install(monkeypatch) -> types.ModuleType:
    """Put this fake in ``sys.modules`` as ``vllm`` (and its submodules) for one test."""
    this = sys.modules[__name__]
    vllm = types.ModuleType("vllm")
    vllm.__version__ = __version__
    vllm.LLM, vllm.SamplingParams = LLM, SamplingParams
    sampling = types.ModuleType("vllm.sampling_params")
    sampling.SamplingParams, sampling.StructuredOutputsParams = SamplingParams, StructuredOutputsParams
    lora = types.ModuleType("vllm.lora")
    request = types.ModuleType("vllm.lora.request")
    request.LoRARequest = LoRARequest
    outputs = types.ModuleType("vllm.outputs")
    outputs.RequestOutput, outputs.CompletionOutput = RequestOutput, CompletionOutput
    platforms = types.ModuleType("vllm.platforms")
    platforms.current_platform = types.SimpleNamespace(is_cpu=lambda: True)  # the fake runs where the tests do
    vllm.sampling_params, vllm.lora, vllm.outputs, vllm.platforms = sampling, lora, outputs, platforms
    lora.request = request
    for name, module in {
        "vllm": vllm,
        "vllm.sampling_params": sampling,
        "vllm.lora": lora,
        "vllm.lora.request": request,
        "vllm.outputs": outputs,
        "vllm.platforms": platforms,
    }.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(this, "STALE_ADAPTERS", False)
    ENGINES.clear()
    return vllm


def save_checkpoint(model: Any, tokenizer: Any, directory: Path) -> Path:
    """Write an in-process model and tokenizer as the checkpoint directory vLLM (and this fake) loads."""
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


__all__ = ["LLM", "LoRARequest", "SamplingParams", "StructuredOutputsParams", "install", "save_checkpoint"]
