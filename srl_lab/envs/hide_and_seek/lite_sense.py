"""What lite agents perceive: view cone + line of sight, lidar, and the observation arrays.

Sight runs from an agent's centre to the target's centre. Walls, boxes and ramps block it (the
target object itself excepted); agents do not. Lidar rays start at the agent's centre and stop at
walls, boxes, ramps and other agents. Column layouts follow ``scene.*_FEATURES``.
"""
from __future__ import annotations

import math

import numpy as np

from srl_lab.envs.hide_and_seek import spec
from srl_lab.envs.hide_and_seek.lite_geometry import ray_box, ray_disc
from srl_lab.envs.hide_and_seek.lite_jit import njit

COS_HALF_VIEW = math.cos(spec.VIEW_HALF_ANGLE)
_ANGLES = np.arange(spec.LIDAR_RAYS) * (2.0 * np.pi / spec.LIDAR_RAYS)
LIDAR_DX = np.cos(_ANGLES)
LIDAR_DY = np.sin(_ANGLES)
_HUGE = 1e30  # stands for 1/0 so the slab test needs no branch for axis-parallel rays
LIDAR_INV_DX = np.where(np.abs(LIDAR_DX) > 1e-12, 1.0 / np.where(LIDAR_DX == 0, 1.0, LIDAR_DX), _HUGE)
LIDAR_INV_DY = np.where(np.abs(LIDAR_DY) > 1e-12, 1.0 / np.where(LIDAR_DY == 0, 1.0, LIDAR_DY), _HUGE)
AGENT_Z = spec.AGENT_RADIUS
OBJECT_HEIGHT = 0.5


@njit
def clear_line(ax: float, ay: float, bx: float, by: float, walls: np.ndarray, n_walls: int,
               ob: np.ndarray, oi: np.ndarray, skip: int) -> bool:
    """True when no wall and no object but ``skip`` cuts the segment a→b."""
    dx = bx - ax
    dy = by - ay
    for w in range(n_walls):
        if ray_box(ax, ay, dx, dy, walls[w, 0], walls[w, 1], walls[w, 2], walls[w, 3], 1.0) < 1.0:
            return False
    for o in range(ob.shape[0]):
        if o == skip or oi[o, 0] == 0:
            continue
        hx = ob[o, 2]
        hy = ob[o, 3]
        if ray_box(ax, ay, dx, dy, ob[o, 0] - hx, ob[o, 1] - hy, ob[o, 0] + hx, ob[o, 1] + hy, 1.0) < 1.0:
            return False
    return True


@njit
def in_cone(ax: float, ay: float, ch: float, sh: float, bx: float, by: float) -> bool:
    """True when b lies within the 135° cone about heading (cos ``ch``, sin ``sh``) at a."""
    dx = bx - ax
    dy = by - ay
    d = math.sqrt(dx * dx + dy * dy)
    return d < 1e-9 or dx * ch + dy * sh >= COS_HALF_VIEW * d


@njit
def update_visibility(ag: np.ndarray, ob: np.ndarray, oi: np.ndarray, walls: np.ndarray,
                      n_walls: int, vis: np.ndarray) -> None:
    """``vis[i, j]`` for agents j, ``vis[i, A + o]`` for objects o: 1 if in cone and in sight."""
    n_agents = ag.shape[0]
    for i in range(n_agents):
        ax = ag[i, 0]
        ay = ag[i, 1]
        ch = math.cos(ag[i, 2])
        sh = math.sin(ag[i, 2])
        for j in range(n_agents):
            seen = (j != i and in_cone(ax, ay, ch, sh, ag[j, 0], ag[j, 1])
                    and clear_line(ax, ay, ag[j, 0], ag[j, 1], walls, n_walls, ob, oi, -1))
            vis[i, j] = 1 if seen else 0
        for o in range(ob.shape[0]):
            seen = (oi[o, 0] != 0 and in_cone(ax, ay, ch, sh, ob[o, 0], ob[o, 1])
                    and clear_line(ax, ay, ob[o, 0], ob[o, 1], walls, n_walls, ob, oi, o))
            vis[i, n_agents + o] = 1 if seen else 0


@njit
def _rays_box(px: float, py: float, xmin: float, ymin: float, xmax: float, ymax: float,
              out: np.ndarray) -> None:
    """Shorten every lidar ray of ``out`` that enters the box earlier (branch-free: vectorises)."""
    for k in range(spec.LIDAR_RAYS):
        ax = (xmin - px) * LIDAR_INV_DX[k]
        bx = (xmax - px) * LIDAR_INV_DX[k]
        ay = (ymin - py) * LIDAR_INV_DY[k]
        by = (ymax - py) * LIDAR_INV_DY[k]
        enter = max(max(min(ax, bx), min(ay, by)), 0.0)
        leave = min(max(ax, bx), max(ay, by))
        out[k] = enter if enter <= leave and enter < out[k] else out[k]


@njit
def lidar(ag: np.ndarray, i: int, ob: np.ndarray, oi: np.ndarray, walls: np.ndarray, n_walls: int,
          out: np.ndarray) -> None:
    """Distances along 30 world-frame rays from agent ``i`` (``LIDAR_RANGE`` when nothing is hit)."""
    px = ag[i, 0]
    py = ag[i, 1]
    out[:] = spec.LIDAR_RANGE
    for w in range(n_walls):
        _rays_box(px, py, walls[w, 0], walls[w, 1], walls[w, 2], walls[w, 3], out)
    for o in range(ob.shape[0]):
        if oi[o, 0] != 0:
            _rays_box(px, py, ob[o, 0] - ob[o, 2], ob[o, 1] - ob[o, 3], ob[o, 0] + ob[o, 2],
                      ob[o, 1] + ob[o, 3], out)
    for j in range(ag.shape[0]):
        if j != i:
            for k in range(spec.LIDAR_RAYS):
                t = ray_disc(px, py, LIDAR_DX[k], LIDAR_DY[k], ag[j, 0], ag[j, 1], spec.AGENT_RADIUS)
                out[k] = min(out[k], t)


@njit
def _agent_columns(row: np.ndarray, ag: np.ndarray, j: int) -> None:
    """Columns 0-7 (position, heading, velocity) of agent ``j``, shared by self and other-agent rows."""
    row[0] = ag[j, 0]
    row[1] = ag[j, 1]
    row[2] = AGENT_Z
    row[3] = ag[j, 2]
    row[4] = ag[j, 3]
    row[5] = ag[j, 4]
    row[6] = 0.0
    row[7] = ag[j, 5]


@njit
def write_obs(e: int, ag: np.ndarray, ob: np.ndarray, oi: np.ndarray, walls: np.ndarray,
              n_walls: int, vis: np.ndarray, t: int, prep_steps: int, n_hiders: int, n_boxes: int,
              o_self: np.ndarray, o_agents: np.ndarray, o_boxes: np.ndarray, o_ramps: np.ndarray,
              o_lidar: np.ndarray, m_aa: np.ndarray, m_ab: np.ndarray, m_ar: np.ndarray,
              s_aa: np.ndarray, s_ab: np.ndarray, s_ar: np.ndarray) -> None:
    """Fill row ``e`` of every observation array from one environment's state."""
    n_agents = ag.shape[0]
    progress = min(1.0, t / prep_steps) if prep_steps > 0 else 1.0
    for i in range(n_agents):
        hider_i = i < n_hiders
        row = o_self[e, i]
        _agent_columns(row, ag, i)
        row[8] = 1.0 if hider_i else 0.0
        row[9] = progress
        k = 0
        for j in range(n_agents):
            if j == i:
                continue
            row = o_agents[e, i, k]
            _agent_columns(row, ag, j)
            row[8] = 1.0 if j < n_hiders else 0.0
            row[9] = 1.0 if (j < n_hiders) == hider_i else 0.0
            m_aa[e, i, k] = vis[i, j]
            s_aa[e, i, k] = 1.0
            k += 1
        team = 0 if hider_i else 1
        for o in range(ob.shape[0]):
            if o < n_boxes:
                row = o_boxes[e, i, o]
                m_ab[e, i, o] = vis[i, n_agents + o]
                s_ab[e, i, o] = oi[o, 0]
            else:
                row = o_ramps[e, i, o - n_boxes]
                m_ar[e, i, o - n_boxes] = vis[i, n_agents + o]
                s_ar[e, i, o - n_boxes] = oi[o, 0]
            if oi[o, 0] == 0:
                row[:] = 0.0
                continue
            row[0] = ob[o, 0]
            row[1] = ob[o, 1]
            row[2] = 0.5 * OBJECT_HEIGHT
            row[3] = math.cos(ob[o, 6])
            row[4] = math.sin(ob[o, 6])
            row[5] = ob[o, 4]
            row[6] = ob[o, 5]
            row[7] = 0.0
            row[8] = 0.0
            row[9] = 2.0 * ob[o, 2]
            row[10] = 2.0 * ob[o, 3]
            row[11] = OBJECT_HEIGHT
            row[12] = 1.0 if oi[o, 3] == i else 0.0
            row[13] = 1.0 if oi[o, 2] == team else 0.0
            row[14] = 1.0 if oi[o, 2] >= 0 else 0.0
        lidar(ag, i, ob, oi, walls, n_walls, o_lidar[e, i])
