# ---
# jupyter:
#   jupytext:
#     formats: notebooks///ipynb,recipes///py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 05 · Beyond one machine: any Dask scheduler
#
# Everything in srl_lab takes a Dask `Client` or a scheduler address, so moving from the embedded
# cluster to a Slurm/PBS allocation, a Kubernetes cluster or a JupyterHub's dask-gateway changes how
# the cluster is made and nothing else. SRL workers only need this of each Dask worker process:
#
# * **one thread** — an SRL worker is a Python loop holding its thread for the whole run;
# * **one `srl_slot` resource** — every SRL worker asks for a slot, so the scheduler never stacks two
#   loops in one process (`srl_lab.cluster.worker_options()` says exactly this; GPU workers add `GPU=1`).
#
# On the command line that is `dask worker ADDRESS --nthreads 1 --resources srl_slot=1`. Where only
# the environment can be set, the Dask config variable `DASK_DISTRIBUTED__WORKER__RESOURCES__SRL_SLOT=1`
# does the same.
#
# Pair of `recipes/05_cluster.py`: `--scheduler tcp://host:8786` runs against any running scheduler;
# without it, `DEPLOYMENT` below says which cluster to create.

# %% tags=["parameters"]
DEPLOYMENT = "local"  # used without --scheduler: "local", "slurm", "pbs", "kubernetes" or "gateway"
ACTORS = 2
MINUTES = 5.0

# %%
from distributed import Client

import srl_lab
from srl_lab import cluster as clusters
from srl_lab.notebook.recipe import RecipeArgs, recipe_args

SLOT_ENV = {"DASK_DISTRIBUTED__WORKER__RESOURCES__SRL_SLOT": "1"}  # one srl_slot per worker process


def slurm(workers: int):
    """One single-threaded worker per Slurm job (dask-jobqueue); add queue/account/walltime for your site."""
    from dask_jobqueue import SLURMCluster

    cluster = SLURMCluster(cores=1, processes=1, memory="4GB", walltime="02:00:00",
                           worker_extra_args=["--resources", f"{clusters.SLOT}=1"])
    cluster.scale(workers)
    return cluster


def pbs(workers: int):
    from dask_jobqueue import PBSCluster

    cluster = PBSCluster(cores=1, processes=1, memory="4GB", walltime="02:00:00",
                         worker_extra_args=["--resources", f"{clusters.SLOT}=1"])
    cluster.scale(workers)
    return cluster


def kubernetes(workers: int):
    """dask-kubernetes' operator: the worker image must have srl_lab installed (see binder/)."""
    from dask_kubernetes.operator import KubeCluster

    one_cpu = {"cpu": "1", "memory": "4G"}
    return KubeCluster(name="srl-lab", n_workers=workers, env=SLOT_ENV,
                       worker_command=["dask", "worker", "--nthreads", "1"],
                       resources={"requests": one_cpu, "limits": one_cpu})


def gateway(workers: int):
    """A JupyterHub's dask-gateway. Which options exist is the gateway admin's choice: many expose
    ``environment`` and ``worker_cores``; where they do not, ask for workers started with one srl_slot."""
    from dask_gateway import Gateway

    gw = Gateway()
    options = gw.cluster_options()
    options.worker_cores = 1
    options.environment = SLOT_ENV
    cluster = gw.new_cluster(options)
    cluster.scale(workers)
    return cluster


def local(workers: int):
    """What the other deployments give, on this machine: one process per slot."""
    return clusters.local(n_workers=workers)


DEPLOYMENTS = {"local": local, "slurm": slurm, "pbs": pbs, "kubernetes": kubernetes, "gateway": gateway}


def connect(args: RecipeArgs) -> tuple[Client, object | None]:
    """A client for ``--scheduler`` when given, else for a new cluster of ``DEPLOYMENT``."""
    if args.scheduler:
        return Client(args.scheduler), None
    cluster = DEPLOYMENTS[DEPLOYMENT](workers=1 + args.actors)  # the trainer's slot plus the actors'
    return Client(cluster), cluster


def describe(client: Client) -> list[dict]:
    """The Dask workers and what they offer: the first thing to check on a new cluster."""
    workers = client.scheduler_info(n_workers=-1)["workers"]
    return [{"address": address, "host": w.get("host"), "nthreads": w.get("nthreads"),
             "resources": w.get("resources", {})} for address, w in workers.items()]


def make_config(args: RecipeArgs) -> srl_lab.ExperimentConfig:
    return srl_lab.ExperimentConfig(
        name="cluster", actors=srl_lab.ActorConfig(workers=args.actors, ring_size=2, envs_per_group=16),
        metrics_interval_s=0.5)


def main(argv: list[str] | None = None) -> dict:
    args = recipe_args(argv, actors=ACTORS, minutes=MINUTES, description="CartPole on any Dask scheduler")
    client, cluster = connect(args)
    try:
        print(f"scheduler {client.scheduler.address}: {clusters.slot_count(client)} SRL slots")
        run = srl_lab.launch(make_config(args), client=client, run_dir=args.run_dir)
        try:
            run.wait(seconds=60 * args.minutes, target_return=475.0)
        finally:
            result = run.stop()
        print(f"{result['env_steps']:,} env steps, return (last 20) {result['mean_return_last_20']:.1f}")
        return result
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


# %% [markdown]
# ## Connect
#
# With `SRL_LAB_SCHEDULER` (or the recipe's `--scheduler`) set, the notebook joins that scheduler;
# otherwise it creates a `DEPLOYMENT` cluster. A launch on a cluster with too few slots still
# starts: the panel then says how many SRL workers are waiting for a free slot.

# %% tags=["active-ipynb"]
# args = recipe_args([], actors=ACTORS, minutes=MINUTES)
# client, cluster = connect(args)
# print(client.scheduler.address, "offers", clusters.slot_count(client), "SRL slots")
# describe(client)

# %% [markdown]
# ## Run on it
#
# The same launch as on a laptop; the run's workers land wherever the scheduler has slots, and the
# worker table's host column shows where.

# %% tags=["active-ipynb"]
# run = srl_lab.launch(make_config(args), client=client, run_dir=args.run_dir)
# run.panel()

# %% tags=["active-ipynb"]
# run.wait(seconds=60 * args.minutes, target_return=475.0)
# result = run.stop()
# result

# %% tags=["active-ipynb"]
# client.close()
# if cluster is not None:
#     cluster.close()

# %% tags=["active-py"]
if __name__ == "__main__":
    main()
