"""Faults on a real multi-process Dask cluster: killed actor, policy worker and trainer processes, a
hung worker, a kill in the middle of a checkpoint write, resume from a run directory; plus the
in-process rules behind them (bounded send queue, books, supervision, checkpoint files)."""
from __future__ import annotations

import glob
import os
import random
import re
import signal
import sys
import time
from collections import Counter

import gymnasium as gym
import numpy as np
import pytest
import torch
import zmq
from distributed import Client
from torch import nn

from srl_lab import cluster as clusters
from srl_lab.config import (
    ActorConfig,
    EnvConfig,
    ExperimentConfig,
    InferenceConfig,
    PolicyConfig,
    PPOConfig,
    TrainerConfig,
)
from srl_lab.models.mlp import MLPPolicy
from srl_lab.system import checkpoints, codec
from srl_lab.system.controller import Run, launch
from runs import assert_event_files_match_metrics, local_client
from srl_lab.system.sample_stream import Ledger, SampleSender, account
from srl_lab.system.streams import FixedEndpoint, bind
from srl_lab.system.supervisor import Supervisor

RING = 2


@pytest.fixture(scope="module")
def dask_client():
    """A cluster of its own: these tests kill processes and need the spares no other test has touched."""
    yield from local_client()


def config(mode: str = "inline", actors: int = 2, **trainer) -> ExperimentConfig:
    return ExperimentConfig(
        name=f"faults-{mode}", actors=ActorConfig(workers=actors, ring_size=RING, envs_per_group=8,
                                                  fragment_length=64),
        inference=InferenceConfig(mode=mode), trainer=TrainerConfig(**{"heartbeat_timeout_s": 10.0, **trainer}))


def wait_for(predicate, timeout: float, what: str) -> float:
    """Seconds it took for ``predicate`` to hold; fails after ``timeout``."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)
    return time.monotonic() - start


def worker(run: Run, worker_id: str) -> dict:
    return next(w for w in run.status()["workers"] if w["worker"] == worker_id)


def replaced_and_running(run: Run, worker_id: str, old_pid: int) -> bool:
    w = worker(run, worker_id)  # a trainer inside an update reads "training": up and working too
    return w["state"] in ("running", "training") and w["restarts"] >= 1 and w["pid"] != old_pid


def version(run: Run) -> int:
    return run.status()["version"]


def assert_books(result: dict, lost_at_most: int) -> None:
    assert result["fragments_produced"] > 0
    assert result["fragments_produced"] == (result["fragments_consumed"] + result["dropped_stale"]
                                            + result["fragments_lost"]), result
    assert result["fragments_lost_live"] == 0, result
    assert 0 <= result["fragments_lost"] <= lost_at_most, result


def test_killed_actor_process_is_replaced_within_10_s(dask_client, tmp_path):
    run = launch(config(), client=dask_client, run_dir=str(tmp_path))
    try:
        wait_for(lambda: version(run) >= 3, 120, "first updates")
        pid = worker(run, "actor-0")["pid"]
        os.kill(pid, signal.SIGKILL)
        replaced_s = wait_for(lambda: replaced_and_running(run, "actor-0", pid), 30, "a replacement actor")
        v = version(run)
        wait_for(lambda: version(run) >= v + 3, 120, "training to continue")
        assert worker(run, "actor-1")["restarts"] == 0
    finally:
        result = run.stop()
    print(f"actor replaced {replaced_s:.1f} s after kill -9; books {result}")
    assert replaced_s < 10.0
    assert result["restarts"] == 1
    assert_books(result, lost_at_most=RING)  # one fragment per env group of the killed actor at most


def test_killed_policy_worker_actors_reconnect_without_crashing(dask_client, tmp_path):
    run = launch(config("remote"), client=dask_client, run_dir=str(tmp_path))
    try:
        wait_for(lambda: version(run) >= 3, 120, "first updates")
        actor_pids = {w: worker(run, w)["pid"] for w in ("actor-0", "actor-1")}
        pid = worker(run, "policy-0")["pid"]
        os.kill(pid, signal.SIGKILL)
        replaced_s = wait_for(lambda: replaced_and_running(run, "policy-0", pid), 30, "a replacement policy worker")
        v = version(run)
        resumed_s = wait_for(lambda: version(run) >= v + 3, 120, "training through the new policy worker")
        for w, actor_pid in actor_pids.items():  # the same actor processes: waited and reconnected
            assert worker(run, w)["pid"] == actor_pid and worker(run, w)["restarts"] == 0
    finally:
        result = run.stop()
    print(f"policy worker replaced {replaced_s:.1f} s after kill -9, 3 more versions {resumed_s:.1f} s later")
    assert result["restarts"] == 1
    assert_books(result, lost_at_most=0)


def test_lost_dask_worker_is_replaced_by_growing_the_cluster(tmp_path):
    """A node that goes away for good: Dask re-runs the actor, the controller adds the slot it lacks."""
    cluster = clusters.local(n_workers=2, dashboard_address=None)  # trainer + actor, no spare
    client = Client(cluster)
    try:
        run = launch(config(actors=1, heartbeat_timeout_s=5.0), client=client, run_dir=str(tmp_path))
        try:
            wait_for(lambda: version(run) >= 2, 120, "first updates")
            pid = worker(run, "actor-0")["pid"]
            client.retire_workers([run.supervisor.current["actor-0"].dask_worker], close_workers=True, remove=True)
            replaced_s = wait_for(lambda: replaced_and_running(run, "actor-0", pid), 90, "a replacement actor")
            v = version(run)
            wait_for(lambda: version(run) >= v + 2, 120, "training to continue")
        finally:
            result = run.stop()
    finally:
        client.close()
        cluster.close()
    assert any(f["event"] == "lost its Dask worker" and "grew" in f["note"] for f in result["faults"])
    print(f"actor whose Dask worker left for good replaced after {replaced_s:.1f} s")
    assert_books(result, lost_at_most=RING)


BALLAST = 24 << 20  # float32 elements: ~96 MiB, so a checkpoint write takes long enough to kill it midway


class BulkyCheckpointPolicy(MLPPolicy):
    """An MLP whose checkpoints (not its weights) carry ballast, to widen the write window."""

    def __init__(self, observation_space, action_space):
        super().__init__(observation_space, action_space, (64, 64))

    def state_dict(self, *args, **kwargs):
        state = super().state_dict(*args, **kwargs)
        if not args and not kwargs:
            state["ballast"] = torch.zeros(BALLAST)
        return state

    def load_state_dict(self, state, strict=True, assign=False):
        return super().load_state_dict({k: v for k, v in state.items() if k != "ballast"}, strict, assign)

    def weights(self):
        return {k: v.detach().cpu().numpy().copy() for k, v in nn.Module.state_dict(self).items()}


def trainer_versions(run: Run) -> dict[int, list[int]]:
    """Versions the trainer reported, per incarnation, in order."""
    seen: dict[int, list[int]] = {}
    for record in list(run.metrics.records):
        if record.get("role") == "trainer":
            seen.setdefault(record["inc"], []).append(record["version"])
    return seen


def test_trainer_killed_mid_checkpoint_resumes_from_the_previous_one(dask_client, tmp_path):
    cloudpickle_by_value(True)
    cfg = config(actors=1, checkpoint_every_versions=2)
    cfg.policy = PolicyConfig(factory=BulkyCheckpointPolicy)
    run = launch(cfg, client=dask_client, run_dir=str(tmp_path))
    folder = checkpoints.folder(str(tmp_path))
    try:
        wait_for(lambda: len(checkpoints.paths(folder)) >= 2, 120, "two checkpoints")
        pid = worker(run, "trainer-0")["pid"]
        wait_for(lambda: glob.glob(os.path.join(folder, "*.tmp")), 60, "a checkpoint being written")
        os.kill(pid, signal.SIGKILL)
        partial = glob.glob(os.path.join(folder, "*.tmp"))
        complete = checkpoints.paths(folder)
        assert partial, "the kill landed after the write finished"
        assert not os.path.exists(partial[0].rsplit(".", 2)[0])  # never renamed into place
        newest = complete[-1]
        assert checkpoints.load(newest)["version"] == int(newest[-11:-3])  # the previous one loads
        kept_version = int(newest[-11:-3])
        replaced_s = wait_for(lambda: replaced_and_running(run, "trainer-0", pid), 60, "a replacement trainer")
        wait_for(lambda: version(run) >= kept_version + 3, 120, "training after the restart")
    finally:
        result = run.stop()
        cloudpickle_by_value(False)
    incarnations = list(trainer_versions(run).values())
    assert len(incarnations) == 2
    before, after = incarnations
    assert after[0] == kept_version and min(after) >= kept_version, (kept_version, after[:5])
    assert not glob.glob(os.path.join(folder, "*.tmp"))  # the new trainer removed the partial file
    print(f"trainer replaced {replaced_s:.1f} s after kill -9 mid-write; resumed at version {kept_version} "
          f"(was at {before[-1]}); books {result}")
    # Fragments counted by the dead trainer after its last checkpoint are lost with it, and the books say so.
    assert result["fragments_produced"] == (result["fragments_consumed"] + result["dropped_stale"]
                                            + result["fragments_lost"]), result


def cloudpickle_by_value(on: bool) -> None:
    """Ship this module's classes by value, as a class defined in a notebook cell would be."""
    import cloudpickle

    (cloudpickle.register_pickle_by_value if on else cloudpickle.unregister_pickle_by_value)(sys.modules[__name__])


class HangOnceCartPole(gym.Wrapper):
    """CartPole that hangs forever once (the first env to reach step 200, in any process)."""

    def __init__(self, marker: str):
        super().__init__(gym.make("CartPole-v1"))
        self.marker = marker
        self.steps = 0

    def step(self, action):
        self.steps += 1
        if self.steps == 200 and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            time.sleep(3600)
        return self.env.step(action)


def test_silent_worker_is_restarted_after_the_heartbeat_timeout(dask_client, tmp_path):
    cloudpickle_by_value(True)
    cfg = config(actors=1, heartbeat_timeout_s=5.0)
    cfg.env = EnvConfig(id=None, factory=HangOnceCartPole, kwargs={"marker": str(tmp_path / "hung")})
    run = launch(cfg, client=dask_client, run_dir=str(tmp_path / "run"))
    try:
        wait_for(lambda: (tmp_path / "hung").exists(), 120, "the env to hang")
        pid = worker(run, "actor-0")["pid"]
        restarted_s = wait_for(lambda: replaced_and_running(run, "actor-0", pid), 60, "the silent actor restarted")
        v = version(run)
        wait_for(lambda: version(run) >= v + 2, 120, "training to continue")
    finally:
        result = run.stop()
        cloudpickle_by_value(False)
    silent = [f for f in result["faults"] if f["event"] == "silent"]
    assert [f["worker"] for f in silent] == ["actor-0"] and silent[0]["silent_s"] >= 5.0
    print(f"hung actor restarted {restarted_s:.1f} s after the hang was noticed by the test")
    assert result["fragments_produced"] == (result["fragments_consumed"] + result["dropped_stale"]
                                            + result["fragments_lost"]), result


def test_resume_continues_training_counters_and_curves(dask_client, tmp_path, capsys):
    cfg = config(actors=1)
    cfg.ppo = PPOConfig(norm_value=True)
    run = launch(cfg, client=dask_client, run_dir=str(tmp_path))
    try:
        wait_for(lambda: version(run) >= 3, 120, "first updates")
    finally:
        first = run.stop()
    state = checkpoints.load(first["checkpoint"])
    assert {"algorithm", "counters", "ledger", "rng", "config", "config_pickle", "version"} <= state.keys()
    assert {"policy", "optimizer", "value_normalizer"} <= state["algorithm"].keys()
    assert state["counters"]["fragments_consumed"] == first["fragments_consumed"]
    with pytest.raises(Exception, match="Run.resume"):
        launch(cfg, client=dask_client, run_dir=str(tmp_path))  # an earlier run's checkpoints: never clobbered
    records_before = len((tmp_path / "metrics.jsonl").read_text().splitlines())
    wider = config(actors=1)
    wider.ppo, wider.policy.hidden = cfg.ppo, (96, 96)
    with pytest.raises(ValueError, match=r"another shape.*\(64, 4\) where this network has \(96, 4\)"):
        Run.resume(str(tmp_path), client=dask_client, config=wider)  # refused before any worker starts
    assert len((tmp_path / "metrics.jsonl").read_text().splitlines()) == records_before

    run = Run.resume(str(tmp_path), client=dask_client)
    try:
        wait_for(lambda: version(run) >= first["version"] + 2, 120, "training after resume")
        assert run.status()["env_steps"] >= first["env_steps"]  # the curve's x axis continues
        capsys.readouterr()
        run.wait(seconds=0.3)  # its progress bar starts where the run is, not at 0 with a rate in millions
        assert int(re.search(r"(\d+)step \[", capsys.readouterr().err).group(1)) >= first["env_steps"]
    finally:
        second = run.stop()
    versions = trainer_versions(run)
    resumed = [v for inc, v in versions.items() if len(versions) > 1 and v[0] == first["version"]]
    assert resumed and min(resumed[0]) >= first["version"]
    assert second["fragments_consumed"] > first["fragments_consumed"]  # counters continued, not reset
    assert len((tmp_path / "metrics.jsonl").read_text().splitlines()) > records_before
    assert second["env_steps"] > first["env_steps"]
    assert_event_files_match_metrics(tmp_path)  # the first run's points are not written again


# ------------------------------------------------------------------ in-process rules


def test_a_trainer_that_takes_nothing_blocks_the_sender_after_a_bounded_queue():
    ctx = zmq.Context()
    sink, endpoint = bind(ctx, zmq.PULL, "never-read", rcvhwm=4)
    key = codec.new_secret()
    sender = SampleSender(ctx, FixedEndpoint(endpoint), key, actor=0, incarnation=1, hwm=RING)
    fragment = {"obs": np.zeros((64, 8, 4), np.float32), "rewards": np.zeros((64, 8), np.float32)}
    attempts = Counter()

    def give_up() -> bool:
        attempts["blocked"] += 1
        return attempts["blocked"] >= 3

    try:
        for _ in range(5000):
            if not sender.send({"episodes": [], "env_errors": 0}, fragment, give_up):
                break
    finally:
        sender.close(linger_ms=0)
        sink.close(linger=0)
        ctx.term()
    assert attempts["blocked"] >= 3  # the sender blocked instead of queueing without end
    assert sender.produced < 500, sender.produced  # a few queues' worth (send, receive, kernel) at most


def test_books_count_fragments_lost_with_killed_workers():
    ledger = Ledger()
    for seq in range(10):
        ledger.record("0:1", seq)  # a live actor: all 10 arrived
    for seq in (0, 1, 2, 4):
        ledger.record("1:7", seq)  # a killed actor: seq 3 went down with the trainer, 5 with the actor
    books = account(ledger.entries, produced_live={"0:1": 10}, produced_dead={"1:7": 6},
                    consumed=12, dropped_stale=2)
    assert books == {"fragments_produced": 16, "fragments_consumed": 12, "dropped_stale": 2,
                     "fragments_lost": 2, "fragments_lost_live": 0}
    assert Ledger(ledger.snapshot(Counter({"0:1": 3}))).entries["0:1"] == [10, 7]  # untrained batch left out


def test_supervisor_counts_restarts_and_reports_silence_once_per_timeout():
    sup = Supervisor(timeout_s=10)
    beat = {"srl_worker": "actor-0", "role": "actor", "inc": 1, "phase": "running", "pid": 1,
            "dask_worker": "tcp://a", "fragments_produced": 5, "fragments_by_policy": {"default": 5}}
    sup.on_heartbeat(beat, now=100.0)
    assert sup.silent(["actor-0"], now=105.0) == []
    assert [i.inc for i in sup.silent(["actor-0"], now=111.0)] == [1]
    sup.handled("actor-0", now=111.0)
    assert sup.silent(["actor-0"], now=115.0) == []
    sup.on_heartbeat({**beat, "inc": 2, "phase": "starting", "fragments_by_policy": {}}, now=120.0)
    assert sup.silent(["actor-0"], now=135.0) == []  # starting: a longer grace
    sup.on_heartbeat({**beat, "inc": 2, "fragments_by_policy": {}}, now=121.0)
    assert sup.restarts("actor-0") == 1 and sup.faults[-1]["recovery_s"] == 21.0
    assert sup.produced_by_dead_actors({"0:2"}) == {"0:1": 5}
    sup.on_heartbeat({**beat, "inc": 2, "phase": "busy", "busy_s": 50.0}, now=200.0)
    assert sup.silent(["actor-0"], now=200.5) == []  # a long training step beats from a helper thread
    sup.on_heartbeat({**beat, "inc": 2, "phase": "busy", "busy_s": 101.0}, now=251.0)
    assert [i.inc for i in sup.silent(["actor-0"], now=251.5)] == [2]  # ... but not for ever


def test_checkpoint_rng_state_round_trips(tmp_path):
    state = checkpoints.rng_state()
    expected = (torch.rand(3), np.random.rand(3), random.random())
    path = checkpoints.save(str(tmp_path), 7, {"rng": state}, keep=2)
    checkpoints.restore_rng(checkpoints.load(path)["rng"])
    assert torch.equal(torch.rand(3), expected[0]) and np.array_equal(np.random.rand(3), expected[1])
    assert random.random() == expected[2]
    for v in (8, 9, 10):
        checkpoints.save(str(tmp_path), v, {}, keep=2)
    assert [os.path.basename(p) for p in checkpoints.paths(str(tmp_path))] == ["version-00000009.pt",
                                                                               "version-00000010.pt"]

