"""A batch of single-agent gymnasium environments behind the ``EnvGroup`` contract.

Steps the envs in-process (one Python loop; subprocess vector envs are ~6x slower for cheap envs),
resets finished episodes in the same step, and survives environments that raise: the failing env is
reset (or rebuilt), its episode is cut as truncated without bootstrap, and the error is counted.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

import gymnasium as gym
import numpy as np

from srl_lab.api.env import StepResult

logger = logging.getLogger(__name__)


class GymEnvGroup:
    """``num_envs`` copies of a gymnasium env built by ``make_env()``; ``num_agents == 1``."""

    num_agents = 1

    def __init__(self, make_env: Callable[[], gym.Env], num_envs: int, seed: int | None = None):
        self.make_env = make_env
        self.num_envs = num_envs
        self.envs = [make_env() for _ in range(num_envs)]
        self.observation_space = self.envs[0].observation_space
        self.action_space = self.envs[0].action_space
        self._rng = np.random.default_rng(seed)
        self._obs = np.zeros((num_envs, 1, *self.observation_space.shape), dtype=np.float32)
        self._returns = np.zeros(num_envs, dtype=np.float64)
        self._lengths = np.zeros(num_envs, dtype=np.int64)
        self._discrete = isinstance(self.action_space, (gym.spaces.Discrete,))

    def _seed(self) -> int:
        return int(self._rng.integers(2**31 - 1))

    def reset(self, seed: int | None = None) -> np.ndarray:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        for i, env in enumerate(self.envs):
            self._obs[i, 0] = self._reset_env(i)
        self._returns[:] = 0
        self._lengths[:] = 0
        return self._obs.copy()

    def _reset_env(self, i: int) -> Any:
        try:
            obs, _ = self.envs[i].reset(seed=self._seed())
        except Exception:  # a broken env is rebuilt rather than taking the worker down
            logger.exception("environment %d failed in reset(); rebuilding it", i)
            self.envs[i] = self.make_env()
            obs, _ = self.envs[i].reset(seed=self._seed())
        return obs

    def step(self, actions: np.ndarray) -> StepResult:
        n = self.num_envs
        reward = np.zeros((n, 1), dtype=np.float32)
        terminated = np.zeros(n, dtype=bool)
        truncated = np.zeros(n, dtype=bool)
        final_obs = None
        episodes: list[dict[str, float]] = []
        errors = 0
        for i, env in enumerate(self.envs):
            action = int(actions[i, 0]) if self._discrete else actions[i, 0]
            try:
                obs, r, term, trunc, _ = env.step(action)
            except Exception:
                logger.exception("environment %d raised in step(); resetting it", i)
                errors += 1
                obs, r, term, trunc = self._obs[i, 0], 0.0, False, True
            self._returns[i] += r
            self._lengths[i] += 1
            reward[i, 0] = r
            if term or trunc:
                terminated[i], truncated[i] = term, trunc and not term
                if final_obs is None:
                    final_obs = np.zeros_like(self._obs)
                final_obs[i, 0] = obs
                episodes.append({"return": float(self._returns[i]), "length": int(self._lengths[i])})
                self._returns[i] = 0
                self._lengths[i] = 0
                obs = self._reset_env(i)
            self._obs[i, 0] = obs
        return StepResult(self._obs.copy(), reward, terminated, truncated, final_obs, episodes, errors)

    def render(self, env_index: int = 0, pixels: int | None = None) -> np.ndarray | None:
        """Env ``env_index``'s own ``render()``: an RGB array when it was made with
        ``render_mode="rgb_array"`` (None otherwise); ``pixels`` is left to the caller to apply."""
        return self.envs[env_index].render()

    def close(self) -> None:
        for env in self.envs:
            env.close()
