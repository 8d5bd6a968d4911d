"""A gymnasium ``VectorEnv`` used as an env group directly, at its native speed.

``gymnasium.make_vec(id, n, vectorization_mode="vector_entry_point")`` gives numpy-vectorised envs
(CartPole steps all its envs in one array operation) that would be slow to rebuild from single envs.
Gymnasium vector envs reset finished sub-envs in one of two ways, both mapped onto the ``EnvGroup``
contract here:

* ``SAME_STEP``: the step that ends an episode returns the next episode's first observation and the
  last one in ``info["final_obs"]``; this is the contract's own behaviour.
* ``NEXT_STEP`` (the default, and the only mode of CartPole's vector entry point): the step that ends
  an episode returns its last observation; the *next* step ignores that sub-env's action, resets it
  and returns the new first observation with reward 0. That step is marked invalid
  (``StepResult.valid``), so it is never trained on, and the ending step reports its observation as
  ``final_obs``, so truncated episodes are bootstrapped from it.
"""
from __future__ import annotations


import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv

from srl_lab.api.env import StepResult


def autoreset_mode(env: VectorEnv) -> AutoresetMode:
    mode = env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
    return AutoresetMode(mode) if not isinstance(mode, AutoresetMode) else mode


class VectorEnvGroup:
    """A single-agent gymnasium ``VectorEnv`` behind the ``EnvGroup`` contract (``num_agents == 1``)."""

    num_agents = 1

    def __init__(self, env: VectorEnv, seed: int | None = None):
        if not isinstance(env, VectorEnv):
            raise TypeError(f"expected a gymnasium.vector.VectorEnv, got {type(env).__name__}")
        self.mode = autoreset_mode(env)
        if self.mode not in (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP):
            raise ValueError(f"vector envs with autoreset mode {self.mode.name} do not reset finished envs; "
                             "make them with autoreset_mode NEXT_STEP or SAME_STEP")
        self.env = env
        self.num_envs = env.num_envs
        self.observation_space = env.single_observation_space
        self.action_space = env.single_action_space
        self._seed = seed
        self._returns = np.zeros(self.num_envs, dtype=np.float64)
        self._lengths = np.zeros(self.num_envs, dtype=np.int64)
        self._resetting = np.zeros(self.num_envs, dtype=bool)  # NEXT_STEP: ignored by the next step

    def reset(self, seed: int | None = None) -> np.ndarray:
        obs, _ = self.env.reset(seed=self._seed if seed is None else seed)
        self._returns[:] = 0
        self._lengths[:] = 0
        self._resetting[:] = False
        return self._rows(obs)

    def _rows(self, obs: np.ndarray) -> np.ndarray:
        """``[num_envs, 1, ...]`` float32 (the contract's agent axis)."""
        return np.asarray(obs, dtype=np.float32)[:, None]

    def step(self, actions: np.ndarray) -> StepResult:
        actions = actions[:, 0]
        if isinstance(self.action_space, gym.spaces.Discrete):
            actions = actions.astype(np.int64, copy=False)
        obs, reward, terminated, truncated, info = self.env.step(actions)
        reward = np.asarray(reward, dtype=np.float32)
        terminated = np.asarray(terminated, bool)
        truncated = np.asarray(truncated, bool) & ~terminated
        valid = ~self._resetting
        reward = np.where(valid, reward, 0.0).astype(np.float32)
        self._returns += reward
        self._lengths += valid
        ended = (terminated | truncated) & valid
        episodes = [{"return": float(self._returns[i]), "length": int(self._lengths[i])}
                    for i in np.flatnonzero(ended)]
        self._returns[ended] = 0
        self._lengths[ended] = 0
        final_obs = None
        if ended.any():
            if self.mode == AutoresetMode.NEXT_STEP:
                final_obs = self._rows(obs)  # this step returned the last observations; the reset comes next
            else:
                final_obs = np.zeros_like(self._rows(obs))
                final_obs[ended] = self._rows(np.stack([info["final_obs"][i] for i in np.flatnonzero(ended)]))
        if self.mode == AutoresetMode.NEXT_STEP:
            self._resetting = ended
        return StepResult(self._rows(obs), reward[:, None], terminated & valid, truncated & valid, final_obs,
                          episodes, valid=None if valid.all() else valid[:, None])

    def render(self, env_index: int = 0, pixels: int | None = None) -> np.ndarray | None:
        frames = self.env.render()
        return None if frames is None else frames[env_index]

    def close(self) -> None:
        self.env.close()
