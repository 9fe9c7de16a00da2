"""The VLA wing's data modules: seeded initial states split into training and held-out ones.

- ``initial_states``: :class:`~wmrl.vla.datamodule.initial_states.InitialStatesDataModule`, the shared split
- ``lerobot``: :class:`~wmrl.vla.datamodule.lerobot.LeRobotVLADataModule`, PushT with its demonstrations
- ``bandit_contexts``: :class:`~wmrl.vla.datamodule.bandit_contexts.BanditDataModule`, the target bandit's contexts
"""
