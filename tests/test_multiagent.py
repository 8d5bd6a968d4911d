"""Agent -> policy mapping (``policy.mapping="per_team"``: one network per team) and random opponents."""
from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from srl_lab.algorithms import recurrent
from srl_lab.algorithms.ppo import PPO
from srl_lab.api.policy import obs_to_tensor
from srl_lab.config import (
    ActorConfig,
    ConfigError,
    EnvConfig,
    ExperimentConfig,
    PolicyConfig,
    PPOConfig,
    TrainerConfig,
)
from srl_lab.envs.factory import make_policy
from srl_lab.envs.hide_and_seek.lite import HideAndSeekLite
from srl_lab.envs.hide_and_seek.scene import SELF_FEATURES
from srl_lab.models.entity_attention import EntityAttentionPolicy
from srl_lab.models.team import TeamPolicies
from srl_lab.system.actor_ring import ActorRing
from srl_lab.system.fragments import check_fragment
from srl_lab.system.inference import InlineInference
from runs import FixedParams, train_until_version

HIDERS, SEEKERS = 2, 2


def config(mapping: str = "per_team", recurrent_policy: bool = False, **env_kwargs) -> ExperimentConfig:
    factory = functools.partial(EntityAttentionPolicy, hidden=32, embed=16, recurrent=recurrent_policy)
    return ExperimentConfig(
        name=f"teams-{mapping}", env=EnvConfig(id="hide_and_seek_lite", kwargs=env_kwargs or
                                               {"n_hiders": HIDERS, "n_seekers": SEEKERS}),
        policy=PolicyConfig(factory=factory, mapping=mapping))


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Small networks run fastest on one thread (two threads crawl on a busy 2-core machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def env():
    return HideAndSeekLite(4, n_hiders=HIDERS, n_seekers=SEEKERS, seed=0)


def build(env, mapping: str = "per_team", recurrent_policy: bool = False, seed: int = 0):
    torch.manual_seed(seed)
    return make_policy(config(mapping, recurrent_policy), env.observation_space, env.action_space)


def rows(env, seed: int = 0) -> dict[str, torch.Tensor]:
    obs = env.reset(seed=seed)
    return obs_to_tensor({k: v.reshape(-1, *v.shape[2:]) for k, v in obs.items()})


def hider_rows(env) -> torch.Tensor:
    """Rows are env x agent with hiders first: True for every hider row."""
    return torch.as_tensor(np.tile(np.asarray(env.agent_teams) == 0, env.num_envs))


def outputs(policy, obs, actions) -> torch.Tensor:
    """Per row: log-prob of fixed actions, entropy and value, side by side."""
    with torch.no_grad():
        logp, entropy, value = policy.evaluate(obs, actions)
    return torch.stack([logp, entropy, value], dim=-1)


def test_env_names_each_agents_team_and_its_observation_carries_it(env):
    assert env.agent_teams == (0,) * HIDERS + (1,) * SEEKERS and env.team_names == ("hider", "seeker")
    team = env.team_of(env.reset(seed=0))
    assert team.shape == (env.num_envs, env.num_agents) and (team == np.asarray(env.agent_teams)).all()


def test_each_team_has_its_own_network_and_twice_the_parameters(env):
    shared, teams = build(env, "shared"), build(env)
    assert isinstance(teams, TeamPolicies) and not isinstance(shared, TeamPolicies)
    assert teams.team_names == ("hider", "seeker") and len(teams.teams) == 2
    count = lambda p: sum(x.numel() for x in p.parameters())  # noqa: E731
    assert count(teams) == 2 * count(shared)
    assert {k.split(".")[1] for k in teams.weights()} == {"0", "1"}


@pytest.mark.parametrize("changed", [0, 1])
def test_changing_one_teams_weights_leaves_the_other_teams_actions_alone(env, changed):
    policy = build(env)
    obs = rows(env)
    actions = policy.act(obs)[0]
    before = outputs(policy, obs, actions)
    hider = hider_rows(env)
    mine = hider if changed == 0 else ~hider
    # each team's rows get exactly its own network's outputs
    torch.testing.assert_close(before[mine], outputs(policy.teams[changed], {k: v[mine] for k, v in obs.items()},
                                                     actions[mine]))
    with torch.no_grad():
        for p in policy.teams[changed].parameters():
            p.add_(0.05 * torch.randn_like(p))
    after = outputs(policy, obs, actions)
    torch.testing.assert_close(after[~mine], before[~mine], rtol=0, atol=0)
    assert (after[mine] - before[mine]).abs().max() > 1e-3


def test_the_critic_input_stays_distinct_from_the_policy_input(env):
    """Each team's critic sees an entity its policy cannot: the entity-attention split is kept."""
    policy = build(env)
    obs = rows(env)
    hidden = (obs["mask_aa_obs"] == 0) & (obs["mask_aa_obs_spoof"] == 1)
    hider = hider_rows(env)
    picks = [int(torch.nonzero(hidden.any(-1) & team)[0]) for team in (hider, ~hider)]
    changed = {k: v.clone() for k, v in obs.items()}
    for row in picks:
        entity = int(torch.nonzero(hidden[row])[0])
        changed["agent_qpos_qvel"][row, entity] += torch.linspace(1.0, 3.0, changed["agent_qpos_qvel"].shape[-1])
    actions = policy.act(obs)[0]
    before, after = outputs(policy, obs, actions), outputs(policy, changed, actions)
    torch.testing.assert_close(after[:, :2], before[:, :2], rtol=0, atol=1e-6)  # actions: unchanged
    assert all(abs(float(after[row, 2] - before[row, 2])) > 1e-4 for row in picks)  # values: moved


def test_recurrent_teams_step_like_their_own_networks(env):
    policy = build(env, recurrent_policy=True)
    obs = rows(env)
    state = policy.initial_state(len(obs["lidar"]))
    actions, logp, values, state = policy.act(obs, state)
    assert actions.shape == (16, 5) and state.shape == (16, 2, 2, 32) and state.abs().sum() > 0
    hider = hider_rows(env)
    with torch.no_grad():
        seq = {k: v[hider].unsqueeze(0) for k, v in obs.items()}
        _, value, alone = policy.teams[0].distribution_and_value(seq, torch.zeros(8, 2, 2, 32),
                                                                 torch.zeros(1, 8, dtype=torch.bool))
    torch.testing.assert_close(state[hider], alone)
    torch.testing.assert_close(values[hider], value[0])


@pytest.mark.parametrize("recurrent_policy", [False, True])
def test_one_ppo_update_trains_both_teams(env, recurrent_policy):
    policy = build(env, recurrent_policy=recurrent_policy)
    batch = recurrent.Rollout(HideAndSeekLite(4, n_hiders=HIDERS, n_seekers=SEEKERS, seed=1), policy, seed=1).collect(8)
    assert ("states" in batch) == recurrent_policy
    before = [{k: v.clone() for k, v in team.state_dict().items()} for team in policy.teams]
    ppo = PPO(policy, PPOConfig(minibatch_size=64, epochs=1, norm_obs=True, chunk_length=4, burn_in=2))
    stats = ppo.train(batch)
    assert np.isfinite(stats["policy_loss"])
    for team, old in zip(policy.teams, before):
        moved = [k for k, v in team.state_dict().items() if "obs_normalizer" not in k and not torch.equal(v, old[k])]
        assert moved, "a team's network was not trained"
        # each team's observation statistics come from its own rows: half of the 8 x 16 steps
        assert float(team.obs_normalizer.stats["lidar"].count) == 8 * 16 / 2


def test_per_team_needs_an_env_that_names_teams():
    bad = ExperimentConfig(policy=PolicyConfig(mapping="per_team"))  # CartPole
    with pytest.raises(ConfigError, match="policy.*per_team"):
        bad.validate()
    config(**{"n_hiders": 1, "n_seekers": 1}).validate()


def versus_random(num_envs: int = 8, seed: int = 0) -> HideAndSeekLite:
    """Half the envs against a random team: seekers random in envs 0 and 2, hiders in 1 and 3."""
    return HideAndSeekLite(num_envs, n_hiders=HIDERS, n_seekers=SEEKERS, seed=seed, random_opponents=0.5)


def test_random_opponents_leave_only_the_other_team_to_the_policy():
    env = versus_random()
    assert env.random_team.tolist() == [1, 0, 1, 0, -1, -1, -1, -1]
    agents = HIDERS + SEEKERS
    expected = [e * agents + a for e in range(8) for a in range(agents)
                if env.random_team[e] != env.agent_teams[a]]
    assert env.trained_rows.tolist() == expected
    assert HideAndSeekLite(8, seed=0).trained_rows is None  # pure self-play trains every row


def test_the_env_ignores_the_policys_actions_for_random_rows():
    """Two copies on one seed, given different actions only where a team plays randomly, stay equal."""
    first, second = versus_random(), versus_random()
    first.reset(), second.reset()
    rng = np.random.default_rng(1)
    random_rows = np.ones(8 * (HIDERS + SEEKERS), bool)
    random_rows[first.trained_rows] = False
    episodes = []
    for _ in range(200):  # 2.5 episodes of the quadrant's 80 steps
        actions = (rng.random((8, HIDERS + SEEKERS, 5)) * np.asarray(first.action_space.nvec)).astype(np.int64)
        other = actions.copy()
        other.reshape(-1, 5)[random_rows] = (other.reshape(-1, 5)[random_rows] + 1) % 2
        a, b = first.step(actions), second.step(other)
        for key in a.obs:
            np.testing.assert_array_equal(a.obs[key], b.obs[key])
        np.testing.assert_array_equal(a.reward, b.reward)
        episodes += a.episodes
    fresh = versus_random(seed=99)  # a reset with a seed replays the random opponents too
    first.reset(seed=5), fresh.reset(seed=5)
    for _ in range(10):
        a, b = first.step(actions), fresh.step(actions)
        np.testing.assert_array_equal(a.obs["observation_self"], b.obs["observation_self"])
    keys = [set(e) for e in episodes]
    assert {"hidden_fraction_vs_random_seeker", "length"} in keys and {"hidden_fraction_vs_random_hider", "length"} in keys
    assert sum("hider_return" in k for k in keys) == 2 * 4  # self-play envs keep every statistic


def test_random_opponents_must_be_a_fraction():
    with pytest.raises(ValueError, match="random_opponents"):
        HideAndSeekLite(4, random_opponents=1.5)
    with pytest.raises(ConfigError, match="random_opponents"):
        config(n_hiders=1, n_seekers=1, random_opponents=-0.1).validate()


def test_actors_send_only_the_rows_the_policy_plays():
    envs = [versus_random(seed=g) for g in range(2)]
    policy = build(envs[0], mapping="shared")
    fragments = []

    def emit(builder, last_value) -> bool:
        fragments.append(builder.arrays(last_value))
        return True

    ring = ActorRing.single(envs, 16, InlineInference(policy, FixedParams(policy.weights()), lambda: False), emit)
    while len(fragments) < 2:
        assert ring.step(lambda: False)
    ring.close()
    is_hider = SELF_FEATURES.index("is_hider")
    teams = np.tile(np.asarray(envs[0].agent_teams), 8)[envs[0].trained_rows]
    for fragment in fragments:
        assert check_fragment(fragment, 16) is None
        assert (fragment["obs"]["observation_self"][..., is_hider] == (teams == 0)).all()


def test_actors_count_env_steps_not_decisions_when_each_decision_acts_for_several():
    """At ``action_repeat=2`` the env-steps counter (the panel's env steps/s) counts both steps of a
    decision, while a fragment still holds one row per decision."""
    envs = [HideAndSeekLite(4, n_hiders=1, n_seekers=1, seed=g, action_repeat=2) for g in range(2)]
    policy = build(envs[0], mapping="shared")
    fragments = []
    ring = ActorRing.single(envs, 8, InlineInference(policy, FixedParams(policy.weights()), lambda: False),
                            lambda builder, last_value: fragments.append(builder.arrays(last_value)) or True)
    for _ in range(9):  # a fragment is emitted once the decision after its last one is known
        assert ring.step(lambda: False)
    ring.close()
    assert ring.counters["env_steps"] == 9 * 2 * 4 * 2  # decisions x groups x envs x env steps each
    assert len(fragments) == 2 and all(check_fragment(f, 8) is None for f in fragments)


@pytest.mark.slow
def test_per_team_trains_through_launch_on_one_versus_one(dask_client, tmp_path):
    """Also against random opponents in half the envs: their episodes are reported apart."""
    cfg = config(**{"n_hiders": 1, "n_seekers": 1, "random_opponents": 0.5})
    cfg.actors = ActorConfig(workers=1, ring_size=2, envs_per_group=8, fragment_length=32)
    cfg.trainer = TrainerConfig(batch_steps=1024, buffer_fragments=4)
    cfg.ppo = PPOConfig(minibatch_size=256, epochs=2, norm_obs=True, norm_value=True)
    run = train_until_version(cfg, dask_client, str(tmp_path))
    assert run.result["malformed"] == 0
    assert {k.split(".")[1] for k in run.final_weights} == {"0", "1"}
    for team in ("hider", "seeker"):
        assert len(run.metrics.returns(f"hidden_fraction_vs_random_{team}")) > 0
