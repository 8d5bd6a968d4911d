"""Slurm and PBS clusters through dask-jobqueue, one single-threaded SRL worker process per slot."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from srl_lab.cluster._workers import ALLOWED_FAILURES, _import, _resource_and_preload_args

if TYPE_CHECKING:
    from dask_jobqueue import PBSCluster, SLURMCluster


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
