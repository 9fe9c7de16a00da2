"""`VLAGRPOModule`: GRPO post-training of a LeRobot policy, with the same RL hooks as the AutoResearch module.

``training_step`` reads like the method (and like :class:`wmrl.autoresearch.module.GRPOModule`)::

    plan = route(initial states)            # on_rollout_plan: AnchorRouting picks the anchor groups
    batch = rollout(plan)                   # every group plays in the simulator; anchor groups are graded by
                                            # sparse success, the others by the world model; on_rollout_end:
                                            # WorldModelReward side-grades the anchors
    rewards                                 # on_calibrate: OnlineDebiasing calibrates world-model rewards;
                                            # on_rewards: reward terms
    advantages = group_normalise(batch)     # on_advantages: InverseVarianceDenoising weights anchor rows
    loss = advantage-weighted per-sample policy loss + KL to the SFT reference

The callbacks are the AutoResearch ones, unchanged: they see the same typed ``RolloutPlan`` / ``RolloutBatch``
(``input_ids`` and the other token fields are ``[N, 0]``: an embodied rollout has no tokens; each trajectory is an
:class:`~wmrl.vla.episode.EpisodeTrajectory` carrying its episode).

The policy owns its losses (``ChunkPolicy.rl_loss``): ACT is Gaussian around the LeRobot policy's action chunk
(``exploration_std`` in the normalised action space) and gives its negative log-likelihood (:mod:`wmrl.vla.policies.chunk`),
so the advantage-weighted loss is the GRPO policy gradient with one update per rollout batch (PPO ratio 1,
clipping never binds), and the exact Gaussian KL ``mean((mu - mu_ref)^2) / (2 std^2)`` to the frozen reference;
SmolVLA gives its flow-matching loss and no KL.

The paper's SFT stage is its own step, and lives only there: the
:class:`~wmrl.vla.warm_start.BehaviourCloningWarmStart` callback clones the successful demonstrations into the
policy at fit start, before this module's ``on_fit_start`` takes the KL reference; without it the policy starts
as given (``policy_instance`` or ``policy.pretrained_path``). Held-out evaluations are kept by the shared
:class:`~wmrl.evaluation.heldout.HeldOutLog` (``heldout.jsonl``, the end-of-fit report).

Differences from the paper's VLA transfer (MiniVLA-1B on LIBERO-Long, 520 steps, lr 1e-5): a small state-based
ACT on PushT (near-goal initial states on CPU) behaviour-cloned on scripted demonstrations, and a small learned
progress model as the world model.
"""

from __future__ import annotations

import copy
import math
import time
from typing import Any

import numpy as np
import torch
from lightning.pytorch.utilities import rank_zero_info

from wmrl.algorithms.gaussian import policy_gradient_loss
from wmrl.modules.base import RLModule
from wmrl.rollout.batch import TokenRows, rollout_batch
from wmrl.types import RolloutBatch, RolloutPlan, declares
from wmrl.vla.contracts import ChunkPolicy, DemonstrationData, LearnsFromDemonstrations
from wmrl.vla.episode import Episode, EpisodeTrajectory, episode_turn, seed_of
from wmrl.vla.heldout_report import success_report
from wmrl.vla.play import PolicyController, held_out_episodes
from wmrl.vla.policies.chunk import ACTChunkPolicy, LeRobotChunkPolicy, observation_batch
from wmrl.vla.settings import validate


class VLAGRPOModule(RLModule):
    """GRPO for LeRobot policies with world-model rewards (see the module docstring).

    Args:
        simulator: the real environment (:class:`~wmrl.vla.simulators.pusht.PushTSimulator`); must match
            ``data.init_args.simulator`` (the demonstrations' initial states and success threshold).
        policy: which LeRobot policy and its size, by ``class_path``: :class:`~wmrl.vla.policies.chunk.ACTChunkPolicy`
            (``null``: its defaults) or :class:`~wmrl.vla.policies.chunk.SmolVLAChunkPolicy` with their ``init_args``.
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
            ``nn.Module`` that is a :class:`wmrl.vla.contracts.ChunkPolicy`.
    """

    def __init__(
        self,
        simulator: Any = None,
        policy: LeRobotChunkPolicy | dict | None = None,  # a dict: the old `type:` form, refused by name
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
        super().__init__(report=success_report)
        validate(locals())
        policy = ACTChunkPolicy() if policy is None else policy
        self.save_hyperparameters(ignore=["simulator", "policy_instance", "policy"])
        self.hparams["policy"] = policy.config()  # class_path and init_args: plain values, as the config wrote them
        if simulator is None:
            from wmrl.vla.simulators.pusht import PushTSimulator

            simulator = PushTSimulator()
        self.simulator = simulator
        self.environments: dict[str, Any] = {"real": simulator}
        self.policy: ChunkPolicy = policy if policy_instance is None else policy_instance
        self._builds_policy = policy_instance is None  # a LeRobot policy, built in configure_model (imports LeRobot)
        self._starts_trained = policy_instance is not None or policy.pretrained_path is not None
        self.cloned_steps = 0  # behaviour-cloning steps taken (by BehaviourCloningWarmStart, which counts them here)
        self._reference: list[ChunkPolicy] = []  # a list: not a submodule (checkpointed by on_save_checkpoint)
        self._reference_state: dict | None = None  # the SFT reference of a resumed run, until on_fit_start

    @property
    def seed(self) -> int:
        """``model.init_args.seed`` (exploration, evaluation noise, the behaviour-cloning batch order)."""
        return self.hparams.seed

    def policy_to_clone(self) -> ChunkPolicy:
        """The policy :class:`~wmrl.vla.warm_start.BehaviourCloningWarmStart` trains (a ClonesBehaviour)."""
        return self.policy

    # -- construction ----------------------------------------------------------------------------------
    def configure_model(self) -> None:
        if self.hparams.torch_threads:
            torch.set_num_threads(self.hparams.torch_threads)
        if self._builds_policy and self.policy.policy is None:
            torch.manual_seed(self.hparams.seed)
            self.policy.build()

    def configure_optimizers(self):
        return torch.optim.AdamW(self.policy.parameters(), lr=self.hparams.lr)

    # -- before RL: the KL reference and the world model's training -------------------------------------
    def demonstrations(self) -> list[Episode]:
        """The data module's demonstration episodes, after checking that its simulator is this module's."""
        datamodule = self.trainer.datamodule
        if not isinstance(datamodule, DemonstrationData):
            raise ValueError("VLAGRPOModule needs a data module with demonstrations (data: LeRobotVLADataModule, a "
                             f"wmrl.vla.contracts.DemonstrationData); got {type(datamodule).__name__}")
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
            if declares(env, LearnsFromDemonstrations):
                start = time.perf_counter()
                loss = env.fit_demonstrations(demonstrations)
                what = "loaded pretrained" if math.isnan(loss) else f"trained on {len(demonstrations)} demonstrations"
                rank_zero_info(f"{name} ({type(env).__name__}) {what} in {time.perf_counter() - start:.1f} s")

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        """The KL reference (the policy after SFT) travels with the checkpoint, so a resumed run continues the
        same objective instead of anchoring the KL to the resumed policy; so do the held-out evaluations
        (:class:`RLModule`)."""
        super().on_save_checkpoint(checkpoint)
        if self._reference:
            checkpoint["wmrl_vla_reference"] = self._reference[0].state_dict()

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        super().on_load_checkpoint(checkpoint)
        if "wmrl_vla_reference" not in checkpoint:
            raise KeyError("this checkpoint has no VLA KL reference ('wmrl_vla_reference'): it was not written by "
                           "VLAGRPOModule; resume only from this module's checkpoints")
        self._reference_state = checkpoint["wmrl_vla_reference"]

    # -- the method (the step itself is RLModule.training_step, shared with the LLM module) ---------------
    def after_step(self, metrics: dict[str, float], batch: RolloutBatch, step: int) -> None:
        self.log("reward", metrics["reward/mean"], prog_bar=True, on_step=True, batch_size=len(batch))
        self.log("real_success", metrics["anchor/real_success"], prog_bar=True, on_step=True, batch_size=len(batch))

    def rollout(self, plan: RolloutPlan, seed: int) -> RolloutBatch:
        """Play ``group_size`` episodes per group in the simulator; grade each group in its planned environment."""
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
        return rollout_batch(trajectories, [t.group for t in trajectories], TokenRows.empty(len(trajectories)))

    def update(self, batch: RolloutBatch) -> dict[str, float]:
        """One optimizer step: advantage-weighted per-sample policy loss over every chunk of the used rows."""
        hp = self.hparams
        optimizer = self.optimizers()
        rows = batch.used.nonzero().flatten().tolist()
        samples = [(batch.trajectories[i].episode, c, float(batch.advantages[i])) for i in rows
                   for c in range(len(batch.trajectories[i].episode.chunk_starts))]
        if not samples:
            return {"loss/total": 0.0, "loss/pg": 0.0, "loss/kl": 0.0, **self.empty_step()}
        starts = [e.chunk_starts[c] for e, c, _ in samples]
        obs = observation_batch(torch.as_tensor(np.array([e.states[t] for (e, _, _), t in zip(samples, starts, strict=True)])),
                                torch.as_tensor(np.array([e.env_states[t] for (e, _, _), t in zip(samples, starts, strict=True)])))
        obs = {k: v.to(self.device) for k, v in obs.items()}
        chunk = torch.as_tensor(np.array([e.chunk_actions[c] for e, c, _ in samples])).to(self.device)
        advantage = torch.tensor([a for _, _, a in samples], dtype=torch.float32, device=self.device)
        self.policy.train()
        reference = self._reference[0] if hp.kl_coef > 0 else None
        nll, kl = self.policy.rl_loss(obs, chunk, hp.exploration_std, reference)
        pg = policy_gradient_loss(advantage, nll)
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
        """The held-out episodes (:func:`wmrl.vla.play.held_out_episodes`): noise-free, plus ``noisy`` noisy ones
        per state (the exploration noise, seeded by ``seed`` alone: the same draws at every evaluation)."""
        return held_out_episodes(self.simulator, self.policy, task_ids, noisy, self.hparams.exploration_std,
                                 self.hparams.seed)

    def _held_out(self, task_ids: list[str], split: str = "heldout") -> float:
        """Evaluate, keep the episodes (``heldout.jsonl``) and return the success rate (also logging
        ``heldout/success_noisy`` when ``eval_noisy_episodes`` > 0)."""
        episodes = self.evaluate_episodes(task_ids, self.hparams.get("eval_noisy_episodes", 0))
        success = float(np.mean([e["success"] for e in episodes]))
        # one group: the pairs are the initial states (the same seed before and after), resampled together
        self.heldout.keep(self, split, success, {"episodes": episodes},
                          paired={"initial states": [e["success"] for e in episodes]})
        if "noisy_success" in episodes[0]:
            noisy = float(np.mean([e["noisy_success"] for e in episodes]))
            for logger in self.loggers:
                logger.log_metrics({"heldout/success_noisy": noisy}, step=self.global_step)
        return success

    def on_train_start(self) -> None:
        tasks = self.trainer.datamodule.heldout_task_ids

        def before_rl() -> dict[str, float]:
            success = self._held_out(tasks)
            rank_zero_info(f"held-out success before RL: {success:.3f} ({len(tasks)} initial states)")
            return {"success": success}

        self.heldout.at_start(self, before_rl)

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
