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
#   loops in one process (`srl_lab.cluster.worker_options()` says exactly this; GPU workers add `GPU=1`,
#   workers reserved for a role add `srl_role_<role>=1`);
# * **the preload** `srl_lab.system.preload` — the process imports torch and the runtime when it starts,
#   so a replacement SRL worker is up in seconds;
# * a scheduler that re-runs a task after many worker deaths (`allowed_failures`, `ALLOWED_FAILURES`).
#
# `srl_lab.cluster` has one helper per deployment that starts workers this way (they need the extra:
# `pip install 'srl_lab[cluster]'`): `slurm(...)`, `pbs(...)`, `kubernetes(image, ...)`, `gateway(...)`.
# Anything else takes the same flags: `dask worker ADDRESS --nworkers 8` followed by
# `clusters.worker_args()`, or, where only the environment can be set, `clusters.worker_env()`.
#
# Pair of `recipes/05_cluster.py`: `--scheduler tcp://host:8786` runs against any running scheduler;
# without it, `DEPLOYMENT` below says which cluster to create.

# %% tags=["parameters"]
DEPLOYMENT = "local"  # used without --scheduler: "local", "slurm", "pbs", "kubernetes" or "gateway"
ACTORS = 2
MINUTES = 5.0
IMAGE = "ghcr.io/your-org/srl-lab:latest"  # kubernetes: any image with srl_lab installed

# %%
from distributed import Client

import srl_lab
from srl_lab import cluster as clusters
from srl_lab.notebook.recipe import RecipeArgs, recipe_args


def slurm(workers: int):
    """Slurm through dask-jobqueue: each job runs two single-threaded SRL worker processes.

    Add your site's ``queue=``, ``account=``, ``job_extra_directives=[...]``; ``memory`` is per slot.
    """
    return clusters.slurm(workers, slots_per_job=2, memory="4GB", walltime="02:00:00")


def pbs(workers: int):
    """PBS through dask-jobqueue, one SRL worker process per job."""
    return clusters.pbs(workers, memory="4GB", walltime="02:00:00")


def kubernetes(workers: int):
    """The dask-kubernetes operator: one pod per SRL worker process, from ``IMAGE``."""
    return clusters.kubernetes(IMAGE, workers, cpu="1", memory="4G")


def gateway(workers: int):
    """A JupyterHub's dask-gateway (address and auth from the ``gateway.*`` Dask config)."""
    return clusters.gateway(workers)


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
# ## The deployments
#
# **Slurm and PBS** (dask-jobqueue). The scheduler runs in this kernel; each job starts
# `slots_per_job` worker processes with one thread, the `srl_slot` (plus `GPU`/role) resources and the
# preload. `clusters.slurm(2, gpus=1, roles=("trainer", "policy"))` also asks Slurm for the GPU
# (`--gres=gpu:1`); PBS gets PBS Pro's `select=...:ngpus=1` unless you pass your site's
# `resource_spec`. Compute nodes start workers with this kernel's Python, so it must be on a shared
# file system. `cluster.job_script()` shows what will be submitted (below, nothing is submitted).
# Actor-only CPU nodes can join the same scheduler with a job of your own running
# `dask worker {cluster.scheduler_address} --nworkers 16` plus `clusters.worker_args(roles=("actor",))`.
#
# **Kubernetes** (dask-kubernetes operator, installed in the cluster). `clusters.kubernetes(IMAGE, 8)`
# creates a `DaskCluster` whose worker pods each run one `dask worker` with `worker_args()`; the image
# needs srl_lab. `clusters.kubernetes_spec(...)` returns that resource without creating it
# (`kubectl apply` it yourself), and GPU trainers get a worker group of their own:
# `cluster.add_worker_group("gpu", custom_spec=clusters.kubernetes_worker_spec(IMAGE, 1, gpus=1,
# roles=("trainer", "policy")))`, which requests `nvidia.com/gpu`.
#
# **dask-gateway**. What a gateway cluster can be asked for is the server's choice:
# `clusters.gateway(8)` puts `worker_env()` into the server's `environment` option and sets
# `worker_threads` (or `worker_cores`) to 1, and warns when the server exposes neither. The gateway
# admin either exposes them, e.g. in `dask_gateway_config.py`:
#
# ```python
# from dask_gateway_server.options import Integer, Mapping, Options
# c.Backend.cluster_options = Options(
#     Integer("worker_cores", 1, min=1, max=8), Mapping("environment", {}),
#     handler=lambda o: {"worker_cores": o.worker_cores, "environment": o.environment})
# ```
#
# or fixes them for everyone: `c.ClusterConfig.worker_threads = 1` and
# `c.ClusterConfig.environment = srl_lab.cluster.worker_env()`. The worker image needs srl_lab.
#
# The next cell only renders: a Slurm job script and a Kubernetes worker command (when the extra is
# installed) and the flags for a hand-started worker.

# %% tags=["active-ipynb"]
# import importlib.util
#
# if importlib.util.find_spec("dask_jobqueue"):  # renders the job script; no job is submitted
#     with clusters.slurm(slots_per_job=2, walltime="02:00:00",
#                         scheduler_options={"host": "127.0.0.1", "dashboard_address": ":0"}) as preview:
#         print(preview.job_script())
# if importlib.util.find_spec("dask_kubernetes"):
#     print(" ".join(clusters.kubernetes_spec(IMAGE, 2)["spec"]["worker"]["spec"]["containers"][0]["args"]))
# print("dask worker ADDRESS --nworkers 8", " ".join(clusters.worker_args()))

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
