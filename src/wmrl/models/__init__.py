"""Policy models: resolve the built-in SmolLM2 / local checkpoints / offline HF ids, load with LoRA.

Importing this package is cheap; transformers and peft load only when a model does.
"""

from wmrl.models.resolve import (
    DEFAULT_MODEL,
    LoraSettings,
    frozen_copy,
    is_peft_model,
    load_policy,
    reference_mode,
    resolve_model,
    smollm2_tokenizer,
    tiny_llama,
)

__all__ = [
    "DEFAULT_MODEL",
    "LoraSettings",
    "frozen_copy",
    "is_peft_model",
    "load_policy",
    "reference_mode",
    "resolve_model",
    "smollm2_tokenizer",
    "tiny_llama",
]
