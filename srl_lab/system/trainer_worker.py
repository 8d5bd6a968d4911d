"""TrainerWorker: a ``Learner`` fed by the sample stream, publishing weights to the parameter service.

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
from srl_lab.system.control import (WorkerContext, checkpoint_path_name, expected_fragments_name,
                                    limit_threads)
from srl_lab.system.fragments import check_fragment
from srl_lab.system.learner import Learner
from srl_lab.system.parameters import ParameterService
from srl_lab.system.streams import Receiver, bind

DRAIN_TIMEOUT_S = 60.0


class Trainer(Learner):
    """A learner with its sockets: the sample stream in, the parameter service out."""

    def __init__(self, config: ExperimentConfig, ctx: WorkerContext, zctx: zmq.Context, run_dir: str | None):
        super().__init__(config)
        self.ctx = ctx
        self.run_dir = run_dir
        self.sock, self.endpoint = bind(zctx, zmq.PULL, f"samples-{ctx.run_id}",
                                        rcvhwm=config.trainer.buffer_fragments)
        self.receiver = Receiver(self.sock, frozenset({"fragment"}))
        self.params = ParameterService(zctx, ctx.run_id)
        self.params.publish(self.version, self.policy.weights())

    @property
    def rejected(self) -> int:
        return self.receiver.rejected + self.params.rejected

    def receive(self, timeout_ms: int) -> bool:
        """Take one message if one arrives within ``timeout_ms``; True if something was received."""
        msg = self.receiver.recv(timeout_ms=timeout_ms)
        if msg is None:
            return False
        _, _, meta, arrays = msg
        episodes, env_errors = meta.get("episodes"), meta.get("env_errors", 0)
        if (check_fragment(arrays, self.config.actors.fragment_length) or not isinstance(episodes, list)
                or not isinstance(env_errors, int)):
            self.counters["malformed"] += 1
        else:
            self.offer(arrays, episodes, env_errors)
        return True

    def train(self) -> None:
        super().train()
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
        self.ctx.log(version=self.version, **self.counters, rejected=self.rejected,
                     episodes=self.take_episodes(), train=self.last_stats, **extra)

    def drain(self, expected: int) -> None:
        """Receive until every produced fragment is accounted for, then train on the remainder."""
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        while self.counters["fragments_received"] < expected and time.monotonic() < deadline:
            self.receive(timeout_ms=100)
        if self.batch:
            self.train()

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
              "rejected": trainer.rejected, "weights": trainer.policy.weights(),
              "algorithm_state": trainer.algorithm.state_dict()}
    if run_dir:
        result["checkpoint"] = trainer.checkpoint()
    trainer.close()
    zctx.term()
    return result
