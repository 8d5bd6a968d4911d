"""MuJoCo-specific checks of the faithful hide-and-seek variant (the shared contract is tested in
``test_hide_and_seek_invariants``)."""
from __future__ import annotations

import time

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

from srl_lab.envs.hide_and_seek import spec
from srl_lab.envs.hide_and_seek.mujoco_env import HideAndSeekMujoco
from srl_lab.envs.hide_and_seek.mujoco_layout import generate
from srl_lab.envs.hide_and_seek.mujoco_model import FLOOR_GROUP, build_spec
from srl_lab.envs.hide_and_seek.scene import (
    HIDER,
    SEEKER,
    Agent,
    Box,
    Ramp,
    Scene,
    Wall,
    outer_walls,
)

STILL = [5, 5, 5, 0, 0]


def one_v_one(**kwargs) -> HideAndSeekMujoco:
    env = HideAndSeekMujoco(1, n_hiders=1, n_seekers=1, seed=0, **kwargs)
    env.reset()
    return env


def play_time(env: HideAndSeekMujoco) -> int:
    """A scene time after the preparation phase, so seekers act too."""
    return round(spec.PREP_FRACTION * env.horizon) + 1


def test_full_scene_model_is_built_in_code_without_files() -> None:
    scene, _ = generate(np.random.default_rng(0), "randomwalls", spec.Layout(3, 3, 9, 2))
    s = build_spec(scene)
    assert [m.file for m in s.meshes] == [""]  # the ramp wedge comes from vertices given in code
    model = s.compile()
    assert model.opt.timestep == spec.SUBSTEP_DT and model.opt.gravity[2] == -50.0
    assert model.mesh_vertnum[0] == 6 and model.nbody == 1 + 6 + len(scene.boxes) + 2
    sphere = model.geom_type == mujoco.mjtGeom.mjGEOM_SPHERE
    assert sphere.sum() == 6 and np.allclose(model.geom_size[sphere, 0], spec.AGENT_RADIUS)
    assert np.allclose(model.body_mass[1:], 1.0)
    assert np.allclose(model.actuator_gear[:, 0], spec.FORCE_SCALE) and model.nu == 18
    assert model.neq == 6 * (len(scene.boxes) + 2) and model.geom_group[0] == FLOOR_GROUP


def test_grab_activates_a_weld_that_carries_the_box() -> None:
    env = one_v_one()
    scene = Scene(agents=[Agent(2.0, 3.0, 0.0, HIDER), Agent(5.0, 5.0, 0.0, SEEKER)],
                  walls=outer_walls(), boxes=[Box(2.5, 3.0)])
    env.load_scene(0, scene)
    ep = env._episodes[0]
    weld = ep.world.weld[0, 0]
    env.step(np.array([[[5, 5, 5, 1, 0], STILL]]))
    assert ep.world.data.eq_active[weld] and ep.held[0] == 0
    for _ in range(10):  # pull away from the box at full force, still holding it
        env.step(np.array([[[0, 5, 5, 1, 0], STILL]]))
    kin = ep.kin
    assert kin.agent_pos[0, 0] < 1.5
    assert kin.obj_pos[0, 0] - kin.agent_pos[0, 0] == pytest.approx(0.5, abs=0.02)
    env.step(np.array([[STILL, STILL]]))
    assert not ep.world.data.eq_active[weld] and ep.held[0] == -1


def test_grab_needs_reach() -> None:
    env = one_v_one()
    env.load_scene(0, Scene(agents=[Agent(2.0, 3.0, 0.0, HIDER), Agent(5.0, 5.0, 0.0, SEEKER)],
                            walls=outer_walls(), boxes=[Box(2.8, 3.0)]))  # gap 0.4 m
    env.step(np.array([[[5, 5, 5, 1, 0], STILL]]))
    assert not env._episodes[0].world.data.eq_active.any()


def test_locked_box_does_not_move_under_pushing() -> None:
    env = one_v_one()
    scene = Scene(agents=[Agent(2.5, 3.0, 0.0, HIDER), Agent(3.0, 3.5, -np.pi / 2, SEEKER)],
                  walls=outer_walls(), boxes=[Box(3.0, 3.0)], t=play_time(env))
    obs = env.load_scene(0, scene)
    assert obs["mask_ab_obs"][:, 0].tolist() == [1.0, 1.0]
    result = env.step(np.array([[[5, 5, 5, 0, 1], STILL]]))  # the hider locks the box
    box = result.obs["box_obs"][0, :, 0]
    assert box[:, 14].tolist() == [1.0, 1.0]  # obj_lock, seen by both
    assert box[:, 13].tolist() == [1.0, 0.0] and box[:, 12].tolist() == [1.0, 0.0]  # team / you
    start = env._episodes[0].kin.obj_pos[0].copy()
    for _ in range(40):  # both push with full force; the seeker outputs 0 but cannot unlock
        result = env.step(np.array([[[10, 5, 5, 0, 1], [5, 0, 5, 0, 0]]]))
    ep = env._episodes[0]
    assert ep.owner[0] == HIDER
    assert np.abs(ep.kin.obj_pos[0] - start).max() < 1e-3
    assert np.abs(ep.kin.obj_yaw[0]) < 1e-3


def test_walls_block_sight_only_with_flg_static() -> None:
    env = one_v_one()
    agents = [Agent(2.0, 3.0, 0.0, HIDER), Agent(4.0, 3.0, np.pi, SEEKER)]
    open_obs = env.load_scene(0, Scene(agents=agents, walls=outer_walls()))
    assert open_obs["mask_aa_obs"][:, 0].tolist() == [1.0, 1.0]
    walled = env.load_scene(0, Scene(agents=agents, walls=outer_walls() + [Wall(3.0, 2.0, 3.0, 4.0)]))
    assert walled["mask_aa_obs"][:, 0].tolist() == [0.0, 0.0]
    world = env._episodes[0].world
    origin, towards = np.array([2.0, 3.0, spec.AGENT_RADIUS]), np.array([2.0, 0.0, 0.0])
    geom = np.zeros(1, dtype=np.int32)
    mujoco.mj_ray(world.model, world.data, origin, towards, None, 0, int(world.agent_body[0]), geom)
    assert world.model.geom_bodyid[geom[0]] == world.agent_body[1]  # flg_static=0: walls transparent
    mujoco.mj_ray(world.model, world.data, origin, towards, None, 1, int(world.agent_body[0]), geom)
    assert world.model.geom_bodyid[geom[0]] == 0  # flg_static=1: the wall stops the ray
    assert walled["lidar"][0, 0] == pytest.approx(1.0 - spec.WALL_THICKNESS / 2, abs=1e-3)  # from the centre


def test_agents_do_not_tunnel_through_walls() -> None:
    env = one_v_one()
    env.load_scene(0, Scene(agents=[Agent(2.0, 3.0, 0.0, HIDER, vx=9.0), Agent(5.0, 5.0, 0.0, SEEKER)],
                            walls=outer_walls() + [Wall(3.0, 0.0, 3.0, 6.0)]))
    for _ in range(60):
        env.step(np.array([[[10, 5, 5, 0, 0], STILL]]))
        assert env._episodes[0].kin.agent_pos[0, 0] < 3.0 - 0.05


def test_a_ramp_against_a_wall_lets_an_agent_climb_over_it() -> None:
    """The 3-D part the lite variant leaves out: a 45° wedge lifts an agent over a 0.5 m wall."""
    env = one_v_one(horizon=240)
    wall = Wall(3.0, 0.0, 3.0, 6.0)
    agents = [Agent(1.5, 3.0, 0.0, HIDER), Agent(5.5, 5.5, 0.0, SEEKER)]
    env.load_scene(0, Scene(agents=agents, walls=outer_walls() + [wall], ramps=[Ramp(2.7, 3.0, 0.0)], t=40))
    heights = []
    for _ in range(20):
        env.step(np.array([[[10, 5, 5, 0, 0], STILL]]))
        heights.append(env._episodes[0].kin.agent_pos[0, 2])
    assert max(heights) > spec.INTERIOR_WALL_HEIGHT and env._episodes[0].kin.agent_pos[0, 0] > 3.2
    env.load_scene(0, Scene(agents=agents, walls=outer_walls() + [wall], t=40))  # no ramp: stopped
    for _ in range(20):
        env.step(np.array([[[10, 5, 5, 0, 0], STILL]]))
    assert env._episodes[0].kin.agent_pos[0, 0] < 3.0


def test_deterministic_under_a_seed_and_renders() -> None:
    def rollout() -> list[np.ndarray]:
        env = HideAndSeekMujoco(2, scenario="randomwalls", seed=7)
        first = env.reset()
        actions = np.random.default_rng(1).integers(0, spec.ACTION_NVEC, size=(15, 2, 4, 5))
        return [first["box_obs"]] + [env.step(a).obs["box_obs"] for a in actions] + [env.render(1)]

    a, b = rollout(), rollout()
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    frame = a[-1]
    assert frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3


def test_autoreset_reports_final_obs_and_statistics() -> None:
    env = HideAndSeekMujoco(2, horizon=5, seed=3)
    env.reset()
    for _ in range(5):
        result = env.step(np.tile(np.array(STILL), (2, 4, 1)))
    assert result.terminated.all() and not result.truncated.any()  # the horizon ends the game
    assert result.final_obs is not None and result.final_obs["observation_self"].shape == (2, 4, 10)
    assert len(result.episodes) == 2
    assert set(result.episodes[0]) == set(spec.EPISODE_STAT_KEYS) | {"return", "length"}
    assert result.episodes[0]["length"] == 5
    assert result.obs["observation_self"][:, :, 9].max() == 0.0  # the next episode's first step


def test_full_scene_throughput() -> None:
    """The spec's goal is >= 200 env steps per CPU-second for 3v3, 9 boxes, 2 ramps, randomwalls."""
    env = HideAndSeekMujoco(2, scenario="randomwalls", n_hiders=3, n_seekers=3, n_boxes=9, n_ramps=2,
                            seed=0)
    env.reset()
    actions = np.random.default_rng(0).integers(0, spec.ACTION_NVEC, size=(60, 2, 6, 5))
    start = time.process_time()
    for a in actions:
        env.step(a)
    rate = actions.shape[0] * 2 / (time.process_time() - start)
    assert rate >= 200, f"{rate:.0f} env steps per CPU-second"
