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

Several policies: each group is an ``EnvSplit`` with one slot per policy; every policy's rows of a
group are posted to that policy's inference, the env steps once all have answered, and each
policy's fragments go to ``emit`` under its name.
"""
from __future__ import annotations

from typing import Any, Callable, Protocol

import numpy as np

from srl_lab.api.env import extras, obs_rows
from srl_lab.api.tree import tree_concat, tree_map
from srl_lab.system.fragments import FragmentBuilder
from srl_lab.system.opponent_pool import OpponentPlay
from srl_lab.policies import DEFAULT
from srl_lab.system.policy_views import EnvSplit, WholeGroup


class Inference(Protocol):
    """``post(..., bootstrap)``: True when the reply's values bootstrap a full fragment (``last_value``)
    or truncated episodes (``trunc_values``); an inference may skip the values of the other requests."""

    latency_s: float

    def post(self, group: int, obs: Any, state: np.ndarray | None = None, bootstrap: bool = True) -> None: ...

    def wait(self, group: int, should_stop: Callable[[], bool]) -> Any: ...

    def close(self) -> None: ...


class _Slot:
    """One policy's rows of one env group, and its in-progress fragment state."""

    def __init__(self, view: Any, length: int, play: OpponentPlay | None = None):
        self.num_agents = view.num_agents
        self.rows = view.num_envs * view.num_agents
        self.length = length
        self.play = play  # past versions play some rows (self-play against a pool), never trained
        self.obs: Any = None
        self.state: np.ndarray | None = None  # recurrent policies: the rows' state that goes with obs
        self.state_after: np.ndarray | None = None  # ... after the step being taken
        self.trained_rows = extras(view).trained_rows  # None: every row trains
        if play is not None:
            trained = np.zeros(self.rows, dtype=bool)
            trained[np.arange(self.rows) if self.trained_rows is None else self.trained_rows] = True
            self.trained_rows = np.flatnonzero(trained & ~play.frozen)
        self.builder = self.new_builder()
        self.pending: FragmentBuilder | None = None  # full, waiting for the value after its last step
        self.trunc_rows: tuple[FragmentBuilder, int, np.ndarray] | None = None

    def new_builder(self) -> FragmentBuilder:
        return FragmentBuilder(self.length, self.rows, self.trained_rows)


class _Group:
    """One env group of the ring (split by policy) and a slot per policy."""

    def __init__(self, env: EnvSplit, length: int, plays: dict[str, OpponentPlay]):
        self.env = env
        self.slots = {policy: _Slot(view, length, plays.get(policy)) for policy, view in env.views.items()}


def flatten_rows(obs: Any, n: int) -> Any:
    """[n_envs, n_agents, ...] -> [n_envs * n_agents, ...] for an array or a dict of arrays."""
    return tree_map(lambda x: x.reshape(n, *x.shape[2:]), obs)


def _row_flags(per_env: np.ndarray, per_row: np.ndarray | None, n_agents: int) -> np.ndarray:
    """A step's per-row flag: its env's flag, or the row's own (an agent that ended alone)."""
    flags = np.repeat(per_env, n_agents)
    return flags if per_row is None else flags | per_row.reshape(-1)


class ActorRing:
    """Steps its env groups in turn; ``inference[policy]`` acts for that policy's rows of every group.

    ``emit(policy, builder, last_value)`` receives each full fragment of one policy's rows.
    ``opponents[(group, policy)]`` plays some of that policy's rows of that group with past versions.
    """

    def __init__(self, envs: list[EnvSplit], fragment_length: int, inference: dict[str, Inference],
                 emit: Callable[[str, FragmentBuilder, np.ndarray], bool],
                 opponents: dict[tuple[int, str], OpponentPlay] | None = None):
        opponents = opponents or {}
        self.groups = [_Group(env, fragment_length, {p: play for (g2, p), play in opponents.items() if g2 == g})
                       for g, env in enumerate(envs)]
        self.inference = inference
        self.emit = emit
        self.counters = {"env_steps": 0, "episodes": 0, "env_errors": 0}
        self.policy_versions = {policy: -1 for policy in self.groups[0].slots}
        for g, group in enumerate(self.groups):
            obs = group.env.reset()
            for policy, slot in group.slots.items():
                slot.obs = flatten_rows(obs[policy], slot.rows)
                inference[policy].post(g, slot.obs, bootstrap=False)

    @classmethod
    def single(cls, envs: list[Any], fragment_length: int, inference: Inference,
               emit: Callable[[FragmentBuilder, np.ndarray], bool]) -> "ActorRing":
        """A ring of ordinary env groups played by one policy (tests, baselines, benchmarks)."""
        return cls([WholeGroup(env) for env in envs], fragment_length, {DEFAULT: inference},
                   lambda policy, builder, last_value: emit(builder, last_value))

    @property
    def policy_version(self) -> int:
        """The version that acted last for the first policy (the only one of a single-policy run)."""
        return next(iter(self.policy_versions.values()))

    def step(self, should_stop: Callable[[], bool]) -> bool:
        """Step every group once; False when stopped (or ``emit`` refused a fragment)."""
        for g, group in enumerate(self.groups):
            actions = {}
            for policy, slot in group.slots.items():
                reply = self.inference[policy].wait(g, should_stop)
                if reply is None or should_stop() or not self._record_reply(policy, slot, reply):
                    return False
                actions[policy] = reply.actions[:slot.rows].reshape(
                    group.env.num_envs, slot.num_agents, *reply.actions.shape[1:])
            results = group.env.step(actions)
            for policy, slot in group.slots.items():
                self._record_step(g, policy, slot, results[policy])
            first = next(iter(results.values()))  # every policy's result reports the same episodes
            self.counters["env_steps"] += group.env.num_envs * group.env.action_repeat
            self.counters["episodes"] += len(first.episodes)
            self.counters["env_errors"] += first.env_errors
        return True

    def _record_reply(self, policy: str, slot: _Slot, reply: Any) -> bool:
        """Store what the policy answered for the slot's rows; False if ``emit`` refused a fragment."""
        n = slot.rows
        self.policy_versions[policy] = reply.version
        if slot.trunc_rows is not None:  # values of final observations of truncated episodes
            builder, t, rows = slot.trunc_rows
            builder.trunc_values[t, rows] = reply.values[n:]
            slot.trunc_rows = None
        if slot.pending is not None:
            if not self.emit(policy, slot.pending, reply.values[:n]):
                return False
            slot.pending = None
        if slot.play is not None:
            reply = slot.play.act(slot.obs, reply)
        slot.state_after = None if reply.state is None else reply.state[:n]
        if slot.state_after is not None and slot.state is None:  # the first request went without one
            slot.state = np.zeros_like(slot.state_after)
        slot.builder.add_policy_step(slot.obs, reply.actions[:n], reply.logp[:n], reply.values[:n],
                                     reply.version, slot.state)
        return True

    def _record_step(self, g: int, policy: str, slot: _Slot, result: Any) -> None:
        """Record the env's answer for the slot's rows and ask the policy for the next actions."""
        n, b, state_after = slot.rows, slot.builder, slot.state_after
        valid = None if result.valid is None else result.valid.reshape(n)
        terminated = _row_flags(result.terminated, result.agent_terminated, slot.num_agents)
        truncated = _row_flags(result.truncated, result.agent_truncated, slot.num_agents)
        b.add_env_step(result.reward.reshape(n), terminated, truncated, valid)
        if slot.play is not None:
            slot.play.record(result.reward.reshape(n), terminated | truncated)
        b.episodes.extend(result.episodes)
        b.env_errors += result.env_errors
        slot.obs = flatten_rows(result.obs, n)
        if state_after is not None:  # rows whose episode ended start the next one from zero
            slot.state = state_after.copy()
            slot.state[terminated | truncated] = 0.0
            if valid is not None:  # a row whose step was a delayed reset starts its episode now
                slot.state[~valid] = 0.0
        request, request_state = slot.obs, slot.state
        any_truncated = bool(truncated.any())
        if any_truncated:  # ask for V(final obs) in the same message, as extra rows
            rows = np.flatnonzero(truncated)
            slot.trunc_rows = (b, b.steps - 1, rows)
            request = tree_concat([slot.obs, obs_rows(flatten_rows(result.final_obs, n), rows)])
            if state_after is not None:  # the final observation follows the state before the reset
                request_state = np.concatenate([slot.state, state_after[rows]])
        bootstrap = b.full or any_truncated
        if b.full:
            slot.pending, slot.builder = b, slot.new_builder()
        self.inference[policy].post(g, request, request_state, bootstrap=bootstrap)

    def take_pool_results(self) -> dict[str, list[dict[str, Any]]]:
        """Episodes against past versions since the last call, per policy, with the version that trained."""
        results: dict[str, list[dict[str, Any]]] = {}
        for group in self.groups:
            for policy, slot in group.slots.items():
                if slot.play is not None:
                    results.setdefault(policy, []).extend(
                        {**r, "learner_version": self.policy_versions[policy]} for r in slot.play.take_results())
        return results

    def close(self) -> None:
        for inference in self.inference.values():
            inference.close()
        for group in self.groups:
            group.env.close()
