"""`VLAPolicy`: a LeRobot policy (ACT; SmolVLA second) behind the three calls the VLA GRPO module needs.

* ``mean_chunk(obs)``: the policy's action chunk ``[B, H, 2]`` in the normalised action space.
* ``per_sample_loss(obs, chunk, std)``: ``[B]``, the negative log-likelihood of the executed prefix ``chunk``
  ``[B, K <= H, 2]`` of an action chunk under the
  Gaussian exploration policy ``N(mean_chunk(obs), std^2)`` (per action dimension, constants dropped):
  ``mean((chunk - mean)^2) / (2 std^2)``. Weighting it by the GRPO advantage is exactly the policy gradient of
  that Gaussian policy (one update per rollout batch, so the PPO ratio is 1 and clipping never binds).
  ACT's own ``forward`` returns a batch-mean L1 (and a VAE KL) with no per-sample reduction, so for ACT this
  per-sample loss is computed here from ``policy.model(batch)``. Policies whose ``forward`` supports
  ``reduction="none"`` (SmolVLA, pi0) use that per-sample loss instead (an advantage-weighted surrogate, not
  a likelihood).
* ``bc_loss(obs, chunk, is_pad)``: the policy's own supervised loss (ACT: L1 via ``ACTPolicy.forward``) for
  the behaviour-cloning (SFT) stage on the demonstrations.

Observations and actions are PushT pixels normalised by ``x / 256 - 1`` (fixed: no dataset statistics; LeRobot
0.6 moved normalisation into processors, which this wrapper replaces with that one affine map).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch
from torch import nn

from wmrl.vla.requirements import require_lerobot
from wmrl.vla.reward_model import SCALE, normalise

PolicyType = Literal["act", "smolvla"]


@dataclass(frozen=True)
class PolicySettings:
    """Which LeRobot policy to post-train and how big it is.

    Attributes:
        type: ``act`` (CPU default) or ``smolvla``.
        chunk_size: actions predicted per call (``H``).
        n_action_steps: actions of each chunk executed before the policy is called again.
        dim_model / n_heads / dim_feedforward / n_encoder_layers / n_decoder_layers: ACT's transformer size.
        pretrained_path: a local LeRobot policy directory (``save_pretrained`` output) to start from; its
            config wins over the size fields. ``null``: a fresh policy (then the SFT stage trains it).
        vlm_model_name: SmolVLA only: a local SmolVLM directory (never a hub id).
    """

    type: PolicyType = "act"
    chunk_size: int = 8
    n_action_steps: int = 8
    dim_model: int = 64
    n_heads: int = 4
    dim_feedforward: int = 128
    n_encoder_layers: int = 1
    n_decoder_layers: int = 1
    pretrained_path: str | None = None
    vlm_model_name: str | None = None

    def problems(self, key: str) -> list[str]:
        out = []
        if self.type not in ("act", "smolvla"):
            out.append(f"{key}.type must be act or smolvla (got {self.type!r})")
        if self.chunk_size < 1 or not 1 <= self.n_action_steps <= self.chunk_size:
            out.append(f"{key}.n_action_steps must be in [1, chunk_size={self.chunk_size}] (got {self.n_action_steps})")
        return out

    def missing_paths(self, key: str) -> list[str]:
        """Local paths that do not exist (checked when the policy is built, so configs instantiate anywhere)."""
        out = []
        if self.pretrained_path is not None and not Path(self.pretrained_path).is_dir():
            out.append(f"{key}.pretrained_path {self.pretrained_path!r} is not a local directory: give a LeRobot "
                       "policy saved with save_pretrained, or null for a fresh policy")
        if self.type == "smolvla" and self.vlm_model_name is not None and not Path(self.vlm_model_name).is_dir():
            out.append(f"{key}.vlm_model_name {self.vlm_model_name!r} is not a local directory (wmrl never downloads "
                       "a backbone): build or copy a SmolVLM checkpoint there")
        return out


def observation_batch(state: torch.Tensor, env_state: torch.Tensor) -> dict[str, torch.Tensor]:
    """LeRobot's observation batch from raw PushT pixels ``[B, 2]`` and ``[B, 16]``."""
    return {"observation.state": normalise(state.float()), "observation.environment_state": normalise(env_state.float())}


def to_pixels(actions: torch.Tensor) -> torch.Tensor:
    """Normalised actions -> PushT pixels (inverse of ``normalise``)."""
    return (actions + 1.0) * SCALE


class VLAPolicy(nn.Module):
    """A LeRobot policy with the RL module's three calls (see the module docstring)."""

    def __init__(self, settings: PolicySettings) -> None:
        super().__init__()
        require_lerobot(f"the {settings.type} policy")
        missing = settings.missing_paths("model.init_args.policy")
        if missing:
            raise FileNotFoundError("\n".join(missing))
        self.settings = settings
        if settings.type != "act":
            raise NotImplementedError(
                "model.init_args.policy.type: smolvla is not wired into the VLA GRPO module yet (docs/vla.md, "
                "'What is not done'); use act"
            )
        from lerobot.policies.act.modeling_act import ACTPolicy

        if settings.pretrained_path is not None:
            self.policy = ACTPolicy.from_pretrained(settings.pretrained_path)
        else:
            self.policy = ACTPolicy(act_config(settings))
        self.chunk_size = self.policy.config.chunk_size
        self.n_action_steps = self.policy.config.n_action_steps

    def mean_chunk(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """``[B, H, 2]`` the policy's action chunk (normalised); differentiable."""
        actions, _ = self.policy.model(dict(obs))
        return actions

    def per_sample_loss(self, obs: dict[str, torch.Tensor], chunk: torch.Tensor, std: float) -> torch.Tensor:
        """``[B]`` Gaussian NLL per action dimension of the executed normalised ``chunk`` (computed here: ACT's
        ``forward`` has no per-sample reduction)."""
        mean = self.mean_chunk(obs)[:, : chunk.shape[1]]  # the executed prefix of the chunk
        return ((chunk - mean) ** 2).mean(dim=(1, 2)) / (2 * std**2)

    def bc_loss(self, obs: dict[str, torch.Tensor], chunk: torch.Tensor, is_pad: torch.Tensor) -> torch.Tensor:
        """The policy's own supervised loss on demonstration chunks (ACT: masked L1)."""
        loss, _ = self.policy.forward({**obs, "action": chunk, "action_is_pad": is_pad})
        return loss

    def save_pretrained(self, path: str | Path) -> None:
        self.policy.save_pretrained(str(path))


def act_config(settings: PolicySettings):
    """A state-based ACT config for PushT (agent position + block keypoints in, target position out)."""
    from lerobot.configs.types import FeatureType, NormalizationMode, PolicyFeature
    from lerobot.policies.act.configuration_act import ACTConfig

    return ACTConfig(
        input_features={
            "observation.state": PolicyFeature(type=FeatureType.STATE, shape=(2,)),
            "observation.environment_state": PolicyFeature(type=FeatureType.ENV, shape=(16,)),
        },
        output_features={"action": PolicyFeature(type=FeatureType.ACTION, shape=(2,))},
        normalization_mapping={"STATE": NormalizationMode.IDENTITY, "ENV": NormalizationMode.IDENTITY,
                               "ACTION": NormalizationMode.IDENTITY},
        chunk_size=settings.chunk_size,
        n_action_steps=settings.n_action_steps,
        dim_model=settings.dim_model,
        n_heads=settings.n_heads,
        dim_feedforward=settings.dim_feedforward,
        n_encoder_layers=settings.n_encoder_layers,
        n_decoder_layers=settings.n_decoder_layers,
        use_vae=False,  # the RL policy is the deterministic chunk plus Gaussian exploration noise
        dropout=0.0,
        pretrained_backbone_weights=None,
        device="cpu",
    )
