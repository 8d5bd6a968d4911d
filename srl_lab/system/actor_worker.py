"""ActorWorker: a ring of env groups feeding the inference stream and the sample stream.

While group i waits for its actions, group i+1 steps (with remote inference the policy worker computes
group i's batch meanwhile). Each group is a vectorised batch, so one message carries the whole group.
Completed fragments go to the trainer over a PUSH socket whose small high-water mark turns a slow
trainer into backpressure rather than memory growth.
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np
import zmq

from srl_lab.api.env import obs_rows
from srl_lab.api.tree import tree_concat
from srl_lab.config import ExperimentConfig
from srl_lab.envs.factory import make_env_group, make_policy
from srl_lab.system import codec
from srl_lab.system.control import WorkerContext, limit_threads
from srl_lab.system.fragments import FragmentBuilder
from srl_lab.system.inference import InlineInference, RemoteInference, flatten_rows
from srl_lab.system.parameters import ParameterClient
from srl_lab.system.streams import connect

SEND_HWM = 8  # fragments queued towards the trainer before the actor blocks
FLUSH_LINGER_MS = 10_000  # on exit, queued fragments get this long to reach the trainer


class _Group:
    """One env group of the ring and its in-progress fragment state."""

    def __init__(self, env, length: int):
        self.env = env
        self.rows = env.num_envs * env.num_agents
        self.length = length
        self.obs: Any = None
        self.builder = FragmentBuilder(length, self.rows)
        self.pending: FragmentBuilder | None = None  # full, waiting for the value after its last step
        self.trunc_rows: tuple[FragmentBuilder, int, np.ndarray] | None = None


def actor_worker(run_id: str, config: ExperimentConfig, index: int) -> dict[str, Any]:
    """Long-running Dask task: runs until told to stop; returns its final counters."""
    limit_threads()
    ctx = WorkerContext(run_id, "actor", f"actor-{index}")
    zctx = zmq.Context()
    acfg = config.actors
    groups = [_Group(make_env_group(config, acfg.envs_per_group, seed=config.seed * 100_003 + index * 1_000 + g),
                     acfg.fragment_length) for g in range(acfg.ring_size)]
    n_agents = groups[0].env.num_agents
    if config.inference.mode == "inline":
        policy = make_policy(config, groups[0].env.observation_space, groups[0].env.action_space)
        params = ParameterClient(zctx, ctx.wait_endpoint("params"), config.inference.weight_poll_s)
        inference: InlineInference | RemoteInference = InlineInference(policy, params)
    else:
        target = index % config.inference.policy_workers
        inference = RemoteInference(zctx, ctx.wait_endpoint(f"policy-{target}"), index)
    samples = connect(zctx, zmq.PUSH, ctx.wait_endpoint("samples"), sndhwm=SEND_HWM, linger_ms=FLUSH_LINGER_MS)
    samples.setsockopt(zmq.SNDTIMEO, 200)

    counters = {"fragments_produced": 0, "env_steps": 0, "episodes": 0, "env_errors": 0}
    seq = 0

    def send_fragment(builder: FragmentBuilder, last_value: np.ndarray) -> bool:
        nonlocal seq
        frames = codec.encode("fragment", {"actor": index, "seq": seq, "episodes": builder.episodes,
                                           "env_errors": builder.env_errors},
                              builder.arrays(last_value))
        while True:  # blocks while the trainer is behind (backpressure), but stays stoppable
            try:
                samples.send_multipart(frames, copy=False)
                break
            except zmq.Again:
                if ctx.should_stop():
                    return False
        seq += 1
        counters["fragments_produced"] += 1
        return True

    for g, group in enumerate(groups):
        group.obs = flatten_rows(group.env.reset(), group.rows)
        inference.post(g, group.obs)

    last_log, steps_at_log, policy_version = time.monotonic(), 0, -1
    running = True
    while running:
        while ctx.paused() and not ctx.should_stop():
            time.sleep(0.1)
        for g, group in enumerate(groups):
            reply = inference.wait(g, ctx.should_stop)
            if reply is None or ctx.should_stop():
                running = False
                break
            n = group.rows
            policy_version = reply.version
            if group.trunc_rows is not None:  # values of final observations of truncated episodes
                builder, t, rows = group.trunc_rows
                builder.trunc_values[t, rows] = reply.values[n:]
                group.trunc_rows = None
            if group.pending is not None:
                if not send_fragment(group.pending, reply.values[:n]):
                    running = False
                    break
                group.pending = None
            b = group.builder
            b.add_policy_step(group.obs, reply.actions[:n], reply.logp[:n], reply.values[:n], reply.version)
            actions = reply.actions[:n].reshape(group.env.num_envs, n_agents, *reply.actions.shape[1:])
            result = group.env.step(actions)
            b.add_env_step(result.reward.reshape(n), np.repeat(result.terminated, n_agents),
                           np.repeat(result.truncated, n_agents))
            b.episodes.extend(result.episodes)
            b.env_errors += result.env_errors
            counters["env_steps"] += group.env.num_envs
            counters["episodes"] += len(result.episodes)
            counters["env_errors"] += result.env_errors
            group.obs = flatten_rows(result.obs, n)
            request = group.obs
            trunc = np.repeat(result.truncated, n_agents)
            if trunc.any():
                rows = np.flatnonzero(trunc)
                group.trunc_rows = (b, b.steps - 1, rows)
                final = flatten_rows(result.final_obs, n)
                request = tree_concat([group.obs, obs_rows(final, rows)])
            if b.full:
                group.pending, group.builder = b, FragmentBuilder(group.length, n)
            inference.post(g, request)

        now = time.monotonic()
        if now - last_log >= config.metrics_interval_s:
            ctx.log(**counters, env_steps_per_s=(counters["env_steps"] - steps_at_log) / (now - last_log),
                    policy_version=policy_version, inference_latency_ms=1000 * inference.latency_s)
            last_log, steps_at_log = now, counters["env_steps"]

    samples.close(linger=FLUSH_LINGER_MS)  # deliver what is queued before reporting final counts
    inference.close()
    for group in groups:
        group.env.close()
    zctx.term()
    ctx.log(**counters, env_steps_per_s=0.0, state="stopped")
    return {"worker": f"actor-{index}", **counters}

