"""Separate actor and critic trunks with an optional LSTM each: the shape every srl_lab model shares.

A subclass builds two trunks (``obs rows -> [N, hidden]``); this class adds the observation
normaliser, the optional LSTMs, the action head (small-scale init) and the value head.

Feed-forward (``recurrent=False``)::

    dist, value = policy.distribution_and_value(obs)             # obs leaves [B, ...] -> [B]

Recurrent (``recurrent=True``) — state in, state out, over ``[T, B]`` chunks::

    state = policy.initial_state(B)                               # [B, 2, 2, hidden]
    dist, value, state = policy.distribution_and_value(obs, state, done)
    # obs leaves [T, B, ...]; done [T, B] is True where obs[t] starts a new episode (the state is
    # zeroed before step t); dist and value are batched [T, B]; the returned state follows step T-1.

The state stacks (actor, critic) x (h, c). The runtime steps a recurrent model with
``act(obs_rows, state)`` (``api.policy``), keeps the state per env-agent row and stores the state
before each step in its fragments, which is what PPO's recurrent chunks start from.
"""
from __future__ import annotations

import gymnasium as gym
import torch
from torch import nn
from torch.distributions import Distribution

from srl_lab.api.policy import ActionHead, Policy, TensorObs, layer_init
from srl_lab.api.tree import tree_map
from srl_lab.models.normalization import ObsNormalizer


class ActorCriticPolicy(Policy):
    """Base class: subclasses call ``build(actor_trunk, critic_trunk, hidden)`` in ``__init__``."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, recurrent: bool = False):
        super().__init__(observation_space, action_space)
        self.recurrent = recurrent
        self.obs_normalizer = ObsNormalizer(observation_space)

    def build(self, actor_trunk: nn.Module, critic_trunk: nn.Module, hidden: int) -> None:
        self.hidden = hidden
        self.actor_trunk = actor_trunk
        self.critic_trunk = critic_trunk
        if self.recurrent:
            self.actor_lstm = nn.LSTMCell(hidden, hidden)
            self.critic_lstm = nn.LSTMCell(hidden, hidden)
        self.action_head = ActionHead(self.action_space, hidden, init_scale=0.01)
        self.value_head = layer_init(nn.Linear(hidden, 1), std=1.0)

    def initial_state(self, batch_size: int) -> torch.Tensor:
        """Zero LSTM state ``[batch_size, 2, 2, hidden]``: (actor, critic) x (h, c)."""
        if not self.recurrent:
            raise TypeError("a feed-forward policy has no state; build it with recurrent=True")
        return torch.zeros(batch_size, 2, 2, self.hidden, device=self.value_head.weight.device)

    def distribution_and_value(self, obs: TensorObs, state: torch.Tensor | None = None,
                               done: torch.Tensor | None = None
                               ) -> tuple[Distribution, torch.Tensor] | tuple[Distribution, torch.Tensor, torch.Tensor]:
        """``(dist, value)`` for rows, or ``(dist, value, state)`` for ``[T, B]`` chunks (module doc)."""
        obs = self.obs_normalizer(obs)
        if state is None:
            if self.recurrent:
                raise TypeError("a recurrent policy needs state=policy.initial_state(batch) and obs [T, B, ...]")
            return self.action_head(self.actor_trunk(obs)), self.value_head(self.critic_trunk(obs)).squeeze(-1)
        if not self.recurrent:
            raise TypeError("state given to a feed-forward policy; build it with recurrent=True")
        T, B = done.shape
        rows = tree_map(lambda x: x.reshape(T * B, *x.shape[2:]), obs)
        done = done.to(state.dtype)
        actor, actor_state = _unroll(self.actor_lstm, self.actor_trunk(rows).view(T, B, -1), state[:, 0], done)
        critic, critic_state = _unroll(self.critic_lstm, self.critic_trunk(rows).view(T, B, -1), state[:, 1], done)
        value = self.value_head(critic).squeeze(-1)
        return self.action_head(actor), value, torch.stack([actor_state, critic_state], dim=1)

    def distribution(self, obs: TensorObs) -> Distribution:
        """Feed-forward: the actor's trunk and head alone, without the critic's trunk."""
        if self.recurrent:
            return super().distribution(obs)  # needs a state, which it refuses as distribution_and_value does
        return self.action_head(self.actor_trunk(self.obs_normalizer(obs)))

    def evaluate(self, obs: TensorObs, actions: torch.Tensor, state: torch.Tensor | None = None,
                 done: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(log_probs, entropy, values)`` with gradients; recurrent models take ``state``/``done``."""
        dist, value, *_ = self.distribution_and_value(obs, state, done)
        return dist.log_prob(actions), dist.entropy(), value


def _unroll(cell: nn.LSTMCell, x: torch.Tensor, state: torch.Tensor, done: torch.Tensor
            ) -> tuple[torch.Tensor, torch.Tensor]:
    """Run ``cell`` over ``x [T, B, H]`` from ``state [B, 2, H]``, zeroing it where ``done[t]``."""
    h, c = state[:, 0], state[:, 1]
    outputs = []
    for t in range(x.shape[0]):
        keep = (1.0 - done[t]).unsqueeze(-1)
        h, c = cell(x[t], (h * keep, c * keep))
        outputs.append(h)
    return torch.stack(outputs), torch.stack([h, c], dim=1)
