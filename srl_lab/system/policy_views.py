"""An env group split by policy: one ``EnvGroup``-shaped view per policy, stepped together.

The actor ring steps *splits*. A split's ``views`` hold, per policy, the shape of that policy's rows
(``num_envs``, ``num_agents``, its observation and action spaces); ``step`` takes every policy's
actions and returns one ``StepResult`` per policy, so each policy's rows go to its own inference and
its own trainer.

* ``WholeGroup``: a single-policy experiment on an ordinary ``EnvGroup``: the group is its own
  (only) view and nothing is copied.
* ``AgentSplit``: an ``AgentGroup`` (per-agent spaces, e.g. a PettingZoo env) split by the
  experiment's ``policy_mapping``. A policy's rows are ``[num_envs, agents it plays]``; its agents
  must share spaces. Agents that are absent in a step become invalid rows (never trained on), and
  an agent whose episode ends before its env's carries its own terminated / truncated row flag.
  Each policy's episode records carry ``return`` (the mean return of its agents) and
  ``return/<policy>``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import gymnasium as gym
import numpy as np

from srl_lab.api.agents import AgentGroup, AgentStepResult
from srl_lab.api.env import EnvGroup, Obs, StepResult, extras
from srl_lab.config import ConfigError, ExperimentConfig
from srl_lab.policies import DEFAULT, check_mapping, is_multi_policy


@dataclass(frozen=True)
class PolicyView:
    """The rows one policy plays in a split group."""

    num_envs: int
    num_agents: int
    observation_space: gym.Space
    action_space: gym.Space
    agents: tuple[str, ...] = ()


class EnvSplit(Protocol):
    num_envs: int
    action_repeat: int  # env steps each step() acts for
    views: dict[str, Any]  # policy -> its view (a PolicyView, or the EnvGroup itself)

    def reset(self, seed: int | None = None) -> dict[str, Obs]: ...

    def step(self, actions: dict[str, np.ndarray]) -> dict[str, StepResult]: ...

    def close(self) -> None: ...


class WholeGroup:
    """One policy plays every row of an ordinary env group."""

    def __init__(self, env: EnvGroup):
        self.env = env
        self.num_envs = env.num_envs
        self.action_repeat = extras(env).action_repeat
        self.views = {DEFAULT: env}

    def reset(self, seed: int | None = None) -> dict[str, Obs]:
        return {DEFAULT: self.env.reset(seed)}

    def step(self, actions: dict[str, np.ndarray]) -> dict[str, StepResult]:
        return {DEFAULT: self.env.step(actions[DEFAULT])}

    def close(self) -> None:
        self.env.close()


def _stack(parts: list[Any]) -> Any:
    """Per-agent ``[num_envs, ...]`` arrays (or dicts of them) -> ``[num_envs, agents, ...]``."""
    if isinstance(parts[0], dict):
        return {k: np.stack([p[k] for p in parts], axis=1) for k in parts[0]}
    return np.stack(parts, axis=1)


class AgentSplit:
    """Rows of an ``AgentGroup`` grouped by the policy that plays each agent."""

    def __init__(self, group: AgentGroup, assigned: dict[str, str]):
        self.group = group
        self.num_envs = group.num_envs
        self.action_repeat = extras(group).action_repeat
        self.agents_of: dict[str, tuple[str, ...]] = {}
        for agent in group.agents:
            self.agents_of.setdefault(assigned[agent], ())
            self.agents_of[assigned[agent]] += (agent,)
        self.views = {policy: self._view(policy, agents) for policy, agents in self.agents_of.items()}

    def _view(self, policy: str, agents: tuple[str, ...]) -> PolicyView:
        first = agents[0]
        obs_space, act_space = self.group.observation_spaces[first], self.group.action_spaces[first]
        for agent in agents[1:]:
            if self.group.observation_spaces[agent] != obs_space or self.group.action_spaces[agent] != act_space:
                raise ConfigError("policy_mapping", f"policy {policy!r} plays {first!r} and {agent!r}, whose "
                                  "observation or action spaces differ", "map agents with different spaces "
                                  "to different policies")
        return PolicyView(self.num_envs, len(agents), obs_space, act_space, agents)

    def reset(self, seed: int | None = None) -> dict[str, Obs]:
        obs = self.group.reset(seed)
        return {policy: _stack([obs[a] for a in agents]) for policy, agents in self.agents_of.items()}

    def step(self, actions: dict[str, np.ndarray]) -> dict[str, StepResult]:
        joint = {agent: actions[policy][:, j] for policy, agents in self.agents_of.items()
                 for j, agent in enumerate(agents)}
        result = self.group.step(joint)
        return {policy: self._result(policy, agents, result) for policy, agents in self.agents_of.items()}

    def _result(self, policy: str, agents: tuple[str, ...], r: AgentStepResult) -> StepResult:
        terminated = np.stack([r.terminated[a] for a in agents], axis=1)
        truncated = np.stack([r.truncated[a] for a in agents], axis=1) & ~terminated
        no_env_flag = np.zeros(self.num_envs, dtype=bool)
        return StepResult(
            obs=_stack([r.obs[a] for a in agents]),
            reward=np.stack([r.reward[a] for a in agents], axis=1).astype(np.float32),
            terminated=no_env_flag, truncated=no_env_flag,
            final_obs=None if r.final_obs is None else _stack([r.final_obs[a] for a in agents]),
            episodes=[_episode_of(policy, agents, e) for e in r.episodes],
            env_errors=r.env_errors,
            valid=np.stack([r.valid[a] for a in agents], axis=1),
            agent_terminated=terminated, agent_truncated=truncated)

    def close(self) -> None:
        self.group.close()


def _episode_of(policy: str, agents: tuple[str, ...], episode: dict[str, float]) -> dict[str, float]:
    """One env's episode record as policy ``policy`` reports it: its agents' mean return."""
    mean = float(np.mean([episode.get(f"return/{a}", 0.0) for a in agents]))
    kept = {k: v for k, v in episode.items() if not k.startswith("return")}
    return {**kept, "return": mean, f"return/{policy}": mean}


def split(config: ExperimentConfig, env: Any) -> EnvSplit:
    """The split the ring steps for an env group built from ``config``."""
    if isinstance(env, AgentGroup):
        return AgentSplit(env, check_mapping(config, tuple(env.agents)))
    if is_multi_policy(config):
        raise ConfigError("policies", f"{type(env).__name__} gives every agent one observation space and no agent "
                          "ids, so its agents cannot be mapped to several policies",
                          "use an env keyed by agent (a PettingZoo env through env.factory), or one policy")
    return WholeGroup(env)
