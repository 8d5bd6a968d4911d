"""Doors, the quadrant room and the fort rule behind the phase statistics (``spec.PHASE_STAT_KEYS``).

Shared by both variants (compiled with numba inside the lite kernels, called from Python by the
MuJoCo one), so each figure means the same on either. Everything lives in the floor plane; walls
are their footprint rectangles ``(xmin, ymin, xmax, ymax)`` (``scene.Wall.rect``).

* **Door lines.** ``quadrant``: the room's two inner sides, x = 3 for y in [3, 6] and y = 3 for
  x in [3, 6] (the room is the top-right quarter, from ``ROOM_LO`` to the floor's edge).
  ``randomwalls``: every line carrying walls (segments of one orientation on one centre line),
  from its first segment's end to its last's.
* **Doors.** The stretches of a door line that no wall covers and that are at least ``PASSAGE``
  (0.27 m, a little under an agent's diameter) long: a narrower one lets no agent through. A wall
  covers a line where its rectangle spans the line's whole thickness (the line's own segments and
  walls crossing it; not a wall that merely ends on it in a T). So a quadrant wall with its 2-cell
  door has one 0.4 m door, a wall without a door none, a missing wall one 3 m door, and a
  randomwalls world one door per interior wall (none with a single room).
* **Blocking.** Only boxes locked by the hider team count (not ramps, unlocked or seeker-locked
  boxes), by their true footprints (rotated, in MuJoCo). Two bodies close the way between them
  when they stand less than ``PASSAGE`` apart: no agent fits through. A door is blocked when a
  chain of such boxes runs from the wall on one side of it to the wall on the other with every gap
  in the chain (wall to box, box to box, box to wall) that narrow; the walls are taken up to
  ``BANK`` along the line from the door. Gaps are measured between true shapes, so diagonal
  squeezes count: a cube standing 0.2 m off the wall in front of a 0.4 m door, overlapping it by
  0.15 m, leaves a 0.32 m diagonal between its corner and the wall's end, and agents (trained
  seekers too) slip through it, though only 0.25 m of the door line stays free. A locked box away
  from the door never blocks it.

The statistics: ``doors_blocked_prep`` = blocked doors / doors and ``fort_prep`` = 1.0 if every
door is blocked, else 0.0, both when preparation ends and NaN without a door (in randomwalls a
fort thus means every interior door closed). ``hider_in_room`` / ``seeker_in_room``: fraction of
play steps ending with every hider / at least one seeker wholly inside the quadrant room
(``in_room``: past the inner walls' room face); NaN in randomwalls (no room stands out) and without
a play step.
``num_doors``: how many doors the room (randomwalls: all interior walls) has.
``first_seen_step``: the first play step (0-based from the end of preparation) on which a seeker
sees a hider, or the number of play steps if none does.
"""
from __future__ import annotations

import math

import numpy as np

from srl_lab.envs.hide_and_seek import spec
from srl_lab.envs.hide_and_seek.lite_jit import njit

ROOM_LO = spec.FLOOR_SIZE / 2  # the quadrant room is [ROOM_LO, FLOOR_SIZE]²
HALF_T = spec.WALL_THICKNESS / 2
# The narrowest opening an agent gets through. Less than its 0.3 m diameter: contacts give a little
# under a full push. Measured in both variants with agents run at gaps head on and diagonally:
# through 0.27 m, never through 0.268 m (tests/test_phase_metrics.py keeps a case either side).
PASSAGE = 0.27
BANK = 1.0  # how much of the wall on each side of a door the fort rule looks at (m)
EPS = 1e-9
BOX_COLUMNS = 5  # rows of ``boxes``: x, y, half size x, half size y, yaw


# An agent is in the quadrant room when its whole disc is past the room face of the inner walls (2 cm
# allowed for contacts): a seeker pressed into a doorway a locked box closes stays out, its centre at
# most PASSAGE - radius past that face, while an agent standing against the wall inside is in.
INSIDE = ROOM_LO + HALF_T + spec.AGENT_RADIUS - 0.02


@njit
def in_room(x: float, y: float) -> bool:
    """Whether an agent centred at ``(x, y)`` stands wholly inside the quadrant room (see ``INSIDE``)."""
    return INSIDE < x < spec.FLOOR_SIZE and INSIDE < y < spec.FLOOR_SIZE


@njit
def _set_line(lines: np.ndarray, k: int, vertical: bool, c: float, a0: float, a1: float) -> None:
    lines[k, 0] = 1.0 if vertical else 0.0
    lines[k, 1] = c
    lines[k, 2] = a0
    lines[k, 3] = a1


@njit
def _door_lines(walls: np.ndarray, n_walls: int, quadrant: bool, lines: np.ndarray) -> int:
    """Fill ``lines[k] = (vertical, centre, from, to)`` with the door lines (see the module); count."""
    if quadrant:
        _set_line(lines, 0, True, ROOM_LO, ROOM_LO, spec.FLOOR_SIZE)
        _set_line(lines, 1, False, ROOM_LO, ROOM_LO, spec.FLOOR_SIZE)
        return 2
    n = 0
    for w in range(n_walls):
        vertical = walls[w, 3] - walls[w, 1] >= walls[w, 2] - walls[w, 0]
        a = 1 if vertical else 0  # the along axis's column in a rect
        c = 0.5 * (walls[w, 1 - a] + walls[w, 3 - a])
        merged = False
        for k in range(n):
            if lines[k, 0] == (1.0 if vertical else 0.0) and abs(lines[k, 1] - c) < 1e-6:
                lines[k, 2] = min(lines[k, 2], walls[w, a])
                lines[k, 3] = max(lines[k, 3], walls[w, 2 + a])
                merged = True
                break
        if not merged:
            _set_line(lines, n, vertical, c, walls[w, a], walls[w, 2 + a])
            n += 1
    return n


@njit
def _uncovered(lo: np.ndarray, hi: np.ndarray, n: int, a0: float, a1: float, out: np.ndarray) -> int:
    """The stretches of [a0, a1] none of the intervals ``[lo[k], hi[k]]``, k < n, covers, into
    ``out[m] = (start, end)``; their count."""
    order = np.argsort(lo[:n])
    cursor = a0
    m = 0
    for k in order:
        start = min(max(lo[k], a0), a1)
        if start > cursor:
            out[m, 0] = cursor
            out[m, 1] = start
            m += 1
        cursor = max(cursor, min(hi[k], a1))
    if cursor < a1:
        out[m, 0] = cursor
        out[m, 1] = a1
        m += 1
    return m


@njit
def _wall_cover(walls: np.ndarray, n_walls: int, vertical: bool, c: float, lo: np.ndarray,
                hi: np.ndarray) -> int:
    """Along-line extents of the walls crossing the band of line ``c``, into ``lo``/``hi``; count."""
    a = 1 if vertical else 0
    n = 0
    for w in range(n_walls):
        if walls[w, 1 - a] <= c - HALF_T + EPS and walls[w, 3 - a] >= c + HALF_T - EPS:
            lo[n] = walls[w, a]
            hi[n] = walls[w, 2 + a]
            n += 1
    return n


@njit
def _corners(row: np.ndarray, out: np.ndarray) -> None:
    """The corners of a footprint row (x, y, half size x, half size y, yaw), in order round it."""
    cos, sin = math.cos(row[4]), math.sin(row[4])
    for k in range(4):
        ux = row[2] if k == 1 or k == 2 else -row[2]
        uy = row[3] if k >= 2 else -row[3]
        out[k, 0] = row[0] + cos * ux - sin * uy
        out[k, 1] = row[1] + sin * ux + cos * uy


@njit
def _point_to_segment(p: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    dx, dy = b[0] - a[0], b[1] - a[1]
    length2 = dx * dx + dy * dy
    u = 0.0 if length2 == 0.0 else min(1.0, max(0.0, ((p[0] - a[0]) * dx + (p[1] - a[1]) * dy) / length2))
    return math.hypot(p[0] - a[0] - u * dx, p[1] - a[1] - u * dy)


@njit
def _overlap(p: np.ndarray, q: np.ndarray) -> bool:
    """Whether two rectangles (corner arrays) overlap: no side direction of either separates them."""
    for shape in (p, q):
        for k in range(2):
            nx, ny = shape[k + 1, 1] - shape[k, 1], shape[k, 0] - shape[k + 1, 0]
            p_lo = q_lo = math.inf
            p_hi = q_hi = -math.inf
            for m in range(4):
                a = p[m, 0] * nx + p[m, 1] * ny
                b = q[m, 0] * nx + q[m, 1] * ny
                p_lo, p_hi, q_lo, q_hi = min(p_lo, a), max(p_hi, a), min(q_lo, b), max(q_hi, b)
            if p_hi < q_lo or q_hi < p_lo:
                return False
    return True


@njit
def _gap(p: np.ndarray, q: np.ndarray) -> float:
    """The distance between two rectangles (corner arrays); 0 when they overlap."""
    if _overlap(p, q):
        return 0.0
    gap = math.inf
    for k in range(4):
        j = (k + 1) % 4
        for m in range(4):
            gap = min(gap, _point_to_segment(p[m], q[k], q[j]), _point_to_segment(q[m], p[k], p[j]))
    return gap


@njit
def _line_piece(vertical: bool, c: float, a0: float, a1: float, out: np.ndarray) -> None:
    """Corners of the wall-thick stretch [a0, a1] of line ``c``."""
    mid, half = 0.5 * (a0 + a1), 0.5 * (a1 - a0)
    row = np.array([c, mid, HALF_T, half, 0.0]) if vertical else np.array([mid, c, half, HALF_T, 0.0])
    _corners(row, out)


@njit
def _closed(boxes: np.ndarray, n_boxes: int, vertical: bool, c: float, before: float, d0: float, d1: float,
            after: float) -> bool:
    """Whether the boxes close the door [d0, d1] of line ``c``: a chain of them runs from the wall
    before it ([before, d0]) to the wall after it ([d1, after]) with every gap in the chain (wall to
    box, box to box, box to wall) narrower than PASSAGE, so an agent fits through none of them."""
    n = n_boxes + 2
    shapes = np.empty((n, 4, 2))
    _line_piece(vertical, c, before, d0, shapes[0])
    _line_piece(vertical, c, d1, after, shapes[1])
    for b in range(n_boxes):
        _corners(boxes[b], shapes[b + 2])
    reached = np.zeros(n, np.bool_)
    stack = np.empty(n, np.int64)
    reached[0] = True
    stack[0] = 0
    top = 1
    while top:
        top -= 1
        i = stack[top]
        for j in range(1, n):
            if not reached[j] and _gap(shapes[i], shapes[j]) < PASSAGE - EPS:
                if j == 1:
                    return True
                reached[j] = True
                stack[top] = j
                top += 1
    return False


@njit
def count_doors(walls: np.ndarray, n_walls: int, quadrant: bool, boxes: np.ndarray,
                n_boxes: int) -> tuple[int, int]:
    """(doors, doors blocked) of a world: ``walls[:n_walls]`` rects, ``boxes[:n_boxes]`` the
    hider-locked boxes as rows (x, y, half size x, half size y, yaw); see the module for the rule."""
    size = n_walls + 2
    lines = np.empty((size, 4))
    lo = np.empty(size)
    hi = np.empty(size)
    gaps = np.empty((size, 2))
    doors = blocked = 0
    for k in range(_door_lines(walls, n_walls, quadrant, lines)):
        vertical = lines[k, 0] == 1.0
        c, a0, a1 = lines[k, 1], lines[k, 2], lines[k, 3]
        n_gaps = _uncovered(lo, hi, _wall_cover(walls, n_walls, vertical, c, lo, hi), a0, a1, gaps)
        for g in range(n_gaps):
            d0, d1 = gaps[g, 0], gaps[g, 1]
            if d1 - d0 < PASSAGE - EPS:
                continue
            doors += 1
            # the wall on either side, up to BANK long and never over the next opening of the line
            before = max(d0 - BANK, gaps[g - 1, 1] if g > 0 else a0)
            after = min(d1 + BANK, gaps[g + 1, 0] if g + 1 < n_gaps else a1)
            if _closed(boxes, n_boxes, vertical, c, before, d0, d1, after):
                blocked += 1
    return doors, blocked


@njit
def door_stats(walls: np.ndarray, n_walls: int, quadrant: bool, boxes: np.ndarray,
               n_boxes: int) -> tuple[float, float, float]:
    """``(doors_blocked_prep, fort_prep, num_doors)`` for the world as it stands: the share of doors
    blocked, 1.0 if all are (0.0 otherwise), and the number of doors; the first two NaN without a door."""
    doors, blocked = count_doors(walls, n_walls, quadrant, boxes, n_boxes)
    if doors == 0:
        return math.nan, math.nan, 0.0
    return blocked / doors, 1.0 if blocked == doors else 0.0, float(doors)


def warm_up() -> None:
    """Compile (or load from numba's cache) ``door_stats`` for calls from Python, as the MuJoCo
    variant makes them once per episode: that one-time cost then falls outside any episode."""
    door_stats(np.zeros((0, 4)), 0, True, np.zeros((1, BOX_COLUMNS)), 0)
