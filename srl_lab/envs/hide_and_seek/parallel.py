"""A PettingZoo ``ParallelEnv`` view of one hide-and-seek world, for either variant.

It wraps any batched hide-and-seek env built with ``num_envs == 1`` (``HideAndSeekLite``,
``HideAndSeekMujoco``) and names the agents ``hider_0.., seeker_0..``. When the episode ends the
last observation is returned and every agent leaves ``agents``; call ``reset`` to play again.
"""
from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from pettingzoo import ParallelEnv

from srl_lab.api.env import EnvGroup

NEUTRAL_ACTION = np.array([5, 5, 5, 0, 0], np.int64)  # no force, no torque, no grab, no lock


class HideAndSeekParallel(ParallelEnv):
    """``env`` is a batched hide-and-seek env with one environment and a ``layout`` attribute."""

    metadata: ClassVar[dict[str, Any]] = {"name": "hide_and_seek_v0", "render_modes": ["rgb_array"], "is_parallelizable": True}

    def __init__(self, env: EnvGroup, render_mode: str | None = None) -> None:
        if env.num_envs != 1:
            raise ValueError(f"wrap a single environment (num_envs=1), got num_envs={env.num_envs}")
        self.env = env
        self.render_mode = render_mode
        layout = env.layout
        self.possible_agents = ([f"hider_{i}" for i in range(layout.n_hiders)]
                                + [f"seeker_{i}" for i in range(layout.n_seekers)])
        self.agents: list[str] = []
        self._index = {name: i for i, name in enumerate(self.possible_agents)}

    def observation_space(self, agent: str) -> gym.spaces.Dict:
        """Every agent shares the wrapped env's (one object, as PettingZoo asks)."""
        return self.env.observation_space

    def action_space(self, agent: str) -> gym.spaces.MultiDiscrete:
        return self.env.action_space

    def reset(self, seed: int | None = None, options: dict | None = None
              ) -> tuple[dict[str, dict[str, np.ndarray]], dict[str, dict]]:
        obs = self.env.reset(seed=seed)
        self.agents = list(self.possible_agents)
        return self._split(obs), {name: {} for name in self.agents}

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        """Agents missing from ``actions`` take the neutral action."""
        batch = np.tile(NEUTRAL_ACTION, (1, len(self.possible_agents), 1))
        for name, action in actions.items():
            batch[0, self._index[name]] = np.asarray(action, np.int64)
        result = self.env.step(batch)
        ended = bool(result.terminated[0] or result.truncated[0])
        obs = self._split(result.final_obs if ended else result.obs)
        names = self.agents
        rewards = {name: float(result.reward[0, self._index[name]]) for name in names}
        terminated = {name: bool(result.terminated[0]) for name in names}
        truncated = {name: bool(result.truncated[0]) for name in names}
        infos: dict[str, dict] = {name: {} for name in names}
        if ended and result.episodes:
            for name in names:
                infos[name]["episode"] = result.episodes[0]
        obs = {name: obs[name] for name in names}
        if ended:
            self.agents = []
        return obs, rewards, terminated, truncated, infos

    def render(self) -> np.ndarray:
        return self.env.render(0)

    def close(self) -> None:
        self.env.close()

    def _split(self, obs: dict[str, np.ndarray]) -> dict[str, dict[str, np.ndarray]]:
        return {name: {key: value[0, i] for key, value in obs.items()}
                for i, name in enumerate(self.possible_agents)}
