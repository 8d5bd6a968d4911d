"""TrainerWorker: consumes fragments, runs the algorithm, publishes versioned weights.

Fragments whose oldest step was acted by a policy more than ``max_version_lag`` versions behind are
dropped and counted. On stop the trainer drains: it waits until it has received every fragment the
actors reported producing, trains on what is left, and returns exact counters
(``produced == consumed + dropped_stale``).
"""
from __future__ import annotations

import os
import time
from typing import Any

import torch
import zmq

from srl_lab.config import ExperimentConfig
from srl_lab.envs.factory import make_env_group, make_policy
from srl_lab.system.control import (WorkerContext, checkpoint_path_name, expected_fragments_name,
                                    limit_threads)
from srl_lab.system.fragments import batch_fragments, check_fragment
from srl_lab.system.parameters import ParameterService
from srl_lab.system.streams import Receiver, bind

DRAIN_TIMEOUT_S = 60.0


def make_algorithm(config: ExperimentConfig, policy, device: str):
    from srl_lab.algorithms.ppo import PPO

    return PPO(policy, config.ppo, device)


class Trainer:
    """The trainer's state machine, separate from the Dask task so it can be driven directly."""

    def __init__(self, config: ExperimentConfig, ctx: WorkerContext, zctx: zmq.Context, run_dir: str | None):
        self.config = config
        self.ctx = ctx
        self.run_dir = run_dir
        device = config.trainer.device
        probe = make_env_group(config, 1)
        self.policy = make_policy(config, probe.observation_space, probe.action_space)
        probe.close()
        self.algorithm = make_algorithm(config, self.policy, device)
        self.sock, self.endpoint = bind(zctx, zmq.PULL, f"samples-{ctx.run_id}",
                                        rcvhwm=config.trainer.buffer_fragments)
        self.receiver = Receiver(self.sock, frozenset({"fragment"}))
        self.params = ParameterService(zctx, ctx.run_id)
        self.version = 0
        self.params.publish(self.version, self.policy.weights())
        self.batch: list[dict[str, Any]] = []
        self.batch_rows_steps = 0
        self.episodes: list[dict[str, float]] = []
        self.counters = {"fragments_received": 0, "fragments_consumed": 0, "dropped_stale": 0,
                         "malformed": 0, "env_steps_consumed": 0, "env_errors": 0}
        self.last_stats: dict[str, float] = {}

    def receive(self, timeout_ms: int) -> bool:
        """Take one fragment if one arrives within ``timeout_ms``; True if something was received."""
        msg = self.receiver.recv(timeout_ms=timeout_ms)
        if msg is None:
            return False
        _, _, meta, arrays = msg
        problem = check_fragment(arrays, self.config.actors.fragment_length)
        episodes = meta.get("episodes")
        if problem or not isinstance(episodes, list):
            self.counters["malformed"] += 1
            return True
        self.counters["fragments_received"] += 1
        self.counters["env_errors"] += int(meta.get("env_errors", 0) or 0)
        self.episodes.extend(e for e in episodes if isinstance(e, dict))
        if self.version - int(arrays["versions"].min()) > self.config.trainer.max_version_lag:
            self.counters["dropped_stale"] += 1
            return True
        self.batch.append(arrays)
        self.batch_rows_steps += arrays["rewards"].size
        return True

    def ready(self) -> bool:
        return self.batch_rows_steps >= self.config.trainer.batch_steps

    def train(self) -> None:
        batch = batch_fragments(self.batch)
        start = time.perf_counter()
        self.last_stats = self.algorithm.train(batch)
        self.last_stats["train_s"] = time.perf_counter() - start
        self.counters["fragments_consumed"] += len(self.batch)
        self.counters["env_steps_consumed"] += self.batch_rows_steps
        self.batch, self.batch_rows_steps = [], 0
        self.version += 1
        self.params.publish(self.version, self.policy.weights())
        every = self.config.trainer.checkpoint_every_versions
        if self.run_dir and every and self.version % every == 0:
            self.checkpoint()

    def checkpoint(self) -> str:
        """Atomic write: a crash mid-write leaves the previous checkpoint intact."""
        folder = os.path.join(self.run_dir, "checkpoints")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"version-{self.version:08d}.pt")
        tmp = path + ".tmp"
        torch.save({"version": self.version, "algorithm": self.algorithm.state_dict(),
                    "counters": dict(self.counters), "config": self.config.to_dict()}, tmp)
        os.replace(tmp, path)
        return path

    def log(self, **extra: Any) -> None:
        episodes, self.episodes = self.episodes, []
        self.ctx.log(version=self.version, **self.counters, rejected=self.receiver.rejected + self.params.rejected,
                     episodes=episodes, train=self.last_stats, **extra)

    def drain(self, expected: int) -> None:
        """Receive until every produced fragment is accounted for, then train on the remainder."""
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        while self.accounted() < expected and time.monotonic() < deadline:
            self.receive(timeout_ms=100)
        if self.batch:
            self.train()

    def accounted(self) -> int:
        return self.counters["fragments_received"]

    def close(self) -> None:
        self.params.close()
        self.sock.close(linger=0)


def trainer_worker(run_id: str, config: ExperimentConfig, run_dir: str | None) -> dict[str, Any]:
    """Long-running Dask task: trains until told to stop, drains, returns counters and weights."""
    from distributed import Variable

    limit_threads()
    ctx = WorkerContext(run_id, "trainer", "trainer-0")
    zctx = zmq.Context()
    trainer = Trainer(config, ctx, zctx, run_dir)
    ctx.publish_endpoint("params", trainer.params.endpoint)
    ctx.publish_endpoint("samples", trainer.endpoint)
    last_log = time.monotonic()
    while not ctx.should_stop():
        if trainer.receive(timeout_ms=50) and trainer.ready():
            trainer.train()
        if run_dir and ctx.checkpoint_requested():
            Variable(checkpoint_path_name(run_id)).set(trainer.checkpoint())
        if time.monotonic() - last_log >= config.metrics_interval_s:
            trainer.log()
            last_log = time.monotonic()
    expected = Variable(expected_fragments_name(run_id)).get(timeout=DRAIN_TIMEOUT_S)
    trainer.drain(int(expected))
    trainer.log(state="stopped")
    result = {"worker": "trainer-0", "version": trainer.version, **trainer.counters,
              "rejected": trainer.receiver.rejected + trainer.params.rejected,
              "weights": trainer.policy.weights(), "algorithm_state": trainer.algorithm.state_dict()}
    if run_dir:
        result["checkpoint"] = trainer.checkpoint()
    trainer.close()
    zctx.term()
    return result
