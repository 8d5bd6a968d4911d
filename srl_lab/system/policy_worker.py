"""PolicyWorker: batched inference for every actor connected to it.

Requests that arrive while a batch is being computed wait in the socket; the next loop merges all
of them (up to ``max_batch_rows`` rows) into one forward pass. Weights are refreshed from the
parameter service between batches without ever blocking. A replacement policy worker publishes a new
endpoint; actors notice it, reconnect and re-send what was unanswered. For a recurrent policy each
request carries its rows' states (or none: initial state) and each reply the states after the step.
"""
from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
import numpy as np
import zmq

from srl_lab.api.policy import Policy
from srl_lab.api.tree import tree_concat
from srl_lab.config import ExperimentConfig
from srl_lab.envs.factory import make_policy, probe_env
from srl_lab.policies import for_policy, policy_worker_slots, service
from srl_lab.system import codec
from srl_lab.system.control import StopRequested, WorkerContext
from srl_lab.system.inference import state_shape, step_policy
from srl_lab.system.parameters import ParameterClient
from srl_lab.system.streams import Receiver, Refused, bind, refusal_report
from srl_lab.system.worker_task import run_worker_task

DOES_NOT_FIT = "inference request: does not fit the observation space"


def read_infer(meta: dict[str, Any], arrays: dict[str, Any], state_shape: tuple[int, ...] | None = None,
               space: gym.Space | None = None) -> tuple[int, Any, int, np.ndarray | None]:
    """``(group, obs, rows, state)`` of an ``infer`` request; raises ``Refused`` saying why not.

    ``space`` is the policy's observation space: each row must have its keys and shapes, in numbers,
    so that whatever reaches the network fits it (an exception from the network is then the user's
    bug, and fails the run). ``state_shape`` is a recurrent policy's per-row state shape: a request's
    ``states`` must then be float rows of that shape (or absent: initial state). Feed-forward
    policies ignore ``states``.
    """
    group, obs = meta.get("group"), arrays.get("obs")
    if not isinstance(group, int) or obs is None:
        raise Refused("inference request: needs an integer group and obs")
    leaves = list(obs.values()) if isinstance(obs, dict) else [obs]
    if not leaves or any(isinstance(x, dict) or x.ndim < 1 for x in leaves):
        raise Refused("inference request: obs must be arrays of rows")
    rows = len(leaves[0])
    if any(len(x) != rows for x in leaves):
        raise Refused("inference request: obs arrays differ in rows")
    if space is not None and not fits_space(obs, space):
        raise Refused(DOES_NOT_FIT)
    state = arrays.get("states") if state_shape is not None else None
    if state is not None and (isinstance(state, dict) or state.shape != (rows, *state_shape)
                              or state.dtype.kind != "f"):
        raise Refused("inference request: states must be float rows of the policy's state shape")
    return group, obs, rows, state


def fits_space(obs: Any, space: gym.Space) -> bool:
    """Whether a batch of rows has ``space``'s structure and per-row shapes, in numbers."""
    if isinstance(space, gym.spaces.Dict):
        return (isinstance(obs, dict) and obs.keys() == space.spaces.keys()
                and all(fits_space(obs[key], sub) for key, sub in space.spaces.items()))
    return (isinstance(obs, np.ndarray) and obs.dtype.kind in "biuf"
            and (space.shape is None or obs.shape[1:] == space.shape))


class BatchServer:
    """The policy worker's loop body, free of Dask: merge pending requests, one forward pass, answer each."""

    def __init__(self, policy: Policy, sock: zmq.Socket, key: bytes, device: str = "cpu", cap: int = 4096):
        self.policy, self.sock, self.key, self.device, self.cap = policy, sock, key, device, cap
        self.receiver = Receiver(sock, frozenset({"infer"}), key, routed=True)
        self.state_shape = state_shape(policy)
        self.busy_s = 0.0

    def _gather(self, timeout_ms: int) -> tuple[list[tuple], int]:
        requests, rows = [], 0
        msg = self.receiver.recv(timeout_ms=timeout_ms)
        while msg is not None:
            identity, _, meta, arrays = msg
            try:
                parsed = read_infer(meta, arrays, self.state_shape, self.policy.observation_space)
            except Refused as refused:
                self.receiver.refuse(str(refused))
            else:
                requests.append((identity, *parsed))
                rows += parsed[2]
            msg = self.receiver.recv() if rows < self.cap else None
        return requests, rows

    def _states(self, requests: list[tuple]) -> np.ndarray | None:
        """Every request's rows' states, the initial state where a request carried none."""
        if self.state_shape is None or all(r[4] is None for r in requests):
            return None
        return np.concatenate([r[4] if r[4] is not None else self.policy.initial_state(r[3]).cpu().numpy()
                               for r in requests]).astype(np.float32, copy=False)

    def serve_once(self, version: int, timeout_ms: int = 100) -> int:
        """Answer whatever arrived within ``timeout_ms`` (merged, capped); returns the rows served."""
        requests, rows = self._gather(timeout_ms)
        if not requests:
            return 0
        start = time.perf_counter()
        # Requests that do not fit the network were refused above: an exception here is the user's
        # network failing, and fails the run with its traceback, as inline inference does.
        actions, logp, values, state = step_policy(self.policy, tree_concat([r[2] for r in requests]),
                                                   self._states(requests), self.device)
        self.busy_s += time.perf_counter() - start
        offset = 0
        for identity, group, _, k, _ in requests:
            part = slice(offset, offset + k)
            offset += k
            arrays = {"actions": actions[part], "logp": logp[part], "values": values[part]}
            if state is not None:
                arrays["states"] = state[part]
            reply = codec.encode("actions", {"group": group, "version": version}, arrays, key=self.key)
            self.sock.send_multipart([identity, *reply], copy=False)
        return rows


def policy_worker(run_id: str, config: ExperimentConfig, index: int, secret: bytes) -> dict[str, Any]:
    """Long-running Dask task serving inference until told to stop; returns its counters.

    ``index`` numbers the run's policy workers over every policy (``policies.policy_worker_slots``).
    """
    return run_worker_task(run_id, "policy", f"policy-{index}", secret,
                           lambda ctx, zctx: _serve(ctx, zctx, config, index),
                           idle={"batches": 0, "rows": 0, "reconnects": 0})


def _serve(ctx: WorkerContext, zctx: zmq.Context, config: ExperimentConfig, index: int) -> dict[str, Any]:
    device = config.inference.device
    name, number = policy_worker_slots(config)[index]
    probe = probe_env(config, name)
    policy = make_policy(for_policy(config, name), probe.observation_space, probe.action_space, probe).to(device)
    params = ParameterClient(zctx, ctx.watch(service("params", name)), ctx.secret, config.inference.weight_poll_s)
    weights = params.wait_first(ctx.should_stop)
    if weights is None:
        raise StopRequested("params")
    policy.load_weights(weights)
    sock, endpoint = bind(zctx, zmq.ROUTER, f"policy-{ctx.run_id}-{index}")
    server = BatchServer(policy, sock, ctx.secret, device, config.inference.max_batch_rows)
    ctx.publish_endpoint(service("policy", name, number), endpoint)
    ctx.running()

    def stream_counts() -> dict[str, Any]:
        """Messages refused on this worker's socket and by its parameter client; reconnects of the latter."""
        return {**refusal_report(server.receiver.refusals, params.refusals), "reconnects": params.reconnects}

    counters = {"batches": 0, "rows": 0}
    last_log, rows_at_log = time.monotonic(), 0
    while not ctx.should_stop():
        rows = server.serve_once(params.version)
        if rows:
            counters["batches"] += 1
            counters["rows"] += rows
        weights = params.poll()
        if weights is not None:
            policy.load_weights(weights)
        ctx.progress["batches"] = counters["batches"]
        now = time.monotonic()
        if now - last_log >= config.metrics_interval_s:
            ctx.log(**counters, rows_per_s=(counters["rows"] - rows_at_log) / (now - last_log),
                    busy_fraction=server.busy_s / (now - last_log), policy_version=params.version,
                    mean_batch_rows=counters["rows"] / max(1, counters["batches"]), **stream_counts())
            last_log, rows_at_log, server.busy_s = now, counters["rows"], 0.0
    params.close()
    sock.close(linger=0)
    ctx.log(**counters, state="stopped", **stream_counts())
    return {"worker": ctx.worker_id, "inc": ctx.incarnation, **counters, **stream_counts()}
