"""One lite hide-and-seek step for a batch of environments: actions, grab/lock, physics, rewards,
statistics and observations, all inside one compiled loop.

``acc[e]`` accumulates per-episode figures (see ``ACC_*``): hidden play steps, play steps, the
preparation-phase statistics frozen when preparation ends (box/ramp moves and locks, doors blocked
and fort), play steps with every hider / some seeker in the quadrant room, the first play step a
hider was seen on (plus one; 0 while none was), and play steps with a hider holding an object.
"""
from __future__ import annotations

import math

import numpy as np

from srl_lab.envs.hide_and_seek import spec
from srl_lab.envs.hide_and_seek.doors import BOX_COLUMNS, door_stats, in_room
from srl_lab.envs.hide_and_seek.lite_geometry import gap_disc_box
from srl_lab.envs.hide_and_seek.lite_jit import njit
from srl_lab.envs.hide_and_seek.lite_physics import physics_step
from srl_lab.envs.hide_and_seek.lite_scenarios import QUADRANT, generate
from srl_lab.envs.hide_and_seek.lite_sense import update_visibility, write_obs

NEUTRAL = (spec.FORCE_BUCKETS - 1) // 2
ACC_HIDDEN, ACC_PLAY, ACC_BOX_MOVE, ACC_BOX_LOCK, ACC_RAMP_MOVE, ACC_RAMP_LOCK = range(6)
ACC_DOORS_BLOCKED, ACC_FORT, ACC_HIDER_ROOM, ACC_SEEKER_ROOM, ACC_SEEN_AT, ACC_DOORS = range(6, 12)
ACC_HIDER_HOLDS = 12
ACC_SIZE = 13
N_PHASE = len(spec.PHASE_STAT_KEYS)
# Columns of ``stats``: spec.EPISODE_STAT_KEYS (its PHASE_STAT_KEYS last), then "return" and "length".
N_STATS = len(spec.EPISODE_STAT_KEYS) + 2


@njit
def _grab_and_lock(ag: np.ndarray, ob: np.ndarray, oi: np.ndarray, vis: np.ndarray, held: np.ndarray,
                   hoff: np.ndarray, act: np.ndarray, n_hiders: int) -> None:
    """Apply grab (hold the closest visible object within reach) and team-owned lock/unlock."""
    n_agents = ag.shape[0]
    n_objs = ob.shape[0]
    for i in range(n_agents):
        if act[i, 3] == 0:
            held[i] = -1
            continue
        if held[i] >= 0:
            continue
        best = -1
        best_gap = spec.GRAB_RADIUS
        for o in range(n_objs):
            if oi[o, 0] == 0 or vis[i, n_agents + o] == 0:
                continue
            g = gap_disc_box(ag[i, 0], ag[i, 1], spec.AGENT_RADIUS, ob[o, 0], ob[o, 1], ob[o, 2], ob[o, 3])
            if g <= best_gap:
                best = o
                best_gap = g
        held[i] = best
        if best >= 0:
            hoff[i, 0] = ob[best, 0] - ag[i, 0]
            hoff[i, 1] = ob[best, 1] - ag[i, 1]
    for o in range(n_objs):
        if oi[o, 0] == 0:
            continue
        locker = -1
        unlock = False
        for i in range(n_agents):
            if vis[i, n_agents + o] == 0:
                continue
            g = gap_disc_box(ag[i, 0], ag[i, 1], spec.AGENT_RADIUS, ob[o, 0], ob[o, 1], ob[o, 2], ob[o, 3])
            if g > spec.LOCK_RADIUS:
                continue
            team = 0 if i < n_hiders else 1
            if act[i, 4] == 1:
                if locker < 0:
                    locker = i
            elif oi[o, 2] == team:
                unlock = True
        if oi[o, 2] >= 0:
            if unlock:
                oi[o, 2] = -1
                oi[o, 3] = -1
        elif locker >= 0:
            oi[o, 2] = 0 if locker < n_hiders else 1
            oi[o, 3] = locker
            ob[o, 4] = 0.0
            ob[o, 5] = 0.0


@njit
def move_and_locks(ob: np.ndarray, oi: np.ndarray, start: np.ndarray, kind: int) -> tuple[float, float]:
    """Largest displacement since the episode start and number locked, over objects of ``kind``."""
    move = 0.0
    locked = 0.0
    for o in range(ob.shape[0]):
        if oi[o, 0] == 0 or oi[o, 1] != kind:
            continue
        move = max(move, math.hypot(ob[o, 0] - start[o, 0], ob[o, 1] - start[o, 1]))
        if oi[o, 2] >= 0:
            locked += 1.0
    return move, locked


@njit
def hider_locked_boxes(ob: np.ndarray, oi: np.ndarray) -> tuple[np.ndarray, int]:
    """The boxes locked by the hider team as ``doors.count_doors`` takes them (rows x, y, hx, hy, yaw)."""
    boxes = np.empty((ob.shape[0], BOX_COLUMNS))
    n = 0
    for o in range(ob.shape[0]):
        if oi[o, 0] != 0 and oi[o, 1] == 0 and oi[o, 2] == 0:
            boxes[n, 0], boxes[n, 1], boxes[n, 2], boxes[n, 3] = ob[o, 0], ob[o, 1], ob[o, 2], ob[o, 3]
            boxes[n, 4] = 0.0  # lite boxes never rotate
            n += 1
    return boxes, n


@njit
def doors_blocked_now(ob: np.ndarray, oi: np.ndarray, walls: np.ndarray, n_walls: int, quadrant: bool) -> float:
    """``spec.DOORS_KEY`` of one env: the share of its doors blocked by hider-locked boxes, 0 without a door."""
    boxes, n_boxes = hider_locked_boxes(ob, oi)
    if n_boxes == 0:
        return 0.0
    share, _, doors = door_stats(walls, n_walls, quadrant, boxes, n_boxes)
    return share if doors > 0 else 0.0


@njit
def freeze_prep_stats(ob: np.ndarray, oi: np.ndarray, start: np.ndarray, walls: np.ndarray, n_walls: int,
                      quadrant: bool, acc: np.ndarray) -> None:
    """Record the preparation-phase statistics (called when preparation ends)."""
    acc[ACC_BOX_MOVE], acc[ACC_BOX_LOCK] = move_and_locks(ob, oi, start, 0)
    acc[ACC_RAMP_MOVE], acc[ACC_RAMP_LOCK] = move_and_locks(ob, oi, start, 1)
    boxes, n_boxes = hider_locked_boxes(ob, oi)
    acc[ACC_DOORS_BLOCKED], acc[ACC_FORT], acc[ACC_DOORS] = door_stats(walls, n_walls, quadrant, boxes, n_boxes)


@njit
def _track_phases(ag: np.ndarray, held: np.ndarray, n_hiders: int, seen: bool, quadrant: bool,
                  acc: np.ndarray) -> None:
    """Count this play step (already in ``acc[ACC_PLAY]``) towards the first-sight, holding and room
    figures."""
    if seen and acc[ACC_SEEN_AT] == 0.0:
        acc[ACC_SEEN_AT] = acc[ACC_PLAY]
    for i in range(n_hiders):
        if held[i] >= 0:
            acc[ACC_HIDER_HOLDS] += 1.0
            break
    if not quadrant:
        return
    hiders_in = True
    seeker_in = False
    for i in range(ag.shape[0]):
        inside = in_room(ag[i, 0], ag[i, 1])
        if i < n_hiders:
            hiders_in = hiders_in and inside
        else:
            seeker_in = seeker_in or inside
    acc[ACC_HIDER_ROOM] += 1.0 if hiders_in else 0.0
    acc[ACC_SEEKER_ROOM] += 1.0 if seeker_in else 0.0


@njit
def _out(x: float, y: float, lo: float, hi: float) -> bool:
    return x < lo or x > hi or y < lo or y > hi


@njit
def _rewards(ag: np.ndarray, ob: np.ndarray, oi: np.ndarray, vis: np.ndarray, held: np.ndarray,
             n_hiders: int, prep: bool, area_lo: float, area_hi: float, quadrant: bool, acc: np.ndarray,
             reward: np.ndarray) -> None:
    n_agents = ag.shape[0]
    if prep:
        reward[:] = 0.0
        return
    seen = False
    for s in range(n_hiders, n_agents):
        for h in range(n_hiders):
            if vis[s, h] != 0:
                seen = True
    acc[ACC_PLAY] += 1.0
    if not seen:
        acc[ACC_HIDDEN] += 1.0
    _track_phases(ag, held, n_hiders, seen, quadrant, acc)
    objects_out = False
    if quadrant:  # quadrant also penalises everyone when an object leaves the play area
        for o in range(ob.shape[0]):
            if oi[o, 0] != 0 and _out(ob[o, 0], ob[o, 1], area_lo, area_hi):
                objects_out = True
    hider_reward = -1.0 if seen else 1.0
    for i in range(n_agents):
        r = hider_reward if i < n_hiders else -hider_reward
        if objects_out or _out(ag[i, 0], ag[i, 1], area_lo, area_hi):
            r = spec.OUT_OF_BOUNDS_PENALTY
        reward[i] = r


@njit
def _phase_stats(acc: np.ndarray, quadrant: bool, out: np.ndarray) -> None:
    """``spec.PHASE_STAT_KEYS`` into ``out[N_PHASE]`` (room fractions NaN outside quadrant or without
    play, the holding fraction without play)."""
    play = acc[ACC_PLAY]
    room = quadrant and play > 0
    out[0] = acc[ACC_DOORS_BLOCKED]
    out[1] = acc[ACC_FORT]
    out[2] = acc[ACC_HIDER_ROOM] / play if room else math.nan
    out[3] = acc[ACC_SEEKER_ROOM] / play if room else math.nan
    out[4] = acc[ACC_SEEN_AT] - 1.0 if acc[ACC_SEEN_AT] > 0 else play
    out[5] = acc[ACC_DOORS]
    out[6] = acc[ACC_HIDER_HOLDS] / play if play > 0 else math.nan


@njit
def episode_stats(ob: np.ndarray, oi: np.ndarray, start: np.ndarray, acc: np.ndarray, ret: np.ndarray,
                  t: int, n_hiders: int, quadrant: bool, out: np.ndarray) -> None:
    """Fill ``out[N_STATS]`` for an ending episode (order of ``spec.EPISODE_STAT_KEYS``, return, length)."""
    n_agents = ret.shape[0]
    out[0] = ret[:n_hiders].mean()
    out[1] = ret[n_hiders:].mean()
    out[2] = acc[ACC_HIDDEN] / acc[ACC_PLAY] if acc[ACC_PLAY] > 0 else 0.0
    out[3] = acc[ACC_BOX_MOVE]
    out[4], out[6] = move_and_locks(ob, oi, start, 0)
    out[5] = acc[ACC_BOX_LOCK]
    out[7] = acc[ACC_RAMP_MOVE]
    out[8], out[10] = move_and_locks(ob, oi, start, 1)
    out[9] = acc[ACC_RAMP_LOCK]
    _phase_stats(acc, quadrant, out[11:11 + N_PHASE])
    out[11 + N_PHASE] = ret.sum() / n_agents
    out[12 + N_PHASE] = t


@njit
def step_all(ag: np.ndarray, ob: np.ndarray, oi: np.ndarray, walls: np.ndarray, n_walls: np.ndarray,
             held: np.ndarray, hoff: np.ndarray, vis: np.ndarray, t: np.ndarray, ret: np.ndarray,
             acc: np.ndarray, start: np.ndarray, actions: np.ndarray, n_hiders: int, n_boxes: int,
             prep_steps: int, horizon: int, area_lo: float, area_hi: float, quadrant: bool,
             reward: np.ndarray, done: np.ndarray, stats: np.ndarray, doors: np.ndarray,
             o_self: np.ndarray, o_agents: np.ndarray, o_boxes: np.ndarray, o_ramps: np.ndarray,
             o_lidar: np.ndarray, m_aa: np.ndarray, m_ab: np.ndarray, m_ar: np.ndarray,
             s_aa: np.ndarray, s_ab: np.ndarray, s_ar: np.ndarray) -> None:
    """Step every environment once; ``done[e]`` marks episodes that reached the horizon (their
    ``stats[e]`` are set); ``doors[e]`` is env ``e``'s ``spec.DOORS_KEY`` after the step."""
    n_envs, n_agents = ag.shape[0], ag.shape[1]
    act = np.empty((n_agents, 5), np.int64)
    force = np.empty((n_agents, 3))
    scratch = np.empty((n_agents + 2 * ob.shape[1], 2))
    scale = 2.0 * spec.FORCE_SCALE * 0.9 / (spec.FORCE_BUCKETS - 1)
    for e in range(n_envs):
        prep = t[e] < prep_steps
        for i in range(n_agents):
            frozen = prep and i >= n_hiders
            for k in range(5):
                act[i, k] = (NEUTRAL if k < 3 else 0) if frozen else actions[e, i, k]
            for k in range(3):
                force[i, k] = act[i, k] * scale - 0.9 * spec.FORCE_SCALE
        _grab_and_lock(ag[e], ob[e], oi[e], vis[e], held[e], hoff[e], act, n_hiders)
        physics_step(ag[e], ob[e], oi[e], walls[e], n_walls[e], held[e], hoff[e], force, scratch)
        t[e] += 1
        update_visibility(ag[e], ob[e], oi[e], walls[e], n_walls[e], vis[e])
        _rewards(ag[e], ob[e], oi[e], vis[e], held[e], n_hiders, prep, area_lo, area_hi, quadrant,
                 acc[e], reward[e])
        for i in range(n_agents):
            ret[e, i] += reward[e, i]
        if t[e] == prep_steps:  # the frozen figures are the world as it stands: no second door count
            freeze_prep_stats(ob[e], oi[e], start[e], walls[e], n_walls[e], quadrant, acc[e])
            doors[e] = acc[e, ACC_DOORS_BLOCKED] if acc[e, ACC_DOORS] > 0 else 0.0
        else:
            doors[e] = doors_blocked_now(ob[e], oi[e], walls[e], n_walls[e], quadrant)
        done[e] = t[e] >= horizon
        if done[e]:
            episode_stats(ob[e], oi[e], start[e], acc[e], ret[e], t[e], n_hiders, quadrant, stats[e])
        write_obs(e, ag[e], ob[e], oi[e], walls[e], n_walls[e], vis[e], t[e], prep_steps, n_hiders,
                  n_boxes, o_self, o_agents, o_boxes, o_ramps, o_lidar, m_aa, m_ab, m_ar, s_aa, s_ab, s_ar)


@njit
def begin_episode(e: int, ag: np.ndarray, ob: np.ndarray, oi: np.ndarray, walls: np.ndarray,
                  n_walls: np.ndarray, held: np.ndarray, vis: np.ndarray, t: np.ndarray,
                  ret: np.ndarray, acc: np.ndarray, start: np.ndarray, n_hiders: int, n_boxes: int,
                  prep_steps: int, quadrant: bool, o_self: np.ndarray, o_agents: np.ndarray,
                  o_boxes: np.ndarray, o_ramps: np.ndarray, o_lidar: np.ndarray, m_aa: np.ndarray,
                  m_ab: np.ndarray, m_ar: np.ndarray, s_aa: np.ndarray, s_ab: np.ndarray,
                  s_ar: np.ndarray) -> None:
    """Start statistics from env ``e``'s current state (time ``t[e]``) and write its observation."""
    held[e, :] = -1
    ret[e, :] = 0.0
    acc[e, :] = 0.0
    start[e, :, 0] = ob[e, :, 0]
    start[e, :, 1] = ob[e, :, 1]
    if t[e] >= prep_steps:
        freeze_prep_stats(ob[e], oi[e], start[e], walls[e], n_walls[e], quadrant, acc[e])
    update_visibility(ag[e], ob[e], oi[e], walls[e], n_walls[e], vis[e])
    write_obs(e, ag[e], ob[e], oi[e], walls[e], n_walls[e], vis[e], t[e], prep_steps, n_hiders,
              n_boxes, o_self, o_agents, o_boxes, o_ramps, o_lidar, m_aa, m_ab, m_ar, s_aa, s_ab, s_ar)


@njit
def reset_envs(envs: np.ndarray, uniforms: np.ndarray, scenario: int, ag: np.ndarray, ob: np.ndarray,
               oi: np.ndarray, walls: np.ndarray, n_walls: np.ndarray, held: np.ndarray,
               vis: np.ndarray, t: np.ndarray, ret: np.ndarray, acc: np.ndarray, start: np.ndarray,
               n_hiders: int, n_boxes: int, hiders_anywhere: bool, prep_steps: int, o_self: np.ndarray,
               o_agents: np.ndarray, o_boxes: np.ndarray, o_ramps: np.ndarray, o_lidar: np.ndarray,
               m_aa: np.ndarray, m_ab: np.ndarray, m_ar: np.ndarray, s_aa: np.ndarray,
               s_ab: np.ndarray, s_ar: np.ndarray) -> None:
    """Generate a fresh random episode in each env of ``envs`` (``uniforms[k]`` feeds ``envs[k]``)."""
    for k in range(envs.shape[0]):
        e = envs[k]
        n_walls[e] = generate(scenario, n_hiders, n_boxes, hiders_anywhere, uniforms[k], ag[e], ob[e], oi[e],
                              walls[e])
        t[e] = 0
        begin_episode(e, ag, ob, oi, walls, n_walls, held, vis, t, ret, acc, start, n_hiders, n_boxes,
                      prep_steps, scenario == QUADRANT, o_self, o_agents, o_boxes, o_ramps, o_lidar,
                      m_aa, m_ab, m_ar, s_aa, s_ab, s_ar)
