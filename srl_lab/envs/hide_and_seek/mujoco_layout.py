"""Random episode layouts for the MuJoCo hide-and-seek variant, expressed as a hand-built ``Scene``.

Sampling produces the same ``Scene`` description that tests load by hand, so the model builder has
one input. Interior walls sit on the 0.2 m placement grid and each keeps one 2-cell (0.4 m) door.
"""
from __future__ import annotations

import numpy as np

from . import spec
from .scene import HIDER, RAMP_SIZE, SEEKER, Agent, Box, Ramp, Scene, Wall, outer_walls

DOOR_CELLS = 2
MIN_ROOM_CELLS = 6  # a split never leaves a room narrower than this (1.2 m)
SPAWN_MARGIN = 0.05  # clearance between spawned footprints and walls / other entities
TEAM_RADIUS = 0.5  # teammates spawn within this distance of their team's first member
PLACEMENT_TRIES = 2000

Rect = tuple[float, float, float, float]  # xmin, ymin, xmax, ymax


def _wall_with_door(vertical: bool, line: int, start: int, stop: int, door: int | None) -> list[Wall]:
    """Segments of a wall on grid line ``line`` spanning cells ``start..stop``, minus a door."""
    c = spec.CELL
    spans = [(start, stop)] if door is None else [(start, door), (door + DOOR_CELLS, stop)]
    spans = [(a * c, b * c) for a, b in spans]
    pos = line * c
    return [Wall(pos, a, pos, b) if vertical else Wall(a, pos, b, pos) for a, b in spans if b > a]


def quadrant_walls(rng: np.random.Generator) -> tuple[list[Wall], Rect]:
    """A 3 m room in the top-right corner; two walls with a door each, or (p=0.5) one without."""
    n, half = spec.GRID_SIZE, spec.GRID_SIZE // 2
    doors: list[int | None] = [int(rng.integers(half + 1, n - DOOR_CELLS)) for _ in range(2)]
    if rng.random() < 0.5:
        doors[int(rng.integers(2))] = None
    walls = outer_walls()
    walls += _wall_with_door(True, half, half, n, doors[0])
    walls += _wall_with_door(False, half, half, n, doors[1])
    c = spec.CELL
    return walls, (half * c, half * c, n * c, n * c)


def random_walls(rng: np.random.Generator, n_rooms: int) -> list[Wall]:
    """Split the floor into ``n_rooms`` rooms by recursive wall splits, each wall with one door.

    A split line is rejected where its ends would meet an existing door, so every door stays open.
    """
    n = spec.GRID_SIZE
    rooms = [(0, 0, n, n)]  # in cells: x0, y0, x1, y1
    doors: list[tuple[bool, int, int]] = []  # (vertical, line, first door cell)
    walls: list[Wall] = []
    while len(rooms) < n_rooms:
        for _ in range(PLACEMENT_TRIES):
            idx = int(rng.integers(len(rooms)))
            x0, y0, x1, y1 = rooms[idx]
            vertical = bool(rng.integers(2))
            lo, hi = (x0, x1) if vertical else (y0, y1)
            a, b = (y0, y1) if vertical else (x0, x1)
            if hi - lo < 2 * MIN_ROOM_CELLS:
                continue
            line = int(rng.integers(lo + MIN_ROOM_CELLS, hi - MIN_ROOM_CELLS + 1))
            if any(v != vertical and end in (a, b) and d - 1 <= line <= d + DOOR_CELLS + 1
                   for v, end, d in doors):
                continue
            door = int(rng.integers(a + 1, b - DOOR_CELLS))
            break
        else:
            break  # no room is wide enough to split again
        walls += _wall_with_door(vertical, line, a, b, door)
        doors.append((vertical, line, door))
        halves = [(x0, y0, line, y1), (line, y0, x1, y1)] if vertical else \
                 [(x0, y0, x1, line), (x0, line, x1, y1)]
        rooms[idx:idx + 1] = halves
    return walls


def _overlaps(r: Rect, others: list[Rect], margin: float) -> bool:
    return any(r[0] < o[2] + margin and o[0] < r[2] + margin and r[1] < o[3] + margin
               and o[1] < r[3] + margin for o in others)


class _Placer:
    """Rejection sampling of non-overlapping axis-aligned footprints inside a region."""

    def __init__(self, rng: np.random.Generator, walls: list[Wall]) -> None:
        self.rng = rng
        self.taken: list[Rect] = [w.rect() for w in walls]

    def place(self, half: tuple[float, float], region: Rect, avoid: Rect | None = None,
              near: np.ndarray | None = None) -> np.ndarray:
        lo = np.array([region[0] + half[0], region[1] + half[1]])
        hi = np.array([region[2] - half[0], region[3] - half[1]])
        for _ in range(PLACEMENT_TRIES):
            if near is None:
                pos = self.rng.uniform(lo, hi)
            else:
                ang, rad = self.rng.uniform(0, 2 * np.pi), self.rng.uniform(0, TEAM_RADIUS)
                pos = near + rad * np.array([np.cos(ang), np.sin(ang)])
                if np.any(pos < lo) or np.any(pos > hi):
                    continue
            r = (pos[0] - half[0], pos[1] - half[1], pos[0] + half[0], pos[1] + half[1])
            if avoid is not None and _overlaps(r, [avoid], 0.0):
                continue
            if not _overlaps(r, self.taken, SPAWN_MARGIN):
                self.taken.append(r)
                return pos
        raise RuntimeError("could not place an entity: too many entities for the free floor")


def _boxes(rng: np.random.Generator, placer: _Placer, n: int, region: Rect, elongated: bool) -> list[Box]:
    """Cubes, or (randomwalls) a mix of cubes and x-/y-aligned elongated boxes."""
    boxes = []
    for _ in range(n):
        proto = Box(0.0, 0.0)
        if elongated and rng.random() < 0.5:
            proto = Box.elongated(0.0, 0.0, along_x=bool(rng.integers(2)))
        x, y = placer.place((proto.size_x / 2, proto.size_y / 2), region)
        boxes.append(Box(float(x), float(y), proto.size_x, proto.size_y))
    return boxes


def generate(rng: np.random.Generator, scenario: str, layout: spec.Layout,
             hider_spawn: str = "room") -> tuple[Scene, Rect | None]:
    """Sample one episode (scene at t=0) for ``quadrant`` or ``randomwalls``, plus the quadrant room.

    Quadrant: hiders (unless ``hider_spawn="anywhere"``) and boxes start in the room, seekers and
    ramps outside it. A wall layout whose free floor cannot take every entity is redrawn.
    """
    for _ in range(10):
        try:
            return _generate_once(rng, scenario, layout, hider_spawn)
        except RuntimeError:
            continue
    return _generate_once(rng, scenario, layout, hider_spawn)


def _generate_once(rng: np.random.Generator, scenario: str, layout: spec.Layout,
                   hider_spawn: str = "room") -> tuple[Scene, Rect | None]:
    h, s = spec.WALL_THICKNESS / 2, spec.FLOOR_SIZE
    floor: Rect = (h, h, s - h, s - h)
    if scenario == "quadrant":
        walls, room = quadrant_walls(rng)
    elif scenario == "randomwalls":
        room = None
        walls = (outer_walls() if rng.random() < 0.5 else []) + random_walls(rng, int(rng.integers(1, 5)))
    else:
        raise ValueError(f"unknown scenario {scenario!r}; use 'quadrant' or 'randomwalls'")
    placer = _Placer(rng, walls)
    hider_region = room if room is not None else floor
    r = spec.AGENT_RADIUS

    def team(n: int, region: Rect, avoid: Rect | None) -> list[np.ndarray]:
        first = placer.place((r, r), region, avoid)
        return [first] + [placer.place((r, r), region, avoid, near=first) for _ in range(n - 1)]

    hider_start = floor if hider_spawn == "anywhere" else hider_region
    positions = team(layout.n_hiders, hider_start, None) + team(layout.n_seekers, floor, room)
    teams = [HIDER] * layout.n_hiders + [SEEKER] * layout.n_seekers
    headings = rng.uniform(-np.pi, np.pi, size=len(teams))
    agents = [Agent(float(p[0]), float(p[1]), float(hd), tm) for p, hd, tm in zip(positions, headings, teams)]
    n_boxes = layout.n_boxes
    if scenario == "randomwalls":  # 3..n_boxes boxes per episode (all of them if n_boxes < 3)
        n_boxes = int(rng.integers(min(3, n_boxes), n_boxes + 1))
    boxes = _boxes(rng, placer, n_boxes, hider_region, scenario == "randomwalls")
    ramps = []
    for quarter in rng.integers(4, size=layout.n_ramps):
        half = (RAMP_SIZE[0] / 2, RAMP_SIZE[1] / 2)
        x, y = placer.place(half if quarter % 2 == 0 else half[::-1], floor, room)
        ramps.append(Ramp(float(x), float(y), float(quarter * np.pi / 2)))
    return Scene(agents=agents, walls=walls, boxes=boxes, ramps=ramps), room
