"""`ACTChunkPolicy` and `SmolVLAChunkPolicy`: a LeRobot policy behind the calls the VLA GRPO module needs
(:class:`wmrl.vla.contracts.ChunkPolicy`). A config picks one by ``class_path``::

    policy:
      class_path: wmrl.vla.policies.chunk.ACTChunkPolicy      # or wmrl.vla.policies.chunk.SmolVLAChunkPolicy
      init_args: {chunk_size: 4, n_action_steps: 2, dim_model: 64}

Constructing one is cheap and imports nothing of LeRobot (so every config instantiates anywhere); the module calls
:meth:`LeRobotChunkPolicy.build` in ``configure_model``, after seeding torch, which builds the LeRobot policy.

* ``mean_chunk(obs)``: the policy's action chunk ``[B, H, 2]`` in the normalised action space.
* ``per_sample_loss(obs, chunk, std)``: ``[B]``, the negative log-likelihood of the executed prefix ``chunk``
  ``[B, K <= H, 2]`` of an action chunk under the
  Gaussian exploration policy ``N(mean_chunk(obs), std^2)`` (per action dimension, constants dropped):
  ``mean((chunk - mean)^2) / (2 std^2)``. Weighting it by the GRPO advantage is exactly the policy gradient of
  that Gaussian policy (one update per rollout batch, so the PPO ratio is 1 and clipping never binds).
  ACT's own ``forward`` returns a batch-mean L1 (and a VAE KL) with no per-sample reduction, so for ACT this
  per-sample loss is computed here from ``policy.model(batch)``. SmolVLA (a flow-matching policy, no
  likelihood) uses its own per-sample loss instead: ``SmolVLAPolicy.forward(batch, reduction="none")`` on the
  executed prefix (the rest of the chunk marked ``action_is_pad``), an advantage-weighted flow-matching surrogate
  (as in advantage-weighted regression), with no KL term.
* ``rl_loss(obs, chunk, std, reference)``: the per-sample loss and the KL to the frozen SFT ``reference`` (each
  policy owns its losses: ACT the Gaussian NLL and KL from one forward pass, SmolVLA its flow loss and 0).
* ``bc_loss(obs, chunk, is_pad)``: the policy's own supervised loss (ACT: L1 via ``ACTPolicy.forward``) for
  the behaviour-cloning (SFT) stage on the demonstrations.

Observations and actions are PushT pixels normalised by ``x / 256 - 1`` (fixed: no dataset statistics; LeRobot
0.6 moved normalisation into processors, which this wrapper replaces with that one affine map).

SmolVLA's inputs, built here from the state observation: ``observation.state`` ``[B, 18]`` (agent position and
block keypoints), ``observation.image`` ``[B, 3, S, S]`` (:func:`rasterise`: the agent and the block keypoints
drawn as blobs, a camera-free image of the same state; the simulator's 96 x 96 render would need an extra render
per step) and the tokenised PushT instruction (``observation.language.*``, SmolVLM's tokenizer from
``vlm_model_name``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from wmrl.vla.requirements import MissingVLADependency, require_lerobot
from wmrl.vla.world_models.reward_model import SCALE, normalise


@dataclass(frozen=True)
class PolicySettings:
    """A LeRobot policy's sizes and sources, as its class's constructor took them (the fields a policy class does
    not take keep these defaults). The meanings are on :class:`ACTChunkPolicy` and :class:`SmolVLAChunkPolicy`."""

    chunk_size: int = 8
    n_action_steps: int = 8
    dim_model: int = 64
    n_heads: int = 4
    dim_feedforward: int = 128
    n_encoder_layers: int = 1
    n_decoder_layers: int = 1
    pretrained_path: str | None = None
    vlm_model_name: str | None = None
    image_size: int = 32
    num_steps: int = 4


def observation_batch(state: torch.Tensor, env_state: torch.Tensor) -> dict[str, torch.Tensor]:
    """LeRobot's observation batch from raw PushT pixels ``[B, 2]`` and ``[B, 16]``."""
    return {"observation.state": normalise(state.float()), "observation.environment_state": normalise(env_state.float())}


def to_pixels(actions: torch.Tensor) -> torch.Tensor:
    """Normalised actions -> PushT pixels (inverse of ``normalise``)."""
    return (actions + 1.0) * SCALE


class LeRobotChunkPolicy(nn.Module):
    """What both LeRobot policies share: their settings (``init_args``), a cheap constructor and :meth:`build`,
    the wrapped LeRobot ``policy`` (its parameters are this module's, so checkpoints hold ``policy.*``), its chunk
    sizes, and ``save_pretrained``."""

    def __init__(self, **settings: Any) -> None:
        super().__init__()
        self.settings = PolicySettings(**settings)
        self.init_args = dict(settings)  # what the config gave, for the checkpoint's hyperparameters
        self.chunk_size, self.n_action_steps = self.settings.chunk_size, self.settings.n_action_steps
        self.policy: nn.Module | None = None  # the LeRobot policy, once built

    @property
    def pretrained_path(self) -> str | None:
        return self.settings.pretrained_path

    def config(self) -> dict[str, Any]:
        """``{"class_path", "init_args"}``: this policy as a config names it (plain values: checkpoints load with
        ``torch.load(weights_only=True)``)."""
        cls = type(self)
        return {"class_path": f"{cls.__module__}.{cls.__qualname__}", "init_args": dict(self.init_args)}

    def problems(self, key: str, kl_coef: float) -> list[str]:
        """What is wrong with these settings for a module with ``kl_coef`` (``key``: the config key)."""
        s = self.settings
        if s.chunk_size < 1 or not 1 <= s.n_action_steps <= s.chunk_size:
            return [f"{key}.init_args.n_action_steps must be in [1, chunk_size={s.chunk_size}] (got {s.n_action_steps})"]
        return []

    def missing_paths(self, key: str) -> list[str]:
        """Local paths that do not exist (checked when the policy is built, so configs instantiate anywhere)."""
        path = self.settings.pretrained_path
        if path is not None and not Path(path).is_dir():
            return [f"{key}.pretrained_path {path!r} is not a local directory: give a LeRobot policy saved with "
                    "save_pretrained, or null for a fresh policy"]
        return []

    def build(self) -> LeRobotChunkPolicy:
        """Build the LeRobot policy (once; imports LeRobot) and return ``self``."""
        if self.policy is None:
            require_lerobot(f"the {type(self).__name__} policy")
            missing = self.missing_paths("model.init_args.policy.init_args")
            if missing:
                raise FileNotFoundError("\n".join(missing))
            self.policy = self.lerobot_policy()
            self.chunk_size = self.policy.config.chunk_size  # a pretrained policy's config wins over the settings
            self.n_action_steps = self.policy.config.n_action_steps
        return self

    def lerobot_policy(self) -> nn.Module:
        raise NotImplementedError

    def save_pretrained(self, path: str | Path) -> None:
        self.policy.save_pretrained(str(path))


class ACTChunkPolicy(LeRobotChunkPolicy):
    """LeRobot's ACT as a Gaussian policy around its action chunk (see the module docstring): it gives the per-sample
    NLL from the differentiable ``mean_chunk`` and the closed-form KL to its reference.

    Args:
        chunk_size: actions predicted per call (``H``).
        n_action_steps: actions of each chunk executed before the policy is called again.
        dim_model: the transformer width.
        n_heads: attention heads.
        dim_feedforward: the feed-forward width.
        n_encoder_layers: encoder layers.
        n_decoder_layers: decoder layers.
        pretrained_path: a local LeRobot ACT directory (``save_pretrained`` output) to start from; its config wins
            over the size fields. ``null``: a fresh policy (then the SFT stage trains it).
    """

    def __init__(self, chunk_size: int = 8, n_action_steps: int = 8, dim_model: int = 64, n_heads: int = 4,
                 dim_feedforward: int = 128, n_encoder_layers: int = 1, n_decoder_layers: int = 1,
                 pretrained_path: str | None = None) -> None:
        super().__init__(chunk_size=chunk_size, n_action_steps=n_action_steps, dim_model=dim_model, n_heads=n_heads,
                         dim_feedforward=dim_feedforward, n_encoder_layers=n_encoder_layers,
                         n_decoder_layers=n_decoder_layers, pretrained_path=pretrained_path)

    def lerobot_policy(self) -> nn.Module:
        from lerobot.policies.act.modeling_act import ACTPolicy

        if self.settings.pretrained_path is not None:
            return ACTPolicy.from_pretrained(self.settings.pretrained_path)
        return ACTPolicy(act_config(self.settings))

    def mean_chunk(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """``[B, H, 2]`` the policy's action chunk (normalised), differentiable."""
        actions, _ = self.policy.model(dict(obs))
        return actions

    def per_sample_loss(self, obs: dict[str, torch.Tensor], chunk: torch.Tensor, std: float) -> torch.Tensor:
        """``[B]`` the Gaussian NLL per action dimension of the executed normalised ``chunk`` (computed here:
        ACT's ``forward`` has no per-sample reduction)."""
        from wmrl.algorithms.gaussian import chunk_nll

        return chunk_nll(chunk, self.mean_chunk(obs)[:, : chunk.shape[1]], std)  # the executed prefix of the chunk

    def rl_loss(self, obs: dict[str, torch.Tensor], chunk: torch.Tensor, std: float,
                reference: ACTChunkPolicy | None) -> tuple[torch.Tensor, torch.Tensor]:
        """The Gaussian NLL ``[B]`` and the closed-form KL to ``reference``, from one forward pass."""
        from wmrl.algorithms.gaussian import gaussian_rl_loss

        return gaussian_rl_loss(self.mean_chunk, obs, chunk, std, None if reference is None else reference.mean_chunk)

    def bc_loss(self, obs: dict[str, torch.Tensor], chunk: torch.Tensor, is_pad: torch.Tensor) -> torch.Tensor:
        """ACT's own supervised loss on demonstration chunks (masked L1 via ``ACTPolicy.forward``)."""
        loss, _ = self.policy.forward({**obs, "action": chunk, "action_is_pad": is_pad})
        return loss


class SmolVLAChunkPolicy(LeRobotChunkPolicy):
    """LeRobot's SmolVLA (flow matching, no likelihood): it gives its own per-sample loss, the advantage-weighted
    flow-matching surrogate, and has no KL term, so ``model.init_args.kl_coef`` must be 0 (see the module
    docstring).

    Args:
        chunk_size: actions predicted per call (``H``).
        n_action_steps: actions of each chunk executed before the policy is called again.
        dim_model: the tiny SmolVLM's text-model width (``vlm_model_name: null`` only).
        n_heads: the tiny SmolVLM's attention heads (must divide ``dim_model``).
        dim_feedforward: the tiny SmolVLM's feed-forward width.
        n_encoder_layers: the tiny SmolVLM's text-model layers.
        pretrained_path: a local LeRobot SmolVLA directory (``save_pretrained`` output) to start from; its config
            wins over the other fields. ``null``: a fresh policy.
        vlm_model_name: a local SmolVLM directory whose weights are loaded (e.g. a downloaded
            ``SmolVLM2-500M-Video-Instruct``; never a hub id). ``null``: a tiny SmolVLM generated in-process
            (:mod:`wmrl.vla.policies.smolvlm`, random weights) of the sizes above; the CPU configuration.
        image_size: side of the rasterised observation image (a multiple of 16).
        num_steps: flow-matching denoising steps per action chunk.
    """

    def __init__(self, chunk_size: int = 8, n_action_steps: int = 8, dim_model: int = 64, n_heads: int = 4,
                 dim_feedforward: int = 128, n_encoder_layers: int = 1, pretrained_path: str | None = None,
                 vlm_model_name: str | None = None, image_size: int = 32, num_steps: int = 4) -> None:
        super().__init__(chunk_size=chunk_size, n_action_steps=n_action_steps, dim_model=dim_model, n_heads=n_heads,
                         dim_feedforward=dim_feedforward, n_encoder_layers=n_encoder_layers,
                         pretrained_path=pretrained_path, vlm_model_name=vlm_model_name, image_size=image_size,
                         num_steps=num_steps)
        self._tokens: dict[str, torch.Tensor] = {}

    def problems(self, key: str, kl_coef: float) -> list[str]:
        s, out = self.settings, super().problems(key, kl_coef)
        if kl_coef != 0:
            out.append(f"model.init_args.kl_coef must be 0 for {key} SmolVLAChunkPolicy (got {kl_coef}): a "
                       "flow-matching policy has no closed-form KL to its reference; its update is the "
                       "advantage-weighted flow-matching loss")
        if s.image_size < 16 or s.image_size % 16:
            out.append(f"{key}.init_args.image_size must be a positive multiple of 16 (got {s.image_size})")
        if s.num_steps < 1:
            out.append(f"{key}.init_args.num_steps must be >= 1 (got {s.num_steps})")
        if s.pretrained_path is None and s.vlm_model_name is None and s.dim_model % s.n_heads:
            out.append(f"{key}.init_args.n_heads must divide dim_model for the tiny SmolVLM (got {s.n_heads}, "
                       f"{s.dim_model})")
        return out

    def missing_paths(self, key: str) -> list[str]:
        out, name = super().missing_paths(key), self.settings.vlm_model_name
        if name is not None and not Path(name).is_dir():
            out.append(f"{key}.vlm_model_name {name!r} is not a local directory (wmrl never downloads a backbone): "
                       "build or copy a SmolVLM checkpoint there")
        return out

    def lerobot_policy(self) -> nn.Module:
        policy = smolvla_policy(self.settings)
        self._tokens = language_tokens(policy)
        return policy

    def smolvla_batch(self, obs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """SmolVLA's observation batch from the state observation (see the module docstring)."""
        state, env_state = obs["observation.state"], obs["observation.environment_state"]
        count = len(state)
        return {
            "observation.state": torch.cat([state, env_state], dim=1),
            "observation.image": rasterise(state, env_state, self.settings.image_size),
            "observation.language.tokens": self._tokens["input_ids"].to(state.device).expand(count, -1),
            "observation.language.attention_mask": self._tokens["attention_mask"].to(state.device).expand(count, -1),
        }

    def mean_chunk(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """``[B, H, 2]`` a chunk sampled by its flow (from torch's global generator), not differentiated."""
        with torch.no_grad():
            return self.policy.predict_action_chunk(self.smolvla_batch(obs))

    def per_sample_loss(self, obs: dict[str, torch.Tensor], chunk: torch.Tensor, std: float) -> torch.Tensor:
        """``[B]`` its flow-matching loss on the executed prefix, ``forward(batch, reduction="none")`` (``std``
        unused)."""
        return self.flow_loss(obs, chunk, reduction="none")

    def rl_loss(self, obs: dict[str, torch.Tensor], chunk: torch.Tensor, std: float,
                reference: None) -> tuple[torch.Tensor, torch.Tensor]:
        """The flow-matching per-sample loss and no KL (``model.init_args.kl_coef`` is 0 for SmolVLA)."""
        return self.per_sample_loss(obs, chunk, std), torch.zeros((), device=chunk.device)

    def bc_loss(self, obs: dict[str, torch.Tensor], chunk: torch.Tensor, is_pad: torch.Tensor) -> torch.Tensor:
        """Its own supervised loss on demonstration chunks (flow matching)."""
        return self.flow_loss(obs, chunk, is_pad=is_pad)

    def flow_loss(self, obs: dict[str, torch.Tensor], chunk: torch.Tensor, is_pad: torch.Tensor | None = None,
                  reduction: str = "mean") -> torch.Tensor:
        """SmolVLA's loss on ``chunk`` ``[B, K <= H, 2]``, padded to ``H`` with the positions past ``K`` masked."""
        count, executed = chunk.shape[:2]
        if executed < self.chunk_size:
            pad = torch.ones(count, self.chunk_size, dtype=torch.bool, device=chunk.device)
            pad[:, :executed] = False if is_pad is None else is_pad
            chunk = torch.cat([chunk, chunk[:, -1:].expand(count, self.chunk_size - executed, -1)], dim=1)
            is_pad = pad
        batch = {**self.smolvla_batch(obs), "action": chunk}
        if is_pad is not None:
            batch["action_is_pad"] = is_pad
        loss, _ = self.policy.forward(batch, reduction=reduction)
        return loss


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


def rasterise(state: torch.Tensor, env_state: torch.Tensor, size: int) -> torch.Tensor:
    """``[B, 3, size, size]`` in [0, 1]: the agent (red) and the block's 8 keypoints (green) as Gaussian blobs,
    from normalised ``state`` ``[B, 2]`` and ``env_state`` ``[B, 16]`` (coordinates in [-1, 1]).

    >>> image = rasterise(torch.zeros(1, 2), torch.zeros(1, 16), 16)
    >>> tuple(image.shape), round(float(image[0, 0, 8, 8]), 2), float(image[0, 2].max())
    ((1, 3, 16, 16), 0.89, 0.0)
    """
    grid = (torch.arange(size, dtype=state.dtype, device=state.device) + 0.5) / size * 2 - 1  # pixel centres
    sigma = 2.0 / size * 1.5

    def blobs(points: torch.Tensor) -> torch.Tensor:  # [B, P, 2] -> [B, size, size]
        dx = (grid[None, None, None, :] - points[..., 0, None, None]) ** 2  # [B, P, 1, size]
        dy = (grid[None, None, :, None] - points[..., 1, None, None]) ** 2  # [B, P, size, 1]
        return torch.exp(-(dx + dy) / (2 * sigma**2)).amax(dim=1)

    agent = blobs(state[:, None, :])
    block = blobs(env_state.view(len(env_state), 8, 2))
    return torch.stack([agent, block, torch.zeros_like(agent)], dim=1)


def smolvla_policy(settings: PolicySettings):
    """A LeRobot SmolVLA: from ``pretrained_path``, or fresh on ``vlm_model_name`` (loaded weights) or on a tiny
    SmolVLM generated in-process (``vlm_model_name: null``)."""
    from lerobot.policies.smolvla.modeling_smolvla import SmolVLAPolicy

    if settings.pretrained_path is not None:
        return SmolVLAPolicy.from_pretrained(settings.pretrained_path)
    return SmolVLAPolicy(smolvla_config(settings))


def smolvla_config(settings: PolicySettings):
    """SmolVLA for state-derived PushT observations (see the module docstring); identity normalisation."""
    try:
        import transformers  # noqa: F401
        from lerobot.policies.smolvla.configuration_smolvla import SmolVLAConfig
    except ImportError as error:
        raise MissingVLADependency(
            f"wmrl.vla.policies.chunk.SmolVLAChunkPolicy needs LeRobot's smolvla extra (transformers): {error}. Fix: "
            ".venv312/bin/pip install -c constraints-vla.txt 'lerobot[pusht,smolvla]==0.6.1' (docs/vla.md)"
        ) from error
    from lerobot.configs.types import FeatureType, NormalizationMode, PolicyFeature

    if settings.vlm_model_name is None:
        vlm = tiny_smolvlm_dir(settings)
        load_weights, layers = False, settings.n_encoder_layers
    else:
        vlm, load_weights, layers = settings.vlm_model_name, True, -1  # all layers of the given backbone
    size = settings.image_size
    return SmolVLAConfig(
        input_features={
            "observation.state": PolicyFeature(type=FeatureType.STATE, shape=(18,)),
            "observation.image": PolicyFeature(type=FeatureType.VISUAL, shape=(3, size, size)),
        },
        output_features={"action": PolicyFeature(type=FeatureType.ACTION, shape=(2,))},
        normalization_mapping={"VISUAL": NormalizationMode.IDENTITY, "STATE": NormalizationMode.IDENTITY,
                               "ACTION": NormalizationMode.IDENTITY},
        chunk_size=settings.chunk_size,
        n_action_steps=settings.n_action_steps,
        vlm_model_name=str(vlm),
        load_vlm_weights=load_weights,
        num_vlm_layers=layers,
        resize_imgs_with_padding=(size, size),
        tokenizer_max_length=48,
        num_steps=settings.num_steps,
        device="cpu",
    )


_TINY_DIRS: dict[tuple, Path] = {}


def tiny_smolvlm_dir(settings: PolicySettings) -> Path:
    """A tiny SmolVLM directory for these settings, written once per process to a temporary directory."""
    import atexit
    import shutil
    import tempfile

    from wmrl.vla.policies.smolvlm import write_tiny_smolvlm

    key = (settings.dim_model, settings.dim_feedforward, settings.n_encoder_layers, settings.n_heads,
           settings.image_size)
    if key not in _TINY_DIRS:
        path = Path(tempfile.mkdtemp(prefix="wmrl_tiny_smolvlm_"))
        atexit.register(shutil.rmtree, path, ignore_errors=True)
        _TINY_DIRS[key] = write_tiny_smolvlm(path, hidden_size=settings.dim_model,
                                             intermediate_size=settings.dim_feedforward,
                                             num_layers=settings.n_encoder_layers, num_heads=settings.n_heads,
                                             image_size=settings.image_size)
    return _TINY_DIRS[key]


def language_tokens(policy) -> dict[str, torch.Tensor]:
    """The PushT instruction tokenised by the policy's SmolVLM tokenizer (a newline appended, as LeRobot does)."""
    from wmrl.vla.episode import PUSHT_TASK

    tokenizer = policy.model.vlm_with_expert.processor.tokenizer
    tokens = tokenizer(PUSHT_TASK + "\n", return_tensors="pt", truncation=True,
                       max_length=policy.config.tokenizer_max_length)
    return {"input_ids": tokens["input_ids"], "attention_mask": tokens["attention_mask"].bool()}
