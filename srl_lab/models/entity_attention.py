"""The hide-and-seek network: entity embeddings, masked residual self-attention, pooling, (LSTM).

Batch rows are env x agent. Per stream (policy and critic, separate networks of the same shape):

    x_self   = [observation_self, circular conv1d(lidar)]
    self     = relu(dense_128(x_self))
    entity_i = relu(dense_128^type([entity_i, x_self]))        # one dense per type: agent, box, ramp
             = relu(W^type entity_i + U^type x_self + b^type)  # U^type x_self computed once per row
    tokens   = layer_norm(t + attention(layer_norm(t)))          # t = [self, entities], 4 heads x 32
    pooled   = mean of tokens over the mask
    features = relu(dense_256([pooled, self]))  -> LSTM 256 when recurrent -> heads

The **policy** masks entities it cannot see (``mask_*_obs``) and padding (``mask_*_obs_spoof``): they
neither attend, nor are attended to, nor pooled, so their features cannot reach the action. The
**critic** sees every existing entity (it masks padding only), and its x_self includes the critic-only
inputs the observations carry (``spec.CRITIC_ONLY_KEYS``): the episode's clock (``episode_time``; the
horizon ends the game, so the value depends on the steps left, which the policy's inputs do not tell
after preparation) and the share of the room's doors blocked by hider-locked boxes (``doors_blocked``;
what a fort is worth, see ``spec.DOORS_KEY``). Default sizes
with ``recurrent=True`` give ~1.6 M parameters for both networks together. Recurrent use: see ``models.actor_critic``.
"""
from __future__ import annotations

import gymnasium as gym
import torch
import torch.nn.functional as F
from torch import nn

from srl_lab.api.policy import TensorObs, layer_init
from srl_lab.envs.hide_and_seek.spec import CRITIC_ONLY_KEYS
from srl_lab.models.actor_critic import ActorCriticPolicy

# entity array -> (visibility mask, existence mask)
ENTITIES = {
    "agent_qpos_qvel": ("mask_aa_obs", "mask_aa_obs_spoof"),
    "box_obs": ("mask_ab_obs", "mask_ab_obs_spoof"),
    "ramp_obs": ("mask_ar_obs", "mask_ar_obs_spoof"),
}


class MaskedSelfAttention(nn.Module):
    """Residual multi-head self-attention; masked tokens are invisible to every other token."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm_in = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.norm_out = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``x [N, E, D]``, ``mask [N, E]`` (True = present); token 0 must always be present."""
        n, e, d = x.shape
        q, k, v = self.qkv(self.norm_in(x)).view(n, e, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        attended = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None, None, :])
        return self.norm_out(x + self.out(attended.transpose(1, 2).reshape(n, e, d)))


class EntityTrunk(nn.Module):
    """One stream (policy or critic): observation dict rows -> ``[N, hidden]`` features."""

    def __init__(self, space: gym.spaces.Dict, mask_keys: tuple[int, ...], embed: int, heads: int,
                 hidden: int, lidar_channels: int, self_keys: tuple[str, ...] = ("observation_self",)):
        super().__init__()
        self.mask_keys = mask_keys  # which of (visibility, existence) masks this stream applies
        self.self_keys = self_keys  # the row's own features, concatenated with the lidar's
        rays = space["lidar"].shape[0]
        self.lidar_conv = nn.Conv1d(1, lidar_channels, kernel_size=3, padding=1, padding_mode="circular")
        x_self = sum(space[key].shape[0] for key in self_keys) + lidar_channels * rays
        # The dense layer of each entity type reads [entity, x_self]; its x_self half is the same for
        # every entity of a row, so it is one projection per row (shared with the self embedding, in
        # one matmul) plus a per-entity projection of the entity's own features. Same function and
        # parameter count as one dense layer per type over the concatenation, far fewer FLOPs.
        self.embed = embed
        self.self_projection = layer_init(nn.Linear(x_self, (1 + len(ENTITIES)) * embed))
        self.entity_embed = nn.ModuleDict({key: layer_init(nn.Linear(space[key].shape[-1], embed, bias=False))
                                           for key in ENTITIES})
        self.attention = MaskedSelfAttention(embed, heads)
        self.dense = layer_init(nn.Linear(2 * embed, hidden))

    def forward(self, obs: TensorObs) -> torch.Tensor:
        lidar = F.relu(self.lidar_conv(obs["lidar"].unsqueeze(1))).flatten(1)
        x_self = torch.cat([*(obs[key] for key in self.self_keys), lidar], dim=-1)
        self_part, *contexts = self.self_projection(x_self).split(self.embed, dim=-1)
        self_token = F.relu(self_part)
        tokens, masks = [self_token.unsqueeze(1)], [torch.ones_like(self_token[:, :1])]
        for (key, mask_names), context in zip(ENTITIES.items(), contexts):
            entities = obs[key]
            tokens.append(F.relu(self.entity_embed[key](entities) + context.unsqueeze(1)))
            mask = torch.ones_like(entities[..., 0])
            for i in self.mask_keys:
                mask = mask * obs[mask_names[i]]
            masks.append(mask)
        mask = torch.cat(masks, dim=1) > 0.5
        attended = self.attention(torch.cat(tokens, dim=1), mask)
        weights = mask.unsqueeze(-1).to(attended.dtype)
        pooled = (attended * weights).sum(1) / weights.sum(1)
        return F.relu(self.dense(torch.cat([pooled, self_token], dim=-1)))


class EntityAttentionPolicy(ActorCriticPolicy):
    """Hide-and-seek policy and critic (see the module docstring); ``factory(obs_space, action_space)``."""

    VISIBILITY, EXISTENCE = 0, 1

    def __init__(self, observation_space: gym.spaces.Dict, action_space: gym.Space, hidden: int = 256,
                 embed: int = 128, heads: int = 4, lidar_channels: int = 9, recurrent: bool = False):
        if not isinstance(observation_space, gym.spaces.Dict):
            raise TypeError(f"EntityAttentionPolicy needs the hide-and-seek Dict observations, got {observation_space}")
        super().__init__(observation_space, action_space, recurrent)
        missing = {"observation_self", "lidar", *ENTITIES, *(m for pair in ENTITIES.values() for m in pair)}
        missing -= set(observation_space.spaces)
        if missing:
            raise ValueError(f"EntityAttentionPolicy needs the hide-and-seek observation keys; missing {sorted(missing)}")

        def trunk(mask_keys: tuple[int, ...], self_keys: tuple[str, ...]) -> EntityTrunk:
            return EntityTrunk(observation_space, mask_keys, embed, heads, hidden, lidar_channels, self_keys)

        critic_only = tuple(key for key in CRITIC_ONLY_KEYS if key in observation_space.spaces)
        self.build(actor_trunk=trunk((self.VISIBILITY, self.EXISTENCE), ("observation_self",)),
                   critic_trunk=trunk((self.EXISTENCE,), ("observation_self", *critic_only)),
                   hidden=hidden)
