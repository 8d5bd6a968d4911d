"""Doors, the quadrant room and the fort rule behind the phase statistics (``spec.PHASE_STAT_KEYS``).

Shared by both variants (compiled with numba inside the lite kernels, called from Python by the
MuJoCo one), so each figure means the same on either. Everything lives in the floor plane; walls
are their footprint rectangles ``(xmin, ymin, xmax, ymax)`` (``scene.Wall.rect``).

* **Door lines.** ``quadrant``: the room's two inner sides, x = 3 for y in [3, 6] and y = 3 for
  x in [3, 6] (the room is the top-right quarter, from ``ROOM_LO`` to the floor's edge).
  ``randomwalls``: every line carrying walls (segments of one orientation on one centre line),
  from its first segment's end to its last's.
* **Doors.** The stretches of a door line that no wall covers and that are at least ``PASSAGE``
  (an agent's diameter, 0.3 m) long: a narrower one lets no agent through. A wall covers a line
  where its rectangle spans the line's whole thickness (the line's own segments and walls crossing
  it; not a wall that merely ends on it in a T). So a quadrant wall with its 2-cell door has one
  0.4 m door, a wall without a door none, a missing wall one 3 m door, and a randomwalls world one
  door per interior wall (none with a single room).
* **Blocking.** Only boxes locked by the hider team count (not ramps, unlocked or seeker-locked
  boxes). Such a box stands at a door line when its footprint (rotated, in MuJoCo) reaches into
  the band ``|across - line| <= WALL_THICKNESS / 2 + PASSAGE``: no agent fits between it and the
  wall there. Its *shadow* is the along-line extent of the part of its footprint inside the band.
  A door is blocked when the shadows leave no free stretch of it ``PASSAGE`` long (an agent's
  centre must keep 0.15 m from both door ends and from every shadow to pass). A locked box away
  from the door never blocks it. Diagonal squeezes past a box corner are not modelled, so a door
  called blocked may, rarely, still let a perfectly steered agent slip through.

The statistics: ``doors_blocked_prep`` = blocked doors / doors and ``fort_prep`` = 1.0 if every
door is blocked, else 0.0, both when preparation ends and NaN without a door (in randomwalls a
fort thus means every interior door closed). ``hider_in_room`` / ``seeker_in_room``: fraction of
play steps ending with every hider / at least one seeker centred strictly inside the quadrant room
(``in_room``); NaN in randomwalls (no room stands out) and without a play step.
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
PASSAGE = 2 * spec.AGENT_RADIUS  # the narrowest opening an agent passes through
BAND = HALF_T + PASSAGE  # how far across a door line a box still closes it
EPS = 1e-9
BOX_COLUMNS = 5  # rows of ``boxes``: x, y, half size x, half size y, yaw


@njit
def in_room(x: float, y: float) -> bool:
    """Whether a point lies strictly inside the quadrant room (inside its wall lines)."""
    return ROOM_LO < x < spec.FLOOR_SIZE and ROOM_LO < y < spec.FLOOR_SIZE


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
def _shadow(box: np.ndarray, vertical: bool, c: float) -> tuple[float, float]:
    """Along-line extent of the part of a (rotated) box footprint within ``BAND`` of line ``c``;
    ``(inf, -inf)`` when the footprint does not reach the band."""
    cos, sin = math.cos(box[4]), math.sin(box[4])
    t = np.empty(4)
    s = np.empty(4)
    for k in range(4):  # corners in order round the rectangle
        ux = box[2] if k == 1 or k == 2 else -box[2]
        uy = box[3] if k >= 2 else -box[3]
        x = box[0] + cos * ux - sin * uy
        y = box[1] + sin * ux + cos * uy
        t[k], s[k] = (y, x - c) if vertical else (x, y - c)
    t0, t1 = math.inf, -math.inf
    for k in range(4):
        if abs(s[k]) <= BAND:
            t0, t1 = min(t0, t[k]), max(t1, t[k])
        j = (k + 1) % 4
        for edge in (-BAND, BAND):
            if (s[k] - edge) * (s[j] - edge) < 0.0:
                at = t[k] + (t[j] - t[k]) * (edge - s[k]) / (s[j] - s[k])
                t0, t1 = min(t0, at), max(t1, at)
    return t0, t1


@njit
def _blocked(boxes: np.ndarray, n_boxes: int, vertical: bool, c: float, d0: float, d1: float,
             lo: np.ndarray, hi: np.ndarray, free: np.ndarray) -> bool:
    """Whether the box shadows leave no free stretch of the door [d0, d1] on line ``c`` PASSAGE long."""
    n = 0
    for b in range(n_boxes):
        t0, t1 = _shadow(boxes[b], vertical, c)
        if t0 <= t1:
            lo[n] = t0
            hi[n] = t1
            n += 1
    for m in range(_uncovered(lo, hi, n, d0, d1, free)):
        if free[m, 1] - free[m, 0] >= PASSAGE - EPS:
            return False
    return True


@njit
def count_doors(walls: np.ndarray, n_walls: int, quadrant: bool, boxes: np.ndarray,
                n_boxes: int) -> tuple[int, int]:
    """(doors, doors blocked) of a world: ``walls[:n_walls]`` rects, ``boxes[:n_boxes]`` the
    hider-locked boxes as rows (x, y, half size x, half size y, yaw); see the module for the rule."""
    size = n_walls + n_boxes + 2
    lines = np.empty((n_walls + 2, 4))
    lo = np.empty(size)
    hi = np.empty(size)
    gaps = np.empty((size, 2))
    free = np.empty((size, 2))
    doors = blocked = 0
    for k in range(_door_lines(walls, n_walls, quadrant, lines)):
        vertical = lines[k, 0] == 1.0
        c = lines[k, 1]
        n_cover = _wall_cover(walls, n_walls, vertical, c, lo, hi)
        for g in range(_uncovered(lo, hi, n_cover, lines[k, 2], lines[k, 3], gaps)):
            if gaps[g, 1] - gaps[g, 0] < PASSAGE - EPS:
                continue
            doors += 1
            if _blocked(boxes, n_boxes, vertical, c, gaps[g, 0], gaps[g, 1], lo, hi, free):
                blocked += 1
    return doors, blocked


@njit
def door_stats(walls: np.ndarray, n_walls: int, quadrant: bool, boxes: np.ndarray,
               n_boxes: int) -> tuple[float, float]:
    """``(doors_blocked_prep, fort_prep)`` for the world as it stands: the share of doors blocked
    and 1.0 if all are (0.0 otherwise); both NaN when the world has no door."""
    doors, blocked = count_doors(walls, n_walls, quadrant, boxes, n_boxes)
    if doors == 0:
        return math.nan, math.nan
    return blocked / doors, 1.0 if blocked == doors else 0.0


def warm_up() -> None:
    """Compile (or load from numba's cache) ``door_stats`` for calls from Python, as the MuJoCo
    variant makes them once per episode: that one-time cost then falls outside any episode."""
    door_stats(np.zeros((0, 4)), 0, True, np.zeros((1, BOX_COLUMNS)), 0)
