"""A bug in user code fails the run within seconds, naming the worker and carrying the user's message.

Infrastructure faults (a lost process, a lost Dask worker, silence) are healed by the supervisor; an
exception raised by the user's network, env or algorithm is not a fault to heal but a bug to show: in
inline and remote inference alike, the run fails with the worker's name and the original traceback,
in the kernel (``wait`` raises) and in ``status()``.
"""
from __future__ import annotations

import threading
import time

import gymnasium as gym
import pytest

from srl_lab.algorithms.a2c import A2C
from srl_lab.config import ActorConfig, ConfigError, EnvConfig, ExperimentConfig, InferenceConfig, PolicyConfig, TrainerConfig
from srl_lab.models.mlp import MLPPolicy
from srl_lab.system.controller import launch
from runs import local_client

FAIL_WITHIN_S = 15.0


class ExplodingNetwork(MLPPolicy):
    def distribution_and_value(self, obs):
        raise ValueError("the user's network exploded")


class ResetFails(gym.Wrapper):
    def reset(self, **kwargs):
        raise OSError("the user's env cannot reset")


def broken_env(**kwargs) -> gym.Env:
    return ResetFails(gym.make("CartPole-v1"))


class FailingAlgorithm(A2C):
    def train(self, batch, version=None):
        raise ArithmeticError("the user's algorithm diverged")


def small(name: str, **overrides) -> ExperimentConfig:
    return ExperimentConfig(name=name, actors=ActorConfig(workers=1, ring_size=1, envs_per_group=4,
                                                          fragment_length=16),
                            trainer=TrainerConfig(batch_steps=64), **overrides)


@pytest.fixture
def cluster():
    """A cluster of the test's own: a failed run's stop restarts the processes its other workers ran in,
    and one slow to come back must not cost the next test its slots. Three processes: an actor, a policy
    worker and a trainer at most (each fresh cluster of five took ~3.5 s longer to start and stop)."""
    yield from local_client(n_workers=3)


def assert_run_fails(config: ExperimentConfig, client, run_dir: str, worker: str, text: str) -> None:
    run = launch(config, client=client, run_dir=run_dir)
    start = time.monotonic()
    try:
        with pytest.raises(RuntimeError) as failure:
            run.wait(seconds=4 * FAIL_WITHIN_S)
        elapsed = time.monotonic() - start
        message = str(failure.value)
        assert elapsed < FAIL_WITHIN_S, f"the run failed only after {elapsed:.1f} s"
        assert f"SRL worker {worker} failed" in message and text in message, message
        assert "Traceback" in message and "line" in message, message  # where the user's code raised
        status = run.status()
        assert status["error"] is not None and text in status["error"]
        assert [w["state"] for w in status["workers"] if w["worker"] == worker] == ["error"]
    finally:
        with pytest.raises(RuntimeError, match=text):
            run.stop()  # cancels the rest, says why, and leaves result.json behind
    assert run.result["error"] and text in run.result["error"]


@pytest.mark.parametrize("mode,worker", [("inline", "actor-0"), ("remote", "policy-0")])
def test_a_network_raising_in_its_forward_pass_fails_the_run(cluster, tmp_path, mode, worker):
    config = small(f"exploding-{mode}", policy=PolicyConfig(factory=ExplodingNetwork),
                   inference=InferenceConfig(mode=mode, policy_workers=1))
    assert_run_fails(config, cluster, str(tmp_path / "run"), worker, "the user's network exploded")


def test_an_env_raising_in_reset_at_start_up_fails_the_run(cluster, tmp_path):
    config = small("broken-reset", env=EnvConfig(id=None, factory=broken_env))
    assert_run_fails(config, cluster, str(tmp_path / "run"), "actor-0", "the user's env cannot reset")


def test_an_algorithm_raising_in_train_fails_the_run(cluster, tmp_path):
    config = small("diverging", algorithm=FailingAlgorithm)
    assert_run_fails(config, cluster, str(tmp_path / "run"), "trainer-0", "the user's algorithm diverged")


def test_wait_names_a_bad_budget_and_returns_when_the_run_is_stopped_elsewhere(cluster, tmp_path):
    run = launch(small("wait-budget"), client=cluster, run_dir=str(tmp_path / "run"))
    stopper = threading.Timer(3.0, run.stop)  # what the panel's stop button does, from its thread
    try:
        with pytest.raises(ConfigError, match="seconds: must be a number, got '3'"):
            run.wait(seconds="3", progress=False)
        stopper.start()
        start = time.monotonic()
        status = run.wait(progress=False)  # no budget: until the run stops
        assert status["stopped"] and time.monotonic() - start < 60
    finally:
        stopper.cancel()
        if stopper.is_alive():
            stopper.join()
        if run.result is None:
            run.stop()
    assert run.result["env_steps"] > 0
