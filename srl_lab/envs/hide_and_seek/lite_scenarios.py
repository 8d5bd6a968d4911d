"""Random scenario generation for the lite variant (``quadrant`` and ``randomwalls``).

Walls and spawns live on the 30 × 30 placement grid (0.2 m cells). Each reset consumes uniform
numbers from a pre-drawn stream ``u`` (drawn in Python from the env's seeded generator), so the
compiled and the interpreted path build identical worlds.

* ``quadrant``: outer walls; a 3 m room in the top-right corner closed by a vertical and a
  horizontal wall, each with a 2-cell door; with p = 0.5 one of the two walls has no door. Hiders
  and boxes (cubes) spawn in the room, seekers and ramps outside it.
* ``randomwalls``: outer walls with p = 0.5; 1–4 rooms made by splitting a random room with a wall
  that has one 2-cell door; everyone spawns anywhere. 3..``n_boxes`` boxes per episode (fewer if
  ``n_boxes`` < 3), each a cube or, with p = 0.5, an elongated box aligned with x or y at random.

Teammates spawn within 0.5 m of their team's first agent when the grid allows it.
"""
from __future__ import annotations

import math

import numpy as np

from srl_lab.envs.hide_and_seek import spec
from srl_lab.envs.hide_and_seek.lite_jit import njit
from srl_lab.envs.hide_and_seek.scene import RAMP_SIZE

QUADRANT = 0
RANDOMWALLS = 1
GRID = spec.GRID_SIZE
CELL = spec.CELL
HALF_T = spec.WALL_THICKNESS / 2
MIN_ROOM = 6  # cells: rooms are at least 1.2 m across
ROOM = 15  # quadrant room starts at this grid line (3 m)
ANYWHERE, INSIDE_ROOM, OUTSIDE_ROOM = 0, 1, 2
TEAMMATE_RADIUS = 0.5
RAMP_CELLS = round(RAMP_SIZE[0] / CELL) + 1


@njit
def _draw(u: np.ndarray, cursor: np.ndarray) -> float:
    v = u[cursor[0] % u.shape[0]]
    cursor[0] += 1
    return v


@njit
def _pick(u: np.ndarray, cursor: np.ndarray, n: int) -> int:
    """A uniform integer in [0, n)."""
    return min(int(_draw(u, cursor) * n), n - 1)


@njit
def _add_rect(walls: np.ndarray, n: int, xmin: float, ymin: float, xmax: float, ymax: float) -> int:
    walls[n, 0] = xmin
    walls[n, 1] = ymin
    walls[n, 2] = xmax
    walls[n, 3] = ymax
    return n + 1


@njit
def _add_wall(walls: np.ndarray, n: int, grid: np.ndarray, vertical: bool, c: int, a0: int, a1: int,
              door: int) -> int:
    """Add the wall on grid line ``c`` from ``a0`` to ``a1`` (cells), with a 2-cell gap at ``door``
    (none if negative); mark the cells it touches on ``grid``."""
    for k in range(2):
        lo, hi = a0, a1
        if door >= 0:
            lo, hi = (a0, door) if k == 0 else (door + 2, a1)
        elif k == 1:
            break
        if hi <= lo:
            continue
        if vertical:
            n = _add_rect(walls, n, c * CELL - HALF_T, lo * CELL, c * CELL + HALF_T, hi * CELL)
            grid[max(c - 1, 0):min(c + 1, GRID), lo:hi] = 1
        else:
            n = _add_rect(walls, n, lo * CELL, c * CELL - HALF_T, hi * CELL, c * CELL + HALF_T)
            grid[lo:hi, max(c - 1, 0):min(c + 1, GRID)] = 1
    return n


@njit
def _door(u: np.ndarray, cursor: np.ndarray, a0: int, a1: int) -> int:
    """A door position keeping at least one cell of wall at each end."""
    return a0 + 1 + _pick(u, cursor, a1 - a0 - 3)


@njit
def _fits(grid: np.ndarray, i0: int, j0: int, w: int, h: int, region: int) -> bool:
    if region == INSIDE_ROOM and (i0 < ROOM or j0 < ROOM):
        return False
    if region == OUTSIDE_ROOM and i0 + w > ROOM and j0 + h > ROOM:
        return False
    for i in range(i0, i0 + w):
        for j in range(j0, j0 + h):
            if grid[i, j] != 0:
                return False
    return True


@njit
def _candidate(grid: np.ndarray, i0: int, j0: int, w: int, h: int, region: int, near: bool,
               near_x: float, near_y: float) -> bool:
    """True when the footprint at ``(i0, j0)`` fits (``_fits``), within 0.5 m of ``near_*`` if ``near``."""
    if near and math.hypot((i0 + 0.5 * w) * CELL - near_x, (j0 + 0.5 * h) * CELL - near_y) > TEAMMATE_RADIUS:
        return False
    return _fits(grid, i0, j0, w, h, region)


@njit
def _place(grid: np.ndarray, w: int, h: int, region: int, near_x: float, near_y: float,
           u: np.ndarray, cursor: np.ndarray) -> tuple[float, float]:
    """Centre of a random free ``w × h``-cell footprint in ``region`` (within 0.5 m of
    ``(near_x, near_y)`` if that is not NaN and possible), marked occupied; NaN when none fits."""
    for attempt in range(2):
        near = attempt == 0 and not math.isnan(near_x)
        if attempt == 1 and math.isnan(near_x):
            break
        count = 0
        for i0 in range(GRID - w + 1):
            for j0 in range(GRID - h + 1):
                if _candidate(grid, i0, j0, w, h, region, near, near_x, near_y):
                    count += 1
        if count == 0:
            continue
        k = _pick(u, cursor, count)
        for i0 in range(GRID - w + 1):
            for j0 in range(GRID - h + 1):
                if _candidate(grid, i0, j0, w, h, region, near, near_x, near_y):
                    if k == 0:
                        grid[i0:i0 + w, j0:j0 + h] = 1
                        return (i0 + 0.5 * w) * CELL, (j0 + 0.5 * h) * CELL
                    k -= 1
    return math.nan, math.nan


@njit
def _build_walls(scenario: int, u: np.ndarray, cursor: np.ndarray, walls: np.ndarray,
                 grid: np.ndarray) -> int:
    n = 0
    if scenario == QUADRANT or _draw(u, cursor) < 0.5:
        size = GRID * CELL
        n = _add_rect(walls, n, -HALF_T, -HALF_T, size + HALF_T, HALF_T)
        n = _add_rect(walls, n, -HALF_T, size - HALF_T, size + HALF_T, size + HALF_T)
        n = _add_rect(walls, n, -HALF_T, -HALF_T, HALF_T, size + HALF_T)
        n = _add_rect(walls, n, size - HALF_T, -HALF_T, size + HALF_T, size + HALF_T)
    if scenario == QUADRANT:
        doors = np.empty(2, np.int64)
        doors[0] = _door(u, cursor, ROOM, GRID)
        doors[1] = _door(u, cursor, ROOM, GRID)
        if _draw(u, cursor) < 0.5:
            doors[_pick(u, cursor, 2)] = -1
        n = _add_wall(walls, n, grid, True, ROOM, ROOM, GRID, doors[0])
        n = _add_wall(walls, n, grid, False, ROOM, ROOM, GRID, doors[1])
        return n
    rooms = np.zeros((4, 4), np.int64)  # x0, y0, x1, y1 in cells
    rooms[0, 2] = GRID
    rooms[0, 3] = GRID
    n_rooms = 1
    for _ in range(_pick(u, cursor, 4)):
        splittable = 0
        for r in range(n_rooms):
            if max(rooms[r, 2] - rooms[r, 0], rooms[r, 3] - rooms[r, 1]) >= 2 * MIN_ROOM:
                splittable += 1
        if splittable == 0:
            break
        k = _pick(u, cursor, splittable)
        r = 0
        for q in range(n_rooms):
            if max(rooms[q, 2] - rooms[q, 0], rooms[q, 3] - rooms[q, 1]) >= 2 * MIN_ROOM:
                if k == 0:
                    r = q
                    break
                k -= 1
        x0, y0, x1, y1 = rooms[r, 0], rooms[r, 1], rooms[r, 2], rooms[r, 3]
        can_x = x1 - x0 >= 2 * MIN_ROOM
        can_y = y1 - y0 >= 2 * MIN_ROOM
        vertical = can_x and (not can_y or _draw(u, cursor) < 0.5)
        rooms[n_rooms] = rooms[r]
        if vertical:
            c = x0 + MIN_ROOM + _pick(u, cursor, x1 - x0 - 2 * MIN_ROOM + 1)
            n = _add_wall(walls, n, grid, True, c, y0, y1, _door(u, cursor, y0, y1))
            rooms[r, 2] = c
            rooms[n_rooms, 0] = c
        else:
            c = y0 + MIN_ROOM + _pick(u, cursor, y1 - y0 - 2 * MIN_ROOM + 1)
            n = _add_wall(walls, n, grid, False, c, x0, x1, _door(u, cursor, x0, x1))
            rooms[r, 3] = c
            rooms[n_rooms, 1] = c
        n_rooms += 1
    return n


@njit
def generate(scenario: int, n_hiders: int, n_boxes: int, hiders_anywhere: bool, u: np.ndarray,
             ag: np.ndarray, ob: np.ndarray, oi: np.ndarray, walls: np.ndarray) -> int:
    """Build one random episode into ``ag``, ``ob``, ``oi``, ``walls``; return the wall count.

    ``hiders_anywhere``: quadrant hiders start anywhere instead of in the room.
    """
    cursor = np.zeros(1, np.int64)
    grid = np.zeros((GRID, GRID), np.uint8)
    n_walls = _build_walls(scenario, u, cursor, walls, grid)
    quadrant = scenario == QUADRANT
    ag[:] = 0.0
    ob[:] = 0.0
    oi[:] = 0
    oi[:, 2:] = -1
    n_agents = ag.shape[0]
    for i in range(n_agents):
        hider = i < n_hiders
        first = 0 if hider else n_hiders
        near_x = math.nan if i == first else ag[first, 0]
        near_y = math.nan if i == first else ag[first, 1]
        region = ANYWHERE if not quadrant or (hider and hiders_anywhere) else (
            INSIDE_ROOM if hider else OUTSIDE_ROOM)
        x, y = _place(grid, 2, 2, region, near_x, near_y, u, cursor)
        if math.isnan(x):  # the grid is full: drop it anywhere, contacts will sort it out
            x = _draw(u, cursor) * GRID * CELL
            y = _draw(u, cursor) * GRID * CELL
        ag[i, 0] = x
        ag[i, 1] = y
        ag[i, 2] = (2.0 * _draw(u, cursor) - 1.0) * math.pi
    lo = min(3, n_boxes)
    n_ep = n_boxes if quadrant else lo + _pick(u, cursor, n_boxes - lo + 1)
    cube = round(spec.BOX_SIZE / CELL) + 1
    long_cells = math.ceil(spec.ELONGATED_BOX[0] / CELL)
    for o in range(ob.shape[0]):
        ramp = o >= n_boxes
        if not ramp and o >= n_ep:
            continue
        hx = hy = 0.5 * spec.BOX_SIZE
        w = h = cube
        if ramp:
            hx = hy = 0.5 * RAMP_SIZE[0]
            w = h = RAMP_CELLS
        elif not quadrant and _draw(u, cursor) < 0.5:
            along_x = _draw(u, cursor) < 0.5
            hx = 0.5 * (spec.ELONGATED_BOX[0] if along_x else spec.ELONGATED_BOX[1])
            hy = 0.5 * (spec.ELONGATED_BOX[1] if along_x else spec.ELONGATED_BOX[0])
            w, h = (long_cells, 1) if along_x else (1, long_cells)
        region = ANYWHERE if not quadrant else (OUTSIDE_ROOM if ramp else INSIDE_ROOM)
        x, y = _place(grid, w, h, region, math.nan, math.nan, u, cursor)
        if math.isnan(x):
            continue
        ob[o, 0] = x
        ob[o, 1] = y
        ob[o, 2] = hx
        ob[o, 3] = hy
        oi[o, 0] = 1
        oi[o, 1] = 1 if ramp else 0
        if ramp:
            ob[o, 6] = _pick(u, cursor, 4) * 0.5 * math.pi
    return n_walls
