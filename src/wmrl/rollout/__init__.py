"""The multi-turn AutoResearch agent loop (:mod:`wmrl.rollout.agent`): the policy writes a script each turn, its
environment answers, and the turns are laid out as the tokens the GRPO update trains on. The engines it samples
with are in :mod:`wmrl.generation`."""
