"""PettingZooGroup: agents that differ, leave early and join late, behind the AgentGroup contract."""
from __future__ import annotations

import os
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pettingzoo import ParallelEnv
from pettingzoo.utils.conversions import parallel_to_aec

from srl_lab.api.agents import AgentGroup
from srl_lab.envs.pettingzoo_group import PettingZooGroup, is_pettingzoo

INF = np.inf
AGENTS = ("runner", "watcher", "late")


class ShiftEnv(ParallelEnv):
    """Three agents that differ in spaces: ``runner`` terminates after ``runner_steps`` steps,
    ``late`` joins after ``join_at`` steps, ``watcher`` stays; all are truncated at ``horizon``.

    Every real observation holds a 1 (so filler zeros are told apart) and encodes the step, the
    episode count and the reset seed (-1 when unseeded). Rewards depend on the actions. With
    ``keep_dead`` the env (against PettingZoo's rules) keeps listing agents that ended. ``fail_at``:
    the step index at which ``step`` raises, once; ``fail_reset``: the reset call that raises.
    """

    metadata = {"name": "shift_v0", "is_parallelizable": True}

    def __init__(self, runner_steps: int = 2, join_at: int = 1, horizon: int = 4, keep_dead: bool = False,
                 fail_at: int | None = None, fail_reset: int | None = None):
        self.runner_steps, self.join_at, self.horizon, self.keep_dead = runner_steps, join_at, horizon, keep_dead
        self.fail_at, self.fail_reset = fail_at, fail_reset
        self.possible_agents = list(AGENTS)
        self.render_mode = None
        self.agents: list[str] = []
        self.episode, self.resets, self.closed, self.seen_seed, self.t = -1, 0, False, -1, 0
        self.dead: set[str] = set()
        self._obs = {"runner": gym.spaces.Box(-INF, INF, (4,), np.float64),
                     "watcher": gym.spaces.Box(-INF, INF, (2, 3), np.float32),
                     "late": gym.spaces.Dict({"pos": gym.spaces.Box(-INF, INF, (2,)),
                                              "meta": gym.spaces.Box(-INF, INF, (2,))})}
        self._act = {"runner": gym.spaces.Discrete(3), "watcher": gym.spaces.Box(-1, 1, (2,), np.float32),
                     "late": gym.spaces.MultiDiscrete([2, 3])}

    def observation_space(self, agent: str) -> gym.Space:
        return self._obs[agent]

    def action_space(self, agent: str) -> gym.Space:
        return self._act[agent]

    def observe(self, agent: str) -> Any:
        if agent == "runner":
            return np.array([self.t, self.episode, self.seen_seed, 1.0])  # float64: converted to float32
        if agent == "watcher":
            return np.array([[self.t, self.episode, self.seen_seed], [1, 1, 1]], np.float32)
        return {"pos": np.array([self.t, self.episode]), "meta": np.array([self.seen_seed, 1.0])}

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self.resets += 1
        if self.fail_reset == self.resets:
            raise RuntimeError("reset failed")
        self.episode += 1
        self.seen_seed, self.t, self.dead = (-1 if seed is None else seed), 0, set()
        self.agents = ["runner", "watcher"] + (["late"] if self.join_at == 0 else [])
        return {a: self.observe(a) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions: dict) -> tuple[dict, dict, dict, dict, dict]:
        live = [a for a in self.agents if a not in self.dead]
        assert sorted(actions) == sorted(live), (actions, live)  # actions exactly for the present agents
        if self.fail_at == self.t:
            self.fail_at = None
            raise RuntimeError("step failed")
        assert "runner" not in actions or isinstance(actions["runner"], int)
        assert "watcher" not in actions or actions["watcher"].dtype == np.float32
        assert "late" not in actions or actions["late"].dtype == np.int64
        self.t += 1
        value = {"runner": lambda a: a + 1.0, "watcher": lambda a: float(np.sum(a)), "late": lambda a: a[0] * 3.0 + a[1]}
        rewards = {a: value[a](actions[a]) for a in live}
        term = {a: a == "runner" and self.t == self.runner_steps for a in live}
        trunc = {a: self.t >= self.horizon for a in live}
        if self.t == self.join_at and self.t < self.horizon:
            self.agents.append("late")
        ended = {a for a in live if term[a] or trunc[a]}
        obs = {a: self.observe(a) for a in self.agents if a not in self.dead}
        if self.keep_dead:
            self.dead |= ended
        else:
            self.agents = [a for a in self.agents if a not in ended]
        return obs, rewards, term, trunc, {a: {} for a in live}

    def close(self) -> None:
        self.closed = True


def maker(*params: dict) -> tuple[Any, list[ShiftEnv]]:
    """A ``make`` that builds copy ``k`` with ``params[k]``, and the list of envs it built."""
    built: list[ShiftEnv] = []

    def make() -> ShiftEnv:
        built.append(ShiftEnv(**params[len(built)]))
        return built[-1]
    return make, built


def random_actions(group: PettingZooGroup, rng: np.random.Generator) -> dict[str, np.ndarray]:
    out = {}
    for a, space in group.action_spaces.items():
        space.seed(int(rng.integers(2**31)))
        out[a] = np.stack([np.asarray(space.sample()) for _ in range(group.num_envs)])
    return out


def actions_for(runner: int, watcher: float, late: tuple[int, int], n: int) -> dict[str, np.ndarray]:
    return {"runner": np.full(n, runner), "watcher": np.full((n, 2), watcher, np.float32),
            "late": np.tile(np.array(late), (n, 1))}


def is_filler(obs: Any, e: int) -> bool:
    return all(not v[e].any() for v in obs.values()) if isinstance(obs, dict) else not obs[e].any()


def check_layout(group: PettingZooGroup, obs: dict) -> None:
    """Every agent's observation has ``[num_envs, *shape]`` float32 rows (a dict of them for Dict spaces)."""
    n = group.num_envs
    assert set(obs) == set(group.agents)
    for a, space in group.observation_spaces.items():
        if isinstance(space, gym.spaces.Dict):
            assert set(obs[a]) == set(space.spaces)
            for key, sub in space.spaces.items():
                assert obs[a][key].shape == (n, *sub.shape) and obs[a][key].dtype == np.float32
        else:
            assert obs[a].shape == (n, *space.shape) and obs[a].dtype == np.float32


def test_spaces_and_protocol() -> None:
    make, built = maker({}, {})
    group = PettingZooGroup(make, 2, seed=0)
    assert isinstance(group, AgentGroup)
    assert group.agents == AGENTS
    assert group.observation_spaces["runner"].shape == (4,)
    assert group.observation_spaces["watcher"].shape == (2, 3)
    assert isinstance(group.observation_spaces["late"], gym.spaces.Dict)
    assert isinstance(group.action_spaces["runner"], gym.spaces.Discrete)
    assert isinstance(group.action_spaces["late"], gym.spaces.MultiDiscrete)
    check_layout(group, group.reset())
    group.close()
    assert all(env.closed for env in built)


def test_first_env_is_copy_zero_and_helper() -> None:
    first = ShiftEnv()
    make, built = maker({})
    group = PettingZooGroup(make, 2, first=first)
    assert group.envs[0] is first and len(built) == 1
    assert is_pettingzoo(first) and is_pettingzoo(parallel_to_aec(first))
    assert not is_pettingzoo(gym.make("CartPole-v1")) and not is_pettingzoo(object())
    with pytest.raises(TypeError, match="PettingZoo"):
        PettingZooGroup(lambda: gym.make("CartPole-v1"), 1)


def test_unsupported_action_space_is_refused() -> None:
    env = ShiftEnv()
    env._act["late"] = gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Discrete(2)))
    with pytest.raises(ValueError, match="'late' has action space"):
        PettingZooGroup(lambda: ShiftEnv(), 1, first=env)


def test_episode_walkthrough() -> None:
    """Env 0 (horizon 4): runner ends at step 2, late joins after step 1; env 1 runs on (horizon 6)."""
    make, _ = maker({"horizon": 4}, {"horizon": 6})
    group = PettingZooGroup(make, 2, seed=10)
    obs = group.reset()
    np.testing.assert_array_equal(obs["runner"], [[0, 0, 10, 1], [0, 0, 11, 1]])  # seed + i
    assert is_filler(obs["late"], 0) and is_filler(obs["late"], 1)  # not joined yet
    r1 = group.step(actions_for(2, 0.5, (1, 2), 2))  # t=1
    assert r1.valid["runner"].all() and r1.valid["watcher"].all() and not r1.valid["late"].any()
    np.testing.assert_allclose(r1.reward["runner"], 3.0)
    np.testing.assert_allclose(r1.reward["watcher"], 1.0)
    np.testing.assert_array_equal(r1.reward["late"], 0.0)  # absent: reward 0
    np.testing.assert_array_equal(r1.obs["late"]["pos"], [[1, 0], [1, 0]])  # joined: acts next step
    assert r1.final_obs is None and not r1.env_done.any() and not r1.episodes
    r2 = group.step(actions_for(0, 0.25, (0, 1), 2))  # t=2: runner terminates
    assert r2.valid["late"].all() and r2.terminated["runner"].all() and not r2.truncated["runner"].any()
    assert not r2.terminated["watcher"].any() and not r2.terminated["late"].any()
    np.testing.assert_array_equal(r2.final_obs["runner"], [[2, 0, 10, 1], [2, 0, 11, 1]])
    assert is_filler(r2.final_obs["watcher"], 0)  # only agents that ended have final obs
    assert is_filler(r2.obs["runner"], 0) and is_filler(r2.obs["runner"], 1)
    np.testing.assert_allclose(r2.reward["late"], 1.0)
    r3 = group.step(actions_for(1, 0.0, (1, 0), 2))  # t=3: runner absent
    assert not r3.valid["runner"].any() and r3.valid["watcher"].all()
    np.testing.assert_array_equal(r3.reward["runner"], 0.0)
    assert is_filler(r3.obs["runner"], 0)
    r4 = group.step(actions_for(1, 1.0, (0, 2), 2))  # t=4: env 0 truncated and reset in this step
    np.testing.assert_array_equal(r4.env_done, [True, False])
    np.testing.assert_array_equal(r4.truncated["watcher"], [True, False])
    np.testing.assert_array_equal(r4.truncated["late"], [True, False])
    assert not r4.valid["runner"].any() and not r4.truncated["runner"].any()
    np.testing.assert_array_equal(r4.final_obs["watcher"][0], [[4, 0, 10], [1, 1, 1]])
    np.testing.assert_array_equal(r4.final_obs["late"]["pos"][0], [4, 0])
    np.testing.assert_array_equal(r4.obs["runner"][0], [0, 1, -1, 1])  # next episode, unseeded reset
    np.testing.assert_array_equal(r4.obs["watcher"][1], [[4, 0, 11], [1, 1, 1]])  # env 1 goes on
    assert is_filler(r4.obs["late"], 0) and not is_filler(r4.obs["late"], 1)
    [episode] = r4.episodes
    assert episode["length"] == 4
    assert episode["return/runner"] == pytest.approx(3.0 + 1.0)
    assert episode["return/watcher"] == pytest.approx(1.0 + 0.5 + 0.0 + 2.0)
    assert episode["return/late"] == pytest.approx(1.0 + 3.0 + 2.0)
    assert episode["return"] == pytest.approx((4.0 + 3.5 + 6.0) / 3)
    with pytest.raises(KeyError, match="late"):
        group.step({"runner": np.zeros(2), "watcher": np.zeros((2, 2), np.float32)})
    r5 = group.step(actions_for(0, 0.0, (0, 0), 2))
    np.testing.assert_array_equal(r5.valid["runner"], [True, False])  # env 0's new episode
    assert r5.episodes == [] and r5.env_errors == 0


def test_reset_seed_overrides_and_late_agent_never_joining() -> None:
    make, _ = maker({"join_at": 9, "horizon": 2, "runner_steps": 5}, {"join_at": 9})
    group = PettingZooGroup(make, 2)
    assert group.reset()["runner"][:, 2].tolist() == [-1, -1]  # no seed at all
    assert group.reset(seed=5)["runner"][:, 2].tolist() == [5, 6]
    group.step(actions_for(0, 0.0, (0, 0), 2))
    r = group.step(actions_for(0, 0.0, (0, 0), 2))
    assert r.truncated["runner"][0] and not r.terminated["runner"][0]  # runner_steps > horizon
    assert r.episodes[0]["return/late"] == 0.0 and r.episodes[0]["return"] == pytest.approx(1.0)


def test_agents_listed_after_they_ended_never_act_again() -> None:
    """keep_dead: the env still lists ended agents; they stay absent and an all-ended env is reset."""
    make, built = maker({"keep_dead": True, "runner_steps": 1, "horizon": 3})
    group = PettingZooGroup(make, 1, seed=0)
    group.reset()
    assert group.step(actions_for(0, 0.0, (0, 0), 1)).terminated["runner"][0]
    assert "runner" in built[0].agents
    r = group.step(actions_for(0, 0.0, (0, 0), 1))
    assert not r.valid["runner"][0] and r.env_errors == 0 and is_filler(r.obs["runner"], 0)
    r = group.step(actions_for(0, 0.0, (0, 0), 1))
    assert r.env_done[0] and r.episodes[0]["length"] == 3


def test_env_raising_in_step_is_reset_and_counted() -> None:
    make, built = maker({"horizon": 5}, {"horizon": 5, "fail_at": 2}, {"horizon": 5})
    group = PettingZooGroup(make, 3, seed=0)
    group.reset()
    for _ in range(2):
        assert group.step(actions_for(1, 0.0, (0, 0), 3)).env_errors == 0
    r = group.step(actions_for(1, 0.0, (0, 0), 3))
    assert r.env_errors == 1 and r.episodes == []
    np.testing.assert_array_equal(r.env_done, [False, True, False])
    np.testing.assert_array_equal(r.truncated["watcher"], [False, True, False])  # cut, like GymEnvGroup
    np.testing.assert_array_equal(r.final_obs["watcher"][1, 0], [2, 0, 1])  # the last obs it had
    np.testing.assert_array_equal(r.obs["runner"][1], [0, 1, -1, 1])  # reset: next episode
    np.testing.assert_array_equal(r.obs["watcher"][[0, 2], 0, 0], [3, 3])  # the others go on
    assert built[1].resets == 2 and built[0].resets == 1
    r = group.step(actions_for(1, 0.0, (0, 0), 3))
    assert r.env_errors == 0 and r.valid["runner"].tolist() == [False, True, False]


def test_env_raising_in_reset_is_rebuilt() -> None:
    make, built = maker({"horizon": 1, "fail_reset": 2}, {})
    group = PettingZooGroup(make, 1, seed=0)
    group.reset()
    r = group.step(actions_for(0, 0.0, (0, 0), 1))
    assert r.env_done[0] and len(built) == 2 and built[0].closed and group.envs[0] is built[1]
    assert r.obs["runner"][0, 3] == 1  # the rebuilt env's first observation


@st.composite
def env_params(draw: st.DrawFn) -> dict:
    return {"runner_steps": draw(st.integers(1, 7)), "join_at": draw(st.integers(0, 7)),
            "horizon": draw(st.integers(1, 6)), "keep_dead": draw(st.booleans())}


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_invariants_for_random_actions(data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 3), label="num_envs")
    make, _ = maker(*[data.draw(env_params(), label=f"env {k}") for k in range(n)])
    group = PettingZooGroup(make, n, seed=data.draw(st.none() | st.integers(0, 100)))
    obs = group.reset()
    sums, ended = np.zeros((n, 3)), np.zeros((n, 3), bool)
    lengths = np.zeros(n, int)
    for _ in range(data.draw(st.integers(1, 16), label="steps")):
        actions = {"runner": np.array(data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))),
                   "watcher": np.array(data.draw(st.lists(st.lists(st.floats(-1, 1, width=32), min_size=2,
                                                                   max_size=2), min_size=n, max_size=n)),
                                       np.float32),
                   "late": np.array(data.draw(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 2)),
                                                       min_size=n, max_size=n)))}
        r = group.step(actions)
        assert r.env_errors == 0
        check_layout(group, r.obs)
        if r.final_obs is not None:
            check_layout(group, r.final_obs)
        lengths += 1
        for j, a in enumerate(group.agents):
            for field in (r.reward, r.terminated, r.truncated, r.valid):
                assert field[a].shape == (n,)
            assert r.reward[a].dtype == np.float32 and r.valid[a].dtype == bool
            for e in range(n):
                assert r.valid[a][e] == (not is_filler(obs[a], e))  # filler exactly where absent
                assert not (r.terminated[a][e] and r.truncated[a][e])
                if not r.valid[a][e]:
                    assert r.reward[a][e] == 0 and not r.terminated[a][e] and not r.truncated[a][e]
                    continue
                assert not ended[e, j]  # never valid after it ended, until its env resets
                sums[e, j] += r.reward[a][e]
                if r.terminated[a][e] or r.truncated[a][e]:
                    ended[e, j] = True
                    assert not is_filler(r.final_obs[a], e)
                elif not r.env_done[e]:
                    assert not is_filler(r.obs[a], e)  # it goes on
        assert len(r.episodes) == r.env_done.sum()
        for e, episode in zip(np.flatnonzero(r.env_done), r.episodes):
            assert episode["length"] == lengths[e]
            for j, a in enumerate(group.agents):
                assert episode[f"return/{a}"] == pytest.approx(sums[e, j], abs=1e-4)
            sums[e], ended[e], lengths[e] = 0, False, 0
        obs = r.obs
    group.close()


def test_aec_envs_are_converted_or_refused() -> None:
    group = PettingZooGroup(lambda: parallel_to_aec(ShiftEnv()), 1, seed=0)
    assert group.agents == AGENTS and isinstance(group.envs[0], ShiftEnv)
    group.reset()
    assert group.step(actions_for(0, 0.0, (0, 0), 1)).valid["runner"][0]
    from pettingzoo.classic import tictactoe_v3

    with pytest.raises(ValueError, match="turn-based AEC envs are not supported"):
        PettingZooGroup(tictactoe_v3.env, 1)


def knights_archers_zombies() -> Any:
    os.environ["SDL_VIDEODRIVER"] = "dummy"  # pygame without a display
    from pettingzoo.butterfly import knights_archers_zombies_v11

    return knights_archers_zombies_v11


KAZ = {"spawn_delay": 1, "killable_knights": True, "killable_archers": True, "line_death": True, "max_cycles": 40}


def test_knights_archers_zombies_agents_die_one_by_one() -> None:
    kaz = knights_archers_zombies()
    group = PettingZooGroup(lambda: kaz.parallel_env(**KAZ), 2, seed=0)
    assert group.agents == ("archer_0", "archer_1", "knight_0", "knight_1")
    rng = np.random.default_rng(0)
    group.reset()
    left_alone = same_step_reset = False
    gone: list[tuple[str, int]] = []  # agents that ended while others in their env went on
    for _ in range(400):
        r = group.step(random_actions(group, rng))
        check_layout(group, r.obs)
        for a, e in gone:  # ended in the previous step, its env going on
            assert not r.valid[a][e] and r.reward[a][e] == 0
            assert r.env_done[e] or is_filler(r.obs[a], e)
            left_alone |= any(r.valid[b][e] for b in group.agents if b != a)
        gone = [(a, e) for a in group.agents for e in range(2)
                if (r.terminated[a][e] or r.truncated[a][e]) and not r.env_done[e]]
        for e in np.flatnonzero(r.env_done):
            same_step_reset = True
            assert all(not is_filler(r.obs[a], e) for a in group.agents)  # next episode's first obs
        assert all(ep["length"] <= KAZ["max_cycles"] for ep in r.episodes)
        if left_alone and same_step_reset:
            break
    assert left_alone and same_step_reset
    group.close()


def test_knights_archers_zombies_aec_matches_parallel() -> None:
    kaz = knights_archers_zombies()
    aec = PettingZooGroup(lambda: kaz.env(**KAZ), 1, seed=3)
    par = PettingZooGroup(lambda: kaz.parallel_env(**KAZ), 1, seed=3)
    np.testing.assert_array_equal(aec.reset()["knight_0"], par.reset()["knight_0"])
    rng = np.random.default_rng(1)
    for _ in range(60):
        actions = random_actions(par, rng)
        ra, rp = aec.step(actions), par.step(actions)
        for a in par.agents:
            np.testing.assert_array_equal(ra.obs[a], rp.obs[a])
            np.testing.assert_array_equal(ra.valid[a], rp.valid[a])
            np.testing.assert_array_equal(ra.reward[a], rp.reward[a])
        assert ra.episodes == rp.episodes
