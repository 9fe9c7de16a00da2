"""The VLA wing's data modules: seeded initial states split into training and held-out ones.

- ``initial_states``: :class:`~wmrl.vla.data.initial_states.InitialStatesDataModule`, the shared split
- ``lerobot``: :class:`~wmrl.vla.data.lerobot.LeRobotVLADataModule`, PushT with its demonstrations
- ``bandit``: :class:`~wmrl.vla.data.bandit.BanditDataModule`, the target bandit's contexts
"""
