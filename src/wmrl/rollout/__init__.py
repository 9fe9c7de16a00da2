"""Finished rollouts as the typed batch the RL hooks see (:mod:`wmrl.rollout.batch`), for every domain: a domain's
rollout loop (an agent's turns, a policy's episodes) lives in its wing and hands its trajectories and token rows
here."""
