"""A scripted hider that builds the quadrant fort in preparation, reading the lite env's true state.

It answers what the learning runs cannot: can a hider close every door of the quadrant room in the
preparation phase at all, with this env's physics, reach and view cone? A plan gives each door a
cube, in an order. For each cube in turn the hider walks to a side of it (the room side, or an end
along the wall when the room side is out of reach), turns to face it, grabs it, carries it until it
stands against the wall inside the room across the door, locks it and lets go; a placed cube that
lost its lock is walked back to and locked again. Lock stays on while a placed cube is within
reach (a hider outputting 0 there unlocks it) unless the cube being moved is within reach too.

``fort_reach`` plays every plan from the same starts (the env's own random worlds) and keeps the
best per start: the share of starts some plan closes is a lower bound on what preparation allows.
``door_gaps`` measures, in any lite quadrant world, how far the cubes stand from the doors' closing
spots, and ``doors_now`` which of them hider-locked cubes close at any step, to compare a learned
hider's preparation with this one's. Not a policy and never an opponent in training: it reads
positions no observation holds.
"""
from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from srl_lab.envs.hide_and_seek import spec
from srl_lab.envs.hide_and_seek.doors import EPS, HALF_T, PASSAGE, ROOM_LO, _uncovered, _wall_cover, door_stats
from srl_lab.envs.hide_and_seek.lite import HideAndSeekLite
from srl_lab.envs.hide_and_seek.lite_geometry import gap_disc_box, wrap_angle
from srl_lab.envs.hide_and_seek.lite_physics import DAMPING
from srl_lab.envs.hide_and_seek.lite_step import NEUTRAL, hider_locked_boxes
from srl_lab.envs.hide_and_seek.scene import HIDER

FLUSH = 0.02  # how far off the wall's room face a placed cube's spot is (m)
# A cube this close to its spot closes the door: it still overlaps both posts of the 0.4 m door and
# stands nearer the wall than an agent fits through (doors.PASSAGE).
ALONG_TOLERANCE = 0.15
DEPTH_TOLERANCE = 0.08
STANDOFF = spec.AGENT_RADIUS + spec.BOX_SIZE / 2 + 0.08  # agent centre to cube centre when grabbing (m)
ARRIVED = 0.12  # the hider grabs once this close to where it holds the cube from (m)
SETTLED = 0.03  # position error below which the controller stops pushing (m)
TOP_SPEED = 8.0  # m/s the controller asks for at most
GAIN = 6.0  # 1/s: asked speed per metre still to go
MAX_FORCE = 0.9 * spec.FORCE_SCALE
MAX_TURN = MAX_FORCE / DAMPING * spec.STEP_DT  # the most an agent turns in one step (rad)
NEAR = spec.LOCK_RADIUS + 0.05  # a cube this close (gap, m) may be locked or unlocked by the hider's lock head
IDLE = (NEUTRAL, NEUTRAL, NEUTRAL, 0, 0)


@dataclass
class Job:
    """Put cube ``box`` on ``spot``; ``inward`` points from the door's wall into the room."""

    box: int
    spot: tuple[float, float]
    inward: tuple[float, float]
    side: tuple[float, float] | None = None  # from the cube towards where the hider holds it, once chosen


def room_doors(walls: np.ndarray) -> list[tuple[bool, float, float]]:
    """The quadrant room's doors as ``(vertical, start, end)`` along their wall line (x or y = 3 m),
    found as the fort rule finds them (``doors``)."""
    walls = np.ascontiguousarray(walls, dtype=np.float64)
    size = len(walls) + 2
    lo, hi, gaps = np.empty(size), np.empty(size), np.empty((size, 2))
    found = []
    for vertical in (True, False):
        covered = _wall_cover(walls, len(walls), vertical, ROOM_LO, lo, hi)
        for start, end in gaps[:_uncovered(lo, hi, covered, ROOM_LO, spec.FLOOR_SIZE, gaps)]:
            if end - start >= PASSAGE - EPS:
                found.append((vertical, float(start), float(end)))
    return found


def door_spot(vertical: bool, start: float, end: float) -> tuple[tuple[float, float], tuple[float, float]]:
    """Where a cube closing the door stands (against the wall, inside) and the inward unit vector."""
    depth = ROOM_LO + HALF_T + FLUSH + spec.BOX_SIZE / 2
    middle = (start + end) / 2
    return ((depth, middle), (1.0, 0.0)) if vertical else ((middle, depth), (0.0, 1.0))


def _doors_and_cubes(env: HideAndSeekLite, e: int) -> tuple[list[tuple[bool, float, float]], list[int]]:
    """Env ``e``'s room doors and the indices of the cubes in it."""
    cubes = [o for o in range(env.layout.n_boxes) if env._oi[e, o, 0] and env._oi[e, o, 1] == 0]
    return room_doors(env._walls[e, :env._n_walls[e]]), cubes


def plans(env: HideAndSeekLite, e: int) -> list[list[Job]]:
    """Every plan for env ``e``: each ordered choice of one cube per door (at most 2 × 2 in the quadrant)."""
    doors, cubes = _doors_and_cubes(env, e)
    spots = [door_spot(*door) for door in doors]
    found = []
    for chosen in itertools.permutations(cubes, len(spots)):
        for order in itertools.permutations(range(len(spots))):
            found.append([Job(chosen[k], *spots[k]) for k in order])
    return found


def door_gaps(env: HideAndSeekLite, e: int) -> list[float]:
    """Per door of env ``e``'s room: how far the nearest cube stands from the spot that closes it (m)."""
    doors, cubes = _doors_and_cubes(env, e)
    return [min(math.dist(env._ob[e, o, :2], door_spot(*door)[0]) for o in cubes) for door in doors]


def doors_now(env: HideAndSeekLite, e: int) -> tuple[float, float, float]:
    """``doors.door_stats`` of env ``e`` as it stands: (share of doors closed, 1.0 if all are, doors)."""
    boxes, n_boxes = hider_locked_boxes(env._ob[e], env._oi[e])
    return door_stats(env._walls[e], env._n_walls[e], True, boxes, n_boxes)


def in_place(cube: np.ndarray, job: Job) -> bool:
    """Whether ``cube`` (x, y, ...) stands where it closes ``job``'s door."""
    along = abs((cube[0] - job.spot[0]) * job.inward[1] + (cube[1] - job.spot[1]) * job.inward[0])
    depth = abs((cube[0] - job.spot[0]) * job.inward[0] + (cube[1] - job.spot[1]) * job.inward[1])
    return along <= ALONG_TOLERANCE and depth <= DEPTH_TOLERANCE


def hider_action(env: HideAndSeekLite, e: int, i: int, jobs: list[Job]) -> tuple[int, ...]:
    """Hider ``i``'s action in env ``e`` this step, working down ``jobs``."""
    agent, ob, oi = env._ag[e, i], env._ob[e], env._oi[e]
    placed = [job for job in jobs if in_place(ob[job.box], job) and oi[job.box, 2] == HIDER]
    job = next((job for job in jobs if job not in placed), None)
    near_placed = any(_reach(agent, ob[p.box]) <= NEAR for p in placed)
    if job is None:
        return (*IDLE[:4], int(near_placed))
    cube = ob[job.box]
    keep_locks = int(near_placed and _reach(agent, cube) > NEAR)
    held = env._held[e, i] == job.box
    if in_place(cube, job):  # lock it (and let go)
        if held or _reach(agent, cube) <= spec.LOCK_RADIUS:
            return (*_drive(agent, agent[:2], cube[:2]), 0, 1)
    elif held:  # walk so that the cube, at its grab offset, lands on the spot
        to = (job.spot[0] - env._hoff[e, i, 0], job.spot[1] - env._hoff[e, i, 1])
        return (*_drive(agent, to, job.spot), 1, 0)
    if job.side is None:
        job.side = _grab_side(agent, cube, job)
    stand = (cube[0] + STANDOFF * job.side[0], cube[1] + STANDOFF * job.side[1])
    arrived = math.dist(agent[:2], stand) < ARRIVED
    return (*_drive(agent, stand, tuple(cube[:2])), int(arrived and not in_place(cube, job)), keep_locks)


def _grab_side(agent: np.ndarray, cube: np.ndarray, job: Job) -> tuple[float, float]:
    """The side to hold the cube by: the room side or either end along the wall, whichever the hider
    can stand at both now and once the cube is in place, the nearest to the hider first."""
    ix, iy = job.inward
    sides = [(ix, iy), (iy, ix), (-iy, -ix)]
    lo, hi = ROOM_LO + HALF_T + spec.AGENT_RADIUS + 0.02, spec.FLOOR_SIZE - spec.AGENT_RADIUS - 0.02

    def free(centre: tuple[float, float], side: tuple[float, float]) -> bool:
        x, y = centre[0] + STANDOFF * side[0], centre[1] + STANDOFF * side[1]
        return lo <= x <= hi and lo <= y <= hi

    usable = [side for side in sides if free(tuple(cube[:2]), side) and free(job.spot, side)]
    return min(usable or sides[:1], key=lambda side: math.dist(
        agent[:2], (cube[0] + STANDOFF * side[0], cube[1] + STANDOFF * side[1])))


def _bucket(force: float, at_least_one: bool = False) -> int:
    """The force bucket nearest ``force`` (N); one step off neutral at least when ``at_least_one``."""
    level = (np.clip(force, -MAX_FORCE, MAX_FORCE) / spec.FORCE_SCALE + 0.9) / 1.8
    bucket = int(round(level * (spec.FORCE_BUCKETS - 1)))
    if at_least_one and bucket == NEUTRAL and force != 0.0:
        bucket += 1 if force > 0 else -1
    return bucket


def _drive(agent: np.ndarray, to: tuple[float, float], face: tuple[float, float]) -> tuple[int, int, int]:
    """Force and torque buckets taking ``agent`` (x, y, heading, vx, vy, wz) to ``to``, facing ``face``."""
    forces = []
    for axis in range(2):
        error = to[axis] - agent[axis]
        wanted = np.clip(GAIN * error, -TOP_SPEED, TOP_SPEED)
        forces.append(_bucket(DAMPING * wanted + DAMPING * (wanted - agent[3 + axis]), abs(error) > SETTLED))
    turn = wrap_angle(math.atan2(face[1] - agent[1], face[0] - agent[0]) - agent[2])
    return forces[0], forces[1], _bucket(np.clip(turn / MAX_TURN, -1.0, 1.0) * MAX_FORCE)


def _reach(agent: np.ndarray, cube: np.ndarray) -> float:
    """The gap between the agent's disc and the cube, as grab and lock measure it (m)."""
    return gap_disc_box(agent[0], agent[1], spec.AGENT_RADIUS, cube[0], cube[1], cube[2], cube[3])


def quadrant_starts(starts: int, n_hiders: int, n_seekers: int, seed: int) -> HideAndSeekLite:
    """``starts`` fresh quadrant worlds, the env's own random ones from ``seed``."""
    env = HideAndSeekLite(starts, scenario="quadrant", n_hiders=n_hiders, n_seekers=n_seekers, seed=seed)
    env.reset(seed=seed)
    return env


def replicas(origin: HideAndSeekLite, sources: list[int]) -> tuple[HideAndSeekLite, dict[str, np.ndarray]]:
    """A new env whose world ``e`` is a copy of ``origin``'s world ``sources[e]``; its observation."""
    layout = origin.layout
    env = HideAndSeekLite(len(sources), scenario="quadrant", n_hiders=layout.n_hiders,
                          n_seekers=layout.n_seekers, seed=0)
    rows = [env.load_scene(e, origin.snapshot(s)) for e, s in enumerate(sources)]
    return env, {key: np.stack([row[key] for row in rows]) for key in rows[0]}


def fort_reach(starts: int, n_hiders: int = 1, n_seekers: int = 1, seed: int = 0,
               seekers: Callable[[dict[str, np.ndarray]], np.ndarray] | None = None) -> list[dict[str, float]]:
    """Per start of ``quadrant_starts(starts, ...)``: the episode statistics of its best plan (most
    doors closed when preparation ends), with ``plans`` (how many were played) and ``fort_step`` (the
    first preparation step after which every door was closed; NaN if none). ``seekers`` maps an
    observation ``[envs, agents, ...]`` to actions ``[envs, agents, 5]`` and plays the seekers' rows
    (idle by default); the choice of plan looks at preparation only, where seekers are frozen."""
    origin = quadrant_starts(starts, n_hiders, n_seekers, seed)
    tried = [(s, jobs) for s in range(starts) for jobs in plans(origin, s)]
    env, obs = replicas(origin, [s for s, _ in tried])
    shares = [jobs[i::n_hiders] for _, jobs in tried for i in range(n_hiders)]  # each hider's jobs, in turn
    fort_step = np.full(len(tried), math.nan)
    for step in itertools.count(1):
        actions = np.array([[hider_action(env, e, i, shares[e * n_hiders + i]) if i < n_hiders else IDLE
                             for i in range(env.num_agents)] for e in range(len(tried))], np.int64)
        if seekers is not None:
            actions[:, n_hiders:] = seekers(obs)[:, n_hiders:]
        result = env.step(actions)
        if result.episodes:  # every env started together, so all end together
            break
        obs = result.obs
        if step <= env.prep_steps:
            for e in np.flatnonzero(np.isnan(fort_step)):
                if doors_now(env, e)[1] == 1.0:
                    fort_step[e] = step

    def score(e: int) -> tuple[float, float]:  # most doors closed, then soonest
        return result.episodes[e]["doors_blocked_prep"], -np.nan_to_num(fort_step[e], nan=math.inf)

    best: dict[int, int] = {}
    for e, (s, _) in enumerate(tried):
        if s not in best or score(e) > score(best[s]):
            best[s] = e
    played = Counter(s for s, _ in tried)
    return [{**result.episodes[e], "fort_step": float(fort_step[e]), "plans": float(played[s])}
            for s, e in sorted(best.items())]
