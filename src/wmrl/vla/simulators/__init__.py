"""The VLA wing's real environments: :mod:`~wmrl.vla.simulators.pusht` (gym-pusht, sparse success),
:mod:`~wmrl.vla.simulators.libero` (LIBERO, for GPU machines) and :mod:`~wmrl.vla.simulators.bandit` (a one-step
contextual bandit for controlled tests of the corrections)."""
