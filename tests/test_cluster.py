"""Cluster helpers for Slurm/PBS, Kubernetes and dask-gateway start workers the way SRL needs them.

Nothing here needs a queue system or a Kubernetes API: the Slurm job script's worker command and the
Kubernetes worker pod's command are run on this machine against a real scheduler, and a real
dask-gateway server (local backend, loopback only) creates a cluster through the helper.
"""
from __future__ import annotations

import gc
import os
import shlex
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import dask.config
import pytest
from distributed import Client, LocalCluster

from srl_lab import cluster as clusters
from runs import shipped_by_value

LOOPBACK_SCHEDULER = {"host": "127.0.0.1", "dashboard_address": ":0"}


def flag(command: list[str], name: str) -> str:
    """The value after the last ``name`` in a command line."""
    return command[len(command) - 1 - command[::-1].index(name) + 1]


def preloaded() -> bool:
    return clusters.PRELOAD in sys.modules


def allowed_failures(dask_scheduler) -> int:
    return dask_scheduler.allowed_failures


@contextmanager
def started(command: list[str], log: Path, env: dict[str, str] | None = None):
    """Run ``command`` in its own process group for the block; end that group afterwards."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, **(env or {})})
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


def wait_for(client: Client, n: int, proc: subprocess.Popen, log: Path, timeout: float = 120) -> list[dict]:
    deadline = time.monotonic() + timeout
    while len(client.scheduler_info(n_workers=-1)["workers"]) < n:
        assert proc.poll() is None, f"the worker command exited: {log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"no {n} workers after {timeout}s: {log.read_text()[-3000:]}"
        time.sleep(0.2)
    return list(client.scheduler_info(n_workers=-1)["workers"].values())


def all_preloaded(client: Client) -> bool:
    with shipped_by_value(sys.modules[__name__]):
        return all(client.run(preloaded).values())


# ------------------------------------------------------------------------------ helpers in common
def test_worker_args_and_env_say_the_same_as_worker_options():
    assert clusters.worker_args(gpus=2, roles=("actor",)) == [
        "--nthreads", "1", "--resources", "srl_slot=1,GPU=2,srl_role_actor=1", "--preload", clusters.PRELOAD]
    env = clusters.worker_env(gpus=1, roles=("trainer",))
    import dask

    with dask.config.set(dask.config.collect_env(env)):  # as a worker process would read its environment
        assert dask.config.get("distributed.worker.resources") == \
            clusters.worker_options(gpus=1, roles=("trainer",))["resources"]  # "GPU" keeps its case
        assert dask.config.get("distributed.worker.preload") == [clusters.PRELOAD]
        assert dask.config.get("distributed.scheduler.allowed-failures") == clusters.ALLOWED_FAILURES
    with pytest.raises(ValueError, match="unknown SRL role"):
        clusters.worker_args(roles=("learner",))


def test_the_embedded_cluster_adds_gpu_workers_for_cuda_trainers_and_policy_workers():
    """A CUDA trainer and policy worker on one machine: the embedded cluster offers them ``GPU`` slots."""
    from srl_lab.envs.hide_and_seek.showcase import showcase_config
    from srl_lab.system.worker_set import gpu_slots_needed, slots_needed

    config = showcase_config("short", actors=2, device="cuda")
    assert (config.inference.mode, config.inference.device, config.trainer.device) == ("remote", "cuda", "cuda")
    assert gpu_slots_needed(config) == 2 and slots_needed(config) == 4
    assert gpu_slots_needed(showcase_config("short", actors=2)) == 0
    with (clusters.local(n_workers=2, gpu_workers=2, dashboard_address=None) as cluster,
          Client(cluster) as client):
        resources = sorted(tuple(sorted(w["resources"].items()))
                           for w in client.scheduler_info(n_workers=-1)["workers"].values())
        assert resources == [(("GPU", 1), ("srl_slot", 1))] * 2 + [(("srl_slot", 1),)] * 2
        assert clusters.gpu_count(client) == 2 and clusters.slot_count(client) == 4
        # Dask's housekeeping runs at the quiet intervals in every worker and nanny, those added after the
        # cluster started too, and in the scheduler; the caller's own Dask config is left as it was.
        def housekeeping(server) -> tuple:
            callbacks = server.periodic_callbacks
            memory = getattr(server, "memory_manager", None)
            return ("profile" in callbacks, callbacks["tick"].callback_time, callbacks["monitor"].callback_time,
                    getattr(memory, "memory_monitor_interval", 1.0))

        quiet = (False, 1000, 2000, 1.0)
        in_workers = client.run(lambda dask_worker: housekeeping(dask_worker))
        assert len(in_workers) == 4 and set(in_workers.values()) == {quiet}, in_workers
        assert {housekeeping(nanny) for nanny in cluster.workers.values()} == {quiet}
        assert client.run_on_scheduler(lambda dask_scheduler: housekeeping(dask_scheduler)) == quiet
    assert dask.config.get("distributed.admin.tick.interval") == "20ms"


@pytest.mark.parametrize("module, call", [
    ("dask_jobqueue", lambda: clusters.slurm()),
    ("dask_jobqueue", lambda: clusters.pbs()),
    ("dask_kubernetes.operator", lambda: clusters.kubernetes("image")),
    ("dask_kubernetes.operator", lambda: clusters.kubernetes_spec("image")),
    ("dask_gateway", lambda: clusters.gateway()),
])
def test_a_missing_package_names_the_extra(monkeypatch, module, call):
    monkeypatch.setitem(sys.modules, module, None)  # what an environment without the extra sees
    with pytest.raises(ImportError, match=r"pip install 'srl_lab\[cluster\]'"):
        call()


# ---------------------------------------------------------------------------------- dask-jobqueue
def test_slurm_job_runs_single_threaded_slot_workers_that_join_the_scheduler(tmp_path):
    """The job script's worker command, run here as a compute node would, gives two SRL slots."""
    pytest.importorskip("dask_jobqueue")
    with clusters.slurm(slots_per_job=2, gpus=1, roles=("trainer", "policy"), queue="gpu", walltime="00:10:00",
                        scheduler_options=LOOPBACK_SCHEDULER, worker_extra_args=["--host", "127.0.0.1"],
                        local_directory=str(tmp_path)) as cluster:
        script = cluster.job_script()
        assert "#SBATCH -p gpu" in script and "#SBATCH -t 00:10:00" in script
        assert "#SBATCH --cpus-per-task=2" in script  # one core per slot
        assert "#SBATCH --gres=gpu:2" in script  # one GPU for each of the job's two slots
        command = shlex.split(script.strip().splitlines()[-1])
        assert flag(command, "--nthreads") == "1" and flag(command, "--nworkers") == "2"
        assert flag(command, "--resources") == "srl_slot=1,GPU=1,srl_role_trainer=1,srl_role_policy=1"
        assert flag(command, "--preload") == clusters.PRELOAD
        assert cluster.scheduler.allowed_failures == clusters.ALLOWED_FAILURES

        log = tmp_path / "job.log"
        with started(command, log) as job, Client(cluster) as client:
            workers = wait_for(client, 2, job, log)
            assert [w["nthreads"] for w in workers] == [1, 1]
            assert all(w["resources"] == {"srl_slot": 1, "GPU": 1, "srl_role_trainer": 1, "srl_role_policy": 1}
                       for w in workers)
            assert clusters.slot_count(client) == 2 and clusters.gpu_count(client) == 2
            assert clusters.offered_roles(client) == {"trainer", "policy"}
            assert all_preloaded(client)


def test_pbs_job_script_asks_for_the_gpus_and_starts_slot_workers():
    pytest.importorskip("dask_jobqueue")
    with clusters.pbs(memory="8GB", gpus=1, roles=("trainer",), queue="gpuq", account="proj",
                      scheduler_options=LOOPBACK_SCHEDULER) as cluster:
        script = cluster.job_script()
        assert "#PBS -q gpuq" in script and "#PBS -A proj" in script
        assert "#PBS -l select=1:ncpus=1:ngpus=1:mem=" in script
        command = shlex.split(script.strip().splitlines()[-1])
        assert flag(command, "--nthreads") == "1" and "--nworkers" not in command  # one process per job
        assert flag(command, "--resources") == "srl_slot=1,GPU=1,srl_role_trainer=1"
        assert flag(command, "--preload") == clusters.PRELOAD
        assert cluster.scheduler.allowed_failures == clusters.ALLOWED_FAILURES
    with clusters.pbs(resource_spec="nodes=1:ppn=2:gpus=1", gpus=1,  # a Torque site's own form wins
                      scheduler_options=LOOPBACK_SCHEDULER) as cluster:
        assert "#PBS -l nodes=1:ppn=2:gpus=1" in cluster.job_script()
        assert "ngpus" not in cluster.job_script()


def test_jobqueue_helpers_own_the_process_layout():
    pytest.importorskip("dask_jobqueue")
    with pytest.raises(ValueError, match="slots_per_job"):
        clusters.slurm(cores=8)
    with pytest.raises(ValueError, match="slots_per_job"):
        clusters.pbs(slots_per_job=0)


# -------------------------------------------------------------------------------- dask-kubernetes
def test_kubernetes_spec_runs_one_slot_per_worker_pod(tmp_path):
    """The DaskCluster resource, built offline; its worker pod command is run here against a scheduler.

    Creating the cluster itself needs a Kubernetes API with the Dask operator, which tests don't have.
    """
    pytest.importorskip("dask_kubernetes.operator")
    spec = clusters.kubernetes_spec("registry.example/srl-lab:1", 3, name="srl-test", gpus=1,
                                    roles=("trainer",), cpu="4", memory="16G", env={"OMP_NUM_THREADS": "4"})
    assert spec["kind"] == "DaskCluster" and spec["metadata"]["name"] == "srl-test"
    worker = spec["spec"]["worker"]
    assert worker["replicas"] == 3
    (container,) = worker["spec"]["containers"]
    assert container["image"] == "registry.example/srl-lab:1"
    args = container["args"]
    assert args[:2] == ["dask", "worker"] and flag(args, "--nthreads") == "1"
    assert flag(args, "--resources") == "srl_slot=1,GPU=1,srl_role_trainer=1"
    assert flag(args, "--preload") == clusters.PRELOAD
    assert container["resources"] == {"requests": {"cpu": "4", "memory": "16G"},
                                      "limits": {"cpu": "4", "memory": "16G", "nvidia.com/gpu": "1"}}
    assert {"name": "OMP_NUM_THREADS", "value": "4"} in container["env"]
    (scheduler,) = spec["spec"]["scheduler"]["spec"]["containers"]
    assert scheduler["args"][:2] == ["dask", "scheduler"]  # no dask-scheduler script in current distributed
    assert {"name": "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES",
            "value": str(clusters.ALLOWED_FAILURES)} in scheduler["env"]
    assert "nvidia.com/gpu" not in scheduler["resources"]["limits"]
    assert clusters.kubernetes_spec("img")["metadata"]["name"].startswith("srl-lab-")

    # What the operator's pod does: DASK_SCHEDULER_ADDRESS and DASK_WORKER_NAME in the environment,
    # $(DASK_WORKER_NAME) expanded; the dashboard moves off the pod's fixed port on this shared machine.
    command = [a.replace("$(DASK_WORKER_NAME)", "srl-test-worker") for a in args]
    command[command.index("--dashboard-address") + 1] = "127.0.0.1:0"
    with LocalCluster(n_workers=0, host="127.0.0.1", dashboard_address=":0") as cluster, Client(cluster) as client:
        env = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               "DASK_SCHEDULER_ADDRESS": cluster.scheduler_address, "DASK_WORKER_NAME": "srl-test-worker",
               **{e["name"]: e["value"] for e in container["env"]}}
        log = tmp_path / "pod.log"
        with started(command, log, env) as pod:
            (info,) = wait_for(client, 1, pod, log)
            assert info["name"] == "srl-test-worker" and info["nthreads"] == 1
            assert info["resources"] == {"srl_slot": 1, "GPU": 1, "srl_role_trainer": 1}
            assert all_preloaded(client)


# ----------------------------------------------------------------------------------- dask-gateway
def test_gateway_options_fill_what_the_server_exposes():
    options_module = pytest.importorskip("dask_gateway.options")
    Options, Integer, Mapping = options_module.Options, options_module.Integer, options_module.Mapping

    full = Options(Integer("worker_cores", 4, min=1, max=8), Integer("worker_threads", 4, min=1, max=8),
                   Mapping("environment", {"EXISTING": "1"}))
    assert clusters.gateway_options(full, gpus=1) == []
    assert full["worker_threads"] == 1 and full["worker_cores"] == 4  # cores stay for torch, one Dask thread
    assert full["environment"] == {"EXISTING": "1", **clusters.worker_env(gpus=1)}

    cores_only = Options(Integer("worker_cores", 4, min=1, max=8))
    assert clusters.gateway_options(cores_only) == ["environment"]
    assert cores_only["worker_cores"] == 1  # the gateway starts worker_cores threads when it has no threads option
    assert clusters.gateway_options(Options()) == ["environment", "worker_threads"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def gateway_address(tmp_path):
    """A dask-gateway server on loopback: local-process backend, basic auth, options like a JupyterHub's."""
    pytest.importorskip("dask_gateway_server.backends.local")
    pytest.importorskip("dask_gateway")
    api, proxy = free_port(), free_port()
    config = tmp_path / "dask_gateway_config.py"
    config.write_text(textwrap.dedent(f"""
        from dask_gateway_server.options import Integer, Mapping, Options

        c.DaskGateway.address = "127.0.0.1:{api}"
        c.Proxy.address = "127.0.0.1:{proxy}"
        c.DaskGateway.backend_class = "dask_gateway_server.backends.local.UnsafeLocalBackend"
        c.DaskGateway.authenticator_class = "dask_gateway_server.auth.SimpleAuthenticator"
        c.LocalBackend.clusters_directory = {str(tmp_path / "clusters")!r}
        c.ClusterConfig.scheduler_cmd = [{sys.executable!r}, "-m", "distributed.cli.dask_scheduler"]
        c.ClusterConfig.worker_cmd = [{sys.executable!r}, "-m", "distributed.cli.dask_worker"]
        c.Backend.cluster_options = Options(
            Integer("worker_cores", 2, min=1, max=2),
            Mapping("environment", {{}}),
            handler=lambda o: {{"worker_cores": o.worker_cores, "environment": o.environment}},
        )
    """))
    log = tmp_path / "gateway.log"
    address = f"http://127.0.0.1:{proxy}"
    with started([sys.executable, "-m", "dask_gateway_server", "-f", str(config)], log) as server:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, f"the gateway server exited: {log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"the gateway server did not answer: {log.read_text()[-3000:]}"
            try:
                with urllib.request.urlopen(f"{address}/api/health", timeout=2) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                time.sleep(0.3)
        yield address


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_gateway_cluster_workers_offer_one_slot_with_one_thread(gateway_address):
    """A cluster made through the helper on a real gateway: its worker is an SRL slot with one thread."""
    from dask_gateway import BasicAuth

    cluster = clusters.gateway(1, gpus=1, roles=("trainer",), address=gateway_address, auth=BasicAuth("srl"))
    try:
        with cluster.get_client() as client:
            client.wait_for_workers(1, timeout=120)
            (info,) = client.scheduler_info(n_workers=-1)["workers"].values()
            assert info["nthreads"] == 1  # the server's default is 2 worker cores, hence 2 threads
            assert info["resources"] == {"srl_slot": 1, "GPU": 1, "srl_role_trainer": 1}
            assert clusters.slot_count(client) == 1 and clusters.offered_roles(client) == {"trainer"}
            assert all_preloaded(client)
            with shipped_by_value(sys.modules[__name__]):
                assert client.run_on_scheduler(allowed_failures) == clusters.ALLOWED_FAILURES
    finally:
        cluster.shutdown()
    # dask-gateway's Gateway.__del__ closes its client again after shutdown() closed it, which raises;
    # collect it here rather than at some later garbage collection in the middle of other code.
    del client, cluster  # the client refers to the cluster
    gc.collect()
    with pytest.raises(ValueError, match="no cluster option 'image'"):
        clusters.gateway(address=gateway_address, auth=BasicAuth("srl"), image="srl-lab:1")
