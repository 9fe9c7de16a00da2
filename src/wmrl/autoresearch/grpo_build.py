"""The parts `GRPOModule` is built from, one builder each: the policy and its KL reference, the real environment,
the generation engine, the two agent loops (training and held-out sampling); and the check of its settings.

Each builder names the config key it reads in its errors; ``GRPOModule.__init__`` calls them in this order (the
policy's LoRA initialisation draws from the seeded generator first, so a seeded run builds the same weights).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from wmrl.autoresearch.agent import AgentLoop, AgentSettings
from wmrl.autoresearch.contracts import TaskEnvironment
from wmrl.models import LoraSettings
from wmrl.types import GenerationEngine, missing_members

#: how the module builds its generation engine from the policy and its tokenizer (a ``class_path`` whose first two
#: arguments are those, e.g. :class:`wmrl.generation.vllm.VLLMGenerationEngine`)
EngineFactory = Callable[[Any, Any], GenerationEngine]


def policy_pair(model: str, lora: LoraSettings | None, dtype: str, given: tuple | None) -> tuple[Any, Any]:
    """``(policy, tokenizer)``: the in-process pair ``given`` (``policy=``), else ``model`` loaded with ``lora``."""
    if given is not None:
        return given
    from wmrl.models import load_policy

    return load_policy(model, lora, dtype=dtype)


def real_environment(environment: Any) -> TaskEnvironment:
    """``model.init_args.environment``, checked; ``None``: the process sandbox over the shipped task suite."""
    if environment is None:
        from wmrl.autoresearch.environments.real import SandboxEnvironment

        environment = SandboxEnvironment()
    if not isinstance(environment, TaskEnvironment):
        raise TypeError(f"model.init_args.environment must be a wmrl.autoresearch.contracts.TaskEnvironment (source, step_many, "
                        f"prompt); {type(environment).__name__} lacks "
                        f"{missing_members(environment, TaskEnvironment)}")
    return environment


def generation_engine(engine: EngineFactory | None, policy: Any, tokenizer: Any, batch_size: int,
                      top_p: float) -> GenerationEngine:
    """``model.init_args.engine`` built on the policy (``None``: transformers, sharing the policy's weights)."""
    if engine is None:
        from wmrl.generation.hf import HFGenerationEngine

        built = HFGenerationEngine(policy, tokenizer, max_batch_size=batch_size)
    else:
        built = engine(policy, tokenizer)
        if not isinstance(built, GenerationEngine):
            raise TypeError(f"model.init_args.engine must build a wmrl.types.GenerationEngine subclass "
                            f"(got {type(built).__name__})")
    if not built.exact_with_top_p and top_p != 1:
        raise ValueError(f"model.init_args.top_p must be 1.0 with {type(built).__name__} (its log-probs are "
                         f"taken after top-p truncation; got {top_p})")
    return built


def agent_loops(tokenizer: Any, engine: GenerationEngine, settings: Mapping[str, Any]) -> tuple[AgentLoop, AgentLoop]:
    """The training agent loop (``temperature``) and the held-out one (``eval_temperature``), otherwise alike."""
    def loop(temperature: float) -> AgentLoop:
        return AgentLoop(tokenizer, engine, AgentSettings(
            settings["max_turns"], settings["max_new_tokens"], settings["observation_tokens"], temperature,
            settings["top_p"], prefill=settings["prefill"], overlap=settings["overlap"]))

    return loop(settings["temperature"]), loop(settings["eval_temperature"])


def engine_name(engine: EngineFactory | None) -> str:
    """The engine's class as a dotted path, for the hyperparameters (``None``: the transformers engine)."""
    if engine is None:
        return "wmrl.generation.hf.HFGenerationEngine"
    target: Any = engine
    while isinstance(target, functools.partial):  # a class_path factory: a partial that holds the class
        classes = [a for a in target.args if isinstance(a, type)]
        target = classes[-1] if classes else target.func
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', type(target).__name__)}"



def validate(args: dict) -> None:
    """Report every bad constructor value at once, naming the config key."""
    key = "model.init_args."
    checks = [
        (args["group_size"] >= 2, f"{key}group_size must be >= 2 for group-relative advantages "
                                  f"(got {args['group_size']}); it is linked from data.group_size: set that"),
        (args["max_turns"] >= 1, f"{key}max_turns must be >= 1 (got {args['max_turns']})"),
        (args["max_new_tokens"] >= 1, f"{key}max_new_tokens must be >= 1 (got {args['max_new_tokens']})"),
        (args["clip_eps"] > 0, f"{key}clip_eps must be > 0, e.g. 0.2 (got {args['clip_eps']})"),
        (args["kl_coef"] >= 0, f"{key}kl_coef must be >= 0 (got {args['kl_coef']})"),
        (args["entropy_coef"] >= 0, f"{key}entropy_coef must be >= 0 (got {args['entropy_coef']})"),
        (args["lr"] > 0, f"{key}lr must be > 0 (got {args['lr']})"),
        (args["temperature"] > 0, f"{key}temperature must be > 0 for training rollouts (got {args['temperature']})"),
        (args["eval_temperature"] >= 0, f"{key}eval_temperature must be >= 0 (got {args['eval_temperature']})"),
        (0 < args["top_p"] <= 1, f"{key}top_p must be in (0, 1] (got {args['top_p']})"),
        (args["micro_batch_size"] >= 1, f"{key}micro_batch_size must be >= 1 (got {args['micro_batch_size']})"),
        (args["max_staleness"] in (0, 1), f"{key}max_staleness must be 0 (synchronous) or 1 (the next step's "
                                          f"rollouts overlap this step's update); got {args['max_staleness']}"),
        (args["update_precision"] in ("float32", "bfloat16", "auto"),
         f"{key}update_precision must be float32, bfloat16 or auto (got {args['update_precision']!r})"),
        (args["update_precision"] == "float32" or args["dtype"] == "float32",
         f"{key}update_precision {args['update_precision']!r} autocasts a float32 policy: with dtype "
         f"{args['dtype']!r} set update_precision: float32"),
        (args["loss_aggregation"] in ("token_mean", "seq_mean_token_mean", "dr_grpo"),
         f"{key}loss_aggregation must be token_mean, seq_mean_token_mean or dr_grpo (got {args['loss_aggregation']!r})"),
    ]
    problems = [message for ok, message in checks if not ok]
    if problems:
        raise ValueError("invalid GRPOModule configuration:\n  - " + "\n  - ".join(problems))
