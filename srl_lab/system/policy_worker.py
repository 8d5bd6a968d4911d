"""PolicyWorker: batched inference for every actor connected to it.

Requests that arrive while a batch is being computed wait in the socket; the next loop merges all
of them (up to ``max_batch_rows`` rows) into one forward pass. Weights are refreshed from the
parameter service between batches without ever blocking. A replacement policy worker publishes a new
endpoint; actors notice it, reconnect and re-send what was unanswered.
"""
from __future__ import annotations

import time
from typing import Any

import zmq

from srl_lab.api.tree import tree_concat
from srl_lab.config import ExperimentConfig
from srl_lab.envs.factory import make_env_group, make_policy
from srl_lab.system import codec
from srl_lab.system.control import StopRequested, WorkerContext, limit_threads
from srl_lab.system.inference import run_policy
from srl_lab.system.parameters import ParameterClient
from srl_lab.system.streams import Receiver, bind


def parse_infer(meta: dict[str, Any], arrays: dict[str, Any]) -> tuple[int, Any, int] | None:
    """``(group, obs, rows)`` of an ``infer`` request, None if malformed."""
    group, obs = meta.get("group"), arrays.get("obs")
    if not isinstance(group, int) or obs is None:
        return None
    leaves = list(obs.values()) if isinstance(obs, dict) else [obs]
    if not leaves or any(isinstance(x, dict) or x.ndim < 1 for x in leaves):
        return None
    rows = len(leaves[0])
    if any(len(x) != rows for x in leaves):
        return None
    return group, obs, rows


def policy_worker(run_id: str, config: ExperimentConfig, index: int, secret: bytes) -> dict[str, Any]:
    """Long-running Dask task serving inference until told to stop; returns its counters."""
    limit_threads()
    ctx = WorkerContext(run_id, "policy", f"policy-{index}", secret)
    zctx = zmq.Context()
    try:
        return _serve(ctx, zctx, config, index)
    except StopRequested:
        return {"worker": ctx.worker_id, "inc": ctx.incarnation, "batches": 0, "rows": 0, "rejected": 0,
                "unauthenticated": 0}
    finally:
        zctx.destroy(linger=0)


def _serve(ctx: WorkerContext, zctx: zmq.Context, config: ExperimentConfig, index: int) -> dict[str, Any]:
    device = config.inference.device
    probe = make_env_group(config, 1)
    policy = make_policy(config, probe.observation_space, probe.action_space).to(device)
    probe.close()
    params = ParameterClient(zctx, ctx.watch("params"), ctx.secret, config.inference.weight_poll_s)
    weights = params.wait_first(ctx.should_stop)
    if weights is None:
        raise StopRequested("params")
    policy.load_weights(weights)
    sock, endpoint = bind(zctx, zmq.ROUTER, f"policy-{ctx.run_id}-{index}")
    receiver = Receiver(sock, frozenset({"infer"}), ctx.secret, routed=True)
    ctx.publish_endpoint(f"policy-{index}", endpoint)
    ctx.running()

    cap = config.inference.max_batch_rows
    counters = {"batches": 0, "rows": 0}
    last_log, rows_at_log, busy_s = time.monotonic(), 0, 0.0
    while not ctx.should_stop():
        requests, rows = [], 0
        msg = receiver.recv(timeout_ms=100)
        while msg is not None:
            identity, _, meta, arrays = msg
            parsed = parse_infer(meta, arrays)
            if parsed is None:
                receiver.rejected += 1
            else:
                requests.append((identity, *parsed))
                rows += parsed[2]
            msg = receiver.recv() if rows < cap else None
        if requests:
            start = time.perf_counter()
            try:
                actions, logp, values = run_policy(policy, tree_concat([r[2] for r in requests]), device)
            except Exception:  # observations that do not fit the network: drop the batch, keep serving
                receiver.rejected += len(requests)
                continue
            busy_s += time.perf_counter() - start
            offset = 0
            for identity, group, _, k in requests:
                part = slice(offset, offset + k)
                offset += k
                reply = codec.encode("actions", {"group": group, "version": params.version},
                                     {"actions": actions[part], "logp": logp[part], "values": values[part]},
                                     key=ctx.secret)
                sock.send_multipart([identity, *reply], copy=False)
            counters["batches"] += 1
            counters["rows"] += rows
        weights = params.poll()
        if weights is not None:
            policy.load_weights(weights)
        ctx.progress["batches"] = counters["batches"]
        now = time.monotonic()
        if now - last_log >= config.metrics_interval_s:
            ctx.log(**counters, rows_per_s=(counters["rows"] - rows_at_log) / (now - last_log),
                    busy_fraction=busy_s / (now - last_log), policy_version=params.version,
                    mean_batch_rows=counters["rows"] / max(1, counters["batches"]), rejected=receiver.rejected)
            last_log, rows_at_log, busy_s = now, counters["rows"], 0.0
    params.close()
    sock.close(linger=0)
    ctx.log(**counters, state="stopped", rejected=receiver.rejected)
    return {"worker": ctx.worker_id, "inc": ctx.incarnation, **counters, "rejected": receiver.rejected,
            "unauthenticated": receiver.unauthenticated}
