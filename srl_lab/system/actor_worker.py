"""ActorWorker: the Dask task around an ``ActorRing``, wired to the inference and sample streams.

Completed fragments go to the trainer over a PUSH socket whose send queue holds about one fragment
per env group, so a slow trainer turns into backpressure rather than memory growth, and a killed
actor takes at most that much with it. Every peer is followed through its endpoint Variable: a
replaced trainer or policy worker is reconnected to without restarting the actor.
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np
import zmq

from srl_lab.api.env import extras
from srl_lab.config import ExperimentConfig
from srl_lab.envs.factory import describe, make_policy, make_split
from srl_lab.policies import for_policy, policy_ids, service
from srl_lab.system.actor_ring import ActorRing
from srl_lab.system.control import WorkerContext
from srl_lab.system.fragments import FragmentBuilder
from srl_lab.system.opponent_pool import LISTING, OpponentPlay, Seat, frozen_teams, pool_tag
from srl_lab.system.inference import InlineInference, RemoteInference
from srl_lab.system.learner import needs_behaviour_values
from srl_lab.system.metrics import TrailingRate
from srl_lab.system.parameters import ParameterClient
from srl_lab.system.sample_stream import SampleSender, trainer_of_actor
from srl_lab.system.streams import refusal_report
from srl_lab.system.worker_task import run_worker_task

FLUSH_LINGER_MS = 10_000  # on exit, queued fragments get this long to reach the trainer
FETCH_TIMEOUT_S = 10.0  # a past version's weights not here by then: keep the current opponent


def env_seed(config: ExperimentConfig, actor: int, group: int) -> int:
    return config.seed * 100_003 + actor * 1_000 + group


def actor_worker(run_id: str, config: ExperimentConfig, index: int, secret: bytes) -> dict[str, Any]:
    """Long-running Dask task: runs until told to stop; returns its final counters."""
    return run_worker_task(run_id, "actor", f"actor-{index}", secret,
                           lambda ctx, zctx: _run(ctx, zctx, config, index),
                           idle={"actor": index, "env_steps": 0, "episodes": 0, "env_errors": 0,
                                 "fragments_produced": 0, "fragments_by_policy": {},
                                 "reconnects": 0})


def _run(ctx: WorkerContext, zctx: zmq.Context, config: ExperimentConfig, index: int) -> dict[str, Any]:
    acfg = config.actors
    envs = [make_split(config, acfg.envs_per_group, seed=env_seed(config, index, g)) for g in range(acfg.ring_size)]
    policies = policy_ids(config)
    samples = {name: SampleSender(zctx, ctx.watch(service("samples", name, trainer_of_actor(
        index, for_policy(config, name).trainer.trainers))), ctx.secret, index, ctx.incarnation, hwm=acfg.ring_size)
        for name in policies}
    inference = {name: _inference(ctx, zctx, config, name, envs[0].views[name], index) for name in policies}

    def send_fragment(policy: str, builder: FragmentBuilder, last_value: np.ndarray) -> bool:
        meta = {"episodes": builder.episodes, "env_errors": builder.env_errors}
        sent = samples[policy].send(meta, builder.arrays(last_value), ctx.should_stop)
        ctx.progress.update(produced())
        return sent

    def produced() -> dict[str, Any]:
        """Fragments produced: in total, and per policy (each policy's trainer keeps its own books)."""
        by_policy = {name: sender.produced for name, sender in samples.items()}
        return {"fragments_produced": sum(by_policy.values()), "fragments_by_policy": by_policy}

    pools = {name: OpponentPools(ctx, zctx, config, name) for name in policies
             if for_policy(config, name).policy.pool is not None}
    opponents = {(g, name): pool.play(env.views[name], env_seed(config, index, g))
                 for name, pool in pools.items() for g, env in enumerate(envs)}
    ring = ActorRing(envs, acfg.fragment_length, inference, send_fragment, opponents)

    def stream_counts() -> dict[str, Any]:
        """Replies refused (from policy workers or parameter services) and peers followed."""
        reconnects = sum(s.reconnects for s in samples.values()) + sum(i.reconnects for i in inference.values())
        return {**refusal_report(*(i.refusals for i in inference.values())), "reconnects": reconnects}

    def report(env_steps_per_s: float) -> None:
        latency_s = max(i.latency_s for i in inference.values())
        ctx.log(**ring.counters, **produced(), env_steps_per_s=env_steps_per_s,
                policy_version=ring.policy_version, inference_latency_ms=1000 * latency_s,
                pool_results=ring.take_pool_results(), **stream_counts())

    ctx.running()
    last_log = time.monotonic()
    env_steps_rate = TrailingRate(last_log)
    while True:
        if ctx.paused():
            report(0.0)  # idle: the header and the table read 0, not the last rate
            while ctx.paused() and not ctx.should_stop():
                time.sleep(0.1)
            env_steps_rate = TrailingRate(time.monotonic(), ring.counters["env_steps"])  # the pause is not a rate
        if not ring.step(ctx.should_stop):
            break
        now = time.monotonic()
        if now - last_log >= config.metrics_interval_s:
            report(env_steps_rate.update(now, ring.counters["env_steps"]))
            last_log = now

    for sender in samples.values():  # deliver what is queued before reporting final counts
        sender.close(linger_ms=FLUSH_LINGER_MS)
    ring.close()
    for pool in pools.values():
        pool.close()
    ctx.log(**ring.counters, **produced(), env_steps_per_s=0.0, state="stopped",
            pool_results=ring.take_pool_results(), **stream_counts())
    return {"worker": ctx.worker_id, "actor": index, "inc": ctx.incarnation, **ring.counters,
            **produced(), **stream_counts()}


class OpponentPools:
    """An actor's access to one policy's pool of past versions: the listing, and weights by version."""

    LISTING_POLL_S = 1.0

    def __init__(self, ctx: WorkerContext, zctx: zmq.Context, config: ExperimentConfig, name: str):
        self.ctx, self.zctx, self.name = ctx, zctx, name
        self.config = for_policy(config, name)
        self.listing = ParameterClient(zctx, ctx.watch(service("params", name)), ctx.secret, self.LISTING_POLL_S,
                                       tag=LISTING)
        self.versions: list[int] = []

    def current(self) -> list[int]:
        listing = self.listing.poll()
        if listing is not None:
            self.versions = [int(v) for v in listing["versions"]]
        return self.versions

    def fetch(self, version: int) -> dict[str, np.ndarray] | None:
        """A past version's weights (None if it left the pool, or the trainer is away)."""
        client = ParameterClient(self.zctx, self.ctx.watch(service("params", self.name)), self.ctx.secret,
                                 tag=pool_tag(version))
        try:
            return client.wait_first(self.ctx.should_stop, timeout_s=FETCH_TIMEOUT_S)
        except TimeoutError:
            return None
        finally:
            client.close()

    def play(self, view: Any, seed: int) -> OpponentPlay:
        pool = self.config.policy.pool
        frozen = frozen_teams(view, pool.envs_fraction)
        seats = [Seat(extras(view).team_name(int(team)), np.flatnonzero(frozen == team),
                      make_policy(self.config, view.observation_space, view.action_space, describe(view)))
                 for team in np.unique(frozen[frozen >= 0])]
        return OpponentPlay(pool, seats, self.current, self.fetch, seed, num_rows=len(frozen))

    def close(self) -> None:
        self.listing.close()


def _inference(ctx: WorkerContext, zctx: zmq.Context, config: ExperimentConfig, name: str, view: Any,
               index: int) -> InlineInference | RemoteInference:
    """Policy ``name``'s inference for this actor: its own copy (inline) or its policy worker (remote)."""
    if config.inference.mode == "inline":
        own = for_policy(config, name)
        policy = make_policy(own, view.observation_space, view.action_space, describe(view))
        params = ParameterClient(zctx, ctx.watch(service("params", name)), ctx.secret, config.inference.weight_poll_s)
        return InlineInference(policy, params, ctx.should_stop, needs_behaviour_values(own))
    target = index % config.inference.policy_workers
    return RemoteInference(zctx, ctx.watch(service("policy", name, target)), ctx.secret)
