"""Running observation statistics that live inside a policy, so actors receive them with the weights.

The trainer updates them from each batch (``PPOConfig.norm_obs``); they are buffers, so
``Policy.weights()`` ships them to the actors and checkpoints keep them. Until the first update a
normaliser is the identity.
"""
from __future__ import annotations

import gymnasium as gym
import torch
from torch import nn

from srl_lab.api.policy import TensorObs


class RunningMeanStd(nn.Module):
    """Mean and variance of the last axis over all samples seen, merged batch by batch."""

    def __init__(self, size: int, clip: float = 10.0, eps: float = 1e-8):
        super().__init__()
        self.clip = clip
        self.eps = eps
        self.register_buffer("mean", torch.zeros(size))
        self.register_buffer("var", torch.ones(size))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        x = x.reshape(-1, x.shape[-1]).to(self.mean.dtype)
        n = x.shape[0]
        if n == 0:
            return
        # Merge two (mean, variance, count) summaries: the parallel-variance formula.
        batch_mean, batch_var = x.mean(0), x.var(0, unbiased=False)
        total = self.count + n
        delta = batch_mean - self.mean
        m2 = self.var * self.count + batch_var * n + delta.pow(2) * self.count * n / total
        self.mean += delta * (n / total).to(self.mean.dtype)
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.count:
            return x
        return ((x - self.mean) / torch.sqrt(self.var + self.eps)).clamp(-self.clip, self.clip)


class ObsNormalizer(nn.Module):
    """Normalises a Box observation, or every feature array of a Dict one (``mask_*`` keys pass through).

    Statistics are per feature (the last axis), shared by all entities of an entity array.
    """

    def __init__(self, space: gym.Space):
        super().__init__()
        if isinstance(space, gym.spaces.Dict):
            self.stats = nn.ModuleDict({key: RunningMeanStd(sub.shape[-1]) for key, sub in space.spaces.items()
                                        if not key.startswith("mask_") and sub.shape and sub.shape[-1] > 0})
        else:
            self.stats = RunningMeanStd(space.shape[-1])

    def update(self, obs: TensorObs) -> None:
        if isinstance(self.stats, RunningMeanStd):
            self.stats.update(obs)
            return
        for key, stats in self.stats.items():
            stats.update(obs[key])

    def forward(self, obs: TensorObs) -> TensorObs:
        if isinstance(self.stats, RunningMeanStd):
            return self.stats(obs)
        return {key: self.stats[key](x) if key in self.stats else x for key, x in obs.items()}
