"""The batched environment contract the actor worker steps.

An ``EnvGroup`` is a batch of ``num_envs`` environments with ``num_agents`` agents each, stepped
together so one message carries the whole group. Every array has leading axes
``[num_envs, num_agents, ...]`` (single-agent environments use ``num_agents == 1``).

Episodes reset *in the same step* that ends them: ``StepResult.obs`` already holds the first
observation of the next episode for those envs, and ``StepResult.final_obs`` keeps the last
observation of the finished one, so a learner can bootstrap truncated episodes.

Beyond the required members an env group may define the optional attributes of ``EnvExtras``
(rows the policy really plays, teams, a preparation phase, a horizon). The runtime reads them only
through ``extras(env)``, which gives every absent one its declared default.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, Protocol, Union, runtime_checkable

import gymnasium as gym
import numpy as np

Obs = Union[np.ndarray, dict[str, np.ndarray]]
TeamOf = Callable[[Any], Any]  # observation rows (numpy or torch leaves) -> team index of each row


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
    # bool [num_envs, num_agents]: False for rows whose step did not happen (the env ignored the action
    # and gave reward 0: a vector env's delayed reset, an agent absent this step); None: every row.
    # Invalid rows are never trained on.
    valid: np.ndarray | None = None
    # bool [num_envs, num_agents]: rows whose agent's episode ended in this step on its own (it left
    # before its env's episode ended); None: none. Such a row's later steps are invalid until the env
    # resets. ``agent_truncated`` rows are bootstrapped from ``final_obs`` like truncated envs.
    agent_terminated: np.ndarray | None = None
    agent_truncated: np.ndarray | None = None


@runtime_checkable
class EnvGroup(Protocol):
    """A batch of environments stepped together (see module docstring).

    Optional attributes (declared, with their defaults, by ``EnvExtras``): ``trained_rows``,
    ``agent_teams``, ``team_of``, ``team_names``, ``prep_steps``, ``horizon``, ``action_repeat``.
    """

    num_envs: int
    num_agents: int
    observation_space: gym.Space  # per agent
    action_space: gym.Space  # per agent

    def reset(self, seed: int | None = None) -> Obs: ...

    def step(self, actions: np.ndarray) -> StepResult: ...

    def close(self) -> None: ...


@dataclass(frozen=True, eq=False)
class EnvExtras:
    """The optional attributes of an ``EnvGroup``; each default is what an env without it means.

    * ``trained_rows``: flat row indices (``env * num_agents + agent``) of the agents the policy
      really plays. An env that drives some agents itself (scripted or random opponents) ignores
      the actions given for the other rows, so the runtime sends only these rows to the trainer.
      Default ``None``: every row trains.
    * ``agent_teams``: the team index of each agent (``num_agents`` entries, teams numbered from 0).
      Default ``None``: the env has no teams (``policy.mapping="per_team"`` refuses it).
    * ``team_of``: maps observation rows (numpy or torch leaves, any leading dims) to the team index
      of each row, so a per-team policy can route rows the trainer has shuffled. Default ``None``.
    * ``team_names``: a name per team index (``("hider", "seeker")``), for metrics and the viewer.
      Default ``None``: teams are called ``team_0``, ``team_1``, ...
    * ``prep_steps``: steps at the start of each episode that form a preparation phase (the viewer
      captions it). Default ``0``: no such phase.
    * ``horizon``: the step at which an episode is truncated. Default ``None``: not known.
    * ``action_repeat``: env steps each ``step`` call acts for (a frame skip), so that the actors
      count env steps, not decisions. Default ``1``.
    """

    trained_rows: np.ndarray | None = None
    agent_teams: tuple[int, ...] | None = None
    team_of: TeamOf | None = None
    team_names: tuple[str, ...] | None = None
    prep_steps: int = 0
    horizon: int | None = None
    action_repeat: int = 1

    def team_name(self, team: int) -> str:
        """Team ``team``'s name: from ``team_names``, else ``team_<index>``."""
        names = self.team_names
        return names[team] if names and team < len(names) else f"team_{team}"

    @property
    def has_teams(self) -> bool:
        """True when the env names every agent's team and can tell the team of an observation row."""
        return self.agent_teams is not None and self.team_of is not None


def extras(env: Any) -> EnvExtras:
    """``env``'s optional attributes, each one it lacks read as its declared default."""
    return EnvExtras(**{f.name: getattr(env, f.name, f.default) for f in fields(EnvExtras)})


def obs_rows(obs: Obs, index: Any) -> Obs:
    """Select rows of an observation that may be an array or a dict of arrays."""
    if isinstance(obs, dict):
        return {k: v[index] for k, v in obs.items()}
    return obs[index]
