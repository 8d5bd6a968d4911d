"""CleanRL-style actor-critic MLP for flat (Box) observations."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions import Distribution

from srl_lab.api.policy import ActionHead, Policy, layer_init


def _tanh_by_sigmoid(x: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(x * 2).mul_(2).sub_(1)  # = tanh(x), within 2e-7 of torch.tanh


class _TanhBySigmoid(torch.autograd.Function):
    """tanh's value from sigmoid, tanh's own backward."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        y = _tanh_by_sigmoid(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return torch.ops.aten.tanh_backward(grad, y)


class Tanh(nn.Module):
    """``nn.Tanh`` at a third of its cost on large CPU batches: torch's CPU tanh is about 4x slower
    than its sigmoid (0.9 vs 0.2 ms for 4096 x 64 on one core), and it was most of a small MLP's
    forward pass. Small tensors keep torch's tanh, cheaper than the extra calls."""

    SMALL = 8192  # elements

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.numel() < self.SMALL:
            return torch.tanh(x)
        if torch.is_grad_enabled() and x.requires_grad:
            return _TanhBySigmoid.apply(x)
        return _tanh_by_sigmoid(x)


def mlp(in_dim: int, hidden: tuple[int, ...]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for width in hidden:
        layers += [layer_init(nn.Linear(in_dim, width)), Tanh()]
        in_dim = width
    return nn.Sequential(*layers)


class MLPPolicy(Policy):
    """Separate actor and critic MLPs (tanh). Refuses dict observations: flattening entities into
    an MLP leaks hidden state in hide-and-seek, use the entity-attention model there."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space,
                 hidden: tuple[int, ...] = (64, 64)):
        super().__init__(observation_space, action_space)
        if not isinstance(observation_space, gym.spaces.Box):
            raise TypeError(
                f"MLPPolicy needs a Box observation space, got {type(observation_space).__name__}; "
                "give policy.factory a model for structured observations")
        in_dim = int(np.prod(observation_space.shape))
        width = hidden[-1] if hidden else in_dim
        self.actor = mlp(in_dim, hidden)
        self.critic = nn.Sequential(mlp(in_dim, hidden), layer_init(nn.Linear(width, 1), std=1.0))
        self.head = ActionHead(action_space, width)

    def distribution_and_value(self, obs: torch.Tensor) -> tuple[Distribution, torch.Tensor]:
        flat = obs.reshape(obs.shape[0], -1)
        return self.head(self.actor(flat)), self.critic(flat).squeeze(-1)
