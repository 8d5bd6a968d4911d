"""ActorWorker: the Dask task around an ``ActorRing``, wired to the inference and sample streams.

Completed fragments go to the trainer over a PUSH socket whose small high-water mark turns a slow
trainer into backpressure rather than memory growth.
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np
import zmq

from srl_lab.config import ExperimentConfig
from srl_lab.envs.factory import make_env_group, make_policy
from srl_lab.system import codec
from srl_lab.system.actor_ring import ActorRing
from srl_lab.system.control import WorkerContext, limit_threads
from srl_lab.system.fragments import FragmentBuilder
from srl_lab.system.inference import InlineInference, RemoteInference
from srl_lab.system.parameters import ParameterClient
from srl_lab.system.streams import connect

SEND_HWM = 8  # fragments queued towards the trainer before the actor blocks
FLUSH_LINGER_MS = 10_000  # on exit, queued fragments get this long to reach the trainer


def env_seed(config: ExperimentConfig, actor: int, group: int) -> int:
    return config.seed * 100_003 + actor * 1_000 + group


def actor_worker(run_id: str, config: ExperimentConfig, index: int) -> dict[str, Any]:
    """Long-running Dask task: runs until told to stop; returns its final counters."""
    limit_threads()
    ctx = WorkerContext(run_id, "actor", f"actor-{index}")
    zctx = zmq.Context()
    acfg = config.actors
    envs = [make_env_group(config, acfg.envs_per_group, seed=env_seed(config, index, g))
            for g in range(acfg.ring_size)]
    if config.inference.mode == "inline":
        policy = make_policy(config, envs[0].observation_space, envs[0].action_space)
        params = ParameterClient(zctx, ctx.wait_endpoint("params"), config.inference.weight_poll_s)
        inference: InlineInference | RemoteInference = InlineInference(policy, params)
    else:
        target = index % config.inference.policy_workers
        inference = RemoteInference(zctx, ctx.wait_endpoint(f"policy-{target}"), index)
    samples = connect(zctx, zmq.PUSH, ctx.wait_endpoint("samples"), sndhwm=SEND_HWM, linger_ms=FLUSH_LINGER_MS)
    samples.setsockopt(zmq.SNDTIMEO, 200)
    produced = 0

    def send_fragment(builder: FragmentBuilder, last_value: np.ndarray) -> bool:
        nonlocal produced
        frames = codec.encode("fragment", {"actor": index, "seq": produced, "episodes": builder.episodes,
                                           "env_errors": builder.env_errors},
                              builder.arrays(last_value))
        while True:  # blocks while the trainer is behind (backpressure), but stays stoppable
            try:
                samples.send_multipart(frames, copy=False)
                produced += 1
                return True
            except zmq.Again:
                if ctx.should_stop():
                    return False

    ring = ActorRing(envs, acfg.fragment_length, inference, send_fragment)
    last_log, steps_at_log = time.monotonic(), 0
    while True:
        while ctx.paused() and not ctx.should_stop():
            time.sleep(0.1)
        if not ring.step(ctx.should_stop):
            break
        now = time.monotonic()
        if now - last_log >= config.metrics_interval_s:
            steps = ring.counters["env_steps"]
            ctx.log(**ring.counters, fragments_produced=produced,
                    env_steps_per_s=(steps - steps_at_log) / (now - last_log),
                    policy_version=ring.policy_version, inference_latency_ms=1000 * inference.latency_s)
            last_log, steps_at_log = now, steps

    samples.close(linger=FLUSH_LINGER_MS)  # deliver what is queued before reporting final counts
    ring.close()
    zctx.term()
    ctx.log(**ring.counters, fragments_produced=produced, env_steps_per_s=0.0, state="stopped")
    return {"worker": f"actor-{index}", **ring.counters, "fragments_produced": produced}
