"""Top-down rigid-body physics for the lite variant (one environment per call).

Agents are discs, boxes and ramps axis-aligned rectangles that never rotate, walls static
rectangles. Each substep integrates velocities exactly (linear damping, Coulomb floor friction on
objects), then projects positions out of contact (position-based dynamics: grab joints,
agent–agent, agent–object, object–object, then walls) and derives velocities from the displacement.

No tunnelling: every body's displacement per substep is clamped to ``MAX_TRAVEL`` (0.06 m, below
the 0.1 m wall and 0.15 m box thickness; agents reach 9 m/s = 0.045 m per substep), and a body
found inside a wall is pushed out on the side it came from (its position before the substep).
Walls are resolved last, so they always win.

State layouts (per environment): ``ag[A, 6]`` = x, y, heading, vx, vy, wz; ``ob[O, 7]`` = x, y,
half-size x, half-size y, vx, vy, yaw; ``oi[O, 4]`` = exists, kind (0 box, 1 ramp), lock team
(-1 unlocked), locking agent; ``walls[W, 4]`` = xmin, ymin, xmax, ymax.
"""
from __future__ import annotations

import math

import numpy as np

from srl_lab.envs.hide_and_seek import spec
from srl_lab.envs.hide_and_seek.lite_geometry import wrap_angle
from srl_lab.envs.hide_and_seek.lite_jit import njit

R = spec.AGENT_RADIUS
DAMPING = 10.0  # agents' x, y and rz damping (mass 1)
DT = spec.SUBSTEP_DT
DECAY = math.exp(-DAMPING * DT)
FRICTION_DV = 0.2 * 50.0 * DT  # box friction 0.2 under gravity 50: speed lost per substep
MAX_TRAVEL = 0.06


@njit
def inv_mass(oi: np.ndarray, pinned: np.ndarray, o: int) -> float:
    """1 for a free object, 0 for a locked one or one a wall stopped this substep."""
    if oi[o, 2] >= 0 or pinned[o]:
        return 0.0
    return 1.0


@njit
def _from_box(px: float, py: float, xmin: float, ymin: float, xmax: float, ymax: float
              ) -> tuple[float, float, float, float, float]:
    """``(qx, qy, dx, dy, d2)``: the box's point nearest ``(px, py)``, the offset from it, its square length.

    A point inside the box is its own nearest point (offset 0).
    """
    qx = min(max(px, xmin), xmax)
    qy = min(max(py, ymin), ymax)
    dx = px - qx
    dy = py - qy
    return qx, qy, dx, dy, dx * dx + dy * dy


@njit
def _agent_contacts(ag: np.ndarray, ob: np.ndarray, oi: np.ndarray, held: np.ndarray,
                    hoff: np.ndarray, pinned: np.ndarray) -> None:
    """Grab joints, then agent–agent and agent–object contacts (mass-weighted projections)."""
    n_agents = ag.shape[0]
    n_objs = ob.shape[0]
    for i in range(n_agents):
        o = held[i]
        if o >= 0:
            wo = inv_mass(oi, pinned, o)
            k = 1.0 / (1.0 + wo)
            cx = ob[o, 0] - ag[i, 0] - hoff[i, 0]
            cy = ob[o, 1] - ag[i, 1] - hoff[i, 1]
            ag[i, 0] += k * cx
            ag[i, 1] += k * cy
            ob[o, 0] -= wo * k * cx
            ob[o, 1] -= wo * k * cy
    for i in range(n_agents):
        for j in range(i + 1, n_agents):
            dx = ag[j, 0] - ag[i, 0]
            dy = ag[j, 1] - ag[i, 1]
            d2 = dx * dx + dy * dy
            if d2 >= 4.0 * R * R:
                continue
            d = math.sqrt(d2)
            nx, ny = (dx / d, dy / d) if d > 1e-9 else (1.0, 0.0)
            half = 0.5 * (2.0 * R - d)
            ag[i, 0] -= nx * half
            ag[i, 1] -= ny * half
            ag[j, 0] += nx * half
            ag[j, 1] += ny * half
    for i in range(n_agents):
        for o in range(n_objs):
            if oi[o, 0] == 0:
                continue
            px, py = ag[i, 0], ag[i, 1]
            cx, cy, hx, hy = ob[o, 0], ob[o, 1], ob[o, 2], ob[o, 3]
            _, _, dx, dy, d2 = _from_box(px, py, cx - hx, cy - hy, cx + hx, cy + hy)
            if d2 >= R * R:
                continue
            if d2 > 0.0:
                d = math.sqrt(d2)
                nx = dx / d
                ny = dy / d
                pen = R - d
            else:
                depth_x = hx - abs(px - cx)
                depth_y = hy - abs(py - cy)
                if depth_x < depth_y:
                    nx = 1.0 if px >= cx else -1.0
                    ny = 0.0
                    pen = depth_x + R
                else:
                    nx = 0.0
                    ny = 1.0 if py >= cy else -1.0
                    pen = depth_y + R
            wo = inv_mass(oi, pinned, o)
            k = pen / (1.0 + wo)
            ag[i, 0] += nx * k
            ag[i, 1] += ny * k
            ob[o, 0] -= nx * k * wo
            ob[o, 1] -= ny * k * wo


@njit
def _object_contacts(ob: np.ndarray, oi: np.ndarray, pinned: np.ndarray) -> None:
    """Separate overlapping objects along the axis of least penetration."""
    n_objs = ob.shape[0]
    for o in range(n_objs):
        if oi[o, 0] == 0:
            continue
        for p in range(o + 1, n_objs):
            if oi[p, 0] == 0:
                continue
            dx = ob[p, 0] - ob[o, 0]
            pen_x = ob[o, 2] + ob[p, 2] - abs(dx)
            if pen_x <= 0.0:
                continue
            dy = ob[p, 1] - ob[o, 1]
            pen_y = ob[o, 3] + ob[p, 3] - abs(dy)
            if pen_y <= 0.0:
                continue
            wo = inv_mass(oi, pinned, o)
            wp = inv_mass(oi, pinned, p)
            if wo + wp == 0.0:
                continue
            if pen_x < pen_y:
                s = pen_x * (1.0 if dx >= 0.0 else -1.0) / (wo + wp)
                ob[o, 0] -= s * wo
                ob[p, 0] += s * wp
            else:
                s = pen_y * (1.0 if dy >= 0.0 else -1.0) / (wo + wp)
                ob[o, 1] -= s * wo
                ob[p, 1] += s * wp


@njit
def _clamp_travel(pos: np.ndarray, prev: np.ndarray, k: int) -> None:
    dx = pos[k, 0] - prev[k, 0]
    dy = pos[k, 1] - prev[k, 1]
    d2 = dx * dx + dy * dy
    if d2 > MAX_TRAVEL * MAX_TRAVEL:
        s = MAX_TRAVEL / math.sqrt(d2)
        pos[k, 0] = prev[k, 0] + dx * s
        pos[k, 1] = prev[k, 1] + dy * s


@njit
def _agent_walls(ag: np.ndarray, prev_a: np.ndarray, walls: np.ndarray, n_walls: int, i: int) -> None:
    """Push agent ``i`` out of every wall; a centre inside a wall leaves on its previous side."""
    for w in range(n_walls):
        xmin, ymin, xmax, ymax = walls[w, 0], walls[w, 1], walls[w, 2], walls[w, 3]
        px, py = ag[i, 0], ag[i, 1]
        if px < xmin - R or px > xmax + R or py < ymin - R or py > ymax + R:
            continue
        qx, qy, dx, dy, d2 = _from_box(px, py, xmin, ymin, xmax, ymax)
        if d2 >= R * R:
            continue
        if d2 > 0.0:
            d = math.sqrt(d2)
            ag[i, 0] = qx + dx / d * R
            ag[i, 1] = qy + dy / d * R
            continue
        bx = prev_a[i, 0]
        by = prev_a[i, 1]
        out_x = max(xmin - bx, bx - xmax)  # > 0 when the previous centre was beside the wall
        out_y = max(ymin - by, by - ymax)
        if out_x <= 0.0 and out_y <= 0.0:  # it started inside too: leave by the nearest face
            if min(px - xmin, xmax - px) < min(py - ymin, ymax - py):
                ag[i, 0] = xmin - R if px - xmin < xmax - px else xmax + R
            else:
                ag[i, 1] = ymin - R if py - ymin < ymax - py else ymax + R
        elif out_x > out_y:
            ag[i, 0] = xmin - R if bx < xmin else xmax + R
        else:
            ag[i, 1] = ymin - R if by < ymin else ymax + R


@njit
def _object_walls(ob: np.ndarray, prev_o: np.ndarray, walls: np.ndarray, n_walls: int, o: int) -> bool:
    """Push object ``o`` out of every wall along the axis it entered by; True if it touched one."""
    hit = False
    for w in range(n_walls):
        wcx = 0.5 * (walls[w, 0] + walls[w, 2])
        wcy = 0.5 * (walls[w, 1] + walls[w, 3])
        sx = ob[o, 2] + 0.5 * (walls[w, 2] - walls[w, 0])
        sy = ob[o, 3] + 0.5 * (walls[w, 3] - walls[w, 1])
        dx = ob[o, 0] - wcx
        dy = ob[o, 1] - wcy
        pen_x = sx - abs(dx)
        pen_y = sy - abs(dy)
        if pen_x <= 0.0 or pen_y <= 0.0:
            continue
        hit = True
        pdx = prev_o[o, 0] - wcx
        pdy = prev_o[o, 1] - wcy
        prev_x = sx - abs(pdx)
        prev_y = sy - abs(pdy)
        if prev_x <= 0.0 or prev_y <= 0.0:  # came from outside: leave on that side
            along_x = prev_x < prev_y
            side_x = pdx
            side_y = pdy
        else:
            along_x = pen_x < pen_y
            side_x = dx
            side_y = dy
        if along_x:
            ob[o, 0] = wcx + (sx if side_x >= 0.0 else -sx)
        else:
            ob[o, 1] = wcy + (sy if side_y >= 0.0 else -sy)
    return hit


@njit
def _project(ag: np.ndarray, ob: np.ndarray, oi: np.ndarray, walls: np.ndarray, n_walls: int,
             held: np.ndarray, hoff: np.ndarray, prev_a: np.ndarray, prev_o: np.ndarray,
             pinned: np.ndarray) -> bool:
    """One projection pass; returns True when a wall stopped an object (worth a second pass)."""
    _agent_contacts(ag, ob, oi, held, hoff, pinned)
    _object_contacts(ob, oi, pinned)
    stopped = False
    for i in range(ag.shape[0]):
        _clamp_travel(ag, prev_a, i)
        _agent_walls(ag, prev_a, walls, n_walls, i)
    for o in range(ob.shape[0]):
        if oi[o, 0] == 0 or oi[o, 2] >= 0:
            continue
        _clamp_travel(ob, prev_o, o)
        if _object_walls(ob, prev_o, walls, n_walls, o) and not pinned[o]:
            pinned[o] = 1.0
            stopped = True
    return stopped


@njit
def physics_step(ag: np.ndarray, ob: np.ndarray, oi: np.ndarray, walls: np.ndarray, n_walls: int,
                 held: np.ndarray, hoff: np.ndarray, force: np.ndarray, scratch: np.ndarray) -> None:
    """Advance one environment by ``spec.SUBSTEPS`` substeps under per-agent ``force[A, 3]``.

    ``scratch`` is an ``[A + 2 * O, 2]`` work array (previous positions, then pinned flags).
    """
    n_agents = ag.shape[0]
    n_objs = ob.shape[0]
    prev_a = scratch[:n_agents]
    prev_o = scratch[n_agents:n_agents + n_objs]
    pinned = scratch[n_agents + n_objs:, 0]
    for _ in range(spec.SUBSTEPS):
        for i in range(n_agents):
            tx = force[i, 0] / DAMPING
            ty = force[i, 1] / DAMPING
            vx = tx + (ag[i, 3] - tx) * DECAY
            vy = ty + (ag[i, 4] - ty) * DECAY
            prev_a[i, 0] = ag[i, 0]
            prev_a[i, 1] = ag[i, 1]
            ag[i, 0] += vx * DT
            ag[i, 1] += vy * DT
            ag[i, 5] = force[i, 2] / DAMPING
            ag[i, 2] = wrap_angle(ag[i, 2] + ag[i, 5] * DT)
        for o in range(n_objs):
            prev_o[o, 0] = ob[o, 0]
            prev_o[o, 1] = ob[o, 1]
            pinned[o] = 0.0
            if oi[o, 0] == 0:
                continue
            if oi[o, 2] >= 0:
                ob[o, 4] = 0.0
                ob[o, 5] = 0.0
                continue
            speed = math.sqrt(ob[o, 4] * ob[o, 4] + ob[o, 5] * ob[o, 5])
            s = 0.0 if speed <= FRICTION_DV else (speed - FRICTION_DV) / speed
            ob[o, 0] += ob[o, 4] * s * DT
            ob[o, 1] += ob[o, 5] * s * DT
        if _project(ag, ob, oi, walls, n_walls, held, hoff, prev_a, prev_o, pinned):
            _project(ag, ob, oi, walls, n_walls, held, hoff, prev_a, prev_o, pinned)
        for i in range(n_agents):
            ag[i, 3] = (ag[i, 0] - prev_a[i, 0]) / DT
            ag[i, 4] = (ag[i, 1] - prev_a[i, 1]) / DT
        for o in range(n_objs):
            ob[o, 4] = (ob[o, 0] - prev_o[o, 0]) / DT
            ob[o, 5] = (ob[o, 1] - prev_o[o, 1]) / DT
