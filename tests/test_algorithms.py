"""PPO's options (value clipping and normalisation, observation normalisation, V-trace, staleness-bounded
reuse, recurrent chunks, Box actions) and the custom-algorithm example."""
from __future__ import annotations

import dataclasses
import functools
import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from srl_lab.algorithms.a2c import A2C
from srl_lab.algorithms.ppo import PPO, clipped_surrogate
from srl_lab.algorithms.recurrent import Rollout
from srl_lab.algorithms.value_norm import ValueNormalizer
from srl_lab.config import ActorConfig, ExperimentConfig, PPOConfig, TrainerConfig
from srl_lab.envs.gym_group import GymEnvGroup
from srl_lab.envs.memory import CueMemoryEnv
from srl_lab.models.mlp import MLPPolicy
from srl_lab.models.mlp_lstm import MLPLSTMPolicy
from srl_lab.system.controller import launch
from srl_lab.system.learner import Learner
from runs import load_benchmark

SMALL = PPOConfig(epochs=2, minibatch_size=64)


def batch_for(policy, env_id: str = "CartPole-v1", steps: int = 16, envs: int = 8, **kwargs):
    torch.manual_seed(0)
    env = GymEnvGroup(functools.partial(gym.make, env_id, **kwargs), envs, seed=0)
    return Rollout(env, policy, seed=0).collect(steps)


def cartpole_policy(recurrent: bool = False) -> MLPLSTMPolicy:
    env = gym.make("CartPole-v1")
    return MLPLSTMPolicy(env.observation_space, env.action_space, hidden=(16,), recurrent=recurrent)


@pytest.mark.parametrize("options", [
    {}, {"value_clip": 0.2}, {"norm_value": True}, {"norm_obs": True}, {"advantage": "vtrace"},
    {"advantage": "vtrace_minibatch", "norm_value": True, "value_clip": 0.2},
    {"recurrent": True, "chunk_length": 8, "burn_in": 4},
    {"recurrent": True, "advantage": "vtrace", "norm_value": True, "norm_obs": True, "value_clip": 0.2},
], ids=lambda o: ",".join(o) or "plain")
def test_ppo_options_train_and_round_trip_through_checkpoints(options):
    options = dict(options)
    recurrent = options.pop("recurrent", False)
    config = dataclasses.replace(SMALL, **options)
    policy = cartpole_policy(recurrent)
    batch = batch_for(policy)
    algorithm = PPO(policy, config)
    before = {k: v.clone() for k, v in policy.state_dict().items()}
    stats = algorithm.train(batch, version=0)
    assert all(np.isfinite(v) for v in stats.values()), stats
    assert stats["sample_reuse"] == config.epochs
    assert any(not torch.equal(before[k], v) for k, v in policy.state_dict().items())
    again = PPO(cartpole_policy(recurrent), config)
    again.load_state_dict(algorithm.state_dict())
    for key, value in algorithm.policy.state_dict().items():
        torch.testing.assert_close(again.policy.state_dict()[key], value)
    if config.norm_value:
        assert again.value_normalizer.mean_std() == algorithm.value_normalizer.mean_std() != (0.0, 1.0)


@pytest.mark.parametrize("recurrent", [False, True])
def test_staleness_bounds_how_often_a_sample_is_reused(recurrent):
    policy = cartpole_policy(recurrent)
    batch = batch_for(policy)
    batch["versions"][:, :4] = 8  # half the rows were acted two versions before the trainer's 10
    batch["versions"][:, 4:] = 10
    config = dataclasses.replace(SMALL, epochs=4, max_staleness=1, chunk_length=8)
    stats = PPO(policy, config).train(batch, version=10)
    assert stats["sample_reuse"] == pytest.approx(1.0)  # fresh rows: epochs 0 and 1; stale rows: never
    stats = PPO(policy, dataclasses.replace(config, max_staleness=3)).train(batch, version=10)
    assert stats["sample_reuse"] == pytest.approx((4 + 2) / 2)
    stats = PPO(policy, dataclasses.replace(config, max_staleness=None)).train(batch, version=10)
    assert stats["sample_reuse"] == 4
    assert (stats["policy_lag_mean"], stats["policy_lag_max"]) == (1.0, 2.0)  # half the rows 2 versions old


def test_the_learner_reports_policy_lag_against_its_own_version():
    """Samples acted by version 2 and trained at version 5 are 3 versions old, though no newer ones
    share their batch: the trainer passes its version, so the lag (and max_staleness) count from it."""
    learner = Learner(ExperimentConfig(ppo=SMALL, trainer=TrainerConfig(max_version_lag=3)))
    fragment = batch_for(learner.policy)
    fragment["versions"] = np.full(len(fragment["rewards"]), 2)  # a fragment's versions: one per step
    learner.version = 5
    assert learner.offer(fragment, [], 0)
    learner.train()
    assert (learner.last_stats["policy_lag_mean"], learner.last_stats["policy_lag_max"]) == (3.0, 3.0)
    assert learner.version == 6


def test_a_batch_per_actor_follows_the_actors_sending_in_as_many_minibatches():
    """Actors added live hold more rows in flight: with ``trainer.batch_per_actor`` the learner waits
    for a batch per actor sending, and ``ppo.minibatches`` keeps the gradient steps per update, so the
    versions between acting and training stay near one actor's. A removed actor stops counting after
    two updates."""
    ppo = dataclasses.replace(SMALL, epochs=1, minibatch_size=0, minibatches=2)
    probe = Learner(ExperimentConfig(ppo=ppo))
    rows = batch_for(probe.policy)["rewards"].size
    learner = Learner(ExperimentConfig(ppo=ppo, trainer=TrainerConfig(batch_steps=rows, batch_per_actor=True)))
    fragment = batch_for(learner.policy)

    def send(*actors: int) -> None:
        for actor in actors:
            fresh = {k: np.array(v) for k, v in fragment.items()}
            fresh["versions"] = np.full(len(fragment["rewards"]), learner.version)  # one per step
            assert learner.offer(fresh, [], 0, actor=actor)

    def adam_steps() -> int:
        return int(next(iter(learner.algorithm.optimizer.state.values()))["step"])

    send(0)
    assert learner.ready()
    learner.train()
    assert (adam_steps(), learner.last_stats["actors_sending"]) == (2, 1)
    send(1, 2)  # two actors added: their first fragments raise the target to three actors' batch
    assert learner.batch_target() == 3 * rows and not learner.ready()
    send(0)
    assert learner.ready()
    learner.train()
    assert (adam_steps(), learner.last_stats["batch_rows"], learner.last_stats["actors_sending"]) == (4, 3 * rows, 3)
    send(0, 0)  # actors 1 and 2 were removed: still counted while this batch fills
    assert not learner.ready()
    send(0)
    learner.train()
    send(0)
    assert learner.batch_target() == rows and learner.ready()


def test_an_action_the_behaviour_policy_all_but_ruled_out_leaves_the_weights_finite():
    """exp(log pi - log mu) overflows float32 past ~89: the capped log-ratio keeps the update finite."""
    policy = cartpole_policy()
    batch = batch_for(policy)
    batch["logp"][:, 0] = -200.0  # one env's actions had probability e^-200 when they were acted
    stats = PPO(policy, SMALL).train(batch, version=0)
    assert stats["nonfinite_steps"] == 0 and np.isfinite(stats["policy_loss"]), stats
    assert all(torch.isfinite(v).all() for v in policy.state_dict().values())


@settings(max_examples=300, deadline=None)
@given(ratio=st.floats(1e-3, 1e3), adv=st.floats(-10.0, 10.0), clip=st.floats(0.05, 0.5), dual=st.floats(1.6, 10.0))
def test_the_clipped_surrogate_matches_its_numpy_reference(ratio, adv, clip, dual):
    """min(r A, clip(r) A), and with the dual clip never below c A for A < 0; no gradient once bounded."""
    reference = min(ratio * adv, float(np.clip(ratio, 1 - clip, 1 + clip)) * adv)
    r = torch.tensor(ratio, dtype=torch.float64, requires_grad=True)
    a = torch.tensor(adv, dtype=torch.float64)
    assert clipped_surrogate(r, a, clip, 0.0).item() == pytest.approx(reference, rel=1e-12, abs=1e-12)
    dual_reference = max(reference, dual * adv) if adv < 0 else reference
    value = clipped_surrogate(r, a, clip, dual)
    assert value.item() == pytest.approx(dual_reference, rel=1e-12, abs=1e-12)
    value.backward()
    if adv < 0 and ratio > dual:
        assert r.grad.item() == 0.0


def test_the_dual_clip_keeps_a_stale_unlikely_action_from_owning_the_update():
    """One row acted by a behaviour policy that gave its action far less probability than the policy
    now does (ratio e^10 or e^15), with a negative advantage: with the dual clip the first step's
    gradient ignores it, whatever the ratio; without it, the gradient grows with that one row's ratio."""
    def first_gradient(offset: float, dual_clip: float) -> torch.Tensor:
        torch.manual_seed(0)
        policy = cartpole_policy()
        batch = batch_for(policy)
        batch["rewards"][0, 0] = -50.0  # its advantage: far below every other row's
        batch["logp"][0, 0] -= offset
        T, B = batch["rewards"].shape
        config = dataclasses.replace(SMALL, epochs=1, minibatch_size=T * B, ent_coef=0.0, vf_coef=0.0,
                                     max_grad_norm=1e9, dual_clip=dual_clip)
        algorithm = PPO(policy, config)
        captured = []
        algorithm.optimizer.step = lambda: captured.append(_gradient(policy))
        algorithm.train(batch, version=0)
        return captured[0]

    bounded = first_gradient(10.0, 3.0)
    torch.testing.assert_close(first_gradient(15.0, 3.0), bounded)
    unbounded = first_gradient(10.0, 0.0)
    assert unbounded.norm() > 100 * bounded.norm()
    assert first_gradient(15.0, 0.0).norm() / unbounded.norm() == pytest.approx(math.exp(5.0), rel=0.05)


def test_a_non_finite_gradient_is_skipped_not_applied():
    policy = cartpole_policy()
    batch = batch_for(policy)
    batch["rewards"][3, 2] = np.nan  # e.g. a broken env: every normalised advantage becomes NaN
    before = {k: v.clone() for k, v in policy.state_dict().items()}
    stats = PPO(policy, SMALL).train(batch, version=0)
    minibatches = SMALL.epochs * batch["rewards"].size // SMALL.minibatch_size
    assert stats["nonfinite_steps"] == minibatches
    for key, value in policy.state_dict().items():
        torch.testing.assert_close(value, before[key])


def test_observation_statistics_are_learned_by_ppo_and_travel_with_the_weights():
    policy = cartpole_policy()
    batch = batch_for(policy)
    PPO(policy, dataclasses.replace(SMALL, norm_obs=True)).train(batch)
    stats = policy.obs_normalizer.stats
    assert stats.count == batch["rewards"].size
    np.testing.assert_allclose(stats.mean.numpy(), batch["obs"].reshape(-1, 4).mean(0), rtol=1e-4, atol=1e-5)
    actor = cartpole_policy()
    actor.load_weights(policy.weights())
    torch.testing.assert_close(actor.obs_normalizer.stats.var, stats.var)
    with pytest.raises(TypeError, match="obs_normalizer"):
        PPO(MLPPolicy(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2)), dataclasses.replace(SMALL, norm_obs=True))


def test_value_normalizer_is_debiased_and_invertible():
    norm = ValueNormalizer(beta=0.99)
    x = np.random.default_rng(0).normal(1000.0, 50.0, 4096).astype(np.float32)
    np.testing.assert_array_equal(norm.normalize(x), x)  # identity before the first update
    norm.update(x)
    mean, std = norm.mean_std()
    assert mean == pytest.approx(x.mean(), rel=1e-6) and std == pytest.approx(x.std(), rel=1e-3)
    np.testing.assert_allclose(norm.denormalize(norm.normalize(x)), x, rtol=1e-5)
    in_halves = ValueNormalizer(beta=0.99)  # a batch fed in parts, each for its share of the rows
    in_halves.update(x[:2048], share=0.5)
    in_halves.update(x[2048:], share=0.5)
    assert in_halves.mean_std() == pytest.approx((mean, std), rel=1e-3)


def test_value_targets_are_learned_in_the_normalised_scale():
    """With rewards of ~100 per step the head still sees targets of unit scale."""
    policy = cartpole_policy()
    batch = batch_for(policy)
    batch["rewards"] = batch["rewards"] * 100.0
    algorithm = PPO(policy, dataclasses.replace(SMALL, norm_value=True, epochs=8, lr=3e-3))
    for _ in range(5):
        stats = algorithm.train(batch)
    mean, std = algorithm.value_normalizer.mean_std()
    assert mean > 500 and std > 10 and stats["value_loss"] < 1.0


def test_chunk_length_must_divide_the_fragment():
    policy = cartpole_policy(recurrent=True)
    with pytest.raises(ValueError, match="chunk_length"):
        PPO(policy, dataclasses.replace(SMALL, chunk_length=5)).train(batch_for(policy))


@pytest.mark.parametrize("make_policy", [MLPPolicy, MLPLSTMPolicy])
def test_box_actions_use_the_gaussian_head(make_policy):
    env = gym.make("Pendulum-v1")
    policy = make_policy(env.observation_space, env.action_space)
    batch = batch_for(policy, "Pendulum-v1")
    assert batch["actions"].shape == (16, 8, 1) and batch["actions"].dtype == np.float32
    log_std = policy.action_head.log_std if hasattr(policy, "action_head") else policy.head.log_std
    before = log_std.detach().clone()
    stats = PPO(policy, SMALL).train(batch)
    assert np.isfinite(stats["policy_loss"]) and not torch.equal(log_std.detach(), before)


def test_recurrent_batch_carries_states_for_chunks():
    env = GymEnvGroup(functools.partial(CueMemoryEnv, 2, 1), 4, seed=0)
    policy = MLPLSTMPolicy(env.observation_space, env.action_space, hidden=(8,), recurrent=True)
    batch = Rollout(env, policy, seed=0).collect(6)
    assert batch["states"].shape == (6, 4, 2, 2, 8)
    assert set(batch) >= {"obs", "actions", "logp", "values", "rewards", "terminated", "truncated",
                          "trunc_values", "last_value", "versions"}


def test_vtrace_chunks_start_from_the_states_of_the_proximal_pass():
    """A recurrent batch acted by other weights: its stored states are stale. The clipped ratio is
    taken against the proximal pass's log-probs, so the chunks trained on must start from that pass's
    states; the ratio is then exactly 1 before the first step, wherever a chunk starts."""
    policy = cartpole_policy(recurrent=True)
    batch = batch_for(policy, steps=16)
    with torch.no_grad():
        for parameter in policy.parameters():
            parameter.add_(0.3 * torch.randn_like(parameter))  # the trainer's weights moved on since acting
    config = dataclasses.replace(SMALL, advantage="vtrace", chunk_length=4, epochs=1, lr=0.0)
    stats = PPO(policy, config).train(batch, version=0)
    assert stats["approx_kl"] < 1e-9 and stats["clip_frac"] == 0.0, stats


@pytest.mark.slow
def test_a2c_improves_cartpole_in_the_runtime(dask_client, tmp_path):
    config = ExperimentConfig(name="a2c", algorithm=A2C, trainer=TrainerConfig(batch_steps=512),
                              actors=ActorConfig(workers=1, ring_size=2, envs_per_group=8, fragment_length=32),
                              ppo=PPOConfig(lr=1e-3, ent_coef=0.0))
    run = launch(config, client=dask_client, run_dir=str(tmp_path))
    try:
        status = run.wait(target_return=200.0, seconds=150, progress=False)
    finally:
        result = run.stop()
    first = float(run.metrics.returns()[:20].mean())  # episodes of the first policy versions
    print(f"A2C on CartPole: first 20 episodes {first:.1f}, then {status['mean_return_last_20']:.1f} "
          f"after {status['env_steps']} env steps")
    assert status["mean_return_last_20"] >= max(200.0, 3 * first), status
    assert result["version"] > 0 and result["fragments_produced"] == result["fragments_consumed"] + result["dropped_stale"]


@pytest.mark.slow
def test_ppo_gaussian_head_swings_up_the_pendulum_in_the_runtime(dask_client, tmp_path):
    run = launch(load_benchmark("pendulum").config(), client=dask_client, run_dir=str(tmp_path))
    try:
        status = run.wait(target_return=-250.0, seconds=180, progress=False)
    finally:
        run.stop()
    print(f"PPO on Pendulum-v1: mean return {status['mean_return_last_20']:.1f} after {status['env_steps']} env steps")
    assert status["mean_return_last_20"] >= -400.0, status


def _gradient(policy) -> torch.Tensor:
    """Every parameter's gradient, flattened (zeros where the loss does not reach it)."""
    return torch.cat([(torch.zeros_like(p) if p.grad is None else p.grad).reshape(-1) for p in policy.parameters()])


def _policy_gradient(policy, loss: torch.Tensor) -> torch.Tensor:
    policy.zero_grad(set_to_none=True)
    loss.backward()
    return _gradient(policy)


def test_vtrace_corrects_stale_samples_to_the_truncated_importance_weighted_gradient():
    """Behaviour log-probs far from the current policy (samples several versions old): in V-trace mode
    the first gradient step is grad log pi * min(rho_bar, pi/mu) * (r + gamma vs' - V), normalised
    (numpy V-trace reference); plain PPO, whose ratio starts outside the clip, keeps no gradient for most."""
    policy = cartpole_policy()
    batch = batch_for(policy)
    rng = np.random.default_rng(0)
    batch["logp"] = (batch["logp"] + rng.normal(0.0, 0.6, batch["logp"].shape)).astype(np.float32)  # stale mu
    T, B = batch["rewards"].shape
    config = dataclasses.replace(SMALL, epochs=1, minibatch_size=T * B, advantage="vtrace", ent_coef=0.0,
                                 vf_coef=0.0, max_grad_norm=1e9, lr=1e-3)
    obs, actions, _, adv, _ = _reference_vtrace_now(policy, batch, config)
    adv = torch.as_tensor(adv.reshape(-1), dtype=torch.float32)
    adv = (adv - adv.mean()) / (adv.std(unbiased=False) + 1e-8)
    logp, _, _ = policy.evaluate(obs, actions)
    expected = _policy_gradient(policy, -(adv * logp).mean())

    before = [p.detach().clone() for p in policy.parameters()]
    captured = []
    algorithm = PPO(policy, config)
    algorithm.optimizer.step = lambda: captured.append(_gradient(policy))  # the one minibatch step's
    stats = algorithm.train(batch, version=0)
    torch.testing.assert_close(captured[0], expected, rtol=1e-4, atol=1e-6)
    assert stats["clip_frac"] == 0.0 and abs(stats["approx_kl"]) < 1e-6  # measured from the current policy
    assert all(torch.equal(a, b) for a, b in zip(before, policy.parameters()))

    plain = PPO(cartpole_policy(), dataclasses.replace(config, advantage="gae")).train(batch, version=0)
    assert plain["clip_frac"] > 0.3, plain  # the behaviour ratio of stale samples sits outside the clip


def _reference_vtrace_now(policy, batch, config):
    """A feed-forward CartPole batch's rows ``(obs, actions)`` flattened, and numpy reference V-trace of
    the policy as it is now against the batch's behaviour log-probs: ``(log_rhos, advantages, vs)``."""
    from test_advantages import reference_vtrace

    T, B = batch["rewards"].shape
    obs = torch.as_tensor(batch["obs"]).reshape(T * B, -1)
    actions = torch.as_tensor(batch["actions"]).reshape(T * B)
    with torch.no_grad():
        logp_now, _, values_now = policy.evaluate(obs, actions)
    log_rhos = logp_now.numpy().reshape(T, B) - batch["logp"]
    adv, vs = reference_vtrace(batch["rewards"], values_now.numpy().reshape(T, B), batch["terminated"],
                               batch["truncated"], batch["trunc_values"], batch["last_value"], log_rhos,
                               config.gamma, config.vtrace_rho_bar, config.vtrace_c_bar, config.gae_lambda)
    return obs, actions, log_rhos, adv, vs


def test_vtrace_minibatch_takes_its_targets_from_the_minibatch_pass_and_clips_from_the_behaviour_policy():
    """``vtrace_minibatch``: with one minibatch of every column, the step's gradient is PPO's clipped
    surrogate against the behaviour log-probs with A = r + gamma vs' - V (no second importance weight),
    plus the value loss towards vs, both from V-trace on the pass being trained (numpy reference)."""
    from srl_lab.algorithms.ppo import clipped_surrogate

    policy = cartpole_policy()
    batch = batch_for(policy)
    rng = np.random.default_rng(1)
    batch["logp"] = (batch["logp"] + rng.normal(0.0, 0.3, batch["logp"].shape)).astype(np.float32)  # stale mu
    T, B = batch["rewards"].shape
    config = dataclasses.replace(SMALL, epochs=1, minibatch_size=T * B, advantage="vtrace_minibatch",
                                 ent_coef=0.0, vf_coef=0.5, max_grad_norm=1e9, lr=1e-3)
    obs, actions, log_rhos, weighted_adv, vs = _reference_vtrace_now(policy, batch, config)
    adv = torch.as_tensor((weighted_adv / np.minimum(config.vtrace_rho_bar, np.exp(log_rhos))).reshape(-1),
                          dtype=torch.float32)
    adv = (adv - adv.mean()) / (adv.std(unbiased=False) + 1e-8)
    logp, _, value = policy.evaluate(obs, actions)
    ratio = (logp - torch.as_tensor(batch["logp"]).reshape(-1)).exp()
    loss = (-clipped_surrogate(ratio, adv, config.clip_coef, config.dual_clip).mean()
            + config.vf_coef * 0.5 * ((value - torch.as_tensor(vs).reshape(-1)) ** 2).mean())
    expected = _policy_gradient(policy, loss)

    captured = []
    algorithm = PPO(policy, config)
    algorithm.optimizer.step = lambda: captured.append(_gradient(policy))
    stats = algorithm.train(batch, version=0)
    assert len(captured) == 1
    torch.testing.assert_close(captured[0], expected, rtol=1e-4, atol=1e-6)
    assert stats["clip_frac"] > 0.1 and stats["approx_kl"] > 1e-3  # measured from the behaviour policy

    with pytest.raises(ValueError, match="advantage='vtrace'"):
        PPO(cartpole_policy(recurrent=True), config)


def test_vtrace_minibatch_minibatches_are_whole_fragment_columns():
    """Each minibatch holds every step of its fragments, the fragments of an epoch partitioned among them."""
    policy = cartpole_policy()
    batch = batch_for(policy)
    T, B = batch["rewards"].shape
    algorithm = PPO(policy, dataclasses.replace(SMALL, epochs=1, minibatch_size=2 * T, advantage="vtrace_minibatch"))
    seen, train_rows = [], []
    evaluate, vtrace_from_pass = policy.evaluate, algorithm._vtrace_from_pass

    def counted_evaluate(obs, actions):
        seen.append(len(actions))
        return evaluate(obs, actions)

    def recorded_vtrace_from_pass(flat, batch, trunc_values, last_value, idx, *rest, **kwargs):
        train_rows.append(idx.clone())
        return vtrace_from_pass(flat, batch, trunc_values, last_value, idx, *rest, **kwargs)

    policy.evaluate, algorithm._vtrace_from_pass = counted_evaluate, recorded_vtrace_from_pass
    algorithm.train(batch, version=0)
    assert seen == [2 * T] * (B // 2)  # no extra pass over the batch
    columns = [sorted(set((idx % B).tolist())) for idx in train_rows]
    assert all(len(c) == 2 and len(idx) == 2 * T for c, idx in zip(columns, train_rows))
    assert sorted(c for cs in columns for c in cs) == list(range(B))
