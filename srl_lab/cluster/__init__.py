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

Beyond one machine the same three things are asked of every deployment: ``slurm``/``pbs``
(dask-jobqueue), ``kubernetes`` (the dask-kubernetes operator) and ``gateway`` (dask-gateway) start
their workers that way, from what ``worker_args`` (command-line flags) and ``worker_env`` (Dask
config environment variables) say. Those helpers need the extra ``srl_lab[cluster]``.
"""
from srl_lab.cluster._gateway import gateway, gateway_options
from srl_lab.cluster._jobqueue import pbs, slurm
from srl_lab.cluster._kubernetes import kubernetes, kubernetes_spec, kubernetes_worker_spec
from srl_lab.cluster._workers import (
    ALLOWED_FAILURES, EXTRA, PRELOAD, ROLES, SLOT, gpu_count, local, offered_roles, role_resource, slot_count,
    worker_args, worker_env, worker_options,
)

__all__ = ["ALLOWED_FAILURES", "EXTRA", "PRELOAD", "ROLES", "SLOT", "gateway", "gateway_options", "gpu_count",
           "kubernetes", "kubernetes_spec", "kubernetes_worker_spec", "local", "offered_roles", "pbs",
           "role_resource", "slot_count", "slurm", "worker_args", "worker_env", "worker_options"]
