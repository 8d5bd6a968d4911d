"""The trainer's core without sockets: accept fragments, drop stale ones, batch, train, version.

``TrainerWorker`` wraps it with the sample stream and the parameter service; the single-process
baseline drives it directly, so both measure the same learning code.
"""
from __future__ import annotations

import time
from typing import Any

from srl_lab.api.algorithm import Algorithm
from srl_lab.config import ExperimentConfig
from srl_lab.envs.factory import make_policy, probe_env
from srl_lab.policies import DEFAULT, for_policy
from srl_lab.system.fragments import batch_fragments


def make_algorithm(config: ExperimentConfig, policy, device: str) -> Algorithm:
    if config.algorithm is not None:
        return config.algorithm(policy, config.ppo, device)
    from srl_lab.algorithms.ppo import PPO

    return PPO(policy, config.ppo, device)


def needs_behaviour_values(config: ExperimentConfig) -> bool:
    """Whether the algorithm reads the actors' value of every step (a fragment's ``values``), or only
    the values that bootstrap its end and truncated episodes: PPO with V-trace computes its own, so
    inline actors then skip the critic on the other steps and send zeros there."""
    return config.algorithm is not None or config.ppo.advantage == "gae"


class Learner:
    """One policy's learner: ``config`` is the experiment, ``policy`` the name of the policy it trains."""

    def __init__(self, config: ExperimentConfig, policy: str = DEFAULT):
        self.policy_id = policy
        self.experiment = config  # what a checkpoint keeps, to resume every policy
        self.config = config = for_policy(config, policy)
        probe = probe_env(config, policy)
        self.policy = make_policy(config, probe.observation_space, probe.action_space, probe)
        self.algorithm = make_algorithm(config, self.policy, config.trainer.device)
        self.version = 0
        self.batch: list[dict[str, Any]] = []
        self.batch_steps = 0
        self.episodes: list[dict[str, float]] = []
        self.counters = {"fragments_received": 0, "fragments_consumed": 0, "dropped_stale": 0,
                         "env_steps_consumed": 0, "env_errors": 0}
        self.last_stats: dict[str, float] = {}
        # actor workers heard from while filling this batch and the one before (``actors_sending``)
        self._senders: tuple[set[int], set[int]] = (set(), set())

    def offer(self, arrays: dict[str, Any], episodes: list, env_errors: int, actor: int = 0) -> bool:
        """Take a well-formed fragment from actor worker ``actor``; False if it was dropped as stale
        (counted either way).

        Versions newer than the learner's own come from weights of a trainer that died after its
        last checkpoint: that future was lost, so such fragments are stale too.
        """
        self.counters["fragments_received"] += 1
        self.counters["env_errors"] += env_errors
        self.episodes.extend(e for e in episodes if isinstance(e, dict))
        self._senders[0].add(actor)
        versions = arrays["versions"]
        if (self.version - int(versions.min()) > self.config.trainer.max_version_lag
                or int(versions.max()) > self.version):
            self.counters["dropped_stale"] += 1
            return False
        self.batch.append(arrays)
        self.batch_steps += arrays["rewards"].size
        return True

    def actors_sending(self) -> int:
        """Actor workers whose fragments arrived while this batch or the last one filled (at least 1):
        one added live counts from its first fragment, one removed leaves the count two updates later."""
        now, before = self._senders
        return max(1, len(now | before))

    def batch_target(self) -> int:
        """Env-agent steps this learner collects before an update: ``trainer.batch_steps``, or that
        per actor sending to it (``trainer.batch_per_actor``). Each data-parallel rank collects its
        own, as each process of torch's DistributedDataParallel takes its own batch."""
        cfg = self.config.trainer
        return cfg.batch_steps * self.actors_sending() if cfg.batch_per_actor else cfg.batch_steps

    def ready(self) -> bool:
        return self.batch_steps >= self.batch_target()

    def train(self, fragments: int | None = None) -> None:
        """One algorithm update on the first ``fragments`` collected fragments (all by default)."""
        n = len(self.batch) if fragments is None else fragments
        taken, self.batch = self.batch[:n], self.batch[n:]
        steps = sum(f["rewards"].size for f in taken)
        self.update(taken)
        self.counters["fragments_consumed"] += n
        self.counters["env_steps_consumed"] += steps
        self.batch_steps -= steps

    def update(self, fragments: list[dict[str, Any]]) -> None:
        """Run the algorithm on ``fragments`` and bump the policy version (no bookkeeping)."""
        start = time.perf_counter()
        self.last_stats = self.algorithm.train(batch_fragments(fragments), version=self.version)
        self.last_stats["train_s"] = time.perf_counter() - start
        self.last_stats["batch_rows"] = sum(f["rewards"].size for f in fragments)
        self.last_stats["actors_sending"] = self.actors_sending()
        self.version += 1
        self._senders = (set(), self._senders[0])

    def take_episodes(self) -> list[dict[str, float]]:
        episodes, self.episodes = self.episodes, []
        return episodes
