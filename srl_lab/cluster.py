"""Dask clusters with the worker options SRL workers need.

Every SRL worker loops in Python, so each Dask worker process offers exactly one ``srl_slot``
resource and one thread; every SRL task asks for one slot and holds it (and the thread) for its
whole life, so the scheduler never stacks two loops in one process. SRL tasks deliberately do not
``secede()``: with distributed 2026.8 a seceded task hands its resources back to the scheduler,
which then places a second SRL worker on the same process where it waits forever.

When a worker process dies, the scheduler re-runs its SRL task elsewhere; the embedded cluster allows
that many times (``ALLOWED_FAILURES``), and beyond it the controller resubmits the task itself.
Worker processes import the runtime when they start (``PRELOAD``), so a replacement SRL worker
starts in seconds on an idle spare process instead of first importing torch.
"""
from __future__ import annotations

import logging
from typing import Any

SLOT = "srl_slot"
ROLES = ("actor", "policy", "trainer")
ALLOWED_FAILURES = 1000  # re-runs of one task after worker deaths before the scheduler gives up
PRELOAD = "srl_lab.system.preload"


def role_resource(role: str) -> str:
    """The resource that reserves a worker for one SRL role, e.g. ``srl_role_actor``.

    When any worker of a cluster offers a role's resource, every task of that role asks for it, so
    it runs only on those workers (e.g. actors on CPU hosts, policy workers and trainers on a GPU
    host). Roles whose resource no worker offers go to any free slot.
    """
    if role not in ROLES:
        raise ValueError(f"unknown SRL role {role!r}; use one of {ROLES}")
    return f"srl_role_{role}"


def worker_options(gpus: int = 0, roles: tuple[str, ...] = ()) -> dict[str, Any]:
    """Options for any deployment's workers: one thread and one SRL slot (plus GPUs and roles if given)."""
    resources = {SLOT: 1, **({"GPU": gpus} if gpus else {}), **{role_resource(r): 1 for r in roles}}
    return {"nthreads": 1, "resources": resources}


def local(n_workers: int = 4, dashboard_address: str | None = ":0", security: Any = None, **kwargs: Any):
    """An embedded ``LocalCluster(processes=True)`` sized for ``n_workers`` SRL workers.

    ``security``: a ``distributed.security.Security`` (e.g. ``Security.temporary()``) makes every
    Dask connection TLS; the run secret then travels to the workers encrypted.
    """
    from distributed import LocalCluster

    tls = {"security": security, "protocol": "tls://"} if security is not None else {}
    return LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                        resources={SLOT: 1}, dashboard_address=dashboard_address,
                        silence_logs=logging.ERROR, preload=[PRELOAD],
                        scheduler_kwargs={"allowed_failures": ALLOWED_FAILURES}, **tls, **kwargs)


def slot_count(client) -> int:
    """How many SRL slots the cluster currently offers."""
    workers = client.scheduler_info(n_workers=-1)["workers"].values()
    return int(sum(w.get("resources", {}).get(SLOT, 0) for w in workers))


def gpu_count(client) -> int:
    workers = client.scheduler_info(n_workers=-1)["workers"].values()
    return int(sum(w.get("resources", {}).get("GPU", 0) for w in workers))


def offered_roles(client) -> set[str]:
    """The SRL roles some worker of the cluster is reserved for (see ``role_resource``)."""
    workers = client.scheduler_info(n_workers=-1)["workers"].values()
    offered = {name for w in workers for name in w.get("resources", {})}
    return {role for role in ROLES if role_resource(role) in offered}
