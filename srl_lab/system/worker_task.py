"""The frame shared by the actor and policy worker tasks: threads, control context, ZeroMQ context.

One incarnation of such a task runs ``body`` and returns its final result. An incarnation told to
stop before it got going (``StopRequested`` while it waited for a peer) returns what it was given
as ``idle`` plus empty refusal counts, so every result carries the same keys.
"""
from __future__ import annotations

from typing import Any, Callable

import zmq

from srl_lab.system.control import StopRequested, WorkerContext, limit_threads
from srl_lab.system.streams import Refusals


def run_worker_task(run_id: str, role: str, worker_id: str, secret: bytes,
                    body: Callable[[WorkerContext, zmq.Context], dict[str, Any]],
                    idle: dict[str, Any]) -> dict[str, Any]:
    """Run ``body(ctx, zmq_context)`` as one incarnation of worker ``worker_id``; returns its result."""
    limit_threads()
    ctx = WorkerContext(run_id, role, worker_id, secret)
    zctx = zmq.Context()
    try:
        return body(ctx, zctx)
    except StopRequested:
        return {"worker": ctx.worker_id, "inc": ctx.incarnation, **idle, **Refusals().report()}
    finally:
        zctx.destroy(linger=0)
