"""The check of `VLAGRPOModule`'s settings: every bad constructor value at once, each naming its config key; the
old ``policy: {type: ...}`` form is refused with the new one written out."""

from __future__ import annotations

from typing import Any

from wmrl.types import missing_members
from wmrl.vla.contracts import ChunkPolicy, Simulator


def validate(args: dict[str, Any]) -> None:
    """Raise one ``ValueError`` listing every problem of the constructor's ``args`` (its ``locals()``)."""
    key = "model.init_args."
    policy, simulator, instance, kl_coef = args["policy"], args["simulator"], args["policy_instance"], args["kl_coef"]
    if isinstance(policy, dict):
        raise ValueError(old_policy_form(policy))
    problems = [] if policy is None else policy.problems(f"{key}policy", kl_coef)
    checks = [
        (args["group_size"] >= 2, f"{key}group_size must be >= 2 for group-relative advantages (got "
                                  f"{args['group_size']}); it is linked from data.group_size: set that"),
        (args["exploration_std"] > 0, f"{key}exploration_std must be > 0, e.g. 0.1 (got {args['exploration_std']})"),
        (args["lr"] > 0, f"{key}lr must be > 0 (got {args['lr']})"),
        (kl_coef >= 0, f"{key}kl_coef must be >= 0 (got {kl_coef})"),
        (args["torch_threads"] is None or args["torch_threads"] >= 1, f"{key}torch_threads must be >= 1 or null"),
        (args["eval_noisy_episodes"] >= 0,
         f"{key}eval_noisy_episodes must be >= 0 (got {args['eval_noisy_episodes']})"),
        (simulator is None or isinstance(simulator, Simulator),
         f"{key}simulator must be a wmrl.vla.contracts.Simulator (source, success_threshold, play(seeds, controller, "
         f"n_action_steps), grade(episodes)); {type(simulator).__name__} lacks "
         f"{missing_members(simulator, Simulator)}"),
        (instance is None or isinstance(instance, ChunkPolicy),
         f"{key}policy_instance must be a wmrl.vla.contracts.ChunkPolicy (chunk_size, n_action_steps, mean_chunk, "
         f"per_sample_loss, rl_loss, bc_loss); {type(instance).__name__} lacks "
         f"{missing_members(instance, ChunkPolicy)}"),
    ]
    problems += [message for ok, message in checks if not ok]
    if problems:
        raise ValueError("invalid VLAGRPOModule configuration:\n  - " + "\n  - ".join(problems))


#: the policy classes a config names, by the old ``type:`` value
POLICY_CLASSES = {"act": "wmrl.vla.policies.chunk.ACTChunkPolicy", "smolvla": "wmrl.vla.policies.chunk.SmolVLAChunkPolicy"}


def old_policy_form(given: dict[str, Any]) -> str:
    """The error for ``policy: {type: act, ...}``, the form before policies were chosen by ``class_path``: it names
    the key and writes the new form out, with the given sizes as ``init_args``.

    >>> print(old_policy_form({"type": "act", "chunk_size": 4}))  # doctest: +NORMALIZE_WHITESPACE
    model.init_args.policy: `type: act` is the old form; a policy is chosen by class_path now:
      policy: {class_path: wmrl.vla.policies.chunk.ACTChunkPolicy, init_args: {chunk_size: 4}}
    """
    if "type" not in given and isinstance(given.get("init_args"), dict):  # jsonargparse may wrap it in its base class
        given = given["init_args"]
    kind = given.get("type", "act")
    init_args = ", ".join(f"{k}: {'null' if v is None else v}" for k, v in given.items() if k != "type")
    target = POLICY_CLASSES.get(kind, f"{POLICY_CLASSES['act']} (or {POLICY_CLASSES['smolvla']})")
    return (f"model.init_args.policy: `type: {kind}` is the old form; a policy is chosen by class_path now:\n"
            f"  policy: {{class_path: {target}, init_args: {{{init_args}}}}}")
