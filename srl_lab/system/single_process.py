"""The single-process baseline: the same env groups, ring, policy and learner, with no Dask and no
sockets. It is the ceiling a distributed run is measured against (``benchmarks/cartpole_throughput``)
and a quick way to debug an algorithm without a cluster."""
from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

from srl_lab.api.policy import Policy
from srl_lab.config import ExperimentConfig
from srl_lab.envs.factory import make_env_group
from srl_lab.system.actor_ring import ActorRing
from srl_lab.system.fragments import FragmentBuilder
from srl_lab.system.inference import Reply, step_policy
from srl_lab.system.learner import Learner, needs_behaviour_values


class SharedPolicyInference:
    """Acts with the learner's own policy object: always the latest version, no weight copies.
    A subclass may act with another network by overriding ``acting``."""

    latency_s = 0.0

    def __init__(self, learner: Learner):
        self.learner = learner
        self.values_every_step = needs_behaviour_values(learner.config)
        self._replies: dict[int, Reply] = {}

    def acting(self) -> tuple[Policy, int]:
        """The network that acts, and its version."""
        return self.learner.policy, self.learner.version

    def post(self, group: int, obs: Any, state: np.ndarray | None = None, bootstrap: bool = True) -> None:
        policy, version = self.acting()
        actions, logp, values, next_state = step_policy(policy, obs, state,
                                                        values=self.values_every_step or bootstrap)
        self._replies[group] = Reply(actions, logp, values, version, next_state)

    def wait(self, group: int, should_stop: Callable[[], bool]) -> Reply:
        return self._replies.pop(group)

    def close(self) -> None:
        pass


def learner_ring(config: ExperimentConfig, learner: Learner, inference: Any,
                 after_update: Callable[[], None] = lambda: None) -> ActorRing:
    """One actor's env groups on a ring whose fragments go straight to ``learner``, which trains
    (then calls ``after_update``) whenever its batch is full."""
    acfg = config.actors

    def emit(builder: FragmentBuilder, last_value: np.ndarray) -> bool:
        learner.offer(builder.arrays(last_value), builder.episodes, builder.env_errors)
        if learner.ready():
            learner.train()
            after_update()
        return True

    envs = [make_env_group(config, acfg.envs_per_group, seed=config.seed * 100_003 + g) for g in range(acfg.ring_size)]
    return ActorRing.single(envs, acfg.fragment_length, inference, emit)


def train_single_process(config: ExperimentConfig, env_steps: int) -> dict[str, Any]:
    """Train for ``env_steps`` env steps in this process; returns throughput and returns."""
    import torch

    torch.set_num_threads(1)
    learner = Learner(config)
    ring = learner_ring(config, learner, SharedPolicyInference(learner))
    start = time.perf_counter()
    while ring.counters["env_steps"] < env_steps:
        ring.step(lambda: False)
    seconds = time.perf_counter() - start
    ring.close()
    returns = [e["return"] for e in learner.episodes]
    return {"env_steps": ring.counters["env_steps"], "seconds": seconds,
            "env_steps_per_s": ring.counters["env_steps"] / seconds, "version": learner.version,
            "final_return": float(np.mean(returns[-20:])) if returns else float("nan")}
