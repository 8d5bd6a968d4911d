"""A batch of PettingZoo environments behind the ``AgentGroup`` contract.

PettingZoo agents come and go: an agent acts while it is listed in ``env.agents`` and leaves after
the step that terminates or truncates it; some join after the reset. The adapter steps
``num_envs`` copies in-process (like ``GymEnvGroup``), gives actions only to the agents present,
fills the rows of absent ones (``valid`` False, reward 0, zero observations) and resets a copy in
the same step its last agent ends. Parallelizable AEC envs are converted with PettingZoo's own
``aec_to_parallel``; turn-based ones are refused. A copy that raises in ``step`` is reset and its
episode cut as truncated (no episode record), as ``GymEnvGroup`` does, and counted in ``env_errors``.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from pettingzoo import AECEnv, ParallelEnv
from pettingzoo.utils.conversions import aec_to_parallel

from srl_lab.api.agents import AgentId, AgentStepResult
from srl_lab.api.env import Obs

logger = logging.getLogger(__name__)

_PZ = (ParallelEnv, AECEnv)
_ARRAY_SPACES = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)
_ACTION_SPACES = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete)


def is_pettingzoo(env: Any) -> bool:
    """True for PettingZoo ``ParallelEnv`` / ``AECEnv`` instances, PettingZoo's wrappers included."""
    return isinstance(env, _PZ) or isinstance(getattr(env, "unwrapped", None), _PZ)


def as_parallel(env: Any) -> ParallelEnv:
    """``env`` as a ``ParallelEnv``: an AEC env is converted when its metadata allows it."""
    if isinstance(env, ParallelEnv):
        return env
    if isinstance(env, AECEnv):
        metadata = getattr(env, "metadata", None) or {}
        if metadata.get("is_parallelizable", False):
            return aec_to_parallel(env)
        name = metadata.get("name", type(env).__name__)
        raise ValueError(
            f"{name} is a turn-based PettingZoo AEC env (its metadata does not set is_parallelizable=True); "
            "turn-based AEC envs are not supported yet. Use the env's parallel_env() if it has one, or an env "
            "whose agents all act once per cycle (then set metadata['is_parallelizable'] = True)")
    raise TypeError(f"expected a PettingZoo ParallelEnv or AECEnv, got {type(env).__name__}")


def _check_space(agent: AgentId, space: gym.Space, kinds: tuple[type, ...], what: str) -> None:
    """Refuse spaces the rest of srl_lab cannot batch (tuples, nested dicts, text, graphs...)."""
    if what == "observation" and isinstance(space, gym.spaces.Dict):
        bad = [key for key, sub in space.spaces.items() if not isinstance(sub, kinds)]
        if not bad:
            return
    elif isinstance(space, kinds):
        return
    names = "/".join(kind.__name__ for kind in kinds)
    raise ValueError(f"agent {agent!r} has {what} space {space}; PettingZooGroup supports {names} spaces"
                     + (" (or a Dict of them)" if what == "observation" else ""))


def _zeros(space: gym.Space, n: int) -> Obs:
    """``n`` rows of filler (float32 zeros) for ``space``: an array, or a dict of arrays."""
    if isinstance(space, gym.spaces.Dict):
        return {key: np.zeros((n, *sub.shape), np.float32) for key, sub in space.spaces.items()}
    return np.zeros((n, *space.shape), np.float32)


def _write(store: Obs, i: int, value: Any) -> None:
    """Row ``i`` of ``store`` := ``value`` as float32; ``None`` writes filler."""
    if isinstance(store, dict):
        for key, rows in store.items():
            rows[i] = 0 if value is None else np.asarray(value[key], np.float32)
    else:
        store[i] = 0 if value is None else np.asarray(value, np.float32)


def _row(store: Obs, i: int) -> Obs:
    """A copy of row ``i`` of ``store``."""
    return {key: rows[i].copy() for key, rows in store.items()} if isinstance(store, dict) else store[i].copy()


def _copy(store: Obs) -> Obs:
    return {key: rows.copy() for key, rows in store.items()} if isinstance(store, dict) else store.copy()


def _action(space: gym.Space, action: Any) -> Any:
    """One agent's action as the env expects it: an int for Discrete, an array otherwise."""
    if isinstance(space, gym.spaces.Discrete):
        return int(action)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return np.asarray(action, np.int64)
    return np.asarray(action, space.dtype)


class PettingZooGroup:
    """``num_envs`` copies of the PettingZoo env ``make()`` builds; ``first`` (if given) is copy 0.

    Beyond the contract: an agent that drops out of ``env.agents`` without a flag is reported as
    truncated; an agent flagged done never acts again in that episode even if the env still lists
    it; rewards given to agents that did not act are dropped (returns count acting steps only).
    """

    def __init__(self, make: Callable[[], Any], num_envs: int, seed: int | None = None, first: Any = None):
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        self.make = make
        self.num_envs = num_envs
        self.seed = seed
        env0 = as_parallel(first if first is not None else make())
        self.envs: list[ParallelEnv] = [env0] + [as_parallel(make()) for _ in range(num_envs - 1)]
        self.agents: tuple[AgentId, ...] = tuple(env0.possible_agents)
        self.observation_spaces = {a: env0.observation_space(a) for a in self.agents}
        self.action_spaces = {a: env0.action_space(a) for a in self.agents}
        for a in self.agents:
            _check_space(a, self.observation_spaces[a], _ARRAY_SPACES, "observation")
            _check_space(a, self.action_spaces[a], _ACTION_SPACES, "action")
        self._index = {a: j for j, a in enumerate(self.agents)}
        self._obs = {a: _zeros(self.observation_spaces[a], num_envs) for a in self.agents}
        self._ended: list[set[AgentId]] = [set() for _ in range(num_envs)]  # done this episode
        self._returns = np.zeros((num_envs, len(self.agents)), np.float64)
        self._acted = np.zeros((num_envs, len(self.agents)), bool)  # took part in this episode
        self._lengths = np.zeros(num_envs, np.int64)
        self._was_reset = False

    def reset(self, seed: int | None = None) -> dict[AgentId, Obs]:
        """Reset every copy: env ``i`` gets ``seed + i`` (the constructor's seed on the first reset)."""
        base = seed if seed is not None else (None if self._was_reset else self.seed)
        for i in range(self.num_envs):
            self._reset_env(i, None if base is None else base + i)
        self._was_reset = True
        return {a: _copy(rows) for a, rows in self._obs.items()}

    def _reset_env(self, i: int, seed: int | None) -> None:
        try:
            obs, _ = self.envs[i].reset(seed=seed)
        except Exception:  # a broken env is rebuilt rather than taking the worker down
            logger.exception("environment %d failed in reset(); rebuilding it", i)
            try:
                self.envs[i].close()
            except Exception:
                logger.exception("closing the broken environment %d failed", i)
            self.envs[i] = as_parallel(self.make())
            obs, _ = self.envs[i].reset(seed=seed)
        self._ended[i] = set()
        self._returns[i] = 0
        self._acted[i] = False
        self._lengths[i] = 0
        listed = set(self.envs[i].agents)
        for a in self.agents:
            _write(self._obs[a], i, obs.get(a) if a in listed else None)

    def step(self, actions: dict[AgentId, np.ndarray]) -> AgentStepResult:
        """Step every copy; ``actions[agent][i]`` is used only where the agent is present in env ``i``."""
        if not self._was_reset:
            raise RuntimeError("call reset() before step()")
        n, agents = self.num_envs, self.agents
        reward = {a: np.zeros(n, np.float32) for a in agents}
        terminated = {a: np.zeros(n, bool) for a in agents}
        truncated = {a: np.zeros(n, bool) for a in agents}
        valid = {a: np.zeros(n, bool) for a in agents}
        env_done = np.zeros(n, bool)
        final_obs: dict[AgentId, Obs] | None = None
        episodes: list[dict[str, float]] = []
        errors = 0
        presents = [[a for a in env.agents if a in self._index and a not in self._ended[i]]
                    for i, env in enumerate(self.envs)]
        missing = sorted({a for present in presents for a in present if a not in actions})
        if missing:  # checked before any env steps, so a bad call leaves the group as it was
            raise KeyError(f"no actions given for present agents {missing}")
        for i, (env, present) in enumerate(zip(self.envs, presents)):
            ended = self._ended[i]
            act = {a: _action(self.action_spaces[a], actions[a][i]) for a in present}
            failed = False
            try:
                obs, rew, term, trunc, _ = env.step(act)
                listed = [a for a in env.agents if a in self._index]
            except Exception:
                logger.exception("environment %d raised in step(); resetting it", i)
                errors += 1
                failed = True
                obs, rew, term, trunc, listed = {}, {}, {}, dict.fromkeys(present, True), []
            self._lengths[i] += 1
            for a in present:
                j = self._index[a]
                r = float(rew.get(a, 0.0))
                valid[a][i], reward[a][i] = True, r
                self._returns[i, j] += r
                self._acted[i, j] = True
                t, u = bool(term.get(a, False)), bool(trunc.get(a, False)) or a not in listed
                if t or u:
                    terminated[a][i], truncated[a][i] = t, not t
                    if final_obs is None:
                        final_obs = {b: _zeros(self.observation_spaces[b], n) for b in agents}
                    _write(final_obs[a], i, obs[a] if a in obs else _row(self._obs[a], i))
            ended.update(a for a, flag in (*term.items(), *trunc.items()) if flag and a in self._index)
            ended.update(a for a in present if a not in listed)
            alive = {a for a in listed if a not in ended}
            if alive:
                for a in agents:
                    _write(self._obs[a], i, obs.get(a) if a in alive else None)
                continue
            env_done[i] = True
            if not failed:
                episodes.append(self._episode(i))
            self._reset_env(i, None)
        return AgentStepResult({a: _copy(rows) for a, rows in self._obs.items()}, reward, terminated, truncated,
                               valid, env_done, final_obs, episodes, errors)

    def _episode(self, i: int) -> dict[str, float]:
        """Env ``i``'s episode: its length, each agent's return, and their mean over the agents that acted."""
        acted = self._acted[i]
        record: dict[str, float] = {"length": int(self._lengths[i]),
                                    "return": float(self._returns[i, acted].mean()) if acted.any() else 0.0}
        record.update({f"return/{a}": float(self._returns[i, j]) for j, a in enumerate(self.agents)})
        return record

    def render(self, env_index: int = 0, pixels: int | None = None) -> Any:
        """Env ``env_index``'s own ``render()`` (an RGB array for ``render_mode="rgb_array"``)."""
        return self.envs[env_index].render()

    def close(self) -> None:
        """Close every copy, even when one of them raises."""
        for i, env in enumerate(self.envs):
            try:
                env.close()
            except Exception:
                logger.exception("closing environment %d failed", i)
