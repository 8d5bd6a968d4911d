"""Phase statistics (``spec.PHASE_STAT_KEYS``) on hand-built scenes, in both hide-and-seek variants.

The quadrant room is [3, 6]²; ``room_walls`` closes it with a door in each inner wall: x = 3 for
y in [4.0, 4.4] and y = 3 for x in [4.6, 5.0]. Scenes load at the end of preparation (``t = prep``),
so the preparation figures are those of the scene itself, unless a test steps through the last
preparation step. The MuJoCo variant is skipped (``importorskip``) where mujoco is missing.
"""
from __future__ import annotations

import importlib
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from srl_lab.api.env import EnvGroup
from srl_lab.envs.hide_and_seek import spec
from srl_lab.envs.hide_and_seek.doors import PASSAGE, count_doors, door_stats
from srl_lab.envs.hide_and_seek.scene import HIDER, SEEKER, Agent, Box, Scene, Wall, outer_walls

VARIANTS = ["lite", "mujoco"]
STILL = [5, 5, 5, 0, 0]
TURN = [5, 5, 10, 0, 0]  # full torque: the agent turns left
HORIZON = 10  # preparation ends at t = 4; 6 play steps
PREP = round(spec.PREP_FRACTION * HORIZON)
PLAY = HORIZON - PREP
HYPOTHESIS = settings(max_examples=10, deadline=None, derandomize=True,
                      suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
FACE = 3.0 + spec.WALL_THICKNESS / 2  # the room side of the x = 3 wall
CUBE = spec.BOX_SIZE / 2


def room_walls(vertical_door: bool = True, horizontal_door: bool = True) -> list[Wall]:
    """Outer walls plus the quadrant room's two inner walls, with their doors unless told otherwise."""
    x_wall = [Wall(3.0, 3.0, 3.0, 4.0), Wall(3.0, 4.4, 3.0, 6.0)] if vertical_door else [Wall(3.0, 3.0, 3.0, 6.0)]
    y_wall = [Wall(3.0, 3.0, 4.6, 3.0), Wall(5.0, 3.0, 6.0, 3.0)] if horizontal_door else [Wall(3.0, 3.0, 6.0, 3.0)]
    return outer_walls() + x_wall + y_wall


def x_door_box(locked_by: int | None = HIDER, dx: float = 0.0, dy: float = 0.0) -> Box:
    """A cube against the room side of the x = 3 wall, centred on its door (shifted by dx, dy)."""
    return Box(FACE + CUBE + dx, 4.2 + dy, locked_by=locked_by)


def y_door_box(locked_by: int | None = HIDER) -> Box:
    """A cube against the room side of the y = 3 wall, centred on its door."""
    return Box(4.8, FACE + CUBE, locked_by=locked_by)


HIDER_IN = Agent(5.5, 5.5, 0.0, HIDER)
SEEKER_OUT = Agent(1.0, 1.0, math.pi, SEEKER)  # looks at the outer wall: sees nothing


def make(variant: str, scenario: str = "quadrant", n_hiders: int = 1, n_seekers: int = 1,
         horizon: int = HORIZON, n_envs: int = 1) -> EnvGroup:
    """A group of ``n_envs`` envs of ``variant`` with room for two boxes and a ramp."""
    if variant == "lite":
        from srl_lab.envs.hide_and_seek.lite import HideAndSeekLite as cls
    else:
        pytest.importorskip("mujoco")
        cls = importlib.import_module("srl_lab.envs.hide_and_seek.mujoco_env").HideAndSeekMujoco
    env = cls(n_envs, scenario, n_hiders=n_hiders, n_seekers=n_seekers, n_boxes=2, n_ramps=1, horizon=horizon,
              seed=0)
    env.reset()
    return env


def play_out(env: EnvGroup, scene: Scene, moves: list[list[int]] | None = None) -> dict[str, float]:
    """Load ``scene`` and step it to the horizon (agents still, or ``moves`` per agent); its statistics."""
    env.load_scene(0, scene)
    actions = np.array([moves or [STILL] * env.num_agents])
    for _ in range(env.horizon - scene.t):
        result = env.step(actions)
    (stats,) = result.episodes
    return stats


def phase(variant: str, boxes: list[Box], walls: list[Wall] | None = None) -> dict[str, float]:
    """Statistics of a quiet quadrant episode from the end of preparation with these boxes."""
    scene = Scene([HIDER_IN, SEEKER_OUT], room_walls() if walls is None else walls, boxes, t=PREP)
    return play_out(make(variant), scene)


@pytest.fixture(params=VARIANTS)
def variant(request) -> str:
    return request.param


# --- doors and forts in both variants -----------------------------------------------------------
def test_a_hider_locked_box_in_front_of_a_door_blocks_it(variant: str) -> None:
    stats = phase(variant, [x_door_box()])
    assert stats["doors_blocked_prep"] == 0.5 and stats["fort_prep"] == 0.0


def test_the_same_box_unlocked_does_not_count(variant: str) -> None:
    stats = phase(variant, [x_door_box(locked_by=None)])
    assert stats["doors_blocked_prep"] == 0.0 and stats["fort_prep"] == 0.0


def test_a_seeker_locked_box_in_the_door_does_not_count(variant: str) -> None:
    stats = phase(variant, [x_door_box(locked_by=SEEKER), y_door_box(locked_by=SEEKER)])
    assert stats["doors_blocked_prep"] == 0.0 and stats["fort_prep"] == 0.0


@pytest.mark.parametrize("dx, dy", [(0.0, 0.7), (0.4, 0.0), (1.5, 1.0)])
def test_a_locked_box_away_from_the_door_does_not_count(variant: str, dx: float, dy: float) -> None:
    """Beside the door, 0.4 m off the wall (room for an agent between), or across the room."""
    stats = phase(variant, [x_door_box(dx=dx, dy=dy), y_door_box(locked_by=None)])
    assert stats["doors_blocked_prep"] == 0.0


def test_every_door_blocked_is_a_fort(variant: str) -> None:
    stats = phase(variant, [x_door_box(), y_door_box()])
    assert stats["doors_blocked_prep"] == 1.0 and stats["fort_prep"] == 1.0 and stats["num_doors"] == 2.0


def test_a_room_with_one_door_is_a_fort_with_one_box(variant: str) -> None:
    stats = phase(variant, [x_door_box()], room_walls(horizontal_door=False))
    assert stats["doors_blocked_prep"] == 1.0 and stats["fort_prep"] == 1.0 and stats["num_doors"] == 1.0


@pytest.mark.parametrize("boxes, share", [
    ([x_door_box()], 0.5), ([x_door_box(), y_door_box()], 1.0), ([x_door_box(locked_by=None), y_door_box()], 0.5),
    ([x_door_box(locked_by=SEEKER)], 0.0), ([x_door_box(dx=1.5, dy=1.0)], 0.0)])
def test_the_critic_reads_the_share_of_doors_blocked_as_the_world_stands(variant: str, boxes: list[Box],
                                                                        share: float) -> None:
    """``spec.DOORS_KEY`` applies the fort rule to every observation, for every agent, from a loaded
    scene's first one to the episode's last; the next episode starts with nothing locked."""
    env = make(variant)
    first = env.load_scene(0, Scene([HIDER_IN, SEEKER_OUT], room_walls(), boxes, t=PREP))
    np.testing.assert_array_equal(first[spec.DOORS_KEY], np.full((env.num_agents, 1), share))
    seen = []
    for _ in range(env.horizon - PREP):
        result = env.step(np.array([[STILL] * env.num_agents]))
        seen.append((result.final_obs if result.terminated[0] else result.obs)[spec.DOORS_KEY][0])
    np.testing.assert_array_equal(np.array(seen), share)
    assert result.terminated[0] and (result.obs[spec.DOORS_KEY] == 0.0).all()


def test_an_episode_ending_beside_a_fort_leaves_the_forts_doors_blocked(variant: str) -> None:
    """Each env's critic inputs are its own: another env's episode ending and resetting in the same
    step clears only that env's doors blocked."""
    env = make(variant, n_envs=2)
    env.load_scene(0, Scene([HIDER_IN, SEEKER_OUT], room_walls(), [x_door_box(), y_door_box()], t=PREP))
    env.load_scene(1, Scene([HIDER_IN, SEEKER_OUT], room_walls(), [x_door_box(), y_door_box()],
                            t=env.horizon - 1))
    result = env.step(np.array([[STILL] * env.num_agents] * 2))
    assert list(result.terminated) == [False, True]
    np.testing.assert_array_equal(result.obs[spec.DOORS_KEY][:, 0, 0], [1.0, 0.0])
    np.testing.assert_allclose(result.obs[spec.CLOCK_KEY][:, 0, 0], [(PREP + 1) / env.horizon, 0.0])


@pytest.mark.parametrize("off_wall, closed", [(0.0, True), (0.05, True), (0.15, False), (0.2, False)])
def test_a_door_counts_as_blocked_exactly_when_a_seeker_cannot_get_past_the_box(variant: str, off_wall: float,
                                                                                 closed: bool) -> None:
    """A cube ``off_wall`` m from the wall's room face covers the door's upper 0.15 m, so 0.25 m of
    it stay free: too narrow for an agent head on. A seeker running at the door gets into the room
    exactly when the rule calls the door open: the wall's end and the cube's corner stand
    0.25 / 0.255 / 0.29 / 0.32 m apart on the diagonal, and the seeker slips through the last two."""
    walls = room_walls(horizontal_door=False)
    box = x_door_box(dx=off_wall, dy=0.3)
    assert _doors(walls, _boxes((box.x, box.y, CUBE, CUBE, 0.0))) == (1, int(closed))
    env = make(variant, horizon=80)
    deepest = -math.inf
    for push_y in (5, 3):  # straight at the door, or also down along it
        env.load_scene(0, Scene([HIDER_IN, Agent(2.7, 4.12, 0.0, SEEKER)], walls, [box], t=env.prep_steps))
        for _ in range(30):
            env.step(np.array([[STILL, [10, push_y, 5, 0, 0]]]))
            seeker = env.snapshot(0).agents[1]
            deepest = max(deepest, min(seeker.x, seeker.y) - 3.0)
    assert (deepest > 0.3) == (not closed), deepest


def test_a_box_unlocked_in_the_last_preparation_step_does_not_count(variant: str) -> None:
    """The figures are those at the end of preparation, not at the scene's start."""
    env = make(variant)
    near = Agent(FACE + 2 * CUBE + 0.2, 4.2, math.pi, HIDER)  # facing the box, 0.05 m from it
    boxes = [x_door_box(), y_door_box()]
    kept = play_out(env, Scene([Agent(5.5, 5.5, 0.0, HIDER), SEEKER_OUT], room_walls(), boxes, t=PREP - 1))
    unlocked = play_out(env, Scene([near, SEEKER_OUT], room_walls(), boxes, t=PREP - 1))  # lock 0: unlock
    assert kept["fort_prep"] == 1.0
    assert unlocked["doors_blocked_prep"] == 0.5 and unlocked["fort_prep"] == 0.0


def test_randomwalls_counts_the_doors_of_interior_walls(variant: str) -> None:
    env = make(variant, "randomwalls")
    split = [Wall(3.0, 0.0, 3.0, 4.0), Wall(3.0, 4.4, 3.0, 6.0)]  # one interior wall, door y in [4, 4.4]
    agents = [Agent(5.5, 5.5, 0.0, HIDER), SEEKER_OUT]
    stats = play_out(env, Scene(agents, outer_walls() + split, [x_door_box()], t=PREP))
    assert stats["doors_blocked_prep"] == 1.0 and stats["fort_prep"] == 1.0 and stats["num_doors"] == 1.0
    stats = play_out(env, Scene(agents, outer_walls() + split, [x_door_box(locked_by=None)], t=PREP))
    assert stats["doors_blocked_prep"] == 0.0 and stats["fort_prep"] == 0.0
    stats = play_out(env, Scene(agents, outer_walls(), [x_door_box()], t=PREP))  # one room: no door
    assert math.isnan(stats["doors_blocked_prep"]) and math.isnan(stats["fort_prep"])
    assert stats["num_doors"] == 0.0
    assert math.isnan(stats["hider_in_room"]) and math.isnan(stats["seeker_in_room"])
    assert stats["first_seen_step"] == PLAY


# --- rooms and first sight --------------------------------------------------------------------------
def test_hiders_in_the_room_unseen_all_play_long(variant: str) -> None:
    stats = phase(variant, [])
    assert stats["hider_in_room"] == 1.0 and stats["seeker_in_room"] == 0.0
    assert stats["first_seen_step"] == PLAY and stats["hidden_fraction"] == 1.0


def test_a_seeker_in_the_room_sees_the_hider_from_the_first_play_step(variant: str) -> None:
    scene = Scene([HIDER_IN, Agent(4.0, 5.5, 0.0, SEEKER)], room_walls(), t=PREP)
    stats = play_out(make(variant), scene)
    assert stats["hider_in_room"] == 1.0 and stats["seeker_in_room"] == 1.0
    assert stats["first_seen_step"] == 0.0 and stats["hidden_fraction"] == 0.0


@pytest.mark.parametrize("locked_by, inside", [(HIDER, False), (None, True)])
def test_a_seeker_counts_as_in_the_room_only_once_wholly_past_the_wall(variant: str, locked_by: int | None,
                                                                          inside: bool) -> None:
    """A cube 0.2 m off the wall in front of the door: locked, it closes the door, yet the seeker
    pushing at it gets its centre past the wall line, into the doorway, and must not count as in
    the room; unlocked, the seeker pushes it away and comes in."""
    env = make(variant, horizon=40)
    walls = room_walls(horizontal_door=False)
    scene = Scene([HIDER_IN, Agent(2.7, 4.2, 0.0, SEEKER)], walls, [x_door_box(locked_by, dx=0.2)], t=env.prep_steps)
    env.load_scene(0, scene)
    deepest, episodes = -math.inf, []
    while not episodes:
        episodes = env.step(np.array([[STILL, [10, 5, 5, 0, 0]]])).episodes
        if not episodes:  # once it ends, the env has started the next episode
            deepest = max(deepest, env.snapshot(0).agents[1].x)
    (stats,) = episodes
    assert deepest > 3.0, deepest  # the seeker's centre crossed the wall line either way
    assert stats["fort_prep"] == float(not inside)
    assert (stats["seeker_in_room"] > 0.5) == inside, stats["seeker_in_room"]


@pytest.mark.parametrize("holder, grab, share", [(HIDER, 1, 1.0), (HIDER, 0, 0.0), (SEEKER, 1, 0.0)])
def test_hider_holds_play_counts_play_steps_with_a_hider_holding_an_object(variant: str, holder: int,
                                                                           grab: int, share: float) -> None:
    """From the end of preparation, ``holder`` faces a cube 0.1 m off its disc and holds grab (or not)
    while the other agent stands in a far corner; only a hider's hold counts."""
    near = Agent(4.5 - CUBE - 0.25, 4.5, 0.0, holder)  # a 0.15 m disc, 0.1 m from the cube
    far = Agent(5.6, 3.4, 0.0, SEEKER if holder == HIDER else HIDER)
    agents = [near, far] if holder == HIDER else [far, near]
    hold = [5, 5, 5, grab, 0]
    moves = [hold, STILL] if holder == HIDER else [STILL, hold]
    stats = play_out(make(variant), Scene(agents, room_walls(), [Box(4.5, 4.5)], t=PREP), moves)
    assert stats["hider_holds_play"] == share


def test_one_hider_outside_the_room_means_not_every_hider_is_in(variant: str) -> None:
    env = make(variant, n_hiders=2)
    scene = Scene([HIDER_IN, Agent(1.0, 5.0, 0.0, HIDER), SEEKER_OUT], room_walls(), t=PREP)
    assert play_out(env, scene)["hider_in_room"] == 0.0
    scene = Scene([HIDER_IN, Agent(4.0, 4.0, 0.0, HIDER), SEEKER_OUT], room_walls(), t=PREP)
    assert play_out(env, scene)["hider_in_room"] == 1.0


def test_a_seeker_turning_round_first_sees_the_hider_part_way(variant: str) -> None:
    """The hider stands behind the seeker, who turns at full torque: seen after a few play steps."""
    env = make(variant, horizon=20)
    prep = round(spec.PREP_FRACTION * 20)
    scene = Scene([Agent(2.0, 1.0, 0.0, HIDER), Agent(1.0, 1.0, math.pi, SEEKER)], room_walls(), t=prep)
    stats = play_out(env, scene, [STILL, TURN])
    assert 1.0 <= stats["first_seen_step"] <= 8.0 < 20 - prep
    assert stats["hidden_fraction"] < 1.0 and stats["hider_in_room"] == stats["seeker_in_room"] == 0.0


# --- invariants ------------------------------------------------------------------------------------
@HYPOTHESIS
@given(seed=st.integers(0, 2**16), scenario=st.sampled_from(["quadrant", "randomwalls"]))
def test_random_play_keeps_the_figures_in_range(variant: str, seed: int, scenario: str) -> None:
    env = make(variant, scenario, n_hiders=2, n_seekers=2, horizon=12)
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    for _ in range(12):
        result = env.step(rng.integers(0, spec.ACTION_NVEC, (1, env.num_agents, 5)))
    (stats,) = result.episodes
    assert set(stats) == {*spec.EPISODE_STAT_KEYS, "return", "length"}
    assert all(isinstance(stats[k], float) for k in spec.PHASE_STAT_KEYS)
    play = 12 - round(spec.PREP_FRACTION * 12)
    assert 0.0 <= stats["first_seen_step"] <= play
    for key in ("doors_blocked_prep", "fort_prep", "hider_in_room", "seeker_in_room"):
        assert math.isnan(stats[key]) or 0.0 <= stats[key] <= 1.0, key
    assert 0.0 <= stats["hider_holds_play"] <= 1.0  # defined in every world with a play step
    if scenario == "quadrant":  # the room always has a door, and is there to be in
        assert not any(math.isnan(stats[k]) for k in spec.PHASE_STAT_KEYS)
        assert stats["fort_prep"] == float(stats["doors_blocked_prep"] == 1.0)
        assert stats["num_doors"] in (1.0, 2.0)  # two door walls, one of them dropped with p=0.5
    else:
        assert math.isnan(stats["hider_in_room"]) and math.isnan(stats["seeker_in_room"])


@HYPOTHESIS
@given(x=st.one_of(st.floats(1.5, 3.0 - spec.WALL_THICKNESS / 2 - CUBE), st.floats(FACE + CUBE, 4.2)),
       y=st.floats(3.5, 5.0), team=st.sampled_from([HIDER, SEEKER, None]))
def test_both_variants_agree_on_the_fort_rule(x: float, y: float, team: int | None) -> None:
    """One cube anywhere near the x = 3 door, on either side (clear of the walls): the same
    doors_blocked_prep in both variants, and only a hider lock can raise it."""
    boxes = [Box(x, y, locked_by=team), y_door_box()]
    lite, mujoco = (phase(v, boxes)["doors_blocked_prep"] for v in VARIANTS)
    assert lite == mujoco and 0.5 <= lite <= 1.0
    if team != HIDER:
        assert lite == 0.5


def test_statistics_keys_identical_across_variants_and_scenarios() -> None:
    keys = []
    for scenario in ("quadrant", "randomwalls"):
        for v in VARIANTS:
            env = make(v, scenario, horizon=4)
            for _ in range(4):
                result = env.step(np.array([[STILL] * env.num_agents]))
            keys.append(list(result.episodes[0]))
    assert all(k == keys[0] for k in keys)
    assert keys[0][-2 - len(spec.PHASE_STAT_KEYS):-2] == list(spec.PHASE_STAT_KEYS)


def _lite_rollout() -> list[dict[str, float]]:
    """Episode statistics of a few seeded random lite episodes in both scenarios."""
    from srl_lab.envs.hide_and_seek.lite import HideAndSeekLite

    out = []
    for scenario in ("quadrant", "randomwalls"):
        env = HideAndSeekLite(2, scenario, horizon=10, seed=7)
        env.reset()
        rng = np.random.default_rng(0)
        for _ in range(10):
            out += env.step(rng.integers(0, 11, (2, env.num_agents, 5)) % env.action_space.nvec).episodes
    return out


def test_lite_phase_figures_match_without_numba() -> None:
    """The interpreted fallback (``SRL_LAB_NUMBA=0``, in a fresh process) reports the same statistics."""
    script = "import json, test_phase_metrics as t; print(json.dumps(t._lite_rollout()))"
    env = {**os.environ, "SRL_LAB_NUMBA": "0",
           "PYTHONPATH": os.pathsep.join([os.path.dirname(__file__), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", script], check=True, timeout=300, capture_output=True, text=True,
                          env=env)
    interpreted, compiled = json.loads(done.stdout.splitlines()[-1]), _lite_rollout()
    assert len(compiled) == len(interpreted) == 4
    for c, i in zip(compiled, interpreted):
        assert list(c) == list(i)
        np.testing.assert_allclose([i[k] for k in c], list(c.values()), rtol=1e-9)


# --- the door rule itself ------------------------------------------------------------------------------
def _rects(walls: list[Wall]) -> np.ndarray:
    return np.array([w.rect() for w in walls]).reshape(-1, 4)


def _boxes(*rows: tuple[float, float, float, float, float]) -> np.ndarray:
    return np.array(rows, dtype=np.float64).reshape(-1, 5)


def _doors(walls: list[Wall], boxes: np.ndarray, quadrant: bool = True) -> tuple[int, int]:
    rects = _rects(walls)
    return count_doors(rects, len(rects), quadrant, boxes, len(boxes))


def test_doors_are_the_open_stretches_of_the_room_sides() -> None:
    assert _doors(room_walls(), _boxes()) == (2, 0)
    assert _doors(room_walls(vertical_door=False), _boxes()) == (1, 0)
    assert _doors(outer_walls(), _boxes()) == (2, 0)  # no room walls: each side is one wide door
    assert _doors(room_walls(False, False), _boxes()) == (0, 0)
    closed = _rects(room_walls(False, False))
    blocked, fort, doors = door_stats(closed, len(closed), True, _boxes(), 0)
    assert math.isnan(blocked) and math.isnan(fort) and doors == 0


@pytest.mark.parametrize("cover, blocked", [(0.4, True), (0.15, True), (0.13 + 1e-6, True),
                                            (0.13 - 1e-6, False), (0.0, False)])
def test_a_door_stays_open_while_an_agent_fits_past_the_box(cover: float, blocked: bool) -> None:
    """A cube covering ``cover`` m of the 0.4 m door from its lower end leaves 0.4 - cover free."""
    cy = 4.0 + cover - CUBE
    doors = _doors(room_walls(horizontal_door=False), _boxes((FACE + CUBE, cy, CUBE, CUBE, 0.0)))
    assert doors == (1, int(blocked))
    assert PASSAGE == pytest.approx(0.27)


def test_a_turned_box_blocks_by_its_true_footprint() -> None:
    """A cube turned 45° reaches 0.354 m from its centre along its diagonals, its sides only 0.25 m."""
    walls = room_walls(horizontal_door=False)
    corner_in = FACE + math.sqrt(2) * CUBE + 0.15  # its near corner 0.15 m off the wall face
    # 0.25 m from both ends of the 0.4 m door (0.15 across, 0.2 along): no agent passes
    assert _doors(walls, _boxes((corner_in, 4.2, CUBE, CUBE, math.pi / 4))) == (1, 1)
    assert _doors(walls, _boxes((corner_in + 0.1, 4.2, CUBE, CUBE, math.pi / 4))) == (1, 0)  # 0.32 m
    # turned the same way but beside the door, it leaves the door's lower end open
    assert _doors(walls, _boxes((corner_in, 4.9, CUBE, CUBE, math.pi / 4))) == (1, 0)
    # not turned, a cube with its centre as far from the wall stands 0.25 m off it: closed; 0.3 m: open
    assert _doors(walls, _boxes((corner_in, 4.2, CUBE, CUBE, 0.0))) == (1, 1)
    assert _doors(walls, _boxes((corner_in + 0.05, 4.2, CUBE, CUBE, 0.0))) == (1, 0)


@HYPOTHESIS
@given(boxes=st.lists(st.tuples(st.floats(2.0, 6.0), st.floats(2.0, 6.0), st.floats(0.05, 0.9),
                                 st.floats(0.05, 0.9), st.floats(-math.pi, math.pi)), max_size=4),
       extra=st.tuples(st.floats(2.0, 6.0), st.floats(2.0, 6.0), st.floats(0.05, 0.9), st.floats(0.05, 0.9),
                       st.floats(-math.pi, math.pi)))
def test_blocked_doors_are_bounded_and_grow_with_boxes(boxes: list, extra: tuple) -> None:
    walls = room_walls()
    doors, blocked = _doors(walls, _boxes(*boxes))
    more_doors, more_blocked = _doors(walls, _boxes(*boxes, extra))
    assert doors == more_doors == 2 and 0 <= blocked <= more_blocked <= doors
    far = [(bx + 20.0, by, hx, hy, yaw) for bx, by, hx, hy, yaw in boxes]
    assert _doors(walls, _boxes(*far)) == (2, 0)
