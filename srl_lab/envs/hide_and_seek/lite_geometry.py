"""2-D geometry primitives for the lite hide-and-seek kernels (rays, discs, axis-aligned boxes)."""
from __future__ import annotations

import math

from srl_lab.envs.hide_and_seek.lite_jit import njit

INF = math.inf


@njit
def _slab(o: float, d: float, lo: float, hi: float, t0: float, t1: float) -> tuple[float, float]:
    """Clip the ray parameters ``[t0, t1]`` to those with ``lo ≤ o + t d ≤ hi`` on one axis.

    An empty result has ``t0 > t1``.
    """
    if d == 0.0:
        if o < lo or o > hi:
            return INF, -INF
        return t0, t1
    inv = 1.0 / d
    ta = (lo - o) * inv
    tb = (hi - o) * inv
    if ta > tb:
        ta, tb = tb, ta
    return max(t0, ta), min(t1, tb)


@njit
def ray_box(ox: float, oy: float, dx: float, dy: float,
            xmin: float, ymin: float, xmax: float, ymax: float, tmax: float) -> float:
    """Entry parameter of the ray ``o + t d`` (0 ≤ t ≤ tmax) into a box, or ``INF`` if it misses.

    A ray starting inside the box enters at t = 0 (slab method).
    """
    t0, t1 = _slab(ox, dx, xmin, xmax, 0.0, tmax)
    if t0 <= t1:
        t0, t1 = _slab(oy, dy, ymin, ymax, t0, t1)
    return t0 if t0 <= t1 else INF


@njit
def ray_disc(ox: float, oy: float, dx: float, dy: float, cx: float, cy: float, r: float) -> float:
    """Entry distance of the unit ray ``o + t d`` (t ≥ 0) into a disc, or ``INF`` if it misses."""
    px = ox - cx
    py = oy - cy
    b = px * dx + py * dy
    c = px * px + py * py - r * r
    if c <= 0.0:
        return 0.0
    if b >= 0.0:
        return INF
    disc = b * b - c
    if disc < 0.0:
        return INF
    return -b - math.sqrt(disc)


@njit
def gap_disc_box(px: float, py: float, r: float, cx: float, cy: float, hx: float, hy: float) -> float:
    """Distance from a disc's surface to a box (negative when they overlap)."""
    dx = abs(px - cx) - hx
    dy = abs(py - cy) - hy
    if dx > 0.0 and dy > 0.0:
        return math.sqrt(dx * dx + dy * dy) - r
    return max(dx, dy) - r


@njit
def wrap_angle(a: float) -> float:
    """Wrap an angle to [-pi, pi)."""
    return (a + math.pi) % (2.0 * math.pi) - math.pi
