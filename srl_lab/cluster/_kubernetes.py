"""Kubernetes clusters through the dask-kubernetes operator, one SRL worker process per pod."""
from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from srl_lab.cluster._workers import ALLOWED_FAILURES, _import, worker_args

if TYPE_CHECKING:
    from dask_kubernetes.operator import KubeCluster


def _pod_resources(cpu: str, memory: str, gpus: int = 0) -> dict[str, dict[str, str]]:
    limits = {"cpu": cpu, "memory": memory, **({"nvidia.com/gpu": str(gpus)} if gpus else {})}
    return {"requests": {"cpu": cpu, "memory": memory}, "limits": limits}


def kubernetes_worker_spec(image: str, n_workers: int = 0, *, gpus: int = 0, roles: tuple[str, ...] = (),
                           cpu: str = "1", memory: str = "4G", env: dict[str, str] | None = None
                           ) -> dict[str, Any]:
    """A ``DaskWorkerGroup`` worker spec: ``n_workers`` pods, each one SRL worker process.

    Each pod runs ``dask worker`` with ``worker_args`` (one thread, ``srl_slot``, ``GPU``, role
    resources, the preload) and requests ``cpu``/``memory`` (and ``gpus`` as ``nvidia.com/gpu``).
    ``image`` must have srl_lab installed. Also for an extra group on a running cluster, e.g. GPU
    trainers: ``cluster.add_worker_group("gpu", custom_spec=kubernetes_worker_spec(...))``.
    """
    operator = _import("dask_kubernetes.operator", "dask-kubernetes", "kubernetes_worker_spec")
    return operator.make_worker_spec(image=image, n_workers=n_workers, resources=_pod_resources(cpu, memory, gpus),
                                     env=dict(env or {}), worker_command=["dask", "worker", *worker_args(gpus, roles)])


def kubernetes_spec(image: str, n_workers: int = 0, *, name: str | None = None, gpus: int = 0,
                    roles: tuple[str, ...] = (), cpu: str = "1", memory: str = "4G",
                    env: dict[str, str] | None = None, scheduler_cpu: str = "1",
                    scheduler_memory: str = "2G") -> dict[str, Any]:
    """The ``DaskCluster`` resource that ``kubernetes`` creates, built without a Kubernetes API.

    Workers as in ``kubernetes_worker_spec``; the scheduler pod runs ``dask scheduler`` (the
    ``dask-scheduler`` script that dask-kubernetes writes by default is gone from current
    distributed) with ``ALLOWED_FAILURES`` in its environment and no GPU. ``name`` defaults to a
    fresh ``srl-lab-xxxxxxxx``.
    """
    operator = _import("dask_kubernetes.operator", "dask-kubernetes", "kubernetes_spec")
    name = name or f"srl-lab-{uuid.uuid4().hex[:8]}"
    spec = operator.make_cluster_spec(name=name, image=image, n_workers=n_workers,
                                      resources=_pod_resources(scheduler_cpu, scheduler_memory),
                                      env={**(env or {}), "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES":
                                           str(ALLOWED_FAILURES)})
    spec["spec"]["worker"] = kubernetes_worker_spec(image, n_workers, gpus=gpus, roles=roles, cpu=cpu,
                                                    memory=memory, env=env)
    scheduler = spec["spec"]["scheduler"]["spec"]["containers"][0]
    if scheduler["args"][0] == "dask-scheduler":
        scheduler["args"] = ["dask", "scheduler", *scheduler["args"][1:]]
    return spec


def kubernetes(image: str, n_workers: int = 0, *, name: str | None = None, gpus: int = 0,
               roles: tuple[str, ...] = (), cpu: str = "1", memory: str = "4G",
               env: dict[str, str] | None = None, namespace: str | None = None, **kwargs: Any) -> KubeCluster:
    """A dask-kubernetes operator ``KubeCluster`` of one-slot worker pods (needs the Dask operator).

    Creates the ``DaskCluster`` of ``kubernetes_spec`` (one SRL worker process per pod: one thread,
    ``srl_slot``, GPUs, roles, the preload; ``ALLOWED_FAILURES`` on the scheduler).
    ``cluster.scale(n)`` adds pods of the same kind; ``add_worker_group`` without a custom spec
    reuses the same command, resources and environment. Other keywords (``resource_timeout``,
    ``port_forward_cluster_ip``, ...) go to ``KubeCluster``.
    """
    operator = _import("dask_kubernetes.operator", "dask-kubernetes", "kubernetes")
    spec = kubernetes_spec(image, n_workers, name=name, gpus=gpus, roles=roles, cpu=cpu, memory=memory, env=env)
    worker = spec["spec"]["worker"]["spec"]["containers"][0]
    return operator.KubeCluster(custom_cluster_spec=spec, namespace=namespace, image=image,
                                env=dict(env or {}), resources=worker["resources"],
                                worker_command=["dask", "worker", *worker_args(gpus, roles)], **kwargs)
