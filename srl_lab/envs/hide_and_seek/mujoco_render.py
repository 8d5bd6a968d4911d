"""Top-down RGB frames of a MuJoCo hide-and-seek episode, rasterised with numpy.

Drawn from the simulation state rather than MuJoCo's OpenGL renderer so frames work on headless
machines. The look is the shared renderer's (``render.render_scene``: same palette, cones, padlocks,
pale seekers during preparation); what differs is that boxes and ramps are drawn at their actual
yaw, since they turn here, and agents standing on something get a light rim.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from . import spec
from .render import (
    BOX,
    CONE_RADIUS,
    FLOOR,
    GRID_LINE,
    LOCK_TINT,
    MARGIN,
    OUTER_WALL,
    OUTSIDE,
    RAMP,
    ROOM,
    TEAM,
    WALL,
)
from .scene import HIDER

if TYPE_CHECKING:
    from .mujoco_episode import Episode

RAMP_HIGH_SIDE = (95, 60, 130)
UNLOCKED_EDGE = (120, 90, 40)
RAISED_RIM = (235, 235, 235)  # rim of an agent lifted off the floor (on a box or ramp)
Pose = tuple[float, float, float, float, float]  # x, y, yaw, half-size x, half-size y


class _Canvas:
    """RGB float image; shapes are painted inside a bounding window in world coordinates (y up)."""

    def __init__(self, pixels: int) -> None:
        self.lo, hi = -MARGIN, spec.FLOOR_SIZE + MARGIN
        self.scale = pixels / (hi - self.lo)
        self.centres = self.lo + (np.arange(pixels) + 0.5) / self.scale
        self.img = np.empty((pixels, pixels, 3))
        self.img[:] = OUTSIDE

    def window(self, x: float, y: float, reach: float):
        """Pixel slices around (x, y) within ``reach`` metres, and their world coordinates."""
        n = self.img.shape[0]

        def px(metres: float, up: bool) -> int:
            v = (metres - self.lo) * self.scale
            return int(np.clip(math.ceil(v) if up else math.floor(v), 0, n))

        c0, c1 = px(x - reach, False), px(x + reach, True)
        r0, r1 = n - px(y + reach, True), n - px(y - reach, False)  # rows run top (high y) down
        gx, gy = np.meshgrid(self.centres[c0:c1], self.centres[::-1][r0:r1])
        return (slice(r0, r1), slice(c0, c1)), gx, gy

    def paint(self, win, mask: np.ndarray, colour, alpha: float = 1.0) -> None:
        region = self.img[win]
        region[mask] = (1 - alpha) * region[mask] + alpha * np.asarray(colour, float)

    def rect(self, xmin: float, ymin: float, xmax: float, ymax: float, colour, alpha: float = 1.0) -> None:
        cx, cy = (xmin + xmax) / 2, (ymin + ymax) / 2
        self.oriented((cx, cy, 0.0, (xmax - xmin) / 2, (ymax - ymin) / 2), colour, alpha)

    def oriented(self, pose: Pose, colour, alpha: float = 1.0, inset: float = 0.0,
                 band: tuple[float, float] | None = None, hatch: bool = False) -> None:
        """A rotated rectangle, or part of it: its rim ``inset`` wide, the ``band`` between two local
        x coordinates (and within 0.6 of its half-width), or diagonal ``hatch`` stripes."""
        x, y, yaw, hx, hy = pose
        win, gx, gy = self.window(x, y, math.hypot(hx, hy))
        u, v = _local(gx - x, gy - y, yaw)
        mask = (np.abs(u) <= hx) & (np.abs(v) <= hy)
        if inset > 0:
            mask &= (np.abs(u) > hx - inset) | (np.abs(v) > hy - inset)
        if band is not None:
            mask &= (u >= band[0]) & (u <= band[1]) & (np.abs(v) <= 0.6 * hy)
        if hatch:
            mask &= ((gx + gy) / 0.12) % 1.0 < 0.4
        self.paint(win, mask, colour, alpha)

    def disc(self, x: float, y: float, r: float, colour) -> None:
        win, gx, gy = self.window(x, y, r)
        self.paint(win, (gx - x) ** 2 + (gy - y) ** 2 <= r * r, colour)

    def cone(self, x: float, y: float, heading: float, colour, occluders: list[Pose]) -> None:
        """The 135° view cone, cut where walls or boxes hide the floor from the agent's centre."""
        win, gx, gy = self.window(x, y, CONE_RADIUS)
        dx, dy = gx - x, gy - y
        dist = np.hypot(dx, dy)
        ahead = (dx * math.cos(heading) + dy * math.sin(heading)) >= math.cos(spec.VIEW_HALF_ANGLE) * dist
        mask = (dist <= CONE_RADIUS) & ahead
        for pose in occluders:
            mask &= ~_segment_hits(x, y, dx, dy, pose)
        self.paint(win, mask, colour, 0.2)


def _local(dx, dy, yaw: float):
    c, s = math.cos(yaw), math.sin(yaw)
    return c * dx + s * dy, -s * dx + c * dy


def _segment_hits(x: float, y: float, dx: np.ndarray, dy: np.ndarray, pose: Pose) -> np.ndarray:
    """Whether each segment (x, y) → (x + dx, y + dy) crosses a rotated rectangle (slab method)."""
    cx, cy, yaw, hx, hy = pose
    ox, oy = _local(x - cx, y - cy, yaw)
    du, dv = _local(dx, dy, yaw)
    t0, t1 = np.zeros_like(du), np.ones_like(du)
    with np.errstate(divide="ignore", invalid="ignore"):
        for o, d, h in ((ox, du, hx), (oy, dv, hy)):
            ta, tb = (-h - o) / d, (h - o) / d
            flat = d == 0
            near = np.where(flat, -np.inf if abs(o) <= h else np.inf, np.minimum(ta, tb))
            far = np.where(flat, np.inf if abs(o) <= h else -np.inf, np.maximum(ta, tb))
            t0, t1 = np.maximum(t0, near), np.minimum(t1, far)
    return t0 <= t1


def render_episode(ep: Episode, pixels: int = 480) -> np.ndarray:
    """The current frame of ``ep`` as a ``[pixels, pixels, 3]`` uint8 array."""
    cv = _Canvas(pixels)
    s = spec.FLOOR_SIZE
    cv.rect(0.0, 0.0, s, s, FLOOR)
    if ep.room is not None:
        cv.rect(*ep.room, ROOM)
    for k in range(5, spec.GRID_SIZE, 5):
        c = k * spec.CELL
        cv.rect(c - 0.006, 0.0, c + 0.006, s, GRID_LINE)
        cv.rect(0.0, c - 0.006, s, c + 0.006, GRID_LINE)
    kin, w = ep.kin, ep.world
    objects: list[Pose] = [(float(p[0]), float(p[1]), float(yaw), sz[0] / 2, sz[1] / 2)
                           for p, yaw, sz in zip(kin.obj_pos, kin.obj_yaw, w.obj_size)]
    walls = [wall.rect() for wall in ep.walls]
    occluders = [((r[0] + r[2]) / 2, (r[1] + r[3]) / 2, 0.0, (r[2] - r[0]) / 2, (r[3] - r[1]) / 2)
                 for r in walls] + objects[:w.n_boxes]
    for p, yaw, team in zip(kin.agent_pos, kin.agent_yaw, ep.team):
        cv.cone(p[0], p[1], yaw, TEAM[int(team)], occluders)
    for wall, rect in zip(ep.walls, walls):
        cv.rect(*rect, OUTER_WALL if wall.height > spec.INTERIOR_WALL_HEIGHT else WALL)
    for o, pose in enumerate(objects):
        ramp = o >= w.n_boxes
        cv.oriented(pose, RAMP if ramp else BOX)
        if ramp:  # a darker band on the high side (the wedge rises towards its local +x)
            cv.oriented(pose, RAMP_HIGH_SIDE, band=(0.35 * pose[3], 0.85 * pose[3]))
        owner = int(ep.owner[o])
        if owner < 0:
            cv.oriented(pose, UNLOCKED_EDGE, inset=0.02)
        else:
            cv.oriented(pose, LOCK_TINT[owner], alpha=0.9, hatch=True)
            cv.oriented(pose, TEAM[owner], inset=0.05)
            cv.disc(pose[0], pose[1], 0.06, (30, 30, 30))
    r = spec.AGENT_RADIUS
    prep = ep.t < ep.prep
    for p, yaw, team in zip(kin.agent_pos, kin.agent_yaw, ep.team):
        colour = np.asarray(TEAM[int(team)], float)
        if prep and team != HIDER:
            colour = 0.45 * colour + 0.55 * 255
        raised = p[2] > r + 0.05
        cv.disc(p[0], p[1], r, RAISED_RIM if raised else (20, 20, 20))
        cv.disc(p[0], p[1], r * 0.82, colour)
        cv.disc(p[0] + 0.6 * r * math.cos(yaw), p[1] + 0.6 * r * math.sin(yaw), 0.3 * r, (255, 255, 255))
    return np.clip(cv.img, 0, 255).astype(np.uint8)
