"""Gymnasium vector envs as env groups: reset semantics mapped onto the contract, invalid rows never
trained on, and the numpy-vectorised CartPole solved on a real cluster."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from srl_lab.algorithms.ppo import PPO
from srl_lab.config import ConfigError, EnvConfig, ExperimentConfig, PPOConfig
from srl_lab.envs.factory import make_env_group
from srl_lab.envs.vector_group import VectorEnvGroup
from srl_lab.models.mlp import MLPPolicy
from srl_lab.presets import fast_cartpole
from srl_lab.system.controller import launch
from srl_lab.system.fragments import FragmentBuilder, batch_fragments, check_fragment

SOLVED = 475.0


def play(group, steps: int, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    group.reset(seed=seed)
    return [group.step(rng.integers(0, 2, (group.num_envs, 1))) for _ in range(steps)]


def test_next_step_resets_are_invalid_rows_with_no_reward():
    """CartPole's vector entry point resets a finished env on the step after: that step is invalid."""
    group = make_env_group(ExperimentConfig(env=EnvConfig(id="CartPole-v1", vector=True)), 8, seed=0)
    assert group.mode == AutoresetMode.NEXT_STEP
    results = play(group, 400)
    ended_before = np.zeros(8, bool)
    for result in results:
        valid = np.ones(8, bool) if result.valid is None else result.valid[:, 0]
        assert (valid == ~ended_before).all()  # exactly the envs whose episode ended one step before
        assert (result.reward[~valid] == 0).all() and not (result.terminated | result.truncated)[~valid].any()
        ended_before = result.terminated | result.truncated
        if ended_before.any():
            assert result.final_obs is not None
            np.testing.assert_array_equal(result.final_obs[ended_before], result.obs[ended_before])
    episodes = [e for r in results for e in r.episodes]
    assert len(episodes) > 50 and all(e["return"] == e["length"] for e in episodes)  # +1 per real step


def test_same_step_vector_envs_need_no_invalid_rows():
    env = SyncVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(4)], autoreset_mode=AutoresetMode.SAME_STEP)
    results = play(VectorEnvGroup(env, seed=0), 300)
    assert all(r.valid is None for r in results)
    ended = [r for r in results if (r.terminated | r.truncated).any()]
    assert ended and all(np.abs(r.final_obs[r.terminated | r.truncated]).sum() > 0 for r in ended)


def test_a_vector_flag_on_an_srl_lab_env_group_is_a_config_error():
    with pytest.raises(ConfigError, match="env.vector"):
        ExperimentConfig(env=EnvConfig(id="hide_and_seek_lite", vector=True)).validate()


def test_fragments_carry_validity_and_batches_fill_it_in():
    builder = FragmentBuilder(2, 3)
    for t in range(2):
        builder.add_policy_step(np.zeros((3, 4), np.float32), np.zeros(3, np.int64), np.zeros(3), np.zeros(3), 0)
        builder.add_env_step(np.ones(3, np.float32), np.zeros(3, bool), np.zeros(3, bool),
                             np.array([True, t == 0, True]))
    with_mask = builder.arrays(np.zeros(3))
    assert check_fragment(with_mask, 2) is None
    np.testing.assert_array_equal(with_mask["valid"], [[True, True, True], [True, False, True]])
    plain = dict(with_mask)
    del plain["valid"]
    assert batch_fragments([plain, with_mask])["valid"].shape == (2, 6)
    assert "valid" not in batch_fragments([plain, plain])


def test_ppo_does_not_learn_from_invalid_rows():
    """Garbage in the rows marked invalid changes nothing: the update is the same bit for bit."""
    space, actions_space = gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2)
    rng = np.random.default_rng(0)
    T, B = 8, 6
    valid = np.ones((T, B), bool)
    valid[3, 1] = valid[5, 4] = False
    clean = {"obs": rng.normal(size=(T, B, 4)).astype(np.float32), "actions": rng.integers(0, 2, (T, B)),
             "logp": np.full((T, B), np.log(0.5), np.float32), "values": np.zeros((T, B), np.float32),
             "rewards": np.ones((T, B), np.float32), "terminated": np.zeros((T, B), bool),
             "truncated": np.zeros((T, B), bool), "trunc_values": np.zeros((T, B), np.float32),
             "last_value": np.zeros(B, np.float32), "versions": np.zeros((T, B), np.int64), "valid": valid}
    clean["terminated"][2, 1] = clean["terminated"][4, 4] = True  # an invalid step follows an episode's end
    dirty = {k: v.copy() for k, v in clean.items()}
    dirty["obs"][~valid] = 1e3
    dirty["actions"][~valid] = 1 - dirty["actions"][~valid]
    dirty["logp"][~valid] = -20.0
    weights = []
    for batch in (clean, dirty):
        torch.manual_seed(0)
        policy = MLPPolicy(space, actions_space, (16,))
        PPO(policy, PPOConfig(minibatch_size=16), "cpu").train(batch)
        weights.append(policy.weights())
    for name in weights[0]:
        np.testing.assert_array_equal(weights[0][name], weights[1][name])


@pytest.mark.slow
def test_numpy_vectorised_cartpole_is_solved_on_a_cluster(dask_client, tmp_path):
    """The shipped preset: numpy-vectorised CartPole, one actor, large batches (srl_lab.presets)."""
    run = launch(fast_cartpole(), client=dask_client, run_dir=str(tmp_path))
    try:
        status = run.wait(target_return=SOLVED, seconds=300, progress=False)
    finally:
        result = run.stop()
    assert status["mean_return_last_20"] >= SOLVED, (status, result)
    assert result["fragments_produced"] == result["fragments_consumed"] + result["dropped_stale"], result
