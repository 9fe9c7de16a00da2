"""The vLLM backend of a language-model world model (:class:`~wmrl.types.LanguageModelBackend`), for GPU machines and vLLM's CPU build
(``backend: {class_path: wmrl.generation.vllm_world_model.VLLMWorldModelBackend}``).

One engine per process and GPU (:func:`wmrl.generation.vllm.shared_llm`): with ``model: policy`` it is the
policy's own engine, queried without an adapter (the frozen base, as in the paper); any other model gets its own
engine. Prefix caching is on, so the task overview and data dictionary that every script of a task shares are
prefilled once per task and engine rather than once per script.

- ``score`` mode: a one-token request restricted to the option letters (``allowed_token_ids``) asking for their
  log-probs (``logprobs=len(options)``). The engine reports log-probs after the allowed-token mask
  (``logprobs_mode="processed_logprobs"``), so the returned top-k are exactly the letters; renormalised over them
  they equal the transformers backend's ``softmax(logits[letters])``.
- ``generate`` mode: structured outputs (``StructuredOutputsParams(json=PREDICTIONS_SCHEMA)``; vLLM >= 0.12
  replaced ``GuidedDecodingParams`` by it) constrain the answer to the JSON that
  the world model's parser reads, so it always parses.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from wmrl.generation.vllm import VLLMSettings, checkpoint_dir, import_vllm, row_seed, shared_llm

PREDICTIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reason": {"type": "string", "maxLength": 300},
        "predictions": {
            "type": "array",
            "minItems": 1,
            "maxItems": 2,
            "items": {
                "type": "object",
                "properties": {
                    "status": {"enum": ["runtime_err", "ran_no_sub", "valid", "syntax_err", "malformed"]},
                    "error_type": {"type": ["string", "null"], "maxLength": 60},
                    "error_line": {"type": ["integer", "null"]},
                    "quality_bucket": {"enum": ["low", "fair", "mid", "high", None]},
                    "env_feedback": {"type": "string", "maxLength": 420},
                    "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                },
                "required": [
                    "status",
                    "error_type",
                    "error_line",
                    "quality_bucket",
                    "env_feedback",
                    "confidence",
                ],
                "additionalProperties": False,
            },
        },
    },
    "required": ["reason", "predictions"],
    "additionalProperties": False,
}
"""The JSON schema of a ``generate``-mode answer (the shape ``GENERATE_INSTRUCTIONS`` asks for)."""


class VLLMWorldModelBackend:
    """Answers a language-model world model's two questions (:class:`~wmrl.types.LanguageModelBackend`) with a vLLM engine
    (``pip install 'wmrl[vllm]'``). The engine starts at the first question.

    Args:
        settings: how the process's engine is built (shared with the policy's engine when it is the same
            checkpoint: ``model: policy``).
    """

    def __init__(self, settings: VLLMSettings = VLLMSettings()) -> None:  # noqa: B008 - frozen, immutable default
        self.settings = settings
        self.model_path: Path | None = None
        self.tokenizer: Any = None
        self._policy: Any = None

    def load(self, model: str) -> None:
        """A checkpoint of its own: a built-in name or a local dir (only its tokenizer is loaded here)."""
        from transformers import AutoTokenizer

        from wmrl.models import resolve_model

        self.model_path = Path(resolve_model(model))
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_path)

    def bind(self, policy: Any, tokenizer: Any) -> None:
        """The policy's checkpoint: one engine per process, so this is the policy engine, asked without an
        adapter (the frozen base)."""
        self._policy, self.tokenizer = policy, tokenizer  # its checkpoint dir is read when the engine starts

    @property
    def llm(self) -> Any:
        """The process's engine for the world model's checkpoint, looked up at every question: a fit's end shuts
        the engines down (:func:`~wmrl.generation.vllm.release_engines`), and the next question starts one."""
        if self.model_path is None and self._policy is not None:
            self.model_path = Path(checkpoint_dir(self._policy))
        if self.model_path is None:
            raise RuntimeError("VLLMWorldModelBackend has no model: call load(model) or bind(policy, tokenizer)")
        return shared_llm(self.model_path, self.settings)

    def option_probabilities(
        self, prompts: Sequence[Sequence[int]], option_ids: Sequence[int], prefix_groups: Sequence[str] = ()
    ) -> list[list[float] | None]:
        """Per prompt, the next-token probability of each option token, renormalised over the options (prefix
        caching shares each prefix group's prompt prefix: ``prefix_groups`` needs no batching here).

        Raises:
            RuntimeError: the engine did not return every option's log-prob (it does not apply the
                allowed-token mask before reporting log-probs: build it with ``logprobs_mode="processed_logprobs"``).
        """
        vllm = import_vllm()
        options = [int(i) for i in option_ids]
        params = vllm.SamplingParams(
            max_tokens=1, temperature=1.0, logprobs=len(options), allowed_token_ids=options, seed=0
        )
        outputs = self.llm.generate(
            [{"prompt_token_ids": list(map(int, p))} for p in prompts], params, use_tqdm=False
        )
        result = []
        for output in outputs:
            (entry,) = output.outputs[0].logprobs
            missing = [i for i in options if i not in entry]
            if missing:
                raise RuntimeError(
                    f"the vLLM world model returned no log-prob for option tokens {missing}: its engine must report "
                    "log-probs after the allowed-token mask (logprobs_mode='processed_logprobs')"
                )
            logprobs = [float(entry[i].logprob) for i in options]
            top = max(logprobs)
            weights = [math.exp(lp - top) if math.isfinite(lp) else 0.0 for lp in logprobs]
            total = sum(weights)
            result.append([w / total for w in weights] if total > 0 else [math.nan] * len(options))
        return result

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        max_new_tokens: int,
        temperature: float,
        top_p: float,
        seed: int,
    ) -> list[str | None]:
        """One JSON answer per prompt, constrained to :data:`PREDICTIONS_SCHEMA`."""
        vllm = import_vllm()
        from vllm.sampling_params import StructuredOutputsParams

        structured = StructuredOutputsParams(json=PREDICTIONS_SCHEMA)
        params = [
            vllm.SamplingParams(
                max_tokens=max_new_tokens,
                temperature=temperature,
                top_p=top_p,
                seed=row_seed(seed, row, 0),
                structured_outputs=structured,
            )
            for row in range(len(prompts))
        ]
        outputs = self.llm.generate(
            [{"prompt_token_ids": list(map(int, p))} for p in prompts], params, use_tqdm=False
        )
        return [output.outputs[0].text for output in outputs]
