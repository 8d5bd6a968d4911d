"""The batched environment contract the actor worker steps.

An ``EnvGroup`` is a batch of ``num_envs`` environments with ``num_agents`` agents each, stepped
together so one message carries the whole group. Every array has leading axes
``[num_envs, num_agents, ...]`` (single-agent environments use ``num_agents == 1``).

Episodes reset *in the same step* that ends them: ``StepResult.obs`` already holds the first
observation of the next episode for those envs, and ``StepResult.final_obs`` keeps the last
observation of the finished one, so a learner can bootstrap truncated episodes.

Optional attribute ``trained_rows``: flat row indices (``env * num_agents + agent``) of the agents
the policy really plays. An env that drives some agents itself (scripted or random opponents)
ignores the actions given for the other rows, so the runtime sends only ``trained_rows`` to the
trainer. Absent or ``None``: every row trains.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, Union, runtime_checkable

import gymnasium as gym
import numpy as np

Obs = Union[np.ndarray, dict[str, np.ndarray]]


@dataclass
class StepResult:
    """What one ``EnvGroup.step`` returns; see the module docstring for the layout."""

    obs: Obs  # [num_envs, num_agents, ...] (next episode's first obs where an episode ended)
    reward: np.ndarray  # float32 [num_envs, num_agents]
    terminated: np.ndarray  # bool [num_envs]
    truncated: np.ndarray  # bool [num_envs]
    final_obs: Obs | None = None  # last obs of ended episodes (same layout as obs), or None
    episodes: list[dict[str, float]] = field(default_factory=list)  # stats of episodes that ended
    env_errors: int = 0  # environments that raised and were reset this step


@runtime_checkable
class EnvGroup(Protocol):
    """A batch of environments stepped together (see module docstring)."""

    num_envs: int
    num_agents: int
    observation_space: gym.Space  # per agent
    action_space: gym.Space  # per agent

    def reset(self, seed: int | None = None) -> Obs: ...

    def step(self, actions: np.ndarray) -> StepResult: ...

    def close(self) -> None: ...


def obs_rows(obs: Obs, index: Any) -> Obs:
    """Select rows of an observation that may be an array or a dict of arrays."""
    if isinstance(obs, dict):
        return {k: v[index] for k, v in obs.items()}
    return obs[index]
