"""Actor-critic for flat (Box) observations: tanh MLP trunks, optional LSTM, observation normaliser."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
from torch import nn

from srl_lab.models.actor_critic import ActorCriticPolicy
from srl_lab.models.mlp import mlp


class MLPLSTMPolicy(ActorCriticPolicy):
    """Separate actor and critic MLPs (``hidden`` widths), each followed by an LSTM when ``recurrent``.

    Unlike ``models.mlp.MLPPolicy`` it carries the running observation statistics ``PPOConfig.norm_obs``
    updates, and the recurrent interface of ``models.actor_critic``.
    """

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, hidden: tuple[int, ...] = (64, 64),
                 recurrent: bool = False):
        if not isinstance(observation_space, gym.spaces.Box) or not hidden:
            raise TypeError("MLPLSTMPolicy needs a Box observation space and at least one hidden layer")
        super().__init__(observation_space, action_space, recurrent)
        in_dim = int(np.prod(observation_space.shape))

        def trunk() -> nn.Module:
            return nn.Sequential(nn.Flatten(), mlp(in_dim, hidden))

        self.build(actor_trunk=trunk(), critic_trunk=trunk(), hidden=hidden[-1])
