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

With ``trainer.trainers`` > 1 the trainers form a data-parallel group (``data_parallel``): rank
``r`` serves the sample endpoint ``service("samples", policy, r)`` for its share of the actors, all ranks agree
each loop on whether to train, checkpoint or stop, and only rank 0 publishes weights and writes
checkpoints (with every rank's books in them).

Several policies: each has its own trainers (its own group), endpoints, checkpoints and books; a
trainer sees the experiment through ``policies.for_policy``.
"""
from __future__ import annotations

import time
from collections import Counter
from typing import Any

import cloudpickle
import zmq

from srl_lab.config import ExperimentConfig
from srl_lab.policies import DEFAULT, service, trainer_slots
from srl_lab.system import checkpoints
from srl_lab.system.control import WorkerContext, checkpoint_path_name, expected_fragments_name, limit_threads
from srl_lab.system.data_parallel import TrainerGroup, TrainerGroupBroken
from srl_lab.system.fragments import check_fragment, check_spaces
from srl_lab.system.learner import Learner
from srl_lab.system.opponent_pool import PoolKeeper
from srl_lab.system.parameters import ParameterService
from srl_lab.system.sample_stream import Ledger, read_fragment_meta, trainer_of_actor
from srl_lab.system.streams import Receiver, Refused, bind, refusal_report

DRAIN_TIMEOUT_S = 60.0
CHECKPOINT_FORMAT = 1


class Trainer(Learner):
    """A learner with its sockets (sample stream in, parameter service out) and its checkpoints."""

    def __init__(self, config: ExperimentConfig, ctx: WorkerContext, zctx: zmq.Context, run_dir: str | None,
                 rank: int = 0, policy: str = DEFAULT):
        super().__init__(config, policy)
        config = self.config  # as this policy's trainer sees it
        self.ctx = ctx
        self.run_dir = run_dir
        self.rank = rank
        self.ledger = Ledger()
        self.batch_keys: list[str] = []  # ledger key of each fragment in the untrained batch
        self._restored_pool: dict[int, Any] = {}  # past versions of a self-play pool, from the checkpoint
        self.restored_from = self.restore() if run_dir else None
        self._checkpointed = (self.version, time.monotonic())
        self.group: TrainerGroup | None = None
        if config.trainer.trainers > 1:
            timeout_s = max(config.trainer.heartbeat_timeout_s, DRAIN_TIMEOUT_S) + 60
            self.group = TrainerGroup.join(ctx, rank, config.trainer.trainers, timeout_s,
                                           cuda=config.trainer.device != "cpu", policy=policy)
            self.group.broadcast_from_rank0(self.algorithm)
            self.version = self.group.gather(self.version)[0]
            self.group.attach(self.algorithm)
        self.sock, self.endpoint = bind(zctx, zmq.PULL, f"samples-{ctx.run_id}",
                                        rcvhwm=config.trainer.buffer_fragments)
        self.receiver = Receiver(self.sock, frozenset({"fragment"}), ctx.secret)
        self.params: ParameterService | None = None
        self.pool: PoolKeeper | None = None
        if rank == 0:
            self.params = ParameterService(zctx, ctx.run_id, ctx.secret, origin=ctx.incarnation)
            weights = self.policy.weights()
            self.params.publish(self.version, weights)
            if config.policy.pool is not None:
                self.pool = PoolKeeper(config.policy.pool, self.params)
                self.pool.restore(self._restored_pool)
                self.pool.after_update(self.version, weights)

    def stream_counts(self) -> dict[str, Any]:
        """Messages refused on the sample socket and by the parameter service; replies the latter sent."""
        if self.params is None:
            return {**refusal_report(self.receiver.refusals), "param_requests_served": 0}
        return {**refusal_report(self.receiver.refusals, self.params.refusals),
                "param_requests_served": self.params.requests_served}

    def receive_turn(self) -> None:
        """Read the sample socket for this turn of the loop: until the batch is full, waiting up to
        50 ms; in a data-parallel group also while the other ranks fill theirs, without waiting and
        up to a second batch (its actors then wait), or without limit once the actors are stopping.
        A peer may then never fill its batch, so the group trains no more until the trainers are
        told to stop, after every actor has returned: a rank that kept to its limit would leave its
        actors' last fragments unread while they stop (they give them FLUSH_LINGER_MS), and lose them."""
        if not self.ready():
            self.receive(timeout_ms=50)
        elif self.group is not None and (self.batch_steps < 2 * self.batch_target() or self.ctx.actors_stopping()):
            self.receive(timeout_ms=0)

    def receive(self, timeout_ms: int) -> bool:
        """Take one message if one arrives within ``timeout_ms``; True if something was received."""
        msg = self.receiver.recv(timeout_ms=timeout_ms)
        if msg is None:
            return False
        _, _, meta, arrays = msg
        try:
            key, seq, episodes, env_errors = read_fragment_meta(meta)
            problem = (check_fragment(arrays, self.config.actors.fragment_length)
                       or check_spaces(arrays, self.policy.observation_space, self.policy.action_space))
            if problem:
                raise Refused(problem)
        except Refused as refused:
            self.receiver.refuse(f"fragment: {refused}")
            return True
        self.ledger.record(key, seq)
        if self.offer(arrays, episodes, env_errors, actor=int(meta["actor"])):
            self.batch_keys.append(key)
        return True

    def agree(self, ready: bool, stop: bool, checkpoint: bool) -> tuple[bool, bool, bool]:
        """Whether to train, stop and checkpoint now: this trainer's own view, or the group's."""
        return (ready, stop, checkpoint) if self.group is None else self.group.agree(ready, stop, checkpoint)

    def train(self, fragments: int | None = None) -> None:
        if self.group is not None:
            fragments = self.group.common_batch_size(len(self.batch))
        n = len(self.batch) if fragments is None else fragments
        with self.ctx.busy():
            super().train(n)
        del self.batch_keys[:n]
        self._after_update()

    def _after_update(self) -> None:
        if self.group is not None:
            self.group.average_statistics(self.policy, self.algorithm)
            self.group.check_identical(self.policy, self.version)
        if self.params is not None:
            weights = self.policy.weights()
            self.params.publish(self.version, weights)
            if self.pool is not None:
                self.pool.after_update(self.version, weights)

    def checkpoint_due(self) -> bool:
        cfg = self.config.trainer
        version, at = self._checkpointed
        return bool((cfg.checkpoint_every_versions and self.version - version >= cfg.checkpoint_every_versions)
                    or (cfg.checkpoint_every_s and time.monotonic() - at >= cfg.checkpoint_every_s))

    def checkpoint(self) -> str | None:
        """Write everything needed to continue exactly here, atomically; returns the path.

        Fragments waiting in an untrained batch are left out (counters and ledger alike): if this
        trainer dies they are lost, and the books say so. In a data-parallel group every rank calls
        this together; rank 0 writes every rank's books and returns the path, the others None.
        """
        counters = dict(self.counters, fragments_received=self.counters["fragments_received"] - len(self.batch))
        books = {"counters": counters, "ledger": self.ledger.snapshot(Counter(self.batch_keys))}
        peers = self.group.gather(books)[1:] if self.group is not None else []
        if self.rank != 0:
            self._checkpointed = (self.version, time.monotonic())
            return None
        state = {"format": CHECKPOINT_FORMAT, "version": self.version, "algorithm": self.algorithm.state_dict(),
                 **books, "peer_books": peers, "pool": self.pool.state() if self.pool is not None else {},
                 "rng": checkpoints.rng_state(), "config": self.experiment.to_dict(),
                 "config_pickle": cloudpickle.dumps(self.experiment), "run_id": self.ctx.run_id, "time": time.time()}
        with self.ctx.busy():
            path = checkpoints.save(checkpoints.folder(self.run_dir, self.policy_id), self.version, state,
                                    keep=self.config.trainer.checkpoint_keep)
        self._checkpointed = (self.version, time.monotonic())
        return path

    def restore(self) -> str | None:
        """Continue from the newest checkpoint in the run directory, if there is one."""
        directory = checkpoints.folder(self.run_dir, self.policy_id)
        checkpoints.remove_temporary(directory)
        found = checkpoints.load_latest(directory)
        if found is None:
            return None
        path, state = found
        self._restored_pool = state.get("pool", {})
        self.algorithm.load_state_dict(state["algorithm"])
        self.version = int(state["version"])
        peers = state.get("peer_books", [])
        books = state if self.rank == 0 else peers[self.rank - 1] if self.rank <= len(peers) else None
        if books is not None:
            self.counters.update(books["counters"])
            self.ledger = Ledger(books["ledger"])
        checkpoints.restore_rng(state["rng"])
        return path

    def log(self, **extra: Any) -> None:
        named = {} if self.policy_id == DEFAULT else {"policy": self.policy_id}
        self.ctx.log(version=self.version, **{**self.counters, **self.stream_counts()},
                     episodes=self.take_episodes(), train=self.last_stats, **named, **extra)

    def drain(self, expected: dict[str, int]) -> None:
        """Receive until every live incarnation's last fragment is in, then train on the remainder.

        ``expected`` lists every actor incarnation of the run; this trainer waits for its share. In a
        data-parallel group the remainders differ in size, so every rank trains on all of them.
        """
        trainers = self.config.trainer.trainers
        mine = {k: n for k, n in expected.items() if trainer_of_actor(int(k.split(":")[0]), trainers) == self.rank}
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        while not self.ledger.caught_up(mine) and time.monotonic() < deadline:
            self.receive(timeout_ms=100)
        while self.receive(timeout_ms=0):  # anything else already queued (e.g. from killed actors)
            pass
        if self.group is None:
            if self.batch:
                self.train()
            return
        remainder = [f for fragments in self.group.gather(self.batch) for f in fragments]
        if remainder:
            with self.ctx.busy():
                self.update(remainder)
            self.counters["fragments_consumed"] += len(self.batch)
            self.counters["env_steps_consumed"] += self.batch_steps
            self.batch, self.batch_steps, self.batch_keys = [], 0, []
            self._after_update()

    def close(self) -> None:
        if self.params is not None:
            self.params.close()
        if self.group is not None:
            self.group.close()
        self.sock.close(linger=0)


def trainer_worker(run_id: str, config: ExperimentConfig, run_dir: str | None, index: int, secret: bytes
                   ) -> dict[str, Any]:
    """Long-running Dask task: trains until told to stop, drains, returns counters and weights.

    ``index`` numbers the run's trainers over every policy (``policies.trainer_slots``).
    """
    from distributed import Variable

    limit_threads()
    policy, rank = trainer_slots(config)[index]
    ctx = WorkerContext(run_id, "trainer", f"trainer-{index}", secret)
    zctx = zmq.Context()
    trainer: Trainer | None = None
    try:
        trainer = Trainer(config, ctx, zctx, run_dir, rank, policy)
        config = trainer.config
        if trainer.params is not None:
            ctx.publish_endpoint(service("params", policy), trainer.params.endpoint)
        ctx.publish_endpoint(service("samples", policy, rank), trainer.endpoint)
        ctx.running()
        trainer.log(restored_from=trainer.restored_from)
        last_log = time.monotonic()
        while True:
            trainer.receive_turn()
            requested = bool(run_dir) and rank == 0 and ctx.checkpoint_requested()
            due = bool(run_dir) and rank == 0 and trainer.checkpoint_due()
            train, stop, checkpoint = trainer.agree(trainer.ready(), ctx.should_stop(), requested or due)
            if train:
                trainer.train()
            if checkpoint:
                path = trainer.checkpoint()
                if requested:
                    Variable(checkpoint_path_name(run_id)).set(path)
            if stop:
                break
            ctx.progress["version"] = trainer.version
            if time.monotonic() - last_log >= config.metrics_interval_s:
                trainer.log()
                last_log = time.monotonic()
        expected = Variable(expected_fragments_name(run_id)).get(timeout=DRAIN_TIMEOUT_S)
        trainer.drain(expected.get(policy, {}))
        trainer.log(state="stopped")
        result = {"worker": ctx.worker_id, "inc": ctx.incarnation, "policy": policy, "version": trainer.version,
                  **trainer.counters, **trainer.stream_counts(),
                  "ledger": trainer.ledger.entries, "restored_from": trainer.restored_from,
                  "weights": trainer.policy.weights(), "digests": trainer.group.digests if trainer.group else []}
        if run_dir:
            result["checkpoint"] = trainer.checkpoint()
        return result
    except TrainerGroupBroken:
        if trainer is not None:  # the task's result is lost with it: a last record keeps the counts
            trainer.log(state="group broken")
        raise
    finally:
        if trainer is not None:
            trainer.close()  # the parameter service thread first, then every socket
        zctx.destroy(linger=0)
