"""Lite-only checks: the interpreted fallback, scenario layouts, statistics, strict walls, rendering."""
from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
from collections import deque

import numpy as np
import pytest

from srl_lab.envs.hide_and_seek import spec
from srl_lab.envs.hide_and_seek.lite import HideAndSeekLite
from srl_lab.envs.hide_and_seek.render import TEAM
from srl_lab.envs.hide_and_seek.scene import HIDER, SEEKER, Agent, Box, Scene, Wall, outer_walls

STILL = [5, 5, 5, 0, 0]

_ROLLOUT = """
import sys
import numpy as np
from srl_lab.envs.hide_and_seek import lite_jit
from srl_lab.envs.hide_and_seek.lite import HideAndSeekLite

env = HideAndSeekLite(2, "randomwalls", n_hiders=2, n_seekers=2, n_boxes=4, horizon=3, seed=5)
rng = np.random.default_rng(0)
out = {f"reset/{k}": v for k, v in env.reset().items()}
for step in range(4):  # crosses an episode boundary
    result = env.step(rng.integers(0, 11, (2, 4, 5)) % env.action_space.nvec)
    out.update({f"{step}/{k}": v for k, v in result.obs.items()})
    out[f"{step}/reward"] = result.reward
np.savez(sys.argv[1], numba=lite_jit.NUMBA, **out)
"""


def _rollout(path, numba: bool) -> dict[str, np.ndarray]:
    env = {**os.environ, "SRL_LAB_NUMBA": "1" if numba else "0"}
    subprocess.run([sys.executable, "-c", textwrap.dedent(_ROLLOUT), str(path)], env=env, check=True,
                   timeout=120)
    with np.load(path) as data:
        return dict(data)


def test_interpreted_fallback_matches_numba(tmp_path) -> None:
    compiled = _rollout(tmp_path / "numba.npz", numba=True)
    interpreted = _rollout(tmp_path / "python.npz", numba=False)
    assert compiled.pop("numba") and not interpreted.pop("numba")
    assert compiled.keys() == interpreted.keys()
    for key in compiled:
        np.testing.assert_allclose(interpreted[key], compiled[key], rtol=1e-5, atol=1e-5, err_msg=key)


def _segments(scene: Scene) -> list[tuple[bool, float, float, float]]:
    """Interior walls as (vertical, line coordinate, start, end)."""
    out = []
    for w in scene.walls:
        if w.height > spec.INTERIOR_WALL_HEIGHT:
            continue
        vertical = w.x0 == w.x1
        line, a, b = (w.x0, w.y0, w.y1) if vertical else (w.y0, w.x0, w.x1)
        out.append((vertical, line, min(a, b), max(a, b)))
    return out


def _door_partners(segments: list[tuple[bool, float, float, float]]) -> list[int]:
    """For each segment, how many collinear segments end exactly one door (2 cells) away."""
    door = 2 * spec.CELL
    return [sum(1 for v2, l2, a2, b2 in segments
                if (v2, l2) == (v, line) and (abs(a2 - b - door) < 1e-9 or abs(a - b2 - door) < 1e-9))
            for v, line, a, b in segments]


def test_quadrant_layout_room_doors_and_spawns() -> None:
    env = HideAndSeekLite(64, "quadrant", n_hiders=2, n_seekers=2, n_boxes=2, n_ramps=1, seed=0)
    env.reset()
    room = 15 * spec.CELL
    doors_seen = set()
    for e in range(env.num_envs):
        scene = env.snapshot(e)
        assert sum(w.height == spec.OUTER_WALL_HEIGHT for w in scene.walls) == 4
        segments = _segments(scene)
        assert {(v, line) for v, line, _, _ in segments} == {(True, room), (False, room)}
        for vertical in (True, False):
            wall = [s for s in segments if s[0] == vertical]
            assert min(s[2] for s in wall) == room and max(s[3] for s in wall) == spec.FLOOR_SIZE
            covered = sum(s[3] - s[2] for s in wall)
            assert math.isclose(covered, 3.0) or math.isclose(covered, 3.0 - 2 * spec.CELL)
        doors = sum(_door_partners(segments)) // 2
        assert doors in (1, 2)
        doors_seen.add(doors)
        for agent in scene.agents:  # hiders in the room, seekers outside
            assert (agent.x > room and agent.y > room) == (agent.team == HIDER)
        for team in (HIDER, SEEKER):
            a, b = [ag for ag in scene.agents if ag.team == team]
            assert math.hypot(a.x - b.x, a.y - b.y) <= 0.5 + 1e-9
        assert len(scene.boxes) == 2 and all(b.size_x == b.size_y == spec.BOX_SIZE for b in scene.boxes)
        assert all(b.x > room and b.y > room for b in scene.boxes)
        assert len(scene.ramps) == 1 and not (scene.ramps[0].x > room and scene.ramps[0].y > room)
    assert doors_seen == {1, 2}


def _connected(scene: Scene) -> bool:
    """Whether every free 0.1 m cell of the floor is reachable from every other one."""
    n = 60
    centres = (np.arange(n) + 0.5) * spec.FLOOR_SIZE / n
    gx, gy = np.meshgrid(centres, centres, indexing="ij")
    free = np.ones((n, n), bool)
    for w in scene.walls:
        x0, y0, x1, y1 = w.rect()
        free &= ~((gx > x0 - 0.05) & (gx < x1 + 0.05) & (gy > y0 - 0.05) & (gy < y1 + 0.05))
    start = tuple(np.argwhere(free)[0])
    seen = {start}
    todo = deque([start])
    while todo:
        i, j = todo.popleft()
        for k in ((i + 1, j), (i - 1, j), (i, j + 1), (i, j - 1)):
            if 0 <= k[0] < n and 0 <= k[1] < n and free[k] and k not in seen:
                seen.add(k)
                todo.append(k)
    return len(seen) == free.sum()


def test_randomwalls_layout_rooms_doors_and_outer_walls() -> None:
    env = HideAndSeekLite(120, "randomwalls", n_hiders=3, n_seekers=3, n_boxes=9, n_ramps=2, seed=1)
    env.reset()
    outer, rooms, box_counts, elongated = 0, set(), set(), 0
    for e in range(env.num_envs):
        scene = env.snapshot(e)
        n_outer = sum(w.height == spec.OUTER_WALL_HEIGHT for w in scene.walls)
        assert n_outer in (0, 4)
        outer += n_outer == 4
        segments = _segments(scene)
        assert len(segments) % 2 == 0 and _door_partners(segments) == [1] * len(segments)
        rooms.add(len(segments) // 2 + 1)  # every split adds a room and one wall with one door
        assert _connected(scene)
        box_counts.add(len(scene.boxes))
        elongated += sum(max(b.size_x, b.size_y) == spec.ELONGATED_BOX[0] for b in scene.boxes)
        assert len(scene.ramps) == 2
    assert 0.3 < outer / env.num_envs < 0.7
    assert rooms == {1, 2, 3, 4}
    assert min(box_counts) == 3 and max(box_counts) == 9
    assert elongated > 0


def test_episode_statistics_on_a_hand_built_scene() -> None:
    env = HideAndSeekLite(1, "quadrant", n_hiders=1, n_seekers=1, n_boxes=2, n_ramps=1, horizon=10, seed=0)
    # the hider sits behind a wall, one box is locked, the hider pushes the other for 2 steps
    scene = Scene(agents=[Agent(1.0, 1.0, 0.0, HIDER), Agent(4.0, 4.0, math.pi, SEEKER)],
                  walls=outer_walls() + [Wall(2.0, 0.0, 2.0, 4.0)],
                  boxes=[Box(1.0, 3.0, locked_by=HIDER), Box(1.5, 1.0)])
    env.load_scene(0, scene)
    for step in range(10):
        push = [10, 5, 5, 0, 0] if step < 2 else STILL
        result = env.step(np.array([[push, STILL]]))
    (stats,) = result.episodes
    assert stats["length"] == 10 and stats["hidden_fraction"] == 1.0
    assert stats["hider_return"] == 6.0 and stats["seeker_return"] == -6.0 and stats["return"] == 0.0
    assert stats["num_box_lock_prep"] == stats["num_box_lock"] == 1.0
    assert 0.1 < stats["max_box_move_prep"] <= stats["max_box_move"]
    assert stats["max_ramp_move"] == stats["num_ramp_lock"] == 0.0


def test_held_object_xy_follows_a_carried_box_and_is_nan_for_a_pushed_one() -> None:
    env = HideAndSeekLite(2, "quadrant", n_hiders=1, n_seekers=1, n_boxes=2, n_ramps=0, seed=0)
    env.reset()
    for e in range(2):  # the hider faces a box 0.1 m off its disc, the other box far away
        env.load_scene(e, Scene(agents=[Agent(2.5, 3.0, 0.0, HIDER), Agent(5.0, 5.0, 0.0, SEEKER)],
                                walls=outer_walls(), boxes=[Box(1.0, 1.0), Box(3.0, 3.0)]))
    assert np.isnan(env.held_object_xy()).all()  # nothing is held after loading
    for _ in range(6):  # env 0 grabs and pulls the box away; env 1 pushes it without grabbing
        result = env.step(np.array([[[0, 5, 5, 1, 0], STILL], [[10, 5, 5, 0, 0], STILL]]))
    held = env.held_object_xy()
    carried = result.obs["box_obs"][0, 0, 1, :2]
    assert np.allclose(held[0, 0], carried) and carried[0] < 2.5  # the box came along, left of its start
    assert np.isnan(held[0, 1]).all() and np.isnan(held[1]).all()  # the seeker and the pusher hold none


def test_walls_hold_to_the_millimetre_at_full_speed() -> None:
    env = HideAndSeekLite(1, "randomwalls", n_hiders=3, n_seekers=3, n_boxes=1, n_ramps=1)
    thin = Box.elongated(3.0, 3.0, along_x=False, locked_by=HIDER)  # 0.15 m thick, locked
    barrier = [Wall(3.0, 0.0, 3.0, 2.2), Wall(3.0, 3.8, 3.0, 6.0)]  # the box closes the gap between
    scene = Scene(agents=[Agent(1.0, 1.0 + 0.5 * i, 0.0, HIDER) for i in range(3)]
                  + [Agent(5.0, 1.0 + 0.5 * i, 0.0, SEEKER) for i in range(3)],
                  walls=outer_walls() + barrier, boxes=[thin], t=96)  # 140 steps fit in 240
    env.load_scene(0, scene)
    face = spec.WALL_THICKNESS / 2 + spec.AGENT_RADIUS - 1e-3
    for fx, fy in ((10, 5), (0, 5), (10, 10), (10, 5), (0, 0), (5, 10), (10, 0)):
        for _ in range(20):
            pos = env.step(np.array([[[fx, fy, 5, 0, 1]] * 6])).obs["observation_self"][0, :, :2]  # keep locked
            assert np.all(pos > face) and np.all(pos < spec.FLOOR_SIZE - face)
            assert np.all(pos[:3, 0] < 3.0 - face) and np.all(pos[3:, 0] > 3.0 + face)


def test_load_scene_rejects_scenes_that_do_not_fit() -> None:
    env = HideAndSeekLite(1, n_hiders=1, n_seekers=1, n_boxes=1, n_ramps=1)
    with pytest.raises(ValueError, match="hiders then seekers"):
        env.load_scene(0, Scene(agents=[Agent(1, 1, team=SEEKER), Agent(2, 2, team=HIDER)]))
    with pytest.raises(ValueError, match="boxes"):
        env.load_scene(0, Scene(agents=[Agent(1, 1), Agent(2, 2, team=SEEKER)], boxes=[Box(3, 3), Box(4, 4)]))
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros((1, 3, 5), np.int64))


def test_render_draws_walls_and_both_teams() -> None:
    env = HideAndSeekLite(1, "quadrant", seed=2)
    env.reset()
    env.load_scene(0, Scene(agents=[Agent(4.0, 4.0, 0.0, HIDER), Agent(4.5, 4.5, 1.0, HIDER),
                                    Agent(1.0, 1.0, 0.0, SEEKER), Agent(1.5, 1.0, 2.0, SEEKER)],
                            walls=outer_walls(), boxes=[Box(4.0, 5.0, locked_by=HIDER)], t=40))
    img = env.render(0)
    assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3 and img.shape[0] >= 256
    colours = {tuple(c) for c in img.reshape(-1, 3)[:: 7]}
    assert TEAM[HIDER] in colours and TEAM[SEEKER] in colours
    assert (img.sum(axis=2) < 200).mean() > 0.02  # dark outer walls
