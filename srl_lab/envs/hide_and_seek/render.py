"""Top-down RGB rendering of a hide-and-seek ``Scene`` (works for any variant that can snapshot one).

Pure numpy rasterisation: floor (an optional room tinted), walls (outer ones darker), boxes (sand)
and ramps (violet, a darker band on the high side), agents coloured by team (hiders blue, seekers
red) with their 135° view cone, cut where walls and boxes hide the floor. A locked object is hatched
and outlined in its owning team's colour with a padlock dot. During preparation seekers are pale.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from srl_lab.envs.hide_and_seek import spec
from srl_lab.envs.hide_and_seek.scene import HIDER, RAMP_SIZE, Box, Scene

FLOOR = (236, 229, 214)
GRID_LINE = (224, 216, 198)
OUTSIDE = (200, 200, 200)
WALL = (90, 90, 96)
OUTER_WALL = (45, 45, 50)
BOX = (214, 170, 96)
RAMP = (150, 110, 190)
ROOM = (222, 228, 238)
TEAM = {HIDER: (40, 110, 230), 1: (220, 50, 50)}
LOCK_TINT = {HIDER: (120, 165, 245), 1: (240, 130, 130)}  # stripes over a locked object
CONE_RADIUS = 1.2  # m, drawn length of the view cone
MARGIN = 0.4  # m of world drawn around the 6 m floor


class _Canvas:
    """An RGB float image with world-to-pixel mapping and alpha-blended primitives."""

    def __init__(self, pixels: int, lo: float, hi: float) -> None:
        self.img = np.empty((pixels, pixels, 3))
        self.lo = lo
        self.scale = pixels / (hi - lo)
        centres = (np.arange(pixels) + 0.5) / self.scale + lo
        self.xs = centres  # world x of each column
        self.ys = centres[::-1]  # world y of each row (y up)

    def _window(self, xmin: float, ymin: float, xmax: float, ymax: float):
        n = self.img.shape[0]
        c0 = int(np.clip(math.floor((xmin - self.lo) * self.scale), 0, n))
        c1 = int(np.clip(math.ceil((xmax - self.lo) * self.scale), 0, n))
        r0 = int(np.clip(math.floor(n - (ymax - self.lo) * self.scale), 0, n))
        r1 = int(np.clip(math.ceil(n - (ymin - self.lo) * self.scale), 0, n))
        gx, gy = np.meshgrid(self.xs[c0:c1], self.ys[r0:r1])
        return (slice(r0, r1), slice(c0, c1)), gx, gy

    def blend(self, window, mask: np.ndarray, colour, alpha: float = 1.0) -> None:
        region = self.img[window]
        region[mask] = (1 - alpha) * region[mask] + alpha * np.asarray(colour, float)

    def rect(self, xmin, ymin, xmax, ymax, colour, alpha=1.0) -> None:
        window, gx, gy = self._window(xmin, ymin, xmax, ymax)
        self.blend(window, (gx >= xmin) & (gx <= xmax) & (gy >= ymin) & (gy <= ymax), colour, alpha)

    def outline(self, xmin, ymin, xmax, ymax, colour, width: float) -> None:
        window, gx, gy = self._window(xmin, ymin, xmax, ymax)
        inside = (gx >= xmin) & (gx <= xmax) & (gy >= ymin) & (gy <= ymax)
        core = (gx >= xmin + width) & (gx <= xmax - width) & (gy >= ymin + width) & (gy <= ymax - width)
        self.blend(window, inside & ~core, colour)

    def hatch(self, xmin, ymin, xmax, ymax, colour, alpha) -> None:
        """Diagonal stripes (what marks a locked object)."""
        window, gx, gy = self._window(xmin, ymin, xmax, ymax)
        stripes = ((gx + gy) / 0.12) % 1.0 < 0.4
        self.blend(window, stripes & (gx >= xmin) & (gx <= xmax) & (gy >= ymin) & (gy <= ymax), colour, alpha)

    def disc(self, x, y, r, colour, alpha=1.0) -> None:
        window, gx, gy = self._window(x - r, y - r, x + r, y + r)
        self.blend(window, (gx - x) ** 2 + (gy - y) ** 2 <= r * r, colour, alpha)

    def wedge(self, x, y, heading, half_angle, r, colour, alpha, occluders: list[tuple]) -> None:
        """A view cone, cut where ``occluders`` (rectangles) hide the floor from its apex."""
        window, gx, gy = self._window(x - r, y - r, x + r, y + r)
        dx, dy = gx - x, gy - y
        dist = np.hypot(dx, dy)
        cos_off = (dx * math.cos(heading) + dy * math.sin(heading)) / np.maximum(dist, 1e-9)
        mask = (dist <= r) & (cos_off >= math.cos(half_angle))
        for rect in occluders:
            if rect[0] <= x + r and rect[2] >= x - r and rect[1] <= y + r and rect[3] >= y - r:  # within reach
                mask &= ~_segments_hit(x, y, dx, dy, rect)
        self.blend(window, mask, colour, alpha)


def _segments_hit(x: float, y: float, dx: np.ndarray, dy: np.ndarray, rect: tuple) -> np.ndarray:
    """Whether each segment (x, y) → (x + dx, y + dy) crosses ``rect`` (slab method, vectorised)."""
    t0 = np.zeros_like(dx)
    t1 = np.ones_like(dx)
    with np.errstate(divide="ignore", invalid="ignore"):
        for o, d, lo, hi in ((x, dx, rect[0], rect[2]), (y, dy, rect[1], rect[3])):
            ta, tb = (lo - o) / d, (hi - o) / d
            near, far = np.minimum(ta, tb), np.maximum(ta, tb)
            parallel = d == 0
            inside = (o >= lo) & (o <= hi)
            near = np.where(parallel, np.where(inside, -np.inf, np.inf), near)
            far = np.where(parallel, np.where(inside, np.inf, -np.inf), far)
            t0 = np.maximum(t0, near)
            t1 = np.minimum(t1, far)
    return t0 <= t1


def render_scene(scene: Scene, pixels: int = 480, prep: bool = False,
                 room: tuple[float, float, float, float] | None = None) -> np.ndarray:
    """Draw ``scene`` as an ``[pixels, pixels, 3]`` ``uint8`` image (y axis pointing up); ``room``
    (xmin, ymin, xmax, ymax) is tinted, e.g. the hiders' room of ``quadrant``."""
    cv = _Canvas(pixels, -MARGIN, spec.FLOOR_SIZE + MARGIN)
    walls = tuple((w.rect(), w.height > spec.INTERIOR_WALL_HEIGHT) for w in scene.walls)
    floor, wall_mask, wall_colours = _static_layers(pixels, walls, room)
    cv.img[:] = floor
    occluders = [rect for rect, _ in walls] + [_box_rect(b) for b in scene.boxes]
    for agent in scene.agents:
        cv.wedge(agent.x, agent.y, agent.heading, spec.VIEW_HALF_ANGLE, CONE_RADIUS, TEAM[agent.team],
                 0.2, occluders)
    cv.img[wall_mask] = wall_colours
    for box in scene.boxes:
        _object(cv, _box_rect(box), BOX, box.locked_by)
    for ramp in scene.ramps:
        h = RAMP_SIZE[0] / 2
        rect = (ramp.x - h, ramp.y - h, ramp.x + h, ramp.y + h)
        _object(cv, rect, RAMP, ramp.locked_by)
        hx, hy = math.cos(ramp.yaw) * h * 0.6, math.sin(ramp.yaw) * h * 0.6  # the high side
        band = 0.25 * h
        cv.rect(ramp.x + hx - max(abs(hy), band), ramp.y + hy - max(abs(hx), band),
                ramp.x + hx + max(abs(hy), band), ramp.y + hy + max(abs(hx), band), (95, 60, 130))
    r = spec.AGENT_RADIUS
    for agent in scene.agents:
        colour = np.asarray(TEAM[agent.team], float)
        if prep and agent.team != HIDER:
            colour = 0.45 * colour + 0.55 * 255
        cv.disc(agent.x, agent.y, r, (20, 20, 20))
        cv.disc(agent.x, agent.y, r * 0.82, colour)
        cv.disc(agent.x + 0.6 * r * math.cos(agent.heading), agent.y + 0.6 * r * math.sin(agent.heading),
                0.3 * r, (255, 255, 255))
    return np.clip(cv.img, 0, 255).astype(np.uint8)


@functools.lru_cache(maxsize=8)
def _static_layers(pixels: int, walls: tuple[tuple[tuple[float, ...], bool], ...],
                   room: tuple[float, float, float, float] | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What stays put through an episode, drawn once per world: the floor (room tint, grid) and the
    walls, as a mask with their colours (walls go over the view cones, the floor under them)."""
    cv = _Canvas(pixels, -MARGIN, spec.FLOOR_SIZE + MARGIN)
    cv.img[:] = OUTSIDE
    cv.rect(0.0, 0.0, spec.FLOOR_SIZE, spec.FLOOR_SIZE, FLOOR)
    if room is not None:
        cv.rect(*room, ROOM)
    for k in range(5, spec.GRID_SIZE, 5):
        c = k * spec.CELL
        cv.rect(c - 0.006, 0.0, c + 0.006, spec.FLOOR_SIZE, GRID_LINE)
        cv.rect(0.0, c - 0.006, spec.FLOOR_SIZE, c + 0.006, GRID_LINE)
    floor = cv.img.copy()
    for rect, outer in walls:
        cv.rect(*rect, OUTER_WALL if outer else WALL)
    mask = np.any(cv.img != floor, axis=-1)
    return floor, mask, cv.img[mask]


def _box_rect(box: Box) -> tuple[float, float, float, float]:
    return (box.x - box.size_x / 2, box.y - box.size_y / 2, box.x + box.size_x / 2, box.y + box.size_y / 2)


def _object(cv: _Canvas, rect: tuple[float, float, float, float], colour, locked_by: int | None) -> None:
    cv.rect(*rect, colour)
    if locked_by is None:
        cv.outline(*rect, (120, 90, 40), 0.02)
        return
    team = TEAM[locked_by]
    cv.hatch(*rect, LOCK_TINT[locked_by], 0.9)
    cv.outline(*rect, team, 0.05)
    cx, cy = (rect[0] + rect[2]) / 2, (rect[1] + rect[3]) / 2
    cv.disc(cx, cy, 0.06, (30, 30, 30))
