"""What every SRL worker process offers (one thread, one ``srl_slot``, the preload), the embedded
``LocalCluster``, and what a running cluster offers."""
from __future__ import annotations

import copy
import functools
import importlib
import logging
from typing import Any

SLOT = "srl_slot"
ROLES = ("actor", "policy", "trainer")
ALLOWED_FAILURES = 1000  # re-runs of one task after worker deaths before the scheduler gives up
PRELOAD = "srl_lab.system.preload"
GPU_WORKERS_TIMEOUT_S = 120  # for the embedded cluster's GPU workers to start
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


# Dask's housekeeping, at the intervals it picks for a shared cluster's dashboard, keeps an idle embedded
# cluster of five busy at ~0.2 cores, a tenth of a two-core machine its SRL workers need: each server's
# event-loop check every 20 ms, each worker's sampling profiler every 10 ms (it shows nothing of an SRL
# worker's one long task), memory checks every 100 ms, the system monitor every 500 ms. At these settings
# the same cluster idles at ~0.03 cores; a loop blocked past the 3 s warning limit is still reported,
# memory limits still enforced. (Work stealing stays on: it moves a task queued behind a busy slot to a
# worker that joined later.)
QUIET = {
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.worker.profile.enabled": False,
    "distributed.worker.memory.monitor-interval": "1s",
}


def local(n_workers: int = 4, dashboard_address: str | None = ":0", security: Any = None, gpu_workers: int = 0,
          **kwargs: Any):
    """An embedded ``LocalCluster(processes=True)`` sized for ``n_workers`` SRL workers.

    ``gpu_workers``: that many more workers also offer ``GPU=1``, for trainers and policy workers
    whose device is CUDA; they share the machine's GPUs (one SRL worker each, like every slot).
    ``security``: a ``distributed.security.Security`` (e.g. ``Security.temporary()``) makes every
    Dask connection TLS; the run secret then travels to the workers encrypted.
    """
    import dask.config
    from distributed import LocalCluster

    tls = {"security": security, "protocol": "tls://"} if security is not None else {}
    with dask.config.set(QUIET):  # the scheduler's own settings (each nanny sets its own)
        kwargs.setdefault("config", copy.deepcopy(dask.config.config))  # the workers' (Nanny merges shallowly)
        cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                               resources=worker_options()["resources"], dashboard_address=dashboard_address,
                               silence_logs=logging.ERROR, preload=[PRELOAD], worker_class=_quiet_nanny(),
                               scheduler_kwargs={"allowed_failures": ALLOWED_FAILURES}, **tls, **kwargs)
    if gpu_workers:
        gpu_spec = copy.deepcopy(cluster.new_spec)
        gpu_spec["options"]["resources"] = worker_options(gpus=1)["resources"]
        cluster.worker_spec.update({f"gpu-{i}": gpu_spec for i in range(gpu_workers)})
        cluster.scale(len(cluster.worker_spec))
        cluster.wait_for_workers(len(cluster.worker_spec), timeout=GPU_WORKERS_TIMEOUT_S)
    return cluster


@functools.cache
def _quiet_nanny() -> type:
    """A Nanny that keeps ``QUIET``'s intervals itself, also when the cluster grows after it started."""
    import dask.config
    from distributed import Nanny

    class QuietNanny(Nanny):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            with dask.config.set(QUIET):
                super().__init__(*args, **kwargs)

    return QuietNanny


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
