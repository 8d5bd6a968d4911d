"""Memory needs recurrence: an LSTM policy recalls a cue shown 9 steps earlier, an MLP cannot."""
from __future__ import annotations

import functools
import time

import gymnasium as gym
import numpy as np
import pytest
import torch

from srl_lab.algorithms import recurrent
from srl_lab.config import PPOConfig
from srl_lab.envs.gym_group import GymEnvGroup
from srl_lab.envs.memory import ENV_ID, CueMemoryEnv
from srl_lab.models.mlp_lstm import MLPLSTMPolicy

CUES, DELAY = 4, 8  # the query comes 9 steps after the cue; chance is 1 / 4
CONFIG = PPOConfig(lr=1e-3, epochs=4, minibatch_size=512, chunk_length=16, burn_in=8)


def cue_envs(seed: int) -> GymEnvGroup:
    return GymEnvGroup(functools.partial(CueMemoryEnv, CUES, DELAY), 64, seed=seed)


def test_cue_memory_env_contract():
    env = gym.make(ENV_ID, num_cues=3, delay=2)
    obs, _ = env.reset(seed=0)
    cue = int(np.argmax(obs[:3]))
    seen = [obs]
    for _ in range(3):
        obs, reward, terminated, truncated, _ = env.step(0)
        assert not truncated
        seen.append(obs)
        assert reward == 0.0 and not terminated
    assert [o[-1] for o in seen] == [0, 0, 0, 1] and not np.any(np.stack(seen)[1:, :3])
    _, reward, terminated, _, info = env.step(cue)
    assert reward == 1.0 and terminated and info["success"]
    assert gym.make("srl_lab.envs.memory:" + ENV_ID).observation_space.shape == (5,)


def test_rollout_stores_the_state_before_each_step_and_zeroes_it_at_episode_starts():
    torch.manual_seed(0)
    env = cue_envs(0)
    policy = MLPLSTMPolicy(env.observation_space, env.action_space, hidden=(16,), recurrent=True)
    batch = recurrent.Rollout(env, policy, seed=0).collect(2 * (DELAY + 2))
    assert batch["states"].shape == (2 * (DELAY + 2), 64, 2, 2, 16)
    starts = np.flatnonzero(batch["obs"][:, 0, :CUES].any(-1))  # the cue is only in first observations
    assert list(starts) == [0, DELAY + 2]
    assert not batch["states"][starts].any() and batch["states"][starts[0] + 1].any()
    assert batch["terminated"][DELAY + 1].all() and batch["rewards"].sum() == batch["rewards"][[DELAY + 1, -1]].sum()


@pytest.fixture
def one_thread():
    """Small networks train fastest on one thread (and leave the other core to the envs)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def train_until_solved(policy, iterations: int) -> list[dict[str, float]]:
    """PPO updates until the last 5 updates' episodes succeed 97 % of the time (or ``iterations``)."""
    return recurrent.train(cue_envs(0), policy, CONFIG, iterations, fragment_length=32, seed=0,
                           stop=lambda history: np.mean([s["mean_return"] for s in history[-5:]]) >= 0.97)


@pytest.mark.slow
def test_lstm_remembers_the_cue_and_mlp_cannot(one_thread):
    torch.manual_seed(0)
    start = time.perf_counter()
    lstm = MLPLSTMPolicy(cue_envs(0).observation_space, cue_envs(0).action_space, hidden=(64,), recurrent=True)
    lstm_history = train_until_solved(lstm, iterations=200)
    lstm_success = recurrent.mean_return(cue_envs(1), lstm, episodes=500, seed=1)
    lstm_s = time.perf_counter() - start

    torch.manual_seed(0)
    mlp = MLPLSTMPolicy(cue_envs(0).observation_space, cue_envs(0).action_space, hidden=(64,), recurrent=False)
    mlp_history = train_until_solved(mlp, iterations=40)
    mlp_success = recurrent.mean_return(cue_envs(1), mlp, episodes=500, seed=1)
    print(f"CueMemory(cues={CUES}, delay={DELAY}): LSTM success {lstm_success:.3f} after {len(lstm_history)} "
          f"updates ({lstm_s:.0f} s); MLP success {mlp_success:.3f} after {len(mlp_history)} updates")
    assert lstm_success >= 0.9
    assert mlp_success <= 0.6
