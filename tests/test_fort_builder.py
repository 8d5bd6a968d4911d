"""The scripted fort builder: the quadrant fort is within a lone hider's reach in preparation.

If grabbing, carrying, locking or the fort rule broke, or preparation got too short to carry two
cubes, the scripted hider's share of closed rooms would drop; the learning benchmark's fort target
would then ask for something the env no longer allows.
"""
from __future__ import annotations

import numpy as np

from srl_lab.envs.hide_and_seek import spec
from srl_lab.envs.hide_and_seek.fort_builder import door_spot, fort_reach, room_doors
from srl_lab.envs.hide_and_seek.scene import Wall, outer_walls


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
