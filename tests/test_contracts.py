"""The declared contracts users build on: optional env attributes, ``Policy.act``'s one return shape,
the batch's behaviour values, ``Algorithm.optimizers``, and the one env probe of processes that have no
env of their own."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from srl_lab.algorithms.a2c import A2C
from srl_lab.algorithms.ppo import PPO
from srl_lab.api.algorithm import Algorithm
from srl_lab.api.env import EnvExtras, StepResult, extras
from srl_lab.api.policy import Act
from srl_lab.config import EnvConfig, ExperimentConfig, PPOConfig
from srl_lab.envs.factory import probe_env
from srl_lab.envs.gym_group import GymEnvGroup
from srl_lab.envs.hide_and_seek.lite import HideAndSeekLite
from srl_lab.models.mlp import MLPPolicy
from srl_lab.models.mlp_lstm import MLPLSTMPolicy
from srl_lab.system.actor_ring import ActorRing
from srl_lab.system.inference import InlineInference
from srl_lab.system.learner import needs_behaviour_values

OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACTIONS = gym.spaces.Discrete(2)


class BareGroup:
    """An env group with the required members only."""

    num_envs, num_agents = 2, 1
    observation_space, action_space = OBS, ACTIONS

    def reset(self, seed=None):
        return np.zeros((2, 1, 3), np.float32)

    def step(self, actions):
        return StepResult(self.reset(), np.zeros((2, 1), np.float32), np.zeros(2, bool), np.zeros(2, bool))

    def close(self):
        pass


def test_an_env_without_optional_attributes_reads_as_the_declared_defaults():
    info = extras(BareGroup())
    assert (info.trained_rows, info.agent_teams, info.team_of, info.team_names) == (None, None, None, None)
    assert info.prep_steps == 0 and info.horizon is None and not info.has_teams
    assert vars(info) == vars(EnvExtras())


def test_an_env_that_declares_them_is_read_as_given():
    env = HideAndSeekLite(4, n_hiders=1, n_seekers=1, horizon=40, random_opponents=0.5)
    info = extras(env)
    assert info.agent_teams == (0, 1) and info.team_names == ("hider", "seeker") and info.has_teams
    assert info.prep_steps == 16 and info.horizon == 40
    np.testing.assert_array_equal(info.trained_rows, env.trained_rows)
    assert info.team_of(env.reset(seed=0)).tolist() == [[0, 1]] * 4


def test_act_returns_one_shape_for_feed_forward_and_recurrent_policies():
    obs = torch.zeros(5, 3)
    feed_forward = MLPPolicy(OBS, ACTIONS, (8,)).act(obs)
    assert isinstance(feed_forward, Act) and feed_forward.state is None
    assert feed_forward.actions.shape == feed_forward.logp.shape == feed_forward.values.shape == (5,)
    lstm = MLPLSTMPolicy(OBS, ACTIONS, (8,), recurrent=True)
    recurrent = lstm.act(obs, lstm.initial_state(5))
    assert isinstance(recurrent, Act) and recurrent.state.shape == lstm.initial_state(5).shape
    actions, logp, values, state = recurrent.numpy()
    assert isinstance(actions, np.ndarray) and logp.shape == values.shape == (5,) and state.shape[0] == 5
    with pytest.raises(TypeError, match="initial_state"):
        lstm.act(obs)
    with pytest.raises(TypeError, match="feed-forward"):
        MLPPolicy(OBS, ACTIONS, (8,)).act(obs, lstm.initial_state(5))


def _ring_fragments(values_every_step: bool, fragments: int = 3) -> tuple[list[dict], int]:
    """CartPole cut at 6 steps (truncations inside fragments of 4) on a two-group ring: the fragments,
    and how many times the policy's critic ran."""
    from runs import FixedParams

    torch.manual_seed(0)
    policy = MLPLSTMPolicy(gym.make("CartPole-v1").observation_space, gym.spaces.Discrete(2), (8,))
    critic_calls = []
    policy.critic_trunk.register_forward_hook(lambda *_: critic_calls.append(1))
    envs = [GymEnvGroup(lambda: gym.wrappers.TimeLimit(gym.make("CartPole-v1"), 6), 3, seed=g) for g in range(2)]
    inference = InlineInference(policy, FixedParams(policy.weights()), lambda: False, values_every_step)
    out: list[dict] = []
    ring = ActorRing.single(envs, 4, inference,
                            lambda builder, last_value: out.append(builder.arrays(last_value)) or True)
    while len(out) < fragments:
        assert ring.step(lambda: False)
    ring.close()
    return out, len(critic_calls)


def test_actors_skip_the_critic_only_where_the_algorithm_recomputes_the_values():
    """PPO with V-trace computes its own values, so inline actors run the critic only for the values
    that bootstrap a fragment's end or a truncated episode: everything else the trainer reads is the
    same as with a value for every step."""
    assert not needs_behaviour_values(ExperimentConfig(ppo=PPOConfig(advantage="vtrace")))
    assert not needs_behaviour_values(ExperimentConfig(ppo=PPOConfig(advantage="vtrace_minibatch")))
    assert needs_behaviour_values(ExperimentConfig(ppo=PPOConfig(advantage="gae")))
    assert needs_behaviour_values(ExperimentConfig(ppo=PPOConfig(advantage="vtrace"), algorithm=A2C))
    every_step, calls_every_step = _ring_fragments(values_every_step=True)
    skipped, calls_skipped = _ring_fragments(values_every_step=False)
    assert calls_skipped < calls_every_step / 2
    assert any(f["truncated"].any() for f in skipped)
    for full, lean in zip(every_step, skipped):
        skipped_steps = lean["values"] == 0  # a bootstrap request's values are kept for its step too
        assert skipped_steps.mean() >= 0.5 and (lean["values"] == full["values"])[~skipped_steps].all()
        for key in ("actions", "logp", "rewards", "terminated", "truncated", "trunc_values", "last_value"):
            np.testing.assert_array_equal(full[key], lean[key], err_msg=key)


@pytest.mark.parametrize("cls", [PPO, A2C])
def test_algorithms_declare_their_optimisers_and_checkpoint_them(cls):
    algorithm = cls(MLPPolicy(OBS, ACTIONS, (8,)), PPOConfig())
    assert list(algorithm.optimizers()) == [algorithm.optimizer]
    algorithm.optimizer.param_groups[0]["lr"] = 0.123
    state = algorithm.state_dict()
    assert state["optimizer"]["param_groups"][0]["lr"] == 0.123  # the key checkpoints always had
    fresh = cls(MLPPolicy(OBS, ACTIONS, (8,)), PPOConfig())
    fresh.load_state_dict(state)
    assert fresh.optimizer.param_groups[0]["lr"] == 0.123


def test_an_algorithm_with_several_optimisers_checkpoints_each():
    class TwoOptimisers(Algorithm):
        def __init__(self, policy, config, device="cpu"):
            super().__init__(policy, config, device)
            self.actor = torch.optim.SGD(self.policy.actor.parameters(), lr=0.1)
            self.critic = torch.optim.SGD(self.policy.critic.parameters(), lr=0.2)

        def optimizers(self):
            return (self.actor, self.critic)

    state = TwoOptimisers(MLPPolicy(OBS, ACTIONS, (8,)), None).state_dict()
    assert [s["param_groups"][0]["lr"] for s in state["optimizer"]] == [0.1, 0.2]
    other = TwoOptimisers(MLPPolicy(OBS, ACTIONS, (8,)), None)
    other.critic.param_groups[0]["lr"] = 0.5
    other.load_state_dict(state)
    assert other.critic.param_groups[0]["lr"] == 0.2
    assert "optimizer" not in Algorithm(MLPPolicy(OBS, ACTIONS, (8,)), None).state_dict()  # declares none


def test_probe_env_reads_spaces_and_teams_once():
    probe = probe_env(ExperimentConfig(env=EnvConfig(id="hide_and_seek_lite", kwargs={"n_hiders": 1, "n_seekers": 1})))
    assert probe.env_type == "HideAndSeekLite" and probe.extras.agent_teams == (0, 1)
    assert isinstance(probe.observation_space, gym.spaces.Dict) and probe.action_space.shape == (5,)
    cartpole = probe_env(ExperimentConfig())
    assert cartpole.observation_space.shape == (4,) and not cartpole.extras.has_teams
