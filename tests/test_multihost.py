"""SRL across three hosts made of network namespaces: every data stream crosses a real interface.

Host S runs the Dask scheduler, host A two actor workers, host L the policy worker and the trainer.
Each host has its own address on a private /24 and its own hostname, so the data plane must pick
tcp (ipc is only for peers with the same hostname). The test process joins through the bridge.
"""
from __future__ import annotations

import dataclasses
import os
import sys
import time

import netns
import pytest

from srl_lab.config import ExperimentConfig, InferenceConfig
from srl_lab.presets import fast_cartpole
from srl_lab.system.control import endpoint_name
from srl_lab.system.controller import launch
from srl_lab.system.streams import Endpoint
from runs import shipped_by_value

SOLVED = 475.0
SCHEDULER_PORT = 8786
ACTOR_SERVICES = ("samples", "policy-0")  # with remote inference, actors reach the trainer and the policy worker
SERVICES = (*ACTOR_SERVICES, "params")  # params: the trainer's weights, read by the policy worker (also on L)
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cartpole() -> ExperimentConfig:
    """The fast CartPole preset on two actors with a remote policy worker: large inference batches
    cross the hosts, and it reaches 475 in seconds once the cluster is up."""
    return dataclasses.replace(fast_cartpole(actors=2, name="test-multihost"),
                               inference=InferenceConfig(mode="remote", policy_workers=1))


def _probe(endpoints: dict[str, dict]) -> dict:
    """Runs inside a Dask worker process: its hostname, the address it would pick for each
    endpoint, and its established tcp connections."""
    import socket

    import psutil

    from srl_lab.system.streams import Endpoint

    conns = [(c.laddr.ip, c.laddr.port, c.raddr.ip, c.raddr.port)
             for c in psutil.Process().net_connections(kind="tcp")
             if c.status == psutil.CONN_ESTABLISHED and c.raddr]
    return {"hostname": socket.gethostname(),
            "chosen": {s: Endpoint.from_dict(d).choose() for s, d in endpoints.items()},
            "connections": conns}


@pytest.fixture
def hosts(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    cluster = netns.Hosts(["S", "A", "L"], str(logs))
    try:
        cluster.start()
    except netns.Unavailable as why:
        pytest.skip(f"network namespaces unavailable: {why}")
    try:
        yield cluster
    finally:
        cluster.close()


def _start_dask(hosts: netns.Hosts) -> str:
    """Scheduler on S, two actor workers on A, a policy and a trainer worker on L.

    All start at once: workers import the runtime (preload) while the scheduler comes up, and keep
    trying to reach it until it does.
    """
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    py = sys.executable
    hosts.spawn("S", [py, "-m", "distributed.cli.dask_scheduler", "--host", hosts["S"].ip,
                      "--port", str(SCHEDULER_PORT), "--no-dashboard"], "scheduler", env=env, cwd=REPO)
    address = f"tcp://{hosts['S'].ip}:{SCHEDULER_PORT}"

    def worker(host: str, label: str, resources: str, n: int = 1) -> None:
        hosts.spawn(host, [py, "-m", "distributed.cli.dask_worker", address, "--host", hosts[host].ip,
                           "--nworkers", str(n), "--nthreads", "1", "--resources", resources,
                           "--preload", "srl_lab.system.preload", "--no-dashboard", "--name", label,
                           "--local-directory", os.path.join(hosts.log_dir, label), "--death-timeout", "60"],
                    label, env=env, cwd=REPO)

    worker("A", "actors", "srl_slot=1,srl_role_actor=1", n=2)
    worker("L", "policy", "srl_slot=1,srl_role_policy=1")
    worker("L", "trainer", "srl_slot=1,srl_role_trainer=1")
    hosts.wait_port("S", SCHEDULER_PORT, timeout=60)
    return address


def _wait_for_workers(client, hosts: netns.Hosts, n: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while len(client.scheduler_info(n_workers=-1)["workers"]) < n:
        if hosts.exited() or time.monotonic() > deadline:
            raise AssertionError(f"{n} Dask workers did not join; exited: {hosts.exited()}\n{hosts.logs()}")
        time.sleep(0.5)


@pytest.mark.slow
def test_training_across_namespaced_hosts(hosts, tmp_path):
    from distributed import Client, Variable

    t0 = time.monotonic()
    address = _start_dask(hosts)
    with Client(address, timeout=60) as probe_client:
        _wait_for_workers(probe_client, hosts, 4, timeout=120)
        by_host = {}
        for worker_address in probe_client.scheduler_info(n_workers=-1)["workers"]:
            ip = worker_address.split("://", 1)[1].rsplit(":", 1)[0]
            by_host.setdefault(ip, []).append(worker_address)
    a_ip, l_ip = hosts["A"].ip, hosts["L"].ip
    assert sorted(by_host) == sorted([a_ip, l_ip]) and len(by_host[a_ip]) == 2, by_host

    started = time.monotonic()
    run = launch(cartpole(), client=address, run_dir=str(tmp_path / "run"))
    status = result = None
    try:
        status = run.wait(target_return=SOLVED, seconds=300, progress=False)
        # While the run is live: where each stream lives and how the actors reach it.
        endpoints = {s: Variable(endpoint_name(run.run_id, s), client=run.client).get(timeout=10)
                     for s in SERVICES}
        with shipped_by_value(sys.modules[__name__]):
            probes = run.client.run(_probe, endpoints)
    finally:
        try:
            result = run.stop()
        finally:
            if run.client.status != "closed":
                run.client.close()
    print(f"multihost: cluster up in {started - t0:.0f} s, mean return {status['mean_return_last_20']:.1f} "
          f"after {time.monotonic() - started:.0f} s of training; "
          f"hosts {sorted({(w['worker'], w['host']) for w in status['workers']})}")

    assert status["mean_return_last_20"] >= SOLVED, (status, result, hosts.logs())

    # Each role ran on its host (hosts as reported by the workers' heartbeats).
    want = {"actor": hosts["A"].hostname, "policy": hosts["L"].hostname, "trainer": hosts["L"].hostname}
    seen = {w["worker"]: (w["role"], w["host"]) for w in status["workers"]}
    assert sorted(seen) == ["actor-0", "actor-1", "policy-0", "trainer-0"], seen
    assert all(host == want[role] for role, host in seen.values()), (seen, want)

    # Every service is published with the tcp address of L's interface and L's hostname.
    for service, d in endpoints.items():
        ep = Endpoint.from_dict(d)
        assert ep.tcp.startswith(f"tcp://{l_ip}:"), (service, ep)
        assert ep.hostname == hosts["L"].hostname, (service, ep)
    ports = {s: int(Endpoint.from_dict(endpoints[s]).tcp.rsplit(":", 1)[1]) for s in ACTOR_SERVICES}

    # Actor processes pick tcp (not ipc) and hold established connections to L's address on each port.
    for worker_address in by_host[a_ip]:
        p = probes[worker_address]
        assert p["hostname"] == hosts["A"].hostname, p
        assert p["chosen"] == {s: Endpoint.from_dict(d).tcp for s, d in endpoints.items()}, p
        peers = {(rip, rport) for lip, _, rip, rport in p["connections"] if lip == a_ip}
        for service, port in ports.items():
            assert (l_ip, port) in peers, (worker_address, service, port, p["connections"])
    # And on L, the trainer's and policy worker's ports hold connections coming from A's address.
    inbound = {(lport, rip) for w in by_host[l_ip] for lip, lport, rip, _ in probes[w]["connections"]
               if lip == l_ip}
    for service, port in ports.items():
        assert (port, a_ip) in inbound, (service, port, inbound)
    # Same host, same hostname: the policy worker reads weights from the trainer over ipc.
    params = Endpoint.from_dict(endpoints["params"])
    for worker_address in by_host[l_ip]:
        assert probes[worker_address]["hostname"] == hosts["L"].hostname, probes[worker_address]
        assert params.ipc and probes[worker_address]["chosen"]["params"] == params.ipc, (params, probes)

    # The books close, nothing lost.
    assert result["fragments_produced"] > 0, result
    assert result["fragments_produced"] == (result["fragments_consumed"] + result["dropped_stale"]
                                            + result["fragments_lost"]), result
    assert result["fragments_lost"] == 0, result
    assert result["restarts"] == 0, result
