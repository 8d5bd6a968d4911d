"""Advantage actor-critic (A2C): the smallest useful ``Algorithm``, and a template for new ones.

Use it with ``ExperimentConfig(algorithm=A2C)``; it reads its hyper-parameters from ``config.ppo``.
Each batch gives one gradient step on

    loss = -log pi(a|s) * A + vf_coef * (V(s) - R)^2 / 2 - ent_coef * H[pi(.|s)]

with A, R from GAE over the behaviour values (advantages standardised over the batch).
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from srl_lab.algorithms.advantages import gae
from srl_lab.api.algorithm import Algorithm, Batch, flatten_time_batch
from srl_lab.api.policy import Policy, obs_to_tensor
from srl_lab.api.tree import tree_map
from srl_lab.config import PPOConfig


class A2C(Algorithm):
    def __init__(self, policy: Policy, config: PPOConfig, device: str = "cpu"):
        super().__init__(policy, config, device)
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=config.lr)

    def train(self, batch: Batch, version: int | None = None) -> dict[str, float]:
        cfg, dev = self.config, self.device
        advantages, returns = gae(batch["rewards"], batch["values"], batch["terminated"], batch["truncated"],
                                  batch["trunc_values"], batch["last_value"], cfg.gamma, cfg.gae_lambda)
        obs = obs_to_tensor(tree_map(flatten_time_batch, batch["obs"]), dev)
        actions = torch.as_tensor(flatten_time_batch(batch["actions"]), device=dev)
        rows = torch.as_tensor(batch["valid"].reshape(-1) if "valid" in batch else np.ones(len(actions), bool),
                               device=dev)  # rows the env ignored (a delayed reset) are not trained on
        adv = torch.as_tensor(advantages.reshape(-1), device=dev)[rows]
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        ret = torch.as_tensor(returns.reshape(-1), device=dev)[rows]

        logp, entropy, value = self.policy.evaluate(tree_map(lambda x: x[rows], obs), actions[rows])
        policy_loss = -(logp * adv).mean()
        value_loss = 0.5 * (value - ret).pow(2).mean()
        loss = policy_loss + cfg.vf_coef * value_loss - cfg.ent_coef * entropy.mean()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(self.policy.parameters(), cfg.max_grad_norm)
        self.optimizer.step()
        return {"policy_loss": policy_loss.item(), "value_loss": value_loss.item(),
                "entropy": entropy.mean().item()}

    def optimizers(self) -> tuple[torch.optim.Optimizer, ...]:
        """Checkpoints save its state; data-parallel trainers average gradients before its steps."""
        return (self.optimizer,)
