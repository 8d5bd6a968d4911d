"""The hide-and-seek contract, checked on every variant (lite and MuJoCo) with the same tests.

Hand-built scenes (``scene.Scene`` + ``load_scene``) put agents exactly where a rule can be seen at
work; the MuJoCo variant is skipped only while it (or MuJoCo) is not installed.
"""
from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from srl_lab.api.env import EnvGroup
from srl_lab.envs.hide_and_seek import spec
from srl_lab.envs.hide_and_seek.scene import HIDER, SEEKER, Agent, Box, Scene, Wall, outer_walls

VARIANTS = ["lite", "mujoco"]
STILL = [5, 5, 5, 0, 0]
FULL_FORCE = 10  # top force bucket: +90 N
OBJ_LOCK, TEAM_LOCK = 14, 13  # columns of box_obs (scene.ENTITY_FEATURES)
HYPOTHESIS = settings(max_examples=8, deadline=None, derandomize=True,
                      suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _mujoco_available() -> bool:
    return (importlib.util.find_spec("mujoco") is not None
            and importlib.util.find_spec("srl_lab.envs.hide_and_seek.mujoco_env") is not None)


def make(variant: str, num_envs: int = 1, **kwargs) -> EnvGroup:
    """A reset env of ``variant`` (the MuJoCo one skips the test when unavailable)."""
    if variant == "lite":
        from srl_lab.envs.hide_and_seek.lite import HideAndSeekLite as cls
    else:
        if not _mujoco_available():
            pytest.skip("the MuJoCo variant (srl_lab[mujoco]) is not available")
        cls = importlib.import_module("srl_lab.envs.hide_and_seek.mujoco_env").HideAndSeekMujoco
    kwargs.setdefault("seed", 0)
    env = cls(num_envs, **kwargs)
    env.reset()
    return env


@pytest.fixture(params=VARIANTS)
def variant(request) -> str:
    return request.param


def play_t(env) -> int:
    """A scene time just after preparation (seekers act, rewards count)."""
    return round(spec.PREP_FRACTION * env.horizon) + 1


def act(env, *per_agent, n: int | None = None) -> np.ndarray:
    """Actions for every env: the same ``per_agent`` rows in each."""
    a = np.asarray(per_agent, np.int64)
    return np.broadcast_to(a, (n or env.num_envs, *a.shape)).copy()


def positions(obs: dict[str, np.ndarray]) -> np.ndarray:
    return obs["observation_self"][..., :2]


# --- spaces, keys, shapes -------------------------------------------------------------------
@pytest.mark.parametrize("kwargs,message", [
    ({"scenario": "maze"}, "scenario must be one of ('quadrant', 'randomwalls'), got 'maze'"),
    ({"n_hiders": 4}, "n_hiders must be one of (1, 2, 3), got 4"),
    ({"n_seekers": 0}, "n_seekers must be one of (1, 2, 3), got 0"),
    ({"n_boxes": -1}, "n_boxes and n_ramps must be at least 0, got -1 and 1"),
    ({"hider_spawn": "corner"}, "hider_spawn must be one of ('room', 'anywhere'), got 'corner'"),
    ({"action_repeat": 3}, "action_repeat must be a positive divisor of the horizon (80 steps) and of its "
                           "preparation phase (32 steps), got 3"),
    ({"action_repeat": 0}, "action_repeat must be a positive divisor of the horizon (80 steps) and of its "
                           "preparation phase (32 steps), got 0"),
    ({"action_repeat": 2.0}, "action_repeat must be a positive divisor of the horizon (80 steps) and of its "
                             "preparation phase (32 steps), got 2.0"),
])
def test_both_variants_refuse_bad_arguments_with_the_same_message(variant: str, kwargs, message: str) -> None:
    with pytest.raises(ValueError) as error:
        make(variant, **kwargs)
    assert str(error.value) == message


def test_both_variants_refuse_bad_actions_with_the_same_message(variant: str) -> None:
    env = make(variant, 2, n_hiders=1, n_seekers=1)
    with pytest.raises(ValueError) as error:
        env.step(np.zeros((2, 3, 5), np.int64))
    assert str(error.value) == "actions must have shape (2, 2, 5), got (2, 3, 5)"
    with pytest.raises(ValueError) as error:
        env.step(act(env, [11, 5, 5, 0, 0], STILL))
    assert str(error.value) == "actions out of range for MultiDiscrete(11, 11, 11, 2, 2)"
    assert env.team_names == ("hider", "seeker") and env.agent_teams == (HIDER, SEEKER)


def test_spaces_keys_shapes_and_dtypes(variant: str) -> None:
    env = make(variant, 2, n_hiders=2, n_seekers=1, n_boxes=3, n_ramps=1)
    layout = spec.Layout(2, 1, 3, 1)
    shapes = spec.observation_shapes(layout)
    assert env.num_agents == 3 and env.action_space.nvec.tolist() == list(spec.ACTION_NVEC)
    assert set(env.observation_space.spaces) == set(shapes)
    obs = env.reset(seed=1)
    result = env.step(np.random.default_rng(0).integers(0, 11, (2, 3, 5)) % env.action_space.nvec)
    for o in (obs, result.obs):
        assert set(o) == set(shapes)
        for key, shape in shapes.items():
            assert o[key].shape == (2, 3, *shape) and o[key].dtype == spec.OBS_DTYPE, key
            assert env.observation_space[key].shape == shape
            assert env.observation_space[key].dtype == spec.OBS_DTYPE
            for agent in range(3):
                assert env.observation_space[key].contains(o[key][0, agent]), key
    assert result.reward.shape == (2, 3) and result.reward.dtype == np.float32
    assert result.terminated.shape == result.truncated.shape == (2,)
    assert result.terminated.dtype == result.truncated.dtype == np.bool_


def test_both_variants_share_keys_shapes_dtypes_and_statistics() -> None:
    envs = [make(v, 1, scenario="randomwalls", n_hiders=3, n_seekers=3, horizon=6) for v in VARIANTS]
    results = []
    for env in envs:
        obs = env.reset(seed=2)
        for _ in range(6):
            result = env.step(act(env, *[STILL] * 6))
        results.append((obs, result))
    (obs_a, res_a), (obs_b, res_b) = results
    assert {k: (v.shape, v.dtype) for k, v in obs_a.items()} == {k: (v.shape, v.dtype) for k, v in obs_b.items()}
    assert envs[0].observation_space == envs[1].observation_space
    assert envs[0].action_space == envs[1].action_space
    for res in (res_a, res_b):
        assert res.terminated.all() and not res.truncated.any()
        assert res.final_obs is not None and len(res.episodes) == 1
    assert set(res_a.episodes[0]) == set(res_b.episodes[0]) == {*spec.EPISODE_STAT_KEYS, "return", "length"}
    assert res_a.episodes[0]["length"] == res_b.episodes[0]["length"] == 6


def test_the_critics_clock_counts_the_horizon_and_restarts_with_each_episode(variant: str) -> None:
    """``episode_time`` is t / horizon: 0 after a reset, 1 in the final observation, 0 after the autoreset."""
    env = make(variant, 2, horizon=5)
    obs = env.reset(seed=0)
    np.testing.assert_array_equal(obs[spec.CLOCK_KEY], np.zeros((2, env.num_agents, 1)))
    for t in range(1, 6):
        result = env.step(act(env, *[STILL] * env.num_agents, n=2))
        if t < 5:
            np.testing.assert_allclose(result.obs[spec.CLOCK_KEY], t / 5)
    assert result.terminated.all()
    np.testing.assert_allclose(result.final_obs[spec.CLOCK_KEY], 1.0)
    np.testing.assert_array_equal(result.obs[spec.CLOCK_KEY], 0.0)
    scene = dataclasses.replace(env.snapshot(0), t=3)
    np.testing.assert_allclose(env.load_scene(0, scene)[spec.CLOCK_KEY], 3 / 5)


# --- preparation phase and rewards ----------------------------------------------------------
def test_seekers_frozen_and_rewards_zero_in_preparation(variant: str) -> None:
    env = make(variant, 2, n_hiders=1, n_seekers=2, n_boxes=1, n_ramps=1)
    hider_pen = [Wall(2.0, 0.0, 2.0, 2.0), Wall(0.0, 2.0, 2.0, 2.0)]  # so it cannot bump the seekers
    scene = Scene(agents=[Agent(1.0, 1.0, 0.0, HIDER), Agent(4.0, 4.5, 1.0, SEEKER), Agent(4.8, 3.5, 2.0, SEEKER)],
                  walls=outer_walls() + hider_pen, boxes=[Box(1.0, 4.5)])
    start = [env.load_scene(e, scene) for e in range(2)]
    rng = np.random.default_rng(0)
    prep = round(spec.PREP_FRACTION * env.horizon)
    for _ in range(prep):
        hider = rng.integers(0, spec.ACTION_NVEC)
        seekers = rng.integers(0, spec.ACTION_NVEC, (2, 5))
        actions = np.stack([np.stack([hider, *seekers]), np.stack([hider, STILL, STILL])])
        result = env.step(actions)
        assert np.all(result.reward == 0.0)
        for e in range(2):
            np.testing.assert_allclose(positions(result.obs)[e, 1:], positions(start[e])[1:], atol=1e-3)
    # seekers' actions were ignored: both envs (different seeker actions) stayed identical
    np.testing.assert_allclose(result.obs["observation_self"][0], result.obs["observation_self"][1], atol=1e-5)
    result = env.step(act(env, STILL, [FULL_FORCE, 5, 5, 0, 0], STILL))  # preparation is over
    assert np.all(result.reward != 0.0)
    seeker_speed = result.obs["observation_self"][0, 1, 4]
    assert seeker_speed > 1.0


def test_team_rewards_are_zero_sum_and_zero_in_preparation(variant: str) -> None:
    env = make(variant, 2, scenario="quadrant", horizon=40, seed=3)
    rng = np.random.default_rng(1)
    nh = env.layout.n_hiders
    for t in range(40):
        result = env.step(rng.integers(0, spec.ACTION_NVEC, (2, env.num_agents, 5)))
        r = result.reward
        if t < 16:
            assert np.all(r == 0.0)
            continue
        assert np.all(np.isin(r, (-1.0, 1.0)))  # the quadrant's walls keep everyone in bounds
        assert np.all(r[:, :nh] == r[:, :1]) and np.all(r[:, nh:] == -r[:, :1])
        assert np.all(r.sum(axis=1) == 0.0)


def test_out_of_bounds_penalty(variant: str) -> None:
    env = make(variant, 1, scenario="quadrant", n_hiders=2, n_seekers=1, n_boxes=1, n_ramps=1)
    t = play_t(env)
    lo, hi = 0.1, 5.9  # the quadrant's play area
    # everyone looks away from everyone: hiders hidden (+1), the seeker -1, except who is outside
    scene = Scene(agents=[Agent(lo - 0.05, 3.0, math.pi, HIDER), Agent(2.0, 2.0, math.pi, HIDER),
                          Agent(4.0, 4.0, 0.0, SEEKER)], boxes=[Box(1.0, 5.0)], t=t)
    env.load_scene(0, scene)
    np.testing.assert_array_equal(env.step(act(env, STILL, STILL, STILL)).reward[0], [-10.0, 1.0, -1.0])
    scene = Scene(agents=[Agent(2.0, 3.0, math.pi, HIDER), Agent(2.0, 2.0, math.pi, HIDER),
                          Agent(hi + 0.05, 4.0, 0.0, SEEKER)], boxes=[Box(1.0, 5.0)], t=t)
    env.load_scene(0, scene)
    np.testing.assert_array_equal(env.step(act(env, STILL, STILL, STILL)).reward[0], [1.0, 1.0, -10.0])
    # quadrant: a box outside the area costs everyone 10
    scene = Scene(agents=scene.agents[:2] + [Agent(4.0, 4.0, 0.0, SEEKER)], boxes=[Box(3.0, hi + 0.4)], t=t)
    env.load_scene(0, scene)
    np.testing.assert_array_equal(env.step(act(env, STILL, STILL, STILL)).reward[0], [-10.0, -10.0, -10.0])
    # randomwalls: the area is an 18 m square centred on the floor
    env = make(variant, 1, scenario="randomwalls", n_hiders=1, n_seekers=1, n_boxes=1, n_ramps=1)
    scene = Scene(agents=[Agent(-1.0, 3.0, math.pi, HIDER), Agent(12.5, 3.0, 0.0, SEEKER)], t=play_t(env))
    env.load_scene(0, scene)
    np.testing.assert_array_equal(env.step(act(env, STILL, STILL)).reward[0], [1.0, -10.0])


# --- locks and grabs -------------------------------------------------------------------------
def _lock_env(variant: str):
    env = make(variant, 1, n_hiders=2, n_seekers=1, n_boxes=1, n_ramps=1)
    return env, play_t(env)


def test_only_the_owning_team_unlocks(variant: str) -> None:
    env, t = _lock_env(variant)
    far_hider = Agent(0.6, 0.6, math.pi, HIDER)
    # a seeker right at a hider-locked box cannot unlock it, whatever it outputs
    scene = Scene(agents=[far_hider, Agent(0.6, 1.2, math.pi, HIDER), Agent(2.5, 3.0, 0.0, SEEKER)],
                  walls=outer_walls(), boxes=[Box(3.0, 3.0, locked_by=HIDER)], t=t)
    env.load_scene(0, scene)
    for lock in (0, 1, 0):
        obs = env.step(act(env, [5, 5, 5, 0, 1], [5, 5, 5, 0, 1], [5, 5, 5, 0, lock])).obs
        assert obs["box_obs"][0, 2, 0, OBJ_LOCK] == 1.0 and obs["box_obs"][0, 2, 0, TEAM_LOCK] == 0.0
        assert obs["box_obs"][0, 0, 0, TEAM_LOCK] == 1.0
    # a hider there outputting 0 unlocks it, even while the seeker asks to lock (unlock wins)
    scene = Scene(agents=[far_hider, Agent(2.5, 3.0, 0.0, HIDER), Agent(3.0, 2.5, math.pi / 2, SEEKER)],
                  walls=outer_walls(), boxes=[Box(3.0, 3.0, locked_by=HIDER)], t=t)
    env.load_scene(0, scene)
    obs = env.step(act(env, [5, 5, 5, 0, 1], [5, 5, 5, 0, 0], [5, 5, 5, 0, 1])).obs
    assert obs["box_obs"][0, 0, 0, OBJ_LOCK] == 0.0
    # and once unlocked, the seeker's lock makes it the seekers' box
    obs = env.step(act(env, [5, 5, 5, 0, 1], [5, 5, 5, 0, 0], [5, 5, 5, 0, 1])).obs
    assert obs["box_obs"][0, 2, 0, TEAM_LOCK] == 1.0 and obs["box_obs"][0, 1, 0, TEAM_LOCK] == 0.0


@pytest.mark.parametrize("x, heading, can", [
    (2.5, 0.0, True),  # facing the box, gap 0.1 m
    (2.5, math.pi, False),  # the box is behind it: not visible
    (2.3, 0.0, False),  # gap 0.3 m: out of reach
])
def test_lock_needs_visibility_and_reach(variant: str, x: float, heading: float, can: bool) -> None:
    env, t = _lock_env(variant)
    scene = Scene(agents=[Agent(x, 3.0, heading, HIDER), Agent(0.6, 0.6, math.pi, HIDER),
                          Agent(5.0, 5.0, 0.0, SEEKER)], walls=outer_walls(), boxes=[Box(3.0, 3.0)], t=t)
    env.load_scene(0, scene)
    obs = env.step(act(env, [5, 5, 5, 0, 1], STILL, STILL)).obs
    assert obs["box_obs"][0, 0, 0, OBJ_LOCK] == float(can)
    if can:  # a locked box does not move, even pushed at full force
        for _ in range(10):
            obs = env.step(act(env, [FULL_FORCE, 5, 5, 0, 1], STILL, STILL)).obs
        np.testing.assert_allclose(obs["box_obs"][0, 0, 0, :2], [3.0, 3.0], atol=0.02)


@pytest.mark.parametrize("x, heading, can", [
    (2.5, 0.0, True),  # facing the box, gap 0.1 m
    (2.5, math.pi, False),  # the box is behind it
    (2.3, 0.0, False),  # gap 0.3 m
])
def test_grab_needs_visibility_and_reach(variant: str, x: float, heading: float, can: bool) -> None:
    env, t = _lock_env(variant)
    scene = Scene(agents=[Agent(x, 3.0, heading, HIDER), Agent(0.6, 0.6, math.pi, HIDER),
                          Agent(5.0, 5.0, 0.0, SEEKER)], walls=outer_walls(), boxes=[Box(3.0, 3.0)], t=t)
    env.load_scene(0, scene)
    for _ in range(8):  # hold grab and pull away from the box
        obs = env.step(act(env, [0, 5, 5, 1, 0], STILL, STILL)).obs
    assert positions(obs)[0, 0, 0] < x - 0.5  # the agent did move away
    moved = 3.0 - obs["box_obs"][0, 0, 0, 0]
    assert (moved > 0.3) if can else (abs(moved) < 0.02)


# --- sight -----------------------------------------------------------------------------------
@HYPOTHESIS
@given(heading=st.floats(-math.pi, math.pi),
       offset=st.floats(-math.pi, math.pi).filter(lambda a: abs(abs(a) - spec.VIEW_HALF_ANGLE) > 0.05),
       dist=st.floats(0.6, 2.0))
def test_view_cone_geometry(variant: str, heading: float, offset: float, dist: float) -> None:
    env = _cone_env(variant)
    angle = heading + offset
    target = (3.0 + dist * math.cos(angle), 3.0 + dist * math.sin(angle))
    inside = float(abs(offset) < spec.VIEW_HALF_ANGLE)
    hider = Agent(3.0, 3.0, heading, HIDER)
    # the seeker at the tested bearing (facing straight away); the box too far to be in the way
    obs = env.load_scene(0, Scene(agents=[hider, Agent(*target, angle, SEEKER)], boxes=[Box(5.5, 0.5)],
                                  t=play_t(env)))
    assert obs["mask_aa_obs"][0, 0] == inside and obs["mask_aa_obs"][1, 0] == 0.0
    assert obs["mask_aa_obs_spoof"][0, 0] == 1.0
    assert obs["mask_ar_obs_spoof"][0, 0] == 0.0 and obs["mask_ar_obs"][0, 0] == 0.0  # no ramp: padding
    # a box at the tested bearing; the seeker too far to be in the way
    obs = env.load_scene(0, Scene(agents=[hider, Agent(0.5, 5.5, 0.0, SEEKER)], boxes=[Box(*target, 0.3, 0.3)],
                                  t=play_t(env)))
    assert obs["mask_ab_obs"][0, 0] == inside and obs["mask_ab_obs_spoof"][0, 0] == 1.0


_CONE_ENVS: dict[str, EnvGroup] = {}


def _cone_env(variant: str) -> EnvGroup:
    if variant not in _CONE_ENVS:
        _CONE_ENVS[variant] = make(variant, 1, n_hiders=1, n_seekers=1, n_boxes=1, n_ramps=1)
    return _CONE_ENVS[variant]


def test_wall_blocks_line_of_sight(variant: str) -> None:
    env = make(variant, 1, n_hiders=1, n_seekers=1, n_boxes=1, n_ramps=1)
    agents = [Agent(2.0, 3.0, 0.0, HIDER), Agent(4.0, 3.0, math.pi, SEEKER)]
    open_obs = env.load_scene(0, Scene(agents=agents, boxes=[Box(4.0, 3.6)], t=play_t(env)))
    assert open_obs["mask_aa_obs"][0, 0] == 1.0 and open_obs["mask_aa_obs"][1, 0] == 1.0
    assert open_obs["mask_ab_obs"][0, 0] == 1.0
    wall = Wall(3.0, 1.5, 3.0, 4.5)
    walled = env.load_scene(0, Scene(agents=agents, walls=[wall], boxes=[Box(4.0, 3.6)], t=play_t(env)))
    assert walled["mask_aa_obs"][0, 0] == 0.0 and walled["mask_aa_obs"][1, 0] == 0.0
    assert walled["mask_ab_obs"][0, 0] == 0.0
    ray_x = 0  # lidar ray 0 points along +x from the hider
    assert walled["lidar"][0, ray_x] < 1.0 < open_obs["lidar"][0, ray_x]
    # hidden behind the wall, hiders earn +1
    assert env.step(act(env, STILL, STILL)).reward[0].tolist() == [1.0, -1.0]


# --- walls hold -------------------------------------------------------------------------------
def _assert_inside(obs: dict[str, np.ndarray], lo: float, hi: float) -> None:
    """Every agent's centre within [lo, hi]² (the inner faces of the walls: never inside one)."""
    pos = positions(obs)
    assert np.all(pos >= lo) and np.all(pos <= hi), pos


def test_agents_driven_into_walls_stay_in_the_arena(variant: str) -> None:
    env = make(variant, 1, scenario="quadrant", n_hiders=3, n_seekers=3, n_boxes=2, n_ramps=1)
    scene = Scene(agents=[Agent(3.0 + 0.4 * i, 1.0, 0.0, HIDER) for i in range(3)]
                  + [Agent(1.0, 3.0 + 0.4 * i, 0.0, SEEKER) for i in range(3)],
                  walls=outer_walls(), t=play_t(env))
    env.load_scene(0, scene)
    inner = spec.WALL_THICKNESS / 2
    top_speed = 0.0
    for direction in ([0, 5], [10, 5], [5, 10], [10, 10], [0, 0]):  # -x, +x, +y, corner, corner
        for _ in range(25):
            obs = env.step(act(env, *[[*direction, 5, 0, 0]] * 6)).obs
            top_speed = max(top_speed, float(np.abs(obs["observation_self"][0, :, 4:6]).max()))
            _assert_inside(obs, inner, spec.FLOOR_SIZE - inner)
    assert top_speed > 5.0  # they really hit the walls fast


@HYPOTHESIS
@given(seed=st.integers(0, 2**16), steps=st.integers(10, 40))
def test_random_actions_never_leave_a_closed_room(variant: str, seed: int, steps: int) -> None:
    env = _room_env(variant)
    room = [Wall(2.0, 2.0, 4.0, 2.0), Wall(2.0, 4.0, 4.0, 4.0), Wall(2.0, 2.0, 2.0, 4.0), Wall(4.0, 2.0, 4.0, 4.0)]
    scene = Scene(agents=[Agent(2.5, 2.5, 0.0, HIDER), Agent(3.5, 3.5, 1.0, SEEKER)], walls=room,
                  boxes=[Box(3.0, 3.0)], t=play_t(env))
    env.load_scene(0, scene)
    rng = np.random.default_rng(seed)
    lo = 2.0 + spec.WALL_THICKNESS / 2
    for _ in range(steps):
        forces = rng.choice([0, 10], size=(1, 2, 2))  # always full force, towards the walls
        actions = np.concatenate([forces, rng.integers(0, 11, (1, 2, 1)), rng.integers(0, 2, (1, 2, 2))], -1)
        obs = env.step(actions).obs
        _assert_inside(obs, lo, 6.0 - lo)
        box = obs["box_obs"][0, 0, 0, :2]
        assert np.all(box > 2.0) and np.all(box < 4.0)


_ROOM_ENVS: dict[str, EnvGroup] = {}


def _room_env(variant: str) -> EnvGroup:
    if variant not in _ROOM_ENVS:
        _ROOM_ENVS[variant] = make(variant, 1, n_hiders=1, n_seekers=1, n_boxes=1, n_ramps=1)
    return _ROOM_ENVS[variant]


# --- determinism and PettingZoo ------------------------------------------------------------------
@HYPOTHESIS
@given(seed=st.integers(0, 2**31 - 1))
def test_deterministic_under_a_seed(variant: str, seed: int) -> None:
    runs = []
    for _ in range(2):
        env = make(variant, 2, scenario="randomwalls", n_hiders=2, n_seekers=2, n_boxes=4, horizon=12, seed=seed)
        rng = np.random.default_rng(seed)
        trace = [env.reset()]
        for _ in range(14):  # crosses an episode boundary
            result = env.step(rng.integers(0, spec.ACTION_NVEC, (2, 4, 5)))
            trace += [result.obs, {"reward": result.reward}]
        runs.append(trace)
    for a, b in zip(*runs):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)


@HYPOTHESIS
@given(seed=st.integers(0, 2**31 - 1), repeat=st.sampled_from([2, 4]))
def test_action_repeat_acts_for_several_env_steps_and_sums_their_rewards(variant: str, seed: int,
                                                                         repeat: int) -> None:
    """One decision at ``action_repeat=k`` is k env steps of that action: the same observations,
    rewards summed, and the same episode statistics (counted in env steps) where an episode ends."""
    kwargs = dict(n_hiders=1, n_seekers=1, horizon=20, seed=seed)  # 8 steps of preparation
    decisions, steps = make(variant, 2, action_repeat=repeat, **kwargs), make(variant, 2, **kwargs)
    rng = np.random.default_rng(seed)
    ended = 0
    for _ in range(24 // repeat):  # crosses an episode boundary
        actions = rng.integers(0, spec.ACTION_NVEC, (2, 2, 5))
        one = decisions.step(actions)
        several = [steps.step(actions) for _ in range(repeat)]
        for key in one.obs:
            np.testing.assert_allclose(one.obs[key], several[-1].obs[key], atol=1e-6, err_msg=key)
        np.testing.assert_allclose(one.reward, sum(r.reward for r in several), atol=1e-5)
        assert [r.terminated.any() for r in several[:-1]] == [False] * (repeat - 1)
        assert one.episodes == several[-1].episodes
        ended += len(one.episodes)
    assert ended == 2


def test_pettingzoo_parallel_api(variant: str) -> None:
    from pettingzoo.test import parallel_api_test

    from srl_lab.envs.hide_and_seek.parallel import HideAndSeekParallel

    env = make(variant, 1, horizon=12)
    par = HideAndSeekParallel(env)
    parallel_api_test(par, num_cycles=30)
    obs, _ = par.reset(seed=1)
    assert par.agents == ["hider_0", "hider_1", "seeker_0", "seeker_1"]
    assert set(obs["seeker_1"]) == set(env.observation_space.spaces)


@pytest.mark.parametrize("variant", VARIANTS)
def test_quadrant_hiders_start_in_the_room_unless_spawned_anywhere(variant: str) -> None:
    """Seekers always start outside the 3 m room; hiders inside it, or anywhere with hider_spawn."""
    room = spec.FLOOR_SIZE / 2

    def starts(hider_spawn: str) -> tuple[np.ndarray, np.ndarray]:
        env = make(variant, num_envs=24, n_hiders=1, n_seekers=1, hider_spawn=hider_spawn)
        obs = env.reset(seed=3)
        xy = obs["observation_self"][:, :, :2]
        env.close()
        inside = (xy[..., 0] > room) & (xy[..., 1] > room)
        return inside[:, 0], inside[:, 1]

    hiders, seekers = starts("room")
    assert hiders.all() and not seekers.any()
    hiders, seekers = starts("anywhere")
    assert not hiders.all() and not seekers.any()
    with pytest.raises(ValueError, match="hider_spawn"):
        make(variant, hider_spawn="corner")
