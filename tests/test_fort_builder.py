"""The scripted fort builder: the quadrant fort is within a lone hider's reach in preparation;
and the diagnostic that pays a learning hider for forts directly.

If grabbing, carrying, locking or the fort rule broke, or preparation got too short to carry two
cubes, the scripted hider's share of closed rooms would drop; the learning benchmark's fort target
would then ask for something the env no longer allows.
"""
from __future__ import annotations

import json
import math

import numpy as np

from srl_lab.envs.hide_and_seek import spec
from srl_lab.envs.hide_and_seek.fort_builder import door_spot, fort_reach, room_doors
from srl_lab.envs.hide_and_seek.scene import HIDER, SEEKER, Agent, Box, Scene, Wall, outer_walls
from runs import load_benchmark


def test_the_room_doors_are_the_open_stretches_of_its_two_inner_walls() -> None:
    walls = [*outer_walls(), Wall(3, 3, 3, 4.2), Wall(3, 4.6, 3, 6), Wall(3, 3, 6, 3)]
    rects = np.array([wall.rect() for wall in walls])
    assert room_doors(rects) == [(True, 4.2, 4.6)]
    spot, inward = door_spot(True, 4.2, 4.6)
    assert inward == (1.0, 0.0) and spot[1] == 4.4
    assert spot[0] - spec.BOX_SIZE / 2 > 3 + spec.WALL_THICKNESS / 2  # the cube stands clear of the wall, inside


def test_a_lone_hider_can_close_every_door_of_the_room_in_preparation() -> None:
    episodes = fort_reach(24, n_hiders=1, n_seekers=1, seed=3)
    doors = {int(e["num_doors"]) for e in episodes}
    assert doors == {1, 2}, doors  # both room kinds among the starts
    closed = [e for e in episodes if e["fort_prep"] == 1.0]
    assert len(closed) >= 0.85 * len(episodes), [e["fort_step"] for e in episodes]
    prep = spec.prep_steps(spec.DEFAULT_HORIZON["quadrant"])
    assert all(1 <= e["fort_step"] <= prep and e["num_box_lock_prep"] >= e["num_doors"] for e in closed)
    assert all(e["plans"] == 2 * e["num_doors"] for e in episodes)  # 2 cubes: each pairing and order


def test_the_paid_fort_diagnostic_ends_at_preparation_and_pays_the_hider_per_door_closed(capsys) -> None:
    """One of the room's two doors closed by a hider-locked cube when preparation ends pays the hider
    half the play steps (``--pay doors``), or nothing (``--pay fort``: the room is not closed), and
    nothing before; the seeker's rows are not trained."""
    paid = load_benchmark("hide_and_seek_fort_paid")
    prep = spec.prep_steps(spec.DEFAULT_HORIZON["quadrant"])
    face = 3.0 + spec.WALL_THICKNESS / 2
    walls = [*outer_walls(), Wall(3, 3, 3, 4.0), Wall(3, 4.4, 3, 6), Wall(3, 3, 4.6, 3), Wall(5, 3, 6, 3)]
    scene = Scene([Agent(5.5, 5.5, 0.0, HIDER), Agent(1.0, 1.0, math.pi, SEEKER)], walls,
                  [Box(face + spec.BOX_SIZE / 2, 4.2, locked_by=HIDER), Box(1.5, 1.0)], t=prep - 2)
    still = np.array([[[5, 5, 5, 0, 0]] * 2] * 2)
    for pay, hider_pay in (("doors", (spec.DEFAULT_HORIZON["quadrant"] - prep) / 2), ("fort", 0.0)):
        env = paid.FortPaid(2, pay=pay, n_hiders=1, n_seekers=1, seed=0)
        assert env.horizon == env.prep_steps == prep and env.trained_rows.tolist() == [0, 2]
        env.reset()
        env.load_scene(0, scene)
        first, last = env.step(still), env.step(still)
        assert not first.terminated[0] and first.reward[0].tolist() == [0.0, 0.0]
        assert last.terminated[0] and last.reward[0].tolist() == [hider_pay, 0.0], pay

    paid.main(["--size", "short", "--minutes", "0.04", "--report-every", "0.02"])
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["updates"] >= 1 and report["episodes"] > 0 and report["reports"], report
    assert all(0.0 <= report["last_10pct"][k] <= 1.0 for k in ("fort_prep", "doors_blocked_prep")), report
