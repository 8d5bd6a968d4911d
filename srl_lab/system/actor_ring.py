"""The actor's ring of env groups, independent of Dask and sockets.

While group i waits for its actions, group i+1 steps (with remote inference the policy worker
computes group i's batch meanwhile). Each group is a vectorised batch, so one inference message
carries the whole group. Full fragments are handed to ``emit(builder, last_value)`` once the value
after their last step is known. The Dask actor worker and the single-process baseline both drive
this class, so they measure the same code.
"""
from __future__ import annotations

from typing import Any, Callable, Protocol

import numpy as np

from srl_lab.api.env import EnvGroup, obs_rows
from srl_lab.api.tree import tree_concat, tree_map
from srl_lab.system.fragments import FragmentBuilder


class Inference(Protocol):
    latency_s: float

    def post(self, group: int, obs: Any) -> None: ...

    def wait(self, group: int, should_stop: Callable[[], bool]) -> Any: ...

    def close(self) -> None: ...


class _Group:
    """One env group of the ring and its in-progress fragment state."""

    def __init__(self, env: EnvGroup, length: int):
        self.env = env
        self.rows = env.num_envs * env.num_agents
        self.length = length
        self.obs: Any = None
        self.builder = FragmentBuilder(length, self.rows)
        self.pending: FragmentBuilder | None = None  # full, waiting for the value after its last step
        self.trunc_rows: tuple[FragmentBuilder, int, np.ndarray] | None = None


def flatten_rows(obs: Any, n: int) -> Any:
    """[n_envs, n_agents, ...] -> [n_envs * n_agents, ...] for an array or a dict of arrays."""
    return tree_map(lambda x: x.reshape(n, *x.shape[2:]), obs)


class ActorRing:
    def __init__(self, envs: list[EnvGroup], fragment_length: int, inference: Inference,
                 emit: Callable[[FragmentBuilder, np.ndarray], bool]):
        self.groups = [_Group(env, fragment_length) for env in envs]
        self.inference = inference
        self.emit = emit
        self.counters = {"env_steps": 0, "episodes": 0, "env_errors": 0}
        self.policy_version = -1
        for g, group in enumerate(self.groups):
            group.obs = flatten_rows(group.env.reset(), group.rows)
            inference.post(g, group.obs)

    def step(self, should_stop: Callable[[], bool]) -> bool:
        """Step every group once; False when stopped (or ``emit`` refused a fragment)."""
        for g, group in enumerate(self.groups):
            reply = self.inference.wait(g, should_stop)
            if reply is None or should_stop():
                return False
            if not self._step_group(g, group, reply):
                return False
        return True

    def _step_group(self, g: int, group: _Group, reply: Any) -> bool:
        n, n_agents = group.rows, group.env.num_agents
        self.policy_version = reply.version
        if group.trunc_rows is not None:  # values of final observations of truncated episodes
            builder, t, rows = group.trunc_rows
            builder.trunc_values[t, rows] = reply.values[n:]
            group.trunc_rows = None
        if group.pending is not None:
            if not self.emit(group.pending, reply.values[:n]):
                return False
            group.pending = None
        b = group.builder
        b.add_policy_step(group.obs, reply.actions[:n], reply.logp[:n], reply.values[:n], reply.version)
        result = group.env.step(reply.actions[:n].reshape(group.env.num_envs, n_agents, *reply.actions.shape[1:]))
        b.add_env_step(result.reward.reshape(n), np.repeat(result.terminated, n_agents),
                       np.repeat(result.truncated, n_agents))
        b.episodes.extend(result.episodes)
        b.env_errors += result.env_errors
        self.counters["env_steps"] += group.env.num_envs
        self.counters["episodes"] += len(result.episodes)
        self.counters["env_errors"] += result.env_errors
        group.obs = flatten_rows(result.obs, n)
        request = group.obs
        truncated = np.repeat(result.truncated, n_agents)
        if truncated.any():  # ask for V(final obs) in the same message, as extra rows
            rows = np.flatnonzero(truncated)
            group.trunc_rows = (b, b.steps - 1, rows)
            request = tree_concat([group.obs, obs_rows(flatten_rows(result.final_obs, n), rows)])
        if b.full:
            group.pending, group.builder = b, FragmentBuilder(group.length, n)
        self.inference.post(g, request)
        return True

    def close(self) -> None:
        self.inference.close()
        for group in self.groups:
            group.env.close()
