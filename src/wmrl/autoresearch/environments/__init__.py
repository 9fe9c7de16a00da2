"""The AutoResearch real environment, answering :class:`wmrl.types.Environment` (``step_many``):
:mod:`~wmrl.autoresearch.environments.real` (a sandbox runs each script, :mod:`~wmrl.autoresearch.environments.grader`
grades it outside, :mod:`~wmrl.autoresearch.environments.execution_log` records and caches executions), the
sandboxes themselves (``sandbox/``, and :mod:`~wmrl.autoresearch.environments.leak_scan` checking they hold no
answers). The world models that predict the outcome instead are in :mod:`wmrl.autoresearch.world_models`."""
