"""Rollouts: generation engines (transformers; vLLM on GPU machines) and the multi-turn agent loop."""
