"""wmrl's VLA wing: GRPO post-training of LeRobot policies with a world model's rewards (docs/vla.md).

The WMRL callbacks (``wmrl.callbacks``: AnchorRouting, WorldModelReward, OnlineDebiasing, VarianceFusion, ...)
work here unchanged, through the same RL hooks and typed ``RolloutPlan`` / ``RolloutBatch`` as the AutoResearch
wing. The wing has the AutoResearch wing's shape, one role per folder or file:

- ``module``: :class:`~wmrl.vla.module.VLAGRPOModule`, the LightningModule (a config's ``model:``; its settings are
  checked in ``settings``)
- ``datamodule/``: the LightningDataModules (a config's ``data:``): seeded initial states split into training and
  held-out ones (``initial_states``), PushT with its demonstrations (``lerobot``), the bandit's contexts
  (``bandit_contexts``)
- ``simulators/``: the real environments: PushT (``pusht``, gym-pusht, sparse success), LIBERO for GPU machines
  (``libero``), and a one-step contextual bandit for controlled tests of the corrections (``bandit``)
- ``world_models/``: what stands in for the simulator: the learned progress model (``reward_model``) and the
  ``world_model`` environment around it (``progress``), and an oracle with known distortion (``distorted_oracle``)
- ``policies/``: the LeRobot policies behind the calls the RL update needs (``chunk``: ACT and SmolVLA, picked by
  ``class_path``, each owning its losses), the tiny SmolVLM backbone generated locally (``smolvlm``) and the
  scripted demonstrator (``scripted``)
- the wing's records and callbacks: ``episode`` (an embodied rollout as the hooks see it), ``play`` (the policy
  playing a simulator, held-out episodes), ``dataset`` (episodes <-> a local ``LeRobotDataset``), ``recorder``
  (anchor episodes into a dataset), ``warm_start`` (the SFT stage before RL, a callback), ``requirements``

LeRobot needs Python >= 3.12 and the ``wmrl[lerobot]`` extra; importing this package never imports LeRobot
(:func:`wmrl.vla.requirements.require_lerobot` names the fix where it is needed).
"""
