"""Parameter service and env group behaviour, in-process (no Dask needed)."""
from __future__ import annotations

import time

import gymnasium as gym
import numpy as np
import zmq

from srl_lab.envs.gym_group import GymEnvGroup
from srl_lab.system import codec
from srl_lab.system.parameters import ParameterClient, ParameterService


def test_parameter_service_serves_latest_and_tagged_versions():
    ctx = zmq.Context()
    key = codec.new_secret()
    service = ParameterService(ctx, "test", key)
    try:
        service.publish(0, {"w": np.zeros(3, np.float32)})
        reader = ParameterClient(ctx, service.endpoint, key, poll_s=0.0)
        assert reader.wait_first(timeout_s=10)["w"].tolist() == [0, 0, 0]
        service.tag("past")
        service.publish(1, {"w": np.ones(3, np.float32)})
        deadline, weights = time.monotonic() + 10, None
        while weights is None and time.monotonic() < deadline:
            weights = reader.poll(block_s=0.05)
        assert reader.version == 1 and weights["w"].tolist() == [1, 1, 1]
        assert reader.poll(block_s=0.2) is None  # up to date: nothing new to load
        past = ParameterClient(ctx, service.endpoint, key, poll_s=0.0, tag="past")
        assert past.wait_first(timeout_s=10)["w"].tolist() == [0, 0, 0] and past.version == 0
        reader.close()
        past.close()
    finally:
        service.close()
        ctx.term()


class _ExplodingCartPole(gym.Wrapper):
    def __init__(self):
        super().__init__(gym.make("CartPole-v1"))
        self.steps = 0

    def step(self, action):
        self.steps += 1
        if self.steps == 3:
            raise RuntimeError("boom")
        return self.env.step(action)


def test_env_group_resets_in_the_same_step_and_survives_exceptions():
    group = GymEnvGroup(_ExplodingCartPole, num_envs=2, seed=0)
    obs = group.reset()
    assert obs.shape == (2, 1, 4) and obs.dtype == np.float32
    errors, ended = 0, 0
    for _ in range(200):
        result = group.step(np.ones((2, 1), dtype=np.int64))
        errors += result.env_errors
        ended += len(result.episodes)
        done = result.terminated | result.truncated
        if done.any():
            assert result.final_obs is not None
            assert not np.array_equal(result.final_obs[done], result.obs[done])  # next episode's first obs
    assert errors == 2  # once per env, each cut as truncated and reset
    assert ended >= 2
