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
from __future__ import annotations

import importlib
import logging
import uuid
import warnings
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dask_gateway import GatewayCluster
    from dask_jobqueue import PBSCluster, SLURMCluster
    from dask_kubernetes.operator import KubeCluster

SLOT = "srl_slot"
ROLES = ("actor", "policy", "trainer")
ALLOWED_FAILURES = 1000  # re-runs of one task after worker deaths before the scheduler gives up
PRELOAD = "srl_lab.system.preload"
EXTRA = "srl_lab[cluster]"  # the pip extra with dask-jobqueue, dask-kubernetes and dask-gateway


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


def worker_args(gpus: int = 0, roles: tuple[str, ...] = ()) -> list[str]:
    """``dask worker`` flags for one SRL slot per process: one thread, the resources, the preload.

    For deployments that start workers from a command line, e.g.
    ``dask worker tcp://scheduler:8786 --nworkers 8`` followed by these flags.
    """
    return ["--nthreads", "1", *_resource_and_preload_args(gpus, roles)]


def worker_env(gpus: int = 0, roles: tuple[str, ...] = ()) -> dict[str, str]:
    """Dask config environment variables with the same effect as ``worker_args`` (bar the thread count).

    For deployments where only the environment of the worker and scheduler processes can be set
    (dask-gateway, container platforms). The resources travel as one literal so the ``GPU`` key
    keeps its case; the scheduler reads ``ALLOWED_FAILURES`` from the same environment.
    """
    return {"DASK_DISTRIBUTED__WORKER__RESOURCES": repr(worker_options(gpus, roles)["resources"]),
            "DASK_DISTRIBUTED__WORKER__PRELOAD": repr([PRELOAD]),
            "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": str(ALLOWED_FAILURES)}


def _resource_and_preload_args(gpus: int, roles: tuple[str, ...]) -> list[str]:
    resources = ",".join(f"{name}={n}" for name, n in worker_options(gpus, roles)["resources"].items())
    return ["--resources", resources, "--preload", PRELOAD]


def _import(module: str, package: str, helper: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"srl_lab.cluster.{helper}() needs {package}, which is not installed; "
                          f"install the extra: pip install '{EXTRA}'") from exc


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


# ------------------------------------------------------------------------------------ dask-jobqueue
def _jobqueue_kwargs(helper: str, slots_per_job: int, memory: str, gpus: int, roles: tuple[str, ...],
                     scheduler_options: dict[str, Any] | None, worker_extra_args: list[str] | None,
                     kwargs: dict[str, Any]) -> dict[str, Any]:
    taken = sorted({"cores", "processes"} & set(kwargs))
    if taken:
        raise ValueError(f"{helper}(): {', '.join(taken)} follow from slots_per_job (one single-threaded "
                         "worker process per SRL slot); ask the queue for more CPUs per job with "
                         "job_cpu (Slurm) or resource_spec (PBS)")
    if slots_per_job < 1:
        raise ValueError(f"{helper}(): slots_per_job must be 1 or more, got {slots_per_job!r}")
    from dask.utils import parse_bytes

    return {"cores": slots_per_job, "processes": slots_per_job,  # cores / processes = one thread each
            "memory": parse_bytes(memory) * slots_per_job,
            "worker_extra_args": [*_resource_and_preload_args(gpus, roles), *(worker_extra_args or [])],
            "scheduler_options": {"allowed_failures": ALLOWED_FAILURES, **(scheduler_options or {})},
            **kwargs}


def slurm(n_workers: int = 0, *, slots_per_job: int = 1, memory: str = "4GB", gpus: int = 0,
          roles: tuple[str, ...] = (), scheduler_options: dict[str, Any] | None = None,
          worker_extra_args: list[str] | None = None, job_extra_directives: list[str] | None = None,
          **kwargs: Any) -> SLURMCluster:
    """A dask-jobqueue ``SLURMCluster`` whose jobs each run ``slots_per_job`` SRL worker processes.

    Each process has one thread, one ``srl_slot`` (plus ``GPU=gpus`` and the ``roles``' resources)
    and preloads the runtime; ``memory`` is per slot. The scheduler runs in this process and
    re-runs a task after up to ``ALLOWED_FAILURES`` worker deaths. With ``gpus`` the job also asks
    Slurm for the GPUs (``--gres=gpu:N``) unless ``job_extra_directives`` already does. Other
    keywords (``queue``, ``account``, ``walltime``, ``job_cpu``, ``security``, ...) go to
    ``SLURMCluster``; ``n_workers`` counts SRL slots, and ``cluster.scale(n)`` does too. Compute
    nodes run the workers with this Python (``python=`` to change it), which must import srl_lab.
    """
    jobqueue = _import("dask_jobqueue", "dask-jobqueue", "slurm")
    directives = list(job_extra_directives or [])
    if gpus and not any(d.startswith(("--gres", "--gpus", "-G")) for d in directives):
        directives.append(f"--gres=gpu:{gpus * slots_per_job}")
    options = _jobqueue_kwargs("slurm", slots_per_job, memory, gpus, roles, scheduler_options,
                               worker_extra_args, kwargs)
    return jobqueue.SLURMCluster(n_workers=n_workers, job_extra_directives=directives, **options)


def pbs(n_workers: int = 0, *, slots_per_job: int = 1, memory: str = "4GB", gpus: int = 0,
        roles: tuple[str, ...] = (), scheduler_options: dict[str, Any] | None = None,
        worker_extra_args: list[str] | None = None, **kwargs: Any) -> PBSCluster:
    """A dask-jobqueue ``PBSCluster`` whose jobs each run ``slots_per_job`` SRL worker processes.

    Workers as in ``slurm``. With ``gpus`` and no ``resource_spec`` the job asks for them in PBS
    Pro's form (``select=1:ncpus=..:ngpus=..:mem=..``); sites that request GPUs another way pass
    their own ``resource_spec``. Other keywords (``queue``, ``account``, ``walltime``, ...) go to
    ``PBSCluster``; ``n_workers`` counts SRL slots.
    """
    jobqueue = _import("dask_jobqueue", "dask-jobqueue", "pbs")
    options = _jobqueue_kwargs("pbs", slots_per_job, memory, gpus, roles, scheduler_options,
                               worker_extra_args, kwargs)
    if gpus and "resource_spec" not in options:
        from dask_jobqueue.pbs import pbs_format_bytes_ceil

        options["resource_spec"] = (f"select=1:ncpus={slots_per_job}:ngpus={gpus * slots_per_job}"
                                    f":mem={pbs_format_bytes_ceil(options['memory'])}")
    return jobqueue.PBSCluster(n_workers=n_workers, **options)


# ------------------------------------------------------------------------------- dask-kubernetes
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


# ---------------------------------------------------------------------------------- dask-gateway
def gateway_options(options: Any, gpus: int = 0, roles: tuple[str, ...] = ()) -> list[str]:
    """Write SRL's worker needs into a gateway's cluster ``options``; returns the ones it could not.

    What a dask-gateway cluster can be asked for is the server's choice (``c.Backend.cluster_options``).
    This sets ``environment`` (a mapping option) to ``worker_env`` merged over its current value,
    and ``worker_threads`` to 1 (or, where only ``worker_cores`` is exposed, that to 1, since the
    gateway starts ``worker_cores`` threads by default). It returns ``"environment"`` and/or
    ``"worker_threads"`` when the server exposes neither; the server must then set them itself:
    ``c.ClusterConfig.environment`` (``worker_env()``) and ``c.ClusterConfig.worker_threads = 1``.
    """
    missing = []
    if "environment" in options:
        options["environment"] = {**dict(options["environment"] or {}), **worker_env(gpus, roles)}
    else:
        missing.append("environment")
    if "worker_threads" in options:
        options["worker_threads"] = 1
    elif "worker_cores" in options:
        options["worker_cores"] = 1
    else:
        missing.append("worker_threads")
    return missing


def gateway(n_workers: int = 0, *, gpus: int = 0, roles: tuple[str, ...] = (), address: str | None = None,
            proxy_address: str | None = None, auth: Any = None, **options: Any) -> GatewayCluster:
    """A new cluster from a dask-gateway server, its workers set up through the server's options.

    ``gateway_options`` writes one thread, the resources and the preload into the options the
    server exposes; ``options`` (e.g. ``worker_memory=8``, ``image=...``) are applied after and win.
    Where the server exposes neither ``environment`` nor a thread/core option this warns: the
    server's ``ClusterConfig`` must then provide them (see ``gateway_options``). A GPU itself is
    requested however the server offers it (an option, a profile); ``gpus`` only declares it to Dask.
    ``address``/``proxy_address``/``auth`` default to the ``gateway.*`` Dask config, as in
    ``dask_gateway.Gateway``.
    """
    dask_gateway = _import("dask_gateway", "dask-gateway", "gateway")
    # Not closed explicitly: Gateway.close() is not idempotent and Gateway.__del__ closes it (once)
    # when this function lets go of it; the cluster holds a Gateway client of its own.
    cluster_options = dask_gateway.Gateway(address=address, proxy_address=proxy_address,
                                           auth=auth).cluster_options()
    missing = gateway_options(cluster_options, gpus, roles)
    for key, value in options.items():
        try:
            cluster_options[key] = value
        except KeyError:
            raise ValueError(f"gateway(): the server offers no cluster option {key!r}; "
                             f"it offers {sorted(cluster_options)}") from None
    if missing:
        warnings.warn(f"the dask-gateway server exposes no {' or '.join(missing)} option: its "
                      "workers offer an srl_slot with one thread only if the server's ClusterConfig "
                      "sets them (environment=srl_lab.cluster.worker_env(), worker_threads=1)",
                      stacklevel=2)
    cluster = dask_gateway.GatewayCluster(address=address, proxy_address=proxy_address, auth=auth,
                                          cluster_options=cluster_options)
    if n_workers:
        cluster.scale(n_workers)
    return cluster


# ------------------------------------------------------------------------------------ inspection
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
