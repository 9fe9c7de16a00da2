"""The VLA wing's world models: the learned progress/success model (:mod:`~wmrl.vla.world_models.reward_model`),
the ``world_model`` environment around it (:mod:`~wmrl.vla.world_models.progress`), and an oracle with a known
distortion and noise (:mod:`~wmrl.vla.world_models.distorted_oracle`)."""
