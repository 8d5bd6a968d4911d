"""End to end on a real multi-process Dask cluster: learning, live scaling, garbage, broken envs."""
from __future__ import annotations

import sys

import gymnasium as gym
import numpy as np
import pytest
import zmq
from distributed import Variable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from srl_lab.config import ActorConfig, EnvConfig, ExperimentConfig, InferenceConfig, TrainerConfig
from srl_lab.system import codec
from srl_lab.system.control import endpoint_name
from srl_lab.system.controller import launch
from srl_lab.system.streams import Endpoint
from runs import assert_event_files_match_metrics, shipped_by_value, solving_ppo, wait_for


def cartpole(mode: str, actors: int = 2, **kwargs) -> ExperimentConfig:
    return ExperimentConfig(
        name=f"test-{mode}", actors=ActorConfig(workers=actors, ring_size=2, envs_per_group=8, fragment_length=64),
        inference=InferenceConfig(mode=mode), **kwargs)


def assert_accounting(result: dict) -> None:
    assert result["fragments_produced"] > 0
    assert result["fragments_produced"] == result["fragments_consumed"] + result["dropped_stale"], result


# Inline inference solving CartPole to 475 is test_vector_env's check of the shipped preset. Remote
# inference trains the same learner on the same rows, so here it must only learn clearly, on
# gymnasium's per-env CartPole: 300 is 14x the return of a random policy (about 22).
LEARNED = 300.0


@pytest.mark.slow
def test_cartpole_is_learned_with_remote_inference(dask_client, tmp_path):
    run = launch(cartpole("remote", ppo=solving_ppo()), client=dask_client, run_dir=str(tmp_path))
    try:
        status = run.wait(target_return=LEARNED, seconds=420, progress=False)
        assert sorted(w["role"] for w in status["workers"]) == ["actor", "actor", "policy", "trainer"]
    finally:
        result = run.stop()
    # Learned when the target was reached; the drain on stop adds a few episodes that may dip below it.
    assert status["mean_return_last_20"] >= LEARNED, (status, result)
    assert_accounting(result)
    assert (tmp_path / "curve.png").stat().st_size > 1000
    assert (tmp_path / "metrics.jsonl").stat().st_size > 0


def _running_actors(run) -> int:
    return run.status()["actors"]


def _last_update(run) -> dict:
    return run.metrics.train[-1] if run.metrics.train else {}


def test_scale_actors_live_with_exact_accounting(tmp_path):
    """Embedded cluster (no client given): 1 -> 3 actors grows the LocalCluster, then back to 1. The
    batch is per actor sending (``trainer.batch_per_actor``): it follows both moves."""
    per_actor = 2048
    run = launch(cartpole("inline", actors=1, trainer=TrainerConfig(batch_steps=per_actor, batch_per_actor=True)),
                 run_dir=str(tmp_path))
    try:
        wait_for(lambda: _running_actors(run) == 1 and _last_update(run).get("actors_sending") == 1, 120,
                 "first updates")
        assert _last_update(run)["batch_rows"] < 2 * per_actor
        note = run.scale(actors=3)["note"]
        assert note and "grew" in note
        wait_for(lambda: _running_actors(run) == 3, 120, "3 running actors")
        wait_for(lambda: _last_update(run).get("actors_sending") == 3, 120, "updates on 3 actors' batches")
        assert _last_update(run)["batch_rows"] >= 3 * per_actor
        removed = run.scale(actors=1)["removed"]
        assert removed == ["actor-1", "actor-2"]
        wait_for(lambda: _running_actors(run) == 1, 30, "1 running actor")
        wait_for(lambda: _last_update(run).get("actors_sending") == 1, 120, "training after scale-down")
        assert _last_update(run)["batch_rows"] < 2 * per_actor
    finally:
        result = run.stop()
    assert_accounting(result)
    assert result["env_steps"] > 0


frames_strategy = st.lists(st.binary(max_size=96), min_size=1, max_size=4) | st.builds(
    lambda kind, n: [bytes(f) for f in codec.encode(kind, {"group": "x", "have": "y"},
                                                    {"obs": np.zeros((n, 3), np.float64)}, key=b"x" * 32)],
    st.sampled_from(["fragment", "infer", "get_params", "actions"]), st.integers(0, 3))


def test_garbage_on_every_data_socket_is_rejected_and_counted(dask_client, tmp_path):
    run = launch(cartpole("remote"), client=dask_client, run_dir=str(tmp_path))
    ctx = zmq.Context()
    sent = {"trainer": 0, "policy": 0}
    try:
        wait_for(lambda: run.status()["version"] >= 2, 120, "first updates")
        socks = {}
        for service, owner, kind in (("samples", "trainer", zmq.PUSH), ("params", "trainer", zmq.DEALER),
                                     ("policy-0", "policy", zmq.DEALER)):
            ep = Endpoint.from_dict(Variable(endpoint_name(run.run_id, service), client=dask_client).get())
            sock = ctx.socket(kind)
            sock.setsockopt(zmq.LINGER, 1000)
            sock.connect(ep.tcp)
            socks[service] = (sock, owner)

        @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
        @given(frames=frames_strategy, service=st.sampled_from(sorted(socks)))
        def send_garbage(frames, service):
            sock, owner = socks[service]
            sock.send_multipart(frames)
            sent[owner] += 1

        send_garbage()
        version = run.status()["version"]
        wait_for(lambda: run.status()["version"] >= version + 3, 120, "training to continue")
        for sock, _ in socks.values():
            sock.close()
    finally:
        result = run.stop()
        ctx.term()
    assert sent["trainer"] > 0 and sent["policy"] > 0
    assert result["rejected"] == sent["trainer"] + sent["policy"], (result, sent)
    assert result["unauthenticated"] == result["refused"]["unauthenticated"] == result["rejected"]
    assert_accounting(result)


class FlakyCartPole(gym.Wrapper):
    """CartPole whose step() raises now and then, like a buggy simulator."""

    def __init__(self, p_fail: float = 0.002):
        super().__init__(gym.make("CartPole-v1"))
        self.p_fail = p_fail
        self.rng = np.random.default_rng()

    def step(self, action):
        if self.rng.random() < self.p_fail:
            raise RuntimeError("simulator exploded")
        return self.env.step(action)


def test_env_raising_in_step_is_reset_and_counted(dask_client, tmp_path):
    with shipped_by_value(sys.modules[__name__]):
        config = cartpole("inline", actors=1, env=EnvConfig(id=None, factory=FlakyCartPole))
        run = launch(config, client=dask_client, run_dir=str(tmp_path))
        try:
            wait_for(lambda: run.status()["version"] >= 5, 120, "training despite failing envs")
        finally:
            result = run.stop()
    assert result["env_errors"] > 0
    assert result["version"] >= 5
    assert_accounting(result)
    assert_event_files_match_metrics(tmp_path)  # TensorBoard saw every episode and training statistic
