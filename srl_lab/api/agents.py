"""Env groups keyed by agent: multi-agent environments whose agents differ (PettingZoo's shape).

An ``AgentGroup`` is a batch of ``num_envs`` copies of one multi-agent environment. Its agents are
named (``agents``: every agent that can ever appear, PettingZoo's ``possible_agents``) and each has
its own observation and action space. Every array is keyed by agent id and has leading axis
``[num_envs]``.

An agent is *present* in an env at a step when it acts in that step. Agents that finish early or
join late are absent in between: ``valid[agent][e]`` is False for a step in which the agent did not
act (its action was ignored, its reward is 0, and the observation it was given is filler: zeros).
The last step an agent is present in carries its ``terminated`` or ``truncated``.

Episodes reset in the same step that ends them (no agent of the env left): ``env_done[e]`` is True,
``obs`` already holds the next episode's first observations and ``final_obs`` the last ones of the
agents that ended in that step, so a learner can bootstrap truncated agents.

``srl_lab.system.policy_views`` splits an ``AgentGroup`` into one ``EnvGroup``-shaped view per
policy (the agents a mapping gives to that policy), which is what the actor ring steps.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import gymnasium as gym
import numpy as np

from srl_lab.api.env import Obs

AgentId = str


@dataclass
class AgentStepResult:
    """What one ``AgentGroup.step`` returns; see the module docstring for the meaning of each field."""

    obs: dict[AgentId, Obs]  # [num_envs, ...] per agent (next episode's first obs where env_done)
    reward: dict[AgentId, np.ndarray]  # float32 [num_envs]; 0 where the agent was absent
    terminated: dict[AgentId, np.ndarray]  # bool [num_envs]: the agent's episode ended in this step
    truncated: dict[AgentId, np.ndarray]  # bool [num_envs]: ... was cut short (bootstrap from final_obs)
    valid: dict[AgentId, np.ndarray]  # bool [num_envs]: the agent acted in this step
    env_done: np.ndarray  # bool [num_envs]: the env's episode ended and it was reset in this step
    final_obs: dict[AgentId, Obs] | None = None  # last obs of agents terminated/truncated in this step
    # one dict per episode that ended: {"length": steps, "return/<agent>": that agent's return, ...}
    episodes: list[dict[str, float]] = field(default_factory=list)
    env_errors: int = 0  # envs that raised and were reset in this step


@runtime_checkable
class AgentGroup(Protocol):
    """A batch of multi-agent environments stepped together, keyed by agent id."""

    num_envs: int
    agents: tuple[AgentId, ...]
    observation_spaces: dict[AgentId, gym.Space]
    action_spaces: dict[AgentId, gym.Space]

    def reset(self, seed: int | None = None) -> dict[AgentId, Obs]: ...

    def step(self, actions: dict[AgentId, np.ndarray]) -> AgentStepResult: ...

    def close(self) -> None: ...
