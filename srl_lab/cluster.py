"""Dask clusters with the worker options SRL workers need.

Every SRL worker loops in Python, so each Dask worker process offers exactly one ``srl_slot``
resource and one thread; every SRL task asks for one slot and holds it (and the thread) for its
whole life, so the scheduler never stacks two loops in one process. SRL tasks deliberately do not
``secede()``: with distributed 2026.8 a seceded task hands its resources back to the scheduler,
which then places a second SRL worker on the same process where it waits forever.
"""
from __future__ import annotations

import logging
from typing import Any

SLOT = "srl_slot"


def worker_options(gpus: int = 0) -> dict[str, Any]:
    """Options for any deployment's workers: one thread and one SRL slot (plus GPUs if present)."""
    resources = {SLOT: 1, **({"GPU": gpus} if gpus else {})}
    return {"nthreads": 1, "resources": resources}


def local(n_workers: int = 4, dashboard_address: str | None = ":0", **kwargs: Any):
    """An embedded ``LocalCluster(processes=True)`` sized for ``n_workers`` SRL workers."""
    from distributed import LocalCluster

    return LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                        resources={SLOT: 1}, dashboard_address=dashboard_address,
                        silence_logs=logging.ERROR, **kwargs)


def slot_count(client) -> int:
    """How many SRL slots the cluster currently offers."""
    workers = client.scheduler_info(n_workers=-1)["workers"].values()
    return int(sum(w.get("resources", {}).get(SLOT, 0) for w in workers))


def gpu_count(client) -> int:
    workers = client.scheduler_info(n_workers=-1)["workers"].values()
    return int(sum(w.get("resources", {}).get("GPU", 0) for w in workers))
