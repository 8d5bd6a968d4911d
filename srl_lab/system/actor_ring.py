"""The actor's ring of env groups, independent of Dask and sockets.

While group i waits for its actions, group i+1 steps (with remote inference the policy worker
computes group i's batch meanwhile). Each group is a vectorised batch, so one inference message
carries the whole group. Full fragments are handed to ``emit(builder, last_value)`` once the value
after their last step is known. The Dask actor worker and the single-process baseline both drive
this class, so they measure the same code.

Recurrent policies: a reply that carries ``state`` makes the ring keep it per env-agent row, send it
with the group's next request, zero it for rows whose episode ended (the env resets them in the same
step), and store the state before every step in the fragment (``states``). The first request goes
without a state (the policy starts from its all-zero initial state). Values of the final observations
of truncated episodes are asked for with the rows' state before that reset. Feed-forward policies
send and store no state.
"""
from __future__ import annotations

from typing import Any, Callable, Protocol

import numpy as np

from srl_lab.api.env import EnvGroup, extras, obs_rows
from srl_lab.api.tree import tree_concat, tree_map
from srl_lab.system.fragments import FragmentBuilder


class Inference(Protocol):
    latency_s: float

    def post(self, group: int, obs: Any, state: np.ndarray | None = None) -> None: ...

    def wait(self, group: int, should_stop: Callable[[], bool]) -> Any: ...

    def close(self) -> None: ...


class _Group:
    """One env group of the ring and its in-progress fragment state."""

    def __init__(self, env: EnvGroup, length: int):
        self.env = env
        self.rows = env.num_envs * env.num_agents
        self.length = length
        self.obs: Any = None
        self.state: np.ndarray | None = None  # recurrent policies: the rows' state that goes with obs
        self.trained_rows = extras(env).trained_rows  # None: every row trains
        self.builder = self.new_builder()
        self.pending: FragmentBuilder | None = None  # full, waiting for the value after its last step
        self.trunc_rows: tuple[FragmentBuilder, int, np.ndarray] | None = None

    def new_builder(self) -> FragmentBuilder:
        return FragmentBuilder(self.length, self.rows, self.trained_rows)


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
        state_after = reply.state
        if state_after is not None:
            state_after = state_after[:n]
            if group.state is None:  # the first request went without: the initial state
                group.state = np.zeros_like(state_after)
        b = group.builder
        b.add_policy_step(group.obs, reply.actions[:n], reply.logp[:n], reply.values[:n], reply.version,
                          group.state)
        result = group.env.step(reply.actions[:n].reshape(group.env.num_envs, n_agents, *reply.actions.shape[1:]))
        valid = None if result.valid is None else result.valid.reshape(n)
        b.add_env_step(result.reward.reshape(n), np.repeat(result.terminated, n_agents),
                       np.repeat(result.truncated, n_agents), valid)
        b.episodes.extend(result.episodes)
        b.env_errors += result.env_errors
        self.counters["env_steps"] += group.env.num_envs
        self.counters["episodes"] += len(result.episodes)
        self.counters["env_errors"] += result.env_errors
        group.obs = flatten_rows(result.obs, n)
        truncated = np.repeat(result.truncated, n_agents)
        if state_after is not None:  # rows whose episode ended start the next one from zero
            group.state = state_after.copy()
            group.state[np.repeat(result.terminated | result.truncated, n_agents)] = 0.0
            if valid is not None:  # a row whose step was a delayed reset starts its episode now
                group.state[~valid] = 0.0
        request, request_state = group.obs, group.state
        if truncated.any():  # ask for V(final obs) in the same message, as extra rows
            rows = np.flatnonzero(truncated)
            group.trunc_rows = (b, b.steps - 1, rows)
            request = tree_concat([group.obs, obs_rows(flatten_rows(result.final_obs, n), rows)])
            if state_after is not None:  # the final observation follows the state before the reset
                request_state = np.concatenate([group.state, state_after[rows]])
        if b.full:
            group.pending, group.builder = b, group.new_builder()
        if request_state is None:
            self.inference.post(g, request)
        else:
            self.inference.post(g, request, request_state)
        return True

    def close(self) -> None:
        self.inference.close()
        for group in self.groups:
            group.env.close()
