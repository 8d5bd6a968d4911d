"""The hide-and-seek entity-attention model: size, masking (policy vs critic), shapes, recurrence."""
from __future__ import annotations


import numpy as np
import pytest
import torch

from srl_lab.api.policy import obs_to_tensor
from srl_lab.config import ActorConfig, EnvConfig, ExperimentConfig, PolicyConfig, PPOConfig, TrainerConfig
from srl_lab.envs.hide_and_seek import spec
from srl_lab.envs.hide_and_seek.lite import HideAndSeekLite
from srl_lab.models.entity_attention import EntityAttentionPolicy
from srl_lab.models.normalization import ObsNormalizer
from runs import train_until_version


@pytest.fixture(scope="module")
def env():
    return HideAndSeekLite(4, seed=0)


def rows(env, seed=0):
    """One batch of real observations, env x agent rows."""
    obs = env.reset(seed=seed)
    return obs_to_tensor({k: v.reshape(-1, *v.shape[2:]) for k, v in obs.items()})


def logits(dist) -> torch.Tensor:
    return torch.cat([part.logits for part in dist.parts], dim=-1)


def test_parameter_count_with_lstm_is_about_1_6_million(env):
    policy = EntityAttentionPolicy(env.observation_space, env.action_space, recurrent=True)
    count = sum(p.numel() for p in policy.parameters())
    print(f"EntityAttentionPolicy(recurrent=True): {count:,} parameters (policy + critic)")
    assert 1.4e6 <= count <= 1.8e6


def test_rows_shapes_and_multidiscrete_sampling(env):
    torch.manual_seed(0)
    policy = EntityAttentionPolicy(env.observation_space, env.action_space)
    obs = rows(env)
    n = env.num_envs * env.num_agents
    actions, logp, values, state = policy.act(obs)
    assert actions.shape == (n, len(spec.ACTION_NVEC)) and logp.shape == (n,) and values.shape == (n,)
    assert state is None  # feed-forward
    nvec = torch.as_tensor(spec.ACTION_NVEC)
    many = policy.distribution_and_value(obs)[0].sample((200,))
    assert ((many >= 0) & (many < nvec)).all()
    for i, k in enumerate(spec.ACTION_NVEC):  # small-scale head init: close to uniform, every bucket drawn
        assert many[..., i].unique().numel() == k
    logp2, entropy, values2 = policy.evaluate(obs, actions)
    torch.testing.assert_close(logp2, logp)
    torch.testing.assert_close(values2, values)
    assert torch.allclose(entropy, torch.full_like(entropy, float(np.log(spec.ACTION_NVEC).sum())), atol=0.01)


def _pick_row(obs, mask_key: str):
    """A row with an invisible but existing entity of ``mask_key``'s type, and that entity's index."""
    hidden = (obs[mask_key] == 0) & (obs[f"{mask_key}_spoof"] == 1)
    row, entity = map(int, torch.nonzero(hidden)[0])
    return row, entity


@pytest.mark.parametrize("key, mask_key", [("agent_qpos_qvel", "mask_aa_obs"), ("box_obs", "mask_ab_obs")])
def test_invisible_entity_reaches_the_critic_but_not_the_policy(env, key, mask_key):
    torch.manual_seed(1)
    policy = EntityAttentionPolicy(env.observation_space, env.action_space)
    obs = rows(env)
    row, entity = _pick_row(obs, mask_key)
    changed = {k: v.clone() for k, v in obs.items()}
    changed[key][row, entity] += torch.linspace(1.0, 3.0, changed[key].shape[-1])
    with torch.no_grad():
        (dist, value), (dist2, value2) = policy.distribution_and_value(obs), policy.distribution_and_value(changed)
    torch.testing.assert_close(logits(dist2), logits(dist), rtol=0, atol=1e-6)
    assert abs(float(value2[row] - value[row])) > 1e-4
    others = torch.arange(len(value)) != row
    torch.testing.assert_close(value2[others], value[others])


@pytest.mark.parametrize("key", spec.CRITIC_ONLY_KEYS)
def test_the_critic_only_inputs_reach_the_critic_but_not_the_policy(env, key: str):
    """The episode's clock and the doors blocked: the value may depend on them, the actions may not."""
    torch.manual_seed(5)
    policy = EntityAttentionPolicy(env.observation_space, env.action_space)
    obs = rows(env)
    changed = {k: v.clone() for k, v in obs.items()}
    changed[key] += 0.5
    with torch.no_grad():
        (dist, value), (dist2, value2) = policy.distribution_and_value(obs), policy.distribution_and_value(changed)
    torch.testing.assert_close(logits(dist2), logits(dist), rtol=0, atol=0)
    assert (value2 - value).abs().min() > 1e-6


def test_visible_entity_reaches_the_policy(env):
    torch.manual_seed(2)
    policy = EntityAttentionPolicy(env.observation_space, env.action_space)
    obs = rows(env)
    row, entity = map(int, torch.nonzero(obs["mask_ab_obs"] == 1)[0])
    changed = {k: v.clone() for k, v in obs.items()}
    changed["box_obs"][row, entity] += 2.0
    with torch.no_grad():
        before, after = logits(policy.distribution_and_value(obs)[0]), logits(policy.distribution_and_value(changed)[0])
    assert (after[row] - before[row]).abs().max() > 1e-5


def test_padding_reaches_neither_policy_nor_critic(env):
    torch.manual_seed(3)
    policy = EntityAttentionPolicy(env.observation_space, env.action_space)
    obs = rows(env)
    for mask in ("mask_ab_obs", "mask_ab_obs_spoof"):  # the last box is padding in every row
        obs[mask][:, -1] = 0.0
    changed = {k: v.clone() for k, v in obs.items()}
    changed["box_obs"][:, -1] = torch.randn_like(changed["box_obs"][:, -1]) * 5
    with torch.no_grad():
        (dist, value), (dist2, value2) = policy.distribution_and_value(obs), policy.distribution_and_value(changed)
    torch.testing.assert_close(logits(dist2), logits(dist), rtol=0, atol=1e-6)
    torch.testing.assert_close(value2, value, rtol=0, atol=1e-6)


def test_lstm_unroll_matches_step_by_step_and_resets_on_done(env):
    torch.manual_seed(4)
    policy = EntityAttentionPolicy(env.observation_space, env.action_space, hidden=32, embed=16, recurrent=True)
    T, B = 5, env.num_envs * env.num_agents
    seq = {k: torch.stack([v] * T) + 0.1 * torch.randn(T, *v.shape) * (not k.startswith("mask_"))
           for k, v in rows(env).items()}
    done = torch.zeros(T, B, dtype=torch.bool)
    done[3, :2] = True
    state0 = policy.initial_state(B)
    assert state0.shape == (B, 2, 2, 32)
    with torch.no_grad():
        dist, value, state = policy.distribution_and_value(seq, state0, done)
        assert value.shape == (T, B) and dist.sample().shape == (T, B, len(spec.ACTION_NVEC))
        s, step_values = state0, []
        for t in range(T):
            _, v, s = policy.distribution_and_value({k: x[t:t + 1] for k, x in seq.items()}, s, done[t:t + 1])
            step_values.append(v[0])
        torch.testing.assert_close(torch.stack(step_values), value)
        torch.testing.assert_close(s, state)
        # after a reset at t=3, rows 0-1 behave exactly like a fresh start from t=3
        _, fresh, _ = policy.distribution_and_value({k: x[3:] for k, x in seq.items()}, policy.initial_state(B),
                                                    torch.zeros(T - 3, B, dtype=torch.bool))
    torch.testing.assert_close(value[3:, :2], fresh[:, :2])
    assert (value[3:, 2:] - fresh[:, 2:]).abs().max() > 1e-6


def test_recurrent_and_feed_forward_refuse_the_other_call(env):
    obs = rows(env)
    with pytest.raises(TypeError, match="initial_state"):
        EntityAttentionPolicy(env.observation_space, env.action_space, hidden=32, embed=16, recurrent=True).act(obs)
    with pytest.raises(TypeError, match="recurrent=True"):
        EntityAttentionPolicy(env.observation_space, env.action_space, hidden=32, embed=16).initial_state(2)


def test_observation_normaliser_skips_masks_and_round_trips_in_weights(env):
    obs = rows(env)
    norm = ObsNormalizer(env.observation_space)
    assert norm(obs)["box_obs"] is obs["box_obs"]  # identity before the first update
    norm.update({k: v * 3 + 1 for k, v in obs.items()})
    out = norm(obs)
    assert out["mask_ab_obs"] is obs["mask_ab_obs"] and not torch.equal(out["box_obs"], obs["box_obs"])
    policy = EntityAttentionPolicy(env.observation_space, env.action_space, hidden=32, embed=16)
    policy.obs_normalizer.update(obs)
    again = EntityAttentionPolicy(env.observation_space, env.action_space, hidden=32, embed=16)
    again.load_weights(policy.weights())
    torch.testing.assert_close(again.obs_normalizer.stats["lidar"].mean, policy.obs_normalizer.stats["lidar"].mean)


def test_factory_fits_the_runtime_config_check():
    config = ExperimentConfig(env=EnvConfig(id="hide_and_seek_lite"), policy=PolicyConfig(factory=EntityAttentionPolicy))
    config.validate()  # builds one env and the policy and checks their spaces match


@pytest.mark.slow
def test_trains_in_the_runtime_on_hide_and_seek_lite(dask_client, tmp_path):
    config = ExperimentConfig(
        name="entity-attention", env=EnvConfig(id="hide_and_seek_lite"), policy=PolicyConfig(factory=EntityAttentionPolicy),
        actors=ActorConfig(workers=1, ring_size=2, envs_per_group=8, fragment_length=32),
        trainer=TrainerConfig(batch_steps=2048),
        ppo=PPOConfig(minibatch_size=512, epochs=2, norm_obs=True, norm_value=True))  # statistics travel with weights
    train_until_version(config, dask_client, str(tmp_path), timeout_s=180)


def test_weights_of_another_shape_get_an_error_that_says_so(env):
    policy = EntityAttentionPolicy(env.observation_space, env.action_space, hidden=32, embed=16)
    before = policy.weights()
    wider = EntityAttentionPolicy(env.observation_space, env.action_space, hidden=48, embed=16)
    with pytest.raises(ValueError, match="another shape than this EntityAttentionPolicy.*actor_trunk.dense.weight: \\(48, 32\\) where this network has \\(32, 32\\)"):
        policy.load_weights(wider.weights())
    for key, value in policy.weights().items():  # nothing half-loaded
        np.testing.assert_array_equal(value, before[key])
