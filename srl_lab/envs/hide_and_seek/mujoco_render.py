"""Top-down RGB frames of a MuJoCo hide-and-seek episode, rasterised with numpy.

Drawn from the simulation state rather than MuJoCo's OpenGL renderer so frames work on headless
machines: floor, quadrant room, view cones, walls, ramps (shaded low to high), boxes (outlined in
the locking team's colour), agents coloured by team with a heading tick.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from . import spec
from .scene import HIDER

if TYPE_CHECKING:
    from .mujoco_episode import Episode

PX_PER_M = 64
MARGIN = 0.25  # metres of surroundings drawn around the floor
CONE_RADIUS = 1.5  # drawn length of a view cone (sight itself is unlimited)
BACKGROUND = (60, 60, 66)
FLOOR = (236, 232, 220)
ROOM = (214, 226, 240)
WALL = (70, 70, 76)
BOX = (214, 160, 80)
RAMP_LOW, RAMP_HIGH = (120, 170, 110), (180, 225, 160)
TEAM_RGB = {HIDER: (50, 110, 230), 1: (225, 60, 50)}


class _Canvas:
    """An RGB float image with world-coordinate pixel centres (y up) and masked painting."""

    def __init__(self) -> None:
        lo, hi = -MARGIN, spec.FLOOR_SIZE + MARGIN
        n = int(round((hi - lo) * PX_PER_M))
        centres = lo + (np.arange(n) + 0.5) / PX_PER_M
        self.x, self.y = np.meshgrid(centres, centres[::-1])
        self.img = np.empty((n, n, 3))
        self.img[:] = BACKGROUND

    def paint(self, mask: np.ndarray, rgb, alpha: float = 1.0) -> None:
        self.img[mask] = (1 - alpha) * self.img[mask] + alpha * np.asarray(rgb, dtype=float)

    def rect(self, x0: float, y0: float, x1: float, y1: float) -> np.ndarray:
        return (self.x >= x0) & (self.x <= x1) & (self.y >= y0) & (self.y <= y1)

    def local(self, cx: float, cy: float, yaw: float) -> tuple[np.ndarray, np.ndarray]:
        """Pixel coordinates in a frame centred at (cx, cy) and rotated by ``yaw``."""
        dx, dy = self.x - cx, self.y - cy
        c, s = np.cos(yaw), np.sin(yaw)
        return c * dx + s * dy, -s * dx + c * dy

    def oriented(self, cx: float, cy: float, yaw: float, hx: float, hy: float) -> np.ndarray:
        u, v = self.local(cx, cy, yaw)
        return (np.abs(u) <= hx) & (np.abs(v) <= hy)

    def disc(self, cx: float, cy: float, r: float) -> np.ndarray:
        return (self.x - cx) ** 2 + (self.y - cy) ** 2 <= r * r


def render_episode(ep: "Episode") -> np.ndarray:
    """The current frame of ``ep`` as an ``[H, W, 3]`` uint8 array."""
    cv = _Canvas()
    s = spec.FLOOR_SIZE
    cv.paint(cv.rect(0.0, 0.0, s, s), FLOOR)
    if ep.room is not None:
        cv.paint(cv.rect(*ep.room), ROOM)
    kin, w = ep.kin, ep.world
    for (x, y, _), yaw, team in zip(kin.agent_pos, kin.agent_yaw, ep.team):
        u, v = cv.local(x, y, yaw)
        cone = (u * u + v * v <= CONE_RADIUS ** 2) & (u >= np.cos(spec.VIEW_HALF_ANGLE) * np.hypot(u, v))
        cv.paint(cone, TEAM_RGB[int(team)], 0.18)
    for rect in ep.wall_rects:
        cv.paint(cv.rect(*rect), WALL)
    for o in range(len(kin.obj_yaw)):
        x, y, _ = kin.obj_pos[o]
        yaw = kin.obj_yaw[o]
        hx, hy = w.obj_size[o, 0] / 2, w.obj_size[o, 1] / 2
        body = cv.oriented(x, y, yaw, hx, hy)
        if o >= w.n_boxes:  # ramp: shade from the low end to the high end (its local +x)
            u, _ = cv.local(x, y, yaw)
            t = np.clip((u + hx) / (2 * hx), 0, 1)[body][:, None]
            cv.img[body] = (1 - t) * np.array(RAMP_LOW) + t * np.array(RAMP_HIGH)
        else:
            cv.paint(body, BOX)
        if ep.owner[o] >= 0:  # locked: outline in the owning team's colour
            rim = body & ~cv.oriented(x, y, yaw, hx - 0.05, hy - 0.05)
            cv.paint(rim, TEAM_RGB[int(ep.owner[o])])
    for (x, y, _), yaw, team in zip(kin.agent_pos, kin.agent_yaw, ep.team):
        cv.paint(cv.disc(x, y, spec.AGENT_RADIUS), TEAM_RGB[int(team)])
        u, v = cv.local(x, y, yaw)
        cv.paint((u >= 0) & (u <= spec.AGENT_RADIUS) & (np.abs(v) <= 0.02), (255, 255, 255))
    return np.clip(cv.img, 0, 255).astype(np.uint8)
