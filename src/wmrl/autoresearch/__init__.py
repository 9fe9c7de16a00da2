"""The AutoResearch wing: LLM agents that write ML scripts, graded by running them.

The wing has the VLA wing's shape, one role per folder or file:

- ``module``: :class:`~wmrl.autoresearch.module.GRPOModule`, the LightningModule (a config's ``model:``), with its
  construction (``grpo_build``), loss (``grpo_loss``) and metrics (``grpo_metrics``)
- ``datamodule``: :class:`~wmrl.autoresearch.datamodule.AutoResearchDataModule`, the tasks each step plays (a
  config's ``data:``)
- ``environments/``: the real environment (sandboxes, grader, execution log)
- ``world_models/``: what stands in for the sandbox: the policy's own language model asked about a script
  (``lm``), the learned and the task-aware models (``learned``, ``task_aware``), and the deterministic gate every
  one of them answers through (``gate``)
- ``agent``: the multi-turn agent loop, the wing's policy at work (the language model itself is the core's
  :mod:`wmrl.models`)
- ``tasks/``: the offline task suite (specs, builders, metrics, reference solutions, task folders, MLE-bench)

The wing imports the RL core and nothing of the VLA wing; importing this package imports nothing else.
"""
