"""Recurrent PPO in one process: rollouts that store the policy state of every step, PPO on chunks.

A compact loop for experimenting with recurrent models without a cluster (the runtime's actors
carry policy states too; see ``system.actor_ring``). ``Rollout.collect`` builds the actors' ``Batch`` plus
``states [T, B, ...]``, the state *before* each step (already zeroed where an episode began), so
``PPO.train`` cuts it into ``chunk_length`` chunks and replays ``burn_in`` steps before each.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from srl_lab.algorithms.ppo import PPO
from srl_lab.api.algorithm import Batch
from srl_lab.api.env import EnvGroup
from srl_lab.api.policy import Policy, obs_to_tensor
from srl_lab.api.tree import tree_map, tree_stack
from srl_lab.config import PPOConfig


class Rollout:
    """Steps ``env`` with ``policy``, keeping observations and policy state from one call to the next."""

    def __init__(self, env: EnvGroup, policy: Policy, seed: int | None = None):
        self.env, self.policy = env, policy
        self.recurrent = policy.recurrent
        self.rows = env.num_envs * env.num_agents
        self.obs = self._rows(env.reset(seed=seed))
        self.state = policy.initial_state(self.rows) if self.recurrent else None
        self.episodes: list[dict[str, float]] = []

    def _rows(self, obs: Any) -> Any:
        return tree_map(lambda x: x.reshape(self.rows, *x.shape[2:]), obs)

    def _step(self, obs: Any, state: torch.Tensor | None) -> tuple[Any, torch.Tensor, torch.Tensor | None]:
        """``(dist, value, next_state)`` for one step of rows."""
        obs = obs_to_tensor(obs)
        if not self.recurrent:
            return *self.policy.distribution_and_value(obs), None
        dist, value, state = self.policy.distribution_and_value(tree_map(lambda x: x[None], obs), state,
                                                                torch.zeros(1, self.rows, dtype=torch.bool))
        return dist, value[0], state

    @torch.no_grad()
    def collect(self, length: int, version: int = 0, greedy: bool = False) -> Batch:
        """``length`` steps of every row as a ``Batch`` (``[T, B]`` arrays; see ``api.algorithm``)."""
        steps: dict[str, list[Any]] = {k: [] for k in ("obs", "actions", "logp", "values", "rewards",
                                                       "terminated", "truncated", "states")}
        trunc_values = np.zeros((length, self.rows), np.float32)
        agents = self.env.num_agents
        for t in range(length):
            if self.recurrent:
                steps["states"].append(self.state.numpy())
            dist, value, next_state = self._step(self.obs, self.state)
            action = dist.mode if greedy else dist.sample()
            dist_logp = dist.log_prob(action)
            if self.recurrent:
                dist_logp, action = dist_logp[0], action[0]
            result = self.env.step(action.numpy().reshape(self.env.num_envs, agents, *action.shape[1:]))
            terminated, truncated = np.repeat(result.terminated, agents), np.repeat(result.truncated, agents)
            if truncated.any():  # bootstrap from the value of the last observation, with the state after it
                _, final_value, _ = self._step(self._rows(result.final_obs), next_state)
                trunc_values[t, truncated] = final_value.numpy()[truncated]
            for key, item in (("obs", self.obs), ("actions", action.numpy()), ("logp", dist_logp.numpy()),
                              ("values", value.numpy()), ("rewards", result.reward.reshape(self.rows)),
                              ("terminated", terminated), ("truncated", truncated)):
                steps[key].append(item)
            self.episodes.extend(result.episodes)
            self.obs = self._rows(result.obs)
            if self.recurrent:
                self.state = next_state * torch.as_tensor(~(terminated | truncated)).view(-1, 1, 1, 1)
        last_value = self._step(self.obs, self.state)[1].numpy()
        batch = {k: tree_stack(v) if k == "obs" else np.stack(v) for k, v in steps.items() if v}
        batch.update(trunc_values=trunc_values, last_value=last_value,
                     versions=np.full((length, self.rows), version, np.int64))
        return batch


def train(env: EnvGroup, policy: Policy, config: PPOConfig, iterations: int, fragment_length: int,
          seed: int | None = None, stop: Callable[[list[dict[str, float]]], bool] | None = None
          ) -> list[dict[str, float]]:
    """Up to ``iterations`` of collect-then-``PPO.train`` (fewer once ``stop(history)`` is true);
    returns every update's statistics with the mean return of the episodes finished meanwhile."""
    algorithm = PPO(policy, config)
    rollout = Rollout(env, policy, seed)
    history = []
    for version in range(iterations):
        batch = rollout.collect(fragment_length, version)
        stats = algorithm.train(batch, version)
        episodes, rollout.episodes = rollout.episodes, []
        stats["mean_return"] = float(np.mean([e["return"] for e in episodes])) if episodes else float("nan")
        history.append(stats)
        if stop is not None and stop(history):
            break
    return history


def mean_return(env: EnvGroup, policy: Policy, episodes: int, greedy: bool = True, seed: int | None = None) -> float:
    """Mean return of at least ``episodes`` fresh episodes (most likely actions when ``greedy``)."""
    rollout = Rollout(env, policy, seed)
    while len(rollout.episodes) < episodes:
        rollout.collect(16, greedy=greedy)
    return float(np.mean([e["return"] for e in rollout.episodes[:episodes]]))
