"""The AutoResearch wing: LLM agents that write ML scripts, graded by running them.

- ``tasks``: the offline task suite (specs, builders, metrics, reference solutions, task folders, MLE-bench)
- ``environments``: the real environment (sandboxes, grader, execution log) and the world models standing in for it
- ``grpo``: :class:`~wmrl.autoresearch.grpo.GRPOModule`, GRPO for a language agent (a config's ``model:``)
- ``data``: :class:`~wmrl.autoresearch.data.AutoResearchDataModule`, the tasks each step plays (a config's ``data:``)

The wing imports the RL core and nothing of the VLA wing; importing this package imports nothing else.
"""
