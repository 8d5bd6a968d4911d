"""Proximal Policy Optimisation (clipped surrogate), readable top to bottom.

One ``train(batch)`` call: GAE advantages from the behaviour values, then ``epochs`` passes of
shuffled minibatches minimising

    loss = -min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A) + vf_coef * (V - R)^2 / 2 - ent_coef * H

with ratio = pi(a|s) / pi_old(a|s) taken against the behaviour log-probs the actors recorded, so a
fragment a version or two old is still corrected by the clipped ratio.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from srl_lab.algorithms.advantages import gae
from srl_lab.api.algorithm import Algorithm, Batch, flatten_time_batch
from srl_lab.api.policy import Policy, obs_to_tensor
from srl_lab.api.tree import tree_map
from srl_lab.config import PPOConfig


class PPO(Algorithm):
    def __init__(self, policy: Policy, config: PPOConfig, device: str = "cpu"):
        super().__init__(policy, config, device)
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=config.lr, eps=1e-5)
        self.env_steps_trained = 0

    def train(self, batch: Batch) -> dict[str, float]:
        cfg = self.config
        advantages, returns = gae(batch["rewards"], batch["values"], batch["terminated"],
                                  batch["truncated"], batch["trunc_values"], batch["last_value"],
                                  cfg.gamma, cfg.gae_lambda)
        n = advantages.size
        self.env_steps_trained += n
        if cfg.anneal_lr_steps:
            frac = max(0.0, 1.0 - self.env_steps_trained / cfg.anneal_lr_steps)
            self.optimizer.param_groups[0]["lr"] = cfg.lr * frac

        dev = self.device
        obs = obs_to_tensor(tree_map(flatten_time_batch, batch["obs"]), dev)
        actions = torch.as_tensor(flatten_time_batch(batch["actions"]), device=dev)
        old_logp = torch.as_tensor(flatten_time_batch(batch["logp"]), device=dev)
        adv_all = torch.as_tensor(advantages.reshape(-1), device=dev)
        ret_all = torch.as_tensor(returns.reshape(-1), device=dev)

        stats: dict[str, list[float]] = {k: [] for k in
                                         ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_frac")}
        mb = min(cfg.minibatch_size, n)
        for _ in range(cfg.epochs):
            perm = torch.randperm(n, device=dev)
            for start in range(0, n - mb + 1, mb):
                idx = perm[start:start + mb]
                logp, entropy, value = self.policy.evaluate(tree_map(lambda x: x[idx], obs), actions[idx])
                log_ratio = logp - old_logp[idx]
                ratio = log_ratio.exp()
                adv = adv_all[idx]
                if cfg.norm_adv:
                    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                policy_loss = torch.max(-adv * ratio,
                                        -adv * ratio.clamp(1 - cfg.clip_coef, 1 + cfg.clip_coef)).mean()
                value_loss = 0.5 * (value - ret_all[idx]).pow(2).mean()
                loss = policy_loss + cfg.vf_coef * value_loss - cfg.ent_coef * entropy.mean()
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(self.policy.parameters(), cfg.max_grad_norm)
                self.optimizer.step()
                with torch.no_grad():
                    stats["policy_loss"].append(policy_loss.item())
                    stats["value_loss"].append(value_loss.item())
                    stats["entropy"].append(entropy.mean().item())
                    stats["approx_kl"].append(((ratio - 1) - log_ratio).mean().item())
                    stats["clip_frac"].append(((ratio - 1).abs() > cfg.clip_coef).float().mean().item())
        return {k: float(np.mean(v)) for k, v in stats.items()}

    def state_dict(self) -> dict[str, Any]:
        return {"policy": self.policy.state_dict(), "optimizer": self.optimizer.state_dict(),
                "env_steps_trained": self.env_steps_trained}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.policy.load_state_dict(state["policy"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.env_steps_trained = state["env_steps_trained"]
