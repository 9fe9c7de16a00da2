"""`DistortedOracle`: a world model built from the true reward through a known monotone distortion and known noise.

A learned world model's errors are whatever they are; to test each correction on its own, this world model makes
them known. It grades an episode with the true reward ``r`` (the ``oracle``'s own ``grade``: e.g. the simulator)
and returns

    r_wm = clip(offset + scale * g(r) + noise, 0, 1),   noise ~ N(0, noise_sd^2) (seeded),

with ``g`` a monotone map of [0, 1] onto itself: ``identity``, ``power`` (``r ** power``: convex above 1, concave
below) or ``logistic`` (``sigmoid(slope * (r - midpoint))``, rescaled so that ``g(0) = 0`` and ``g(1) = 1``: a squash
around ``midpoint``). Two maps that know nothing, for the test that a world model which knows nothing costs nothing:
``reverse`` (``1 - r``: it ranks backwards) and ``independent`` (``0``: with noise, a reward independent of ``r``, a
world model at chance). ``offset`` and ``scale`` are the affine part (GRPO's group standardisation cancels it: a test
of debiasing needs a non-affine ``g``); ``g`` is the *bias* (the paper's monotone score distortion), ``noise_sd`` the
*noise*. The result is clipped into [0, 1] (an ``Outcome`` reward lies there); clipping merges rewards at the ends,
so the share clipped is logged (``world_model/clipped``) and a setting should keep it small.

Anchors are side-graded the same way (``grade_trajectories``, through ``WorldModelReward``), so the calibration and
the denoiser see exactly the distortion the world-model groups get. The noise generator is checkpointed
(``state_dict``): a resumed run draws the same noise.

Deviation from the paper: none of the method; this is a diagnostic world model (``benchmarks/corrections.py``),
not a model of anything, and it reads the true reward, which a real world model never can.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np

from wmrl.types import GradesTrajectories, Outcome, ReportsMetrics, Source, Status, missing_members
from wmrl.vla.contracts import EpisodeGrader
from wmrl.vla.episode import episode_of

Distortion = Literal["identity", "power", "logistic", "reverse", "independent"]
DISTORTIONS = ("identity", "power", "logistic", "reverse", "independent")


def distort(reward, distortion: Distortion = "identity", power: float = 1.0, slope: float = 10.0,
            midpoint: float = 0.5, offset: float = 0.0, scale: float = 1.0) -> np.ndarray:
    """``offset + scale * g(reward)`` (no noise, no clipping) for the monotone ``g`` named by ``distortion``.

    >>> distort([0.0, 0.5, 1.0], "power", power=2.0).tolist()
    [0.0, 0.25, 1.0]
    >>> [round(v, 3) for v in distort([0.0, 0.5, 1.0], "logistic", slope=10.0, midpoint=0.5).tolist()]
    [0.0, 0.5, 1.0]
    >>> distort([0.2, 0.4], offset=0.3, scale=0.5).tolist()
    [0.4, 0.5]
    >>> distort([0.2, 0.9], "reverse").tolist(), distort([0.2, 0.9], "independent", offset=0.5).tolist()
    ([0.8, 0.09999999999999998], [0.5, 0.5])
    """
    r = np.clip(np.asarray(reward, dtype=np.float64), 0.0, 1.0)
    if distortion == "identity":
        g = r
    elif distortion == "power":
        g = r**power
    elif distortion == "logistic":
        def sigmoid(x):
            return 1.0 / (1.0 + np.exp(-x))

        low, high = sigmoid(slope * (0.0 - midpoint)), sigmoid(slope * (1.0 - midpoint))
        g = (sigmoid(slope * (r - midpoint)) - low) / (high - low)
    elif distortion == "reverse":
        g = 1.0 - r
    elif distortion == "independent":
        g = np.zeros_like(r)
    else:
        raise ValueError(f"distortion must be one of {', '.join(DISTORTIONS)} (got {distortion!r})")
    return offset + scale * g


class DistortedOracle(GradesTrajectories, ReportsMetrics):
    """The true reward through a known monotone distortion plus known Gaussian noise, as a world model.

    Args:
        oracle: what grades an episode with the true reward: a :class:`wmrl.vla.contracts.EpisodeGrader` (the
            simulator, e.g. ``PushTSimulator(reward: shaped)`` or :class:`~wmrl.vla.simulators.bandit.TargetBandit`).
        distortion: the monotone map ``g``: ``identity``, ``power`` or ``logistic`` (module docstring).
        power: ``power`` only: the exponent (> 0).
        slope: ``logistic`` only: the steepness (> 0).
        midpoint: ``logistic`` only: where the squash is steepest, in [0, 1].
        offset: added after ``g`` (the affine part: cancelled by group standardisation).
        scale: multiplies ``g`` (> 0; the affine part too).
        noise_sd: the standard deviation of the Gaussian noise added to every reward (>= 0).
        seed: seeds the noise.
    """

    source = Source.WORLD_MODEL

    def __init__(self, oracle: EpisodeGrader, distortion: Distortion = "identity", power: float = 1.0, slope: float = 10.0,
                 midpoint: float = 0.5, offset: float = 0.0, scale: float = 1.0, noise_sd: float = 0.0,
                 seed: int = 0) -> None:
        key = "world_model.init_args."
        checks = [
            (isinstance(oracle, EpisodeGrader), f"{key}oracle must grade episodes with the true reward (a "
                                                f"wmrl.vla.contracts.EpisodeGrader: grade(episodes) -> [Outcome]; "
                                                f"{type(oracle).__name__} lacks {missing_members(oracle, EpisodeGrader)})"),
            (distortion in DISTORTIONS, f"{key}distortion must be one of {', '.join(DISTORTIONS)} (got {distortion!r})"),
            (power > 0, f"{key}power must be > 0 (got {power})"),
            (slope > 0, f"{key}slope must be > 0 (got {slope})"),
            (0.0 <= midpoint <= 1.0, f"{key}midpoint must lie in [0, 1] (got {midpoint})"),
            (scale > 0, f"{key}scale must be > 0: a monotone increasing distortion (got {scale})"),
            (math.isfinite(offset), f"{key}offset must be finite (got {offset})"),
            (noise_sd >= 0 and math.isfinite(noise_sd), f"{key}noise_sd must be finite and >= 0 (got {noise_sd})"),
        ]
        problems = [message for ok, message in checks if not ok]
        if problems:
            raise ValueError("invalid DistortedOracle configuration:\n  - " + "\n  - ".join(problems))
        self.oracle = oracle
        self.settings = {"distortion": distortion, "power": power, "slope": slope, "midpoint": midpoint,
                         "offset": offset, "scale": scale}
        self.noise_sd = noise_sd
        self.rng = np.random.default_rng(seed)
        self.graded = 0
        self.clipped = 0

    def true_rewards(self, episodes: Sequence) -> np.ndarray:
        """``[n]`` the oracle's reward of each episode (the truth the distortion starts from)."""
        return np.array([o.reward for o in self.oracle.grade(episodes)], dtype=np.float64)

    def score_episodes(self, episodes: Sequence) -> np.ndarray:
        """``[n]`` the distorted, noisy reward of each episode, in [0, 1] (draws noise: call once per episode)."""
        values = distort(self.true_rewards(episodes), **self.settings)
        if self.noise_sd > 0:
            values = values + self.rng.normal(0.0, self.noise_sd, len(values))
        self.graded += len(values)
        self.clipped += int(((values < 0.0) | (values > 1.0)).sum())
        return np.clip(values, 0.0, 1.0)

    def grade(self, episodes: Sequence) -> list[Outcome]:
        """World-model outcomes for the episodes of a world-model group."""
        return [Outcome(Status.VALID, float(r), feedback="distorted oracle", source=Source.WORLD_MODEL)
                for r in self.score_episodes(episodes)]

    def grade_trajectories(self, trajectories: Sequence) -> list[float | None]:
        """Side-grade anchor trajectories (``EpisodeTrajectory``) exactly as world-model groups are graded."""
        episodes = [episode_of(t) for t in trajectories]
        scored = iter(self.score_episodes([e for e in episodes if e is not None]).tolist())
        return [None if e is None else next(scored) for e in episodes]

    def metrics(self) -> dict[str, float]:
        """Logged by ``WorldModelReward`` as ``world_model/*``: the share of rewards clipped into [0, 1] so far."""
        return {"parse_failures": 0.0, "clipped": self.clipped / self.graded if self.graded else 0.0}

    def state_dict(self) -> dict:
        """The noise generator and counters: a resumed run draws the same noise."""
        return {"rng": self.rng.bit_generator.state, "graded": self.graded, "clipped": self.clipped}

    def load_state_dict(self, state: dict) -> None:
        self.rng.bit_generator.state = state["rng"]
        self.graded, self.clipped = int(state["graded"]), int(state["clipped"])
