"""The AutoResearch world models: environments (:class:`wmrl.types.Environment`) that predict a script's outcome
instead of running it. :mod:`~wmrl.autoresearch.world_models.lm` asks a language model (the policy's own, or one
served by vLLM or an OpenAI-compatible server), :mod:`~wmrl.autoresearch.world_models.learned` and
:mod:`~wmrl.autoresearch.world_models.task_aware` learn from executions (the latter from the task's card too);
every one answers through :mod:`~wmrl.autoresearch.world_models.gate`, which decides exactly what needs no
prediction (a turn without a code block, a script ``compile()`` refuses), as the real sandbox would."""
