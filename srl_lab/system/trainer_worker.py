"""TrainerWorker: a ``Learner`` fed by the sample stream, publishing weights to the parameter service.

Fragments whose oldest step was acted by a policy more than ``max_version_lag`` versions behind are
dropped and counted. Checkpoints (model, optimiser, normalisers, counters, the fragment ledger, RNG
state, config) are written atomically every ``checkpoint_every_versions`` versions or
``checkpoint_every_s`` seconds and on demand. A trainer task that starts and finds checkpoints in
its run directory continues from the newest one: that is how a trainer whose process died (and
``Run.resume``) picks up, with a version that never goes back past that checkpoint.

On stop the trainer drains: it waits until every fragment each live actor incarnation reported
producing has arrived, trains on what is left, and returns its counters and ledger, from which the
controller closes the books (``produced == consumed + dropped_stale + lost``).
"""
from __future__ import annotations

import time
from collections import Counter
from typing import Any

import cloudpickle
import zmq

from srl_lab.config import ExperimentConfig
from srl_lab.system import checkpoints
from srl_lab.system.control import WorkerContext, checkpoint_path_name, expected_fragments_name, limit_threads
from srl_lab.system.fragments import check_fragment
from srl_lab.system.learner import Learner
from srl_lab.system.parameters import ParameterService
from srl_lab.system.sample_stream import Ledger, parse_fragment_meta
from srl_lab.system.streams import Receiver, bind

DRAIN_TIMEOUT_S = 60.0
CHECKPOINT_FORMAT = 1


class Trainer(Learner):
    """A learner with its sockets (sample stream in, parameter service out) and its checkpoints."""

    def __init__(self, config: ExperimentConfig, ctx: WorkerContext, zctx: zmq.Context, run_dir: str | None):
        super().__init__(config)
        self.ctx = ctx
        self.run_dir = run_dir
        self.ledger = Ledger()
        self.pending: Counter = Counter()  # ledger keys of the fragments in the untrained batch
        self.restored_from = self.restore() if run_dir else None
        self._checkpointed = (self.version, time.monotonic())
        self.sock, self.endpoint = bind(zctx, zmq.PULL, f"samples-{ctx.run_id}",
                                        rcvhwm=config.trainer.buffer_fragments)
        self.receiver = Receiver(self.sock, frozenset({"fragment"}), ctx.secret)
        self.params = ParameterService(zctx, ctx.run_id, ctx.secret, origin=ctx.incarnation)
        self.params.publish(self.version, self.policy.weights())

    @property
    def rejected(self) -> int:
        return self.receiver.rejected + self.params.rejected

    @property
    def unauthenticated(self) -> int:
        return self.receiver.unauthenticated + self.params.receiver.unauthenticated

    def receive(self, timeout_ms: int) -> bool:
        """Take one message if one arrives within ``timeout_ms``; True if something was received."""
        msg = self.receiver.recv(timeout_ms=timeout_ms)
        if msg is None:
            return False
        _, _, meta, arrays = msg
        parsed = parse_fragment_meta(meta)
        if parsed is None or check_fragment(arrays, self.config.actors.fragment_length):
            self.counters["malformed"] += 1
            return True
        key, seq, episodes, env_errors = parsed
        self.ledger.record(key, seq)
        if self.offer(arrays, episodes, env_errors):
            self.pending[key] += 1
        return True

    def train(self) -> None:
        with self.ctx.busy():
            super().train()
        self.pending.clear()
        self.params.publish(self.version, self.policy.weights())
        if self.run_dir and self._checkpoint_due():
            self.checkpoint()

    def _checkpoint_due(self) -> bool:
        cfg = self.config.trainer
        version, at = self._checkpointed
        return bool((cfg.checkpoint_every_versions and self.version - version >= cfg.checkpoint_every_versions)
                    or (cfg.checkpoint_every_s and time.monotonic() - at >= cfg.checkpoint_every_s))

    def checkpoint(self) -> str:
        """Write everything needed to continue exactly here, atomically; returns the path.

        Fragments waiting in an untrained batch are left out (counters and ledger alike): if this
        trainer dies they are lost, and the books say so.
        """
        counters = dict(self.counters, fragments_received=self.counters["fragments_received"] - len(self.batch))
        state = {"format": CHECKPOINT_FORMAT, "version": self.version, "algorithm": self.algorithm.state_dict(),
                 "counters": counters, "ledger": self.ledger.snapshot(self.pending),
                 "rng": checkpoints.rng_state(), "config": self.config.to_dict(),
                 "config_pickle": cloudpickle.dumps(self.config), "run_id": self.ctx.run_id, "time": time.time()}
        with self.ctx.busy():
            path = checkpoints.save(checkpoints.folder(self.run_dir), self.version, state,
                                    keep=self.config.trainer.checkpoint_keep)
        self._checkpointed = (self.version, time.monotonic())
        return path

    def restore(self) -> str | None:
        """Continue from the newest checkpoint in the run directory, if there is one."""
        directory = checkpoints.folder(self.run_dir)
        checkpoints.remove_temporary(directory)
        found = checkpoints.load_latest(directory)
        if found is None:
            return None
        path, state = found
        self.algorithm.load_state_dict(state["algorithm"])
        self.version = int(state["version"])
        self.counters.update(state["counters"])
        self.ledger = Ledger(state["ledger"])
        checkpoints.restore_rng(state["rng"])
        return path

    def log(self, **extra: Any) -> None:
        self.ctx.log(version=self.version, **self.counters, rejected=self.rejected,
                     unauthenticated=self.unauthenticated, episodes=self.take_episodes(),
                     train=self.last_stats, **extra)

    def drain(self, expected: dict[str, int]) -> None:
        """Receive until every live incarnation's last fragment is in, then train on the remainder."""
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        while not self.ledger.caught_up(expected) and time.monotonic() < deadline:
            self.receive(timeout_ms=100)
        while self.receive(timeout_ms=0):  # anything else already queued (e.g. from killed actors)
            pass
        if self.batch:
            self.train()

    def close(self) -> None:
        self.params.close()
        self.sock.close(linger=0)


def trainer_worker(run_id: str, config: ExperimentConfig, run_dir: str | None, secret: bytes) -> dict[str, Any]:
    """Long-running Dask task: trains until told to stop, drains, returns counters and weights."""
    from distributed import Variable

    limit_threads()
    ctx = WorkerContext(run_id, "trainer", "trainer-0", secret)
    zctx = zmq.Context()
    trainer: Trainer | None = None
    try:
        trainer = Trainer(config, ctx, zctx, run_dir)
        ctx.publish_endpoint("params", trainer.params.endpoint)
        ctx.publish_endpoint("samples", trainer.endpoint)
        ctx.running()
        trainer.log(restored_from=trainer.restored_from)
        last_log = time.monotonic()
        while not ctx.should_stop():
            if trainer.receive(timeout_ms=50) and trainer.ready():
                trainer.train()
            if run_dir and ctx.checkpoint_requested():
                Variable(checkpoint_path_name(run_id)).set(trainer.checkpoint())
            ctx.progress["version"] = trainer.version
            if time.monotonic() - last_log >= config.metrics_interval_s:
                trainer.log()
                last_log = time.monotonic()
        trainer.drain(Variable(expected_fragments_name(run_id)).get(timeout=DRAIN_TIMEOUT_S))
        trainer.log(state="stopped")
        result = {"worker": "trainer-0", "inc": ctx.incarnation, "version": trainer.version, **trainer.counters,
                  "rejected": trainer.rejected, "unauthenticated": trainer.unauthenticated,
                  "ledger": trainer.ledger.entries, "restored_from": trainer.restored_from,
                  "weights": trainer.policy.weights()}
        if run_dir:
            result["checkpoint"] = trainer.checkpoint()
        return result
    finally:
        if trainer is not None:
            trainer.close()  # the parameter service thread first, then every socket
        zctx.destroy(linger=0)
