"""wmrl's VLA path: GRPO post-training of LeRobot policies with a world model's rewards (docs/vla.md).

The WMRL callbacks (``wmrl.callbacks``: AnchorRouting, WorldModelReward, OnlineDebiasing,
InverseVarianceDenoising) work here unchanged, through the same RL hooks and typed ``RolloutPlan`` /
``RolloutBatch`` as the AutoResearch path. One concept per file:

- ``simulator``: :class:`PushTSimulator` (gym-pusht, sparse success; the real environment)
- ``scripted``: :class:`ScriptedPushTPolicy` (the demonstrator)
- ``episode``: :class:`Episode`, :class:`EpisodeTrajectory` (an embodied rollout as the hooks see it)
- ``dataset``: episodes <-> a local ``LeRobotDataset``
- ``policy``: :class:`ACTChunkPolicy` and :class:`SmolVLAChunkPolicy` (LeRobot policies behind the calls the RL update needs;
  a config picks one by ``class_path``, each owns its losses)
- ``play``: :class:`PolicyController` (the policy's chunks plus seeded exploration noise) and the held-out episodes
- ``smolvlm``: a tiny SmolVLM backbone directory generated locally (SmolVLA on CPU)
- ``libero``: :class:`LiberoSimulator` (LIBERO for GPU machines; checks for the package, rollouts not wired yet)
- ``reward_model``: :class:`ProgressRewardModel` (``compute_reward(batch)``) and the shaped trajectory reward
- ``progress_world_model``: :class:`ProgressWorldModel` (the progress model as the ``world_model`` environment)
- ``recorder``: :class:`AnchorEpisodeRecorder` (anchor episodes into a LeRobotDataset)
- ``warm_start``: :class:`BehaviourCloningWarmStart` (the SFT stage before RL, a callback; behaviour cloning lives there only)

The wing's training parts: ``grpo`` (:class:`~wmrl.vla.grpo.VLAGRPOModule`, the RL update) and ``data``
(:class:`~wmrl.vla.data.lerobot.LeRobotVLADataModule`: demonstrations, train / held-out initial states).

LeRobot needs Python >= 3.12 and the ``wmrl[lerobot]`` extra; importing this package never imports LeRobot
(:func:`wmrl.vla.requirements.require_lerobot` names the fix where it is needed).
"""
