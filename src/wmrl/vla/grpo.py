"""`VLAGRPOModule`: GRPO post-training of a LeRobot policy, with the same RL hooks as the AutoResearch module.

``training_step`` reads like the method (and like :class:`wmrl.autoresearch.grpo.GRPOModule`)::

    plan = route(initial states)            # on_rollout_plan: AnchorRouting picks the anchor groups
    batch = rollout(plan)                   # every group plays in the simulator; anchor groups are graded by
                                            # sparse success, the others by the world model; on_rollout_end:
                                            # WorldModelReward side-grades the anchors
    rewards                                 # on_rewards: OnlineDebiasing calibrates world-model rewards
    advantages = group_normalise(batch)     # on_advantages: InverseVarianceDenoising weights anchor rows
    loss = advantage-weighted per-sample policy loss + KL to the SFT reference

The callbacks are the AutoResearch ones, unchanged: they see the same typed ``RolloutPlan`` / ``RolloutBatch``
(``input_ids`` and the other token fields are ``[N, 0]``: an embodied rollout has no tokens; each trajectory is an
:class:`~wmrl.vla.episode.EpisodeTrajectory` carrying its episode).

The policy is Gaussian around the LeRobot policy's action chunk (``exploration_std`` in the normalised action
space); the per-sample loss is its negative log-likelihood (:mod:`wmrl.vla.policy`), so the advantage-weighted
loss is the GRPO policy gradient with one update per rollout batch (PPO ratio 1, clipping never binds), and
the KL to the frozen reference is the exact Gaussian KL ``mean((mu - mu_ref)^2) / (2 std^2)``.

The paper's SFT stage is its own step: the :class:`~wmrl.vla.warm_start.BehaviourCloningWarmStart` callback
clones the successful demonstrations (:meth:`VLAGRPOModule.behaviour_cloning`) at fit start, before this
module's ``on_fit_start`` takes the KL reference; without it the policy starts as given (``policy_instance`` or
``policy.pretrained_path``).

Differences from the paper's VLA transfer (MiniVLA-1B on LIBERO-Long, 520 steps, lr 1e-5): a small state-based
ACT on PushT (near-goal initial states on CPU) behaviour-cloned on scripted demonstrations, and a small learned
progress model as the world model.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from lightning.pytorch.utilities import rank_zero_info

from wmrl.algorithms.gaussian import chunk_nll, gaussian_kl, policy_gradient_loss
from wmrl.modules.base import EVAL_FILE, RLModule
from wmrl.types import (
    ChunkPolicy,
    DemonstrationData,
    LearnsFromDemonstrations,
    RolloutBatch,
    RolloutPlan,
    Simulator,
    Source,
    missing_members,
)
from wmrl.vla.episode import Episode, EpisodeTrajectory, episode_turn, seed_of
from wmrl.vla.policy import PolicySettings, build_policy, observation_batch, to_pixels
from wmrl.vla.reward_model import normalise

EVAL_NOISE_SEED = 10_000_019  # the noisy held-out episodes' generator: seed + this, beyond any step's or rank's seed

# As in wmrl.autoresearch.grpo: the state saved after the optimizer step is the one wmrl means to save.
warnings.filterwarnings("ignore", message="Using ModelCheckpoint with manual optimization")


class PolicyController:
    """Drives the simulator with the policy: its action chunk plus Gaussian exploration noise."""

    def __init__(self, policy: ChunkPolicy, std: float, generator: torch.Generator | None) -> None:
        self.policy, self.std, self.generator = policy, std, generator

    def reset(self, count: int) -> None:
        pass

    @torch.no_grad()
    def __call__(self, agent, env_state, block_pose, rows):
        device = next(self.policy.parameters()).device
        obs = observation_batch(torch.as_tensor(agent), torch.as_tensor(env_state))
        mean = self.policy.mean_chunk({k: v.to(device) for k, v in obs.items()}).float().cpu()
        chunk = mean
        if self.generator is not None and self.std > 0:  # noise drawn on the CPU: the same rollouts on any device
            chunk = mean + self.std * torch.randn(mean.shape, generator=self.generator)
        return to_pixels(chunk).clamp(0.0, 512.0).numpy(), chunk.numpy()


class VLAGRPOModule(RLModule):
    """GRPO for LeRobot policies with world-model rewards (see the module docstring).

    Args:
        simulator: the real environment (:class:`~wmrl.vla.simulator.PushTSimulator`); must match
            ``data.init_args.simulator`` (the demonstrations' initial states and success threshold).
        policy: which LeRobot policy and its size (:class:`~wmrl.vla.policy.PolicySettings`).
        group_size: rollouts per initial state per step (linked from ``data.group_size``; paper 8).
        exploration_std: std of the Gaussian exploration noise on normalised actions (1.0 = 256 pixels).
        lr: AdamW learning rate of the RL update.
        kl_coef: weight of the KL to the SFT reference (paper 0.04).
        max_grad_norm: gradient clipping of the RL update.
        eval_at_start: measure held-out success before the first RL step.
        eval_noisy_episodes: also play this many episodes per held-out state with the exploration noise (the
            Gaussian policy RL trains, not only its mean), logged as ``heldout/success_noisy``; their noise is seeded
            by ``seed`` alone, the same draws at every evaluation. 0: the noise-free evaluation only.
        torch_threads: CPU threads for torch (``null``: torch's default). 1 is fastest for a tiny ACT on a
            shared 2-core machine (measured 0.02 s vs 0.3 s per batch-64 step).
        seed: seeds exploration noise (step ``s`` uses ``seed + s``), evaluation and the order of the
            behaviour-cloning batches.
        policy_instance: an in-process policy object instead of building ``policy`` (tests, notebooks): an
            ``nn.Module`` that is a :class:`wmrl.types.ChunkPolicy`.
    """

    def __init__(
        self,
        simulator: Any = None,
        policy: PolicySettings = PolicySettings(),  # noqa: B008 - frozen, immutable default
        group_size: int = 4,
        exploration_std: float = 0.1,
        lr: float = 1e-4,
        kl_coef: float = 0.04,
        max_grad_norm: float = 1.0,
        eval_at_start: bool = True,
        eval_noisy_episodes: int = 0,
        torch_threads: int | None = 1,
        seed: int = 0,
        policy_instance: Any = None,
    ) -> None:
        super().__init__()
        key = "model.init_args."
        problems = policy.problems(f"{key}policy")
        checks = [
            (group_size >= 2, f"{key}group_size must be >= 2 for group-relative advantages (got {group_size}); it "
                              "is linked from data.group_size: set that"),
            (exploration_std > 0, f"{key}exploration_std must be > 0, e.g. 0.1 (got {exploration_std})"),
            (lr > 0, f"{key}lr must be > 0 (got {lr})"),
            (kl_coef >= 0, f"{key}kl_coef must be >= 0 (got {kl_coef})"),
            (torch_threads is None or torch_threads >= 1, f"{key}torch_threads must be >= 1 or null"),
            (eval_noisy_episodes >= 0, f"{key}eval_noisy_episodes must be >= 0 (got {eval_noisy_episodes})"),
            (policy.type != "smolvla" or kl_coef == 0,
             f"{key}kl_coef must be 0 for {key}policy.type smolvla (got {kl_coef}): a flow-matching policy has no "
             "closed-form KL to its reference; its update is the advantage-weighted flow-matching loss"),
            (simulator is None or isinstance(simulator, Simulator),
             f"{key}simulator must be a wmrl.types.Simulator (source, success_threshold, play(seeds, controller, "
             f"n_action_steps), grade(episodes)); {type(simulator).__name__} lacks "
             f"{missing_members(simulator, Simulator)}"),
            (policy_instance is None or isinstance(policy_instance, ChunkPolicy),
             f"{key}policy_instance must be a wmrl.types.ChunkPolicy (chunk_size, n_action_steps, gaussian, "
             f"mean_chunk, per_sample_loss, bc_loss); {type(policy_instance).__name__} lacks "
             f"{missing_members(policy_instance, ChunkPolicy)}"),
        ]
        problems += [message for ok, message in checks if not ok]
        if problems:
            raise ValueError("invalid VLAGRPOModule configuration:\n  - " + "\n  - ".join(problems))
        self.save_hyperparameters(ignore=["simulator", "policy_instance", "policy"])
        # as a dict: checkpoints must load with torch.load(weights_only=True) (torch's default), no custom classes
        self.hparams["policy"] = dataclasses.asdict(policy)
        if simulator is None:
            from wmrl.vla.simulator import PushTSimulator

            simulator = PushTSimulator()
        self.simulator = simulator
        self.environments: dict[str, Any] = {"real": simulator}
        self.settings = policy
        self.policy: ChunkPolicy | None = policy_instance  # else built in configure_model (imports LeRobot)
        self._starts_trained = policy_instance is not None or policy.pretrained_path is not None
        self.cloned_steps = 0  # behaviour-cloning steps taken (by BehaviourCloningWarmStart)
        self._reference: list[ChunkPolicy] = []  # a list: not a submodule (checkpointed by on_save_checkpoint)
        self._reference_state: dict | None = None  # the SFT reference of a resumed run, until on_fit_start
        self.eval_history: list[tuple[str, float]] = []

    # -- construction ----------------------------------------------------------------------------------
    def configure_model(self) -> None:
        if self.hparams.torch_threads:
            torch.set_num_threads(self.hparams.torch_threads)
        if self.policy is not None:
            return
        torch.manual_seed(self.hparams.seed)
        self.policy = build_policy(self.settings)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.policy.parameters(), lr=self.hparams.lr)

    # -- before RL: the KL reference and the world model's training -------------------------------------
    def demonstrations(self) -> list[Episode]:
        """The data module's demonstration episodes, after checking that its simulator is this module's."""
        datamodule = self.trainer.datamodule
        if not isinstance(datamodule, DemonstrationData):
            raise ValueError("VLAGRPOModule needs a data module with demonstrations (data: LeRobotVLADataModule, a "
                             f"wmrl.types.DemonstrationData); got {type(datamodule).__name__}")
        datamodule.check_simulator(self.simulator)
        return datamodule.demonstrations()

    def on_fit_start(self) -> None:
        # Lightning calls the callbacks' on_fit_start first: a BehaviourCloningWarmStart has already cloned the
        # demonstrations, so the reference taken here is the policy after SFT
        demonstrations = self.demonstrations()
        resumed = self.trainer.ckpt_path is not None  # the loops (global_step) are restored only after this hook
        if not resumed and not self.cloned_steps and not self._starts_trained:
            raise ValueError(
                "model.init_args.policy.pretrained_path is null and trainer.callbacks has no "
                "wmrl.vla.warm_start.BehaviourCloningWarmStart: the policy would start untrained; add the callback "
                "(behaviour cloning on the demonstrations) or give a pretrained policy")
        reference = copy.deepcopy(self.policy).eval().requires_grad_(False)
        if self._reference_state is not None:  # resumed: the KL stays anchored to the first run's SFT policy
            reference.load_state_dict(self._reference_state)
            self._reference_state = None
        self._reference = [reference]
        for name, env in self.environments.items():
            if isinstance(env, LearnsFromDemonstrations):
                start = time.perf_counter()
                loss = env.fit_demonstrations(demonstrations)
                what = "loaded pretrained" if math.isnan(loss) else f"trained on {len(demonstrations)} demonstrations"
                rank_zero_info(f"{name} ({type(env).__name__}) {what} in {time.perf_counter() - start:.1f} s")

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        """The KL reference (the policy after SFT) travels with the checkpoint, so a resumed run continues the
        same objective instead of anchoring the KL to the resumed policy."""
        if self._reference:
            checkpoint["wmrl_vla_reference"] = self._reference[0].state_dict()

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        super().on_load_checkpoint(checkpoint)
        if "wmrl_vla_reference" not in checkpoint:
            raise KeyError("this checkpoint has no VLA KL reference ('wmrl_vla_reference'): it was not written by "
                           "VLAGRPOModule; resume only from this module's checkpoints")
        self._reference_state = checkpoint["wmrl_vla_reference"]

    def behaviour_cloning(self, demonstrations: list[Episode], steps: int, batch_size: int, lr: float) -> float:
        """The SFT stage: ``steps`` AdamW steps of the policy's own loss on demonstration chunks (every step of every
        episode; ``batch_size`` chunks drawn per step, in an order seeded by ``seed``). Returns the last loss, also
        logged as ``sft/loss`` with ``sft/seconds`` and ``sft/demonstration_steps`` (the steps cloned). Called by
        :class:`~wmrl.vla.warm_start.BehaviourCloningWarmStart`."""
        from rich.progress import Progress

        if not demonstrations:
            raise ValueError("no successful demonstration to clone (data.init_args.demonstrations, or the "
                             "simulator's success_threshold, too strict)")
        horizon = self.policy.chunk_size
        states, env_states, chunks, pads = [], [], [], []
        for e in demonstrations:
            for t in range(len(e)):
                window = e.actions[t : t + horizon]
                pad = np.zeros(horizon, dtype=bool)
                pad[len(window):] = True
                window = np.concatenate([window, np.repeat(e.actions[-1:], horizon - len(window), axis=0)])
                states.append(e.states[t]), env_states.append(e.env_states[t]), chunks.append(window), pads.append(pad)
        obs = observation_batch(torch.as_tensor(np.array(states)), torch.as_tensor(np.array(env_states)))
        obs = {k: v.to(self.device) for k, v in obs.items()}
        chunk = normalise(torch.as_tensor(np.array(chunks))).to(self.device)
        is_pad = torch.as_tensor(np.array(pads)).to(self.device)
        optimizer = torch.optim.AdamW(self.policy.parameters(), lr=lr)
        generator = torch.Generator().manual_seed(self.hparams.seed)
        started = time.perf_counter()
        self.policy.train()
        loss = torch.tensor(math.nan)
        with Progress(disable=not self.trainer.is_global_zero) as progress:
            task = progress.add_task(f"SFT on {len(demonstrations)} demonstrations", total=steps)
            for step in range(steps):
                rows = torch.randint(0, len(chunk), (batch_size,), generator=generator)
                loss = self.policy.bc_loss({k: v[rows] for k, v in obs.items()}, chunk[rows], is_pad[rows])
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                if step % 25 == 0 or step == steps - 1:
                    progress.update(task, completed=step + 1, description=f"SFT loss {float(loss.detach()):.3f}")
        self.cloned_steps += steps
        metrics = {"sft/loss": float(loss.detach()), "sft/seconds": time.perf_counter() - started,
                   "sft/demonstration_steps": float(sum(len(e) for e in demonstrations))}
        for logger in self.loggers:
            logger.log_metrics(metrics, step=0)
        return float(loss.detach())

    # -- the method (the step itself is RLModule.training_step, shared with the LLM module) ---------------
    def after_step(self, metrics: dict[str, float], batch: RolloutBatch, step: int) -> None:
        self.log("reward", metrics["reward/mean"], prog_bar=True, on_step=True, batch_size=len(batch))
        self.log("real_success", metrics["anchor/real_success"], prog_bar=True, on_step=True, batch_size=len(batch))

    def rollout(self, plan: RolloutPlan, seed: int) -> RolloutBatch:
        """Play ``group_size`` episodes per group in the simulator; grade each group in its planned environment."""
        for group, name in enumerate(plan.environments):
            if name not in self.environments:
                raise KeyError(f"the rollout plan routes group {group} to {name!r}, but the module has only "
                               f"{sorted(self.environments)}; add the callback that provides it (WorldModelReward)")
        seeds = [seed_of(t) for t in plan.task_ids for _ in range(plan.group_size)]
        generator = torch.Generator().manual_seed(seed)
        self.policy.eval()
        start = time.perf_counter()
        episodes = self.simulator.play(seeds, PolicyController(self.policy, self.hparams.exploration_std, generator),
                                       n_action_steps=self.policy.n_action_steps)
        self.add_time("env", time.perf_counter() - start)
        trajectories = []
        for group, (task, name) in enumerate(zip(plan.task_ids, plan.environments, strict=True)):
            members = episodes[group * plan.group_size : (group + 1) * plan.group_size]
            start = time.perf_counter()
            outcomes = self.environments[name].grade(members)
            self.add_time("world_model" if name != "real" else "grade", time.perf_counter() - start)
            for episode, outcome in zip(members, outcomes, strict=True):
                trajectories.append(EpisodeTrajectory(task, group, (episode_turn(episode, outcome),), outcome.source,
                                                      episode=episode))
        return collate(trajectories)

    def update(self, batch: RolloutBatch) -> dict[str, float]:
        """One optimizer step: advantage-weighted per-sample policy loss over every chunk of the used rows."""
        hp = self.hparams
        optimizer = self.optimizers()
        rows = batch.used.nonzero().flatten().tolist()
        samples = [(batch.trajectories[i].episode, c, float(batch.advantages[i])) for i in rows
                   for c in range(len(batch.trajectories[i].episode.chunk_starts))]
        if not samples:
            # an empty step still steps the optimizer (a no-op without gradients): global_step then counts
            # rollout steps, which the exploration seed and the data order (and so an exact resume) rely on
            optimizer.zero_grad(set_to_none=True)
            optimizer.step()
            return {"loss/total": 0.0, "loss/pg": 0.0, "loss/kl": 0.0, "train/skipped_step": 1.0}
        starts = [e.chunk_starts[c] for e, c, _ in samples]
        obs = observation_batch(torch.as_tensor(np.array([e.states[t] for (e, _, _), t in zip(samples, starts, strict=True)])),
                                torch.as_tensor(np.array([e.env_states[t] for (e, _, _), t in zip(samples, starts, strict=True)])))
        obs = {k: v.to(self.device) for k, v in obs.items()}
        chunk = torch.as_tensor(np.array([e.chunk_actions[c] for e, c, _ in samples])).to(self.device)
        advantage = torch.tensor([a for _, _, a in samples], dtype=torch.float32, device=self.device)
        self.policy.train()
        std = hp.exploration_std
        kl = torch.zeros((), device=self.device)
        if not self.policy.gaussian:  # SmolVLA: forward(batch, reduction="none"), no KL
            pg = policy_gradient_loss(advantage, self.policy.per_sample_loss(obs, chunk, std))
        else:
            mean = self.policy.mean_chunk(obs)[:, : chunk.shape[1]]  # executed actions only
            pg = policy_gradient_loss(advantage, chunk_nll(chunk, mean, std))  # = per_sample_loss, mean reused
        if hp.kl_coef > 0 and self.policy.gaussian:
            with torch.no_grad():
                reference = self._reference[0].mean_chunk(obs)[:, : chunk.shape[1]]
            kl = gaussian_kl(mean, reference, std)
        loss = pg + hp.kl_coef * kl
        optimizer.zero_grad(set_to_none=True)
        self.manual_backward(loss)
        self.clip_gradients(optimizer, gradient_clip_val=hp.max_grad_norm, gradient_clip_algorithm="norm")
        optimizer.step()
        return {"loss/total": float(loss.detach()), "loss/pg": float(pg.detach()), "loss/kl": float(kl.detach()),
                "train/skipped_step": 0.0, "train/samples": float(len(samples))}

    def rollout_metrics(self, batch: RolloutBatch, plan: RolloutPlan) -> dict[str, float]:
        episodes = [t.episode for t in batch.trajectories]
        real = batch.rewards[batch.is_real]
        wm_raw = batch.wm_rewards[~batch.is_real & ~torch.isnan(batch.wm_rewards)]
        metrics = {
            "reward/mean": float(batch.rewards.mean()),
            "reward/real_mean": float(real.mean()) if len(real) else math.nan,
            "reward/world_model_raw_mean": float(wm_raw.mean()) if len(wm_raw) else math.nan,
            "anchor/fraction": sum(plan.anchor_mask) / max(len(plan.anchor_mask), 1),
            "anchor/real_success": float(real.mean()) if len(real) else math.nan,
            "anchor/executions": float(int(batch.is_real.sum())),
            # the simulator's truth on every rollout, world-model groups included: a diagnostic the training
            # never reads (it would be a real execution's reward)
            "rollout/success_rate": float(np.mean([e.success for e in episodes])),
            "rollout/episode_steps": float(np.mean([len(e) for e in episodes])),
            "rollout/simulator_steps": float(sum(len(e) for e in episodes)),
            "rollout/used_fraction": float(batch.used.float().mean()),
        }
        metrics.update(super().rollout_metrics(batch, plan))  # time/* of this step
        return metrics

    # -- held-out evaluation (the simulator's success, no exploration noise) -----------------------------
    def evaluate(self, task_ids: list[str]) -> float:
        """Success rate of the policy's mean action chunks on ``task_ids`` (one episode each)."""
        return float(np.mean([e["success"] for e in self.evaluate_episodes(task_ids)]))

    def evaluate_episodes(self, task_ids: list[str], noisy: int = 0) -> list[dict]:
        """One noise-free episode per initial state: ``{"task_id", "success", "coverage", "steps"}`` each
        (``coverage``: the best goal coverage reached). ``noisy`` > 0 adds ``noisy_success``: the mean success of
        that many episodes per state with the exploration noise (a generator seeded by ``seed``)."""
        self.policy.eval()
        steps = self.policy.n_action_steps
        episodes = self.simulator.play([seed_of(t) for t in task_ids], PolicyController(self.policy, 0.0, None),
                                       n_action_steps=steps)
        out = [{"task_id": t, "success": float(e.success), "coverage": float(e.coverage.max(initial=0.0)),
                "steps": len(e)} for t, e in zip(task_ids, episodes, strict=True)]
        if noisy:
            generator = torch.Generator().manual_seed(self.hparams.seed + EVAL_NOISE_SEED)
            seeds = [seed_of(t) for t in task_ids for _ in range(noisy)]
            played = self.simulator.play(seeds, PolicyController(self.policy, self.hparams.exploration_std, generator),
                                         n_action_steps=steps)
            for i, record in enumerate(out):
                record["noisy_success"] = float(np.mean([e.success for e in played[i * noisy : (i + 1) * noisy]]))
        return out

    def _held_out(self, task_ids: list[str], split: str = "heldout") -> float:
        """Evaluate, keep the episodes in ``<run dir>/heldout.jsonl`` and return the success rate (also logging
        ``heldout/success_noisy`` when ``eval_noisy_episodes`` > 0)."""
        episodes = self.evaluate_episodes(task_ids, self.hparams.get("eval_noisy_episodes", 0))
        success = float(np.mean([e["success"] for e in episodes]))
        self.eval_history.append(("start" if self.trained_steps == 0 else f"step {self.trained_steps}", success))
        self._write_eval(episodes, split)
        if "noisy_success" in episodes[0]:
            noisy = float(np.mean([e["noisy_success"] for e in episodes]))
            for logger in self.loggers:
                logger.log_metrics({"heldout/success_noisy": noisy}, step=self.global_step)
        return success

    def _write_eval(self, episodes: list[dict], split: str = "heldout") -> None:
        """Append one line per evaluation to ``<run dir>/heldout.jsonl`` (``EVAL_FILE``, as the LLM module does):
        paired intervals over initial states (``benchmarks/vla_arms.py``) need episodes, not means. Only a logging
        run has a run dir, and only rank 0 writes."""
        if not self.trainer.loggers or not self.trainer.is_global_zero:
            return
        path = Path(self.trainer.default_root_dir) / EVAL_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as f:
            f.write(json.dumps({"split": split, "step": self.trained_steps, "episodes": episodes}) + "\n")

    def on_train_start(self) -> None:
        datamodule = self.trainer.datamodule
        if not self.hparams.eval_at_start or self.global_step > 0:
            return
        success = self._held_out(datamodule.heldout_task_ids)
        rank_zero_info(f"held-out success before RL: {success:.3f} ({len(datamodule.heldout_task_ids)} initial states)")
        for logger in self.loggers:
            logger.log_metrics({"heldout/success": success}, step=0)

    def validation_step(self, task_ids: list[str], batch_idx: int) -> None:
        if self.trainer.sanity_checking:
            self.evaluate(list(task_ids))
            return
        success = self._held_out(list(task_ids))
        self.log("heldout/success", success, batch_size=len(task_ids), prog_bar=True)

    def test_step(self, task_ids: list[str], batch_idx: int) -> None:
        """``wmrl test``: the held-out evaluation, logged as ``test/success`` (``heldout.jsonl`` split ``test``)."""
        success = self._held_out(list(task_ids), split="test")
        self.log("test/success", success, batch_size=len(task_ids))

    def on_fit_end(self) -> None:
        if self.eval_history and self.trainer.is_global_zero:
            lines = [f"  {when:>10}: success {value:.3f}" for when, value in self.eval_history]
            print("held-out success (simulator, no exploration noise):\n" + "\n".join(lines))


def collate(trajectories: list[EpisodeTrajectory]) -> RolloutBatch:
    """A :class:`RolloutBatch` of episodes: rewards from their outcomes, no tokens (``[N, 0]`` token fields)."""
    n = len(trajectories)
    rewards = torch.tensor([t.reward for t in trajectories], dtype=torch.float32)
    is_real = torch.tensor([t.source is Source.REAL for t in trajectories], dtype=torch.bool)
    empty = torch.zeros((n, 0))
    return RolloutBatch(
        trajectories=tuple(trajectories),
        group_ids=torch.tensor([t.group for t in trajectories], dtype=torch.long),
        input_ids=empty.long(),
        attention_mask=empty.bool(),
        response_mask=empty.bool(),
        old_logprobs=empty.float(),
        rewards=rewards,
        graded=~torch.isnan(rewards),
        is_real=is_real,
        advantages=torch.zeros(n, dtype=torch.float32),
        used=torch.zeros(n, dtype=torch.bool),
        wm_rewards=torch.where(is_real, torch.full_like(rewards, math.nan), rewards),
        wm_calibrated=torch.full_like(rewards, math.nan),
    )
