"""Generation engines: how a language policy (and a language-model world model) samples tokens.

- :mod:`wmrl.generation.engine`: the contract (:class:`~wmrl.generation.engine.GenerationEngine`,
  :class:`~wmrl.generation.engine.SamplingParams`, :class:`~wmrl.generation.engine.Generation`) and what every engine
  shares (the code fences a turn stops at, the end-of-sequence ids);
- :mod:`wmrl.generation.hf`: transformers, in the training process (CPU or GPU; the default);
- :mod:`wmrl.generation.vllm`: vLLM on GPU machines (``pip install 'wmrl[vllm]'``);
- :mod:`wmrl.generation.vllm_cpu_lora`: the LoRA ops wmrl gives vLLM's CPU build (a vLLM plugin);
- :mod:`wmrl.generation.hf_world_model`, :mod:`wmrl.generation.vllm_world_model`,
  :mod:`wmrl.generation.served_world_model`: where a language-model world model runs its model (its ``backend``,
  a :class:`wmrl.types.LanguageModelBackend` chosen by ``class_path``).

The module's engine is chosen by ``class_path`` too (``model.init_args.engine``; unset: transformers).

A domain's rollout loop drives an engine; nothing here imports vllm or transformers at import time.
"""
