"""The AutoResearch environments, all answering :class:`wmrl.types.Environment` (``step_many``): the real one
(:mod:`~wmrl.autoresearch.environments.real`: a sandbox runs each script, :mod:`~wmrl.autoresearch.environments.grader` grades it outside,
:mod:`~wmrl.autoresearch.environments.execution_log` records and caches executions), the sandboxes themselves (``sandbox/``,
and :mod:`~wmrl.autoresearch.environments.leak_scan` checking they hold no answers), and two world models that predict the
outcome instead (:mod:`~wmrl.autoresearch.environments.lm_world_model`, :mod:`~wmrl.autoresearch.environments.learned`)."""
