"""What agents perceive in the MuJoCo world: poses, view cones, line of sight, lidar and gaps.

Sight and lidar share one ``mj_multiRay`` call per agent: rays towards every other agent and object
plus the 30 lidar directions. ``flg_static=1`` makes walls (static world geoms) opaque; the floor is
left out through its geom group so a slightly downward ray never counts the floor as a blocker.
"""
from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from . import spec
from .mujoco_model import FLOOR_GROUP, World

RAY_GROUPS = np.array([g != FLOOR_GROUP for g in range(6)], dtype=np.uint8)
_LIDAR_ANGLES = np.arange(spec.LIDAR_RAYS) * (2 * np.pi / spec.LIDAR_RAYS)
LIDAR_VECS = spec.LIDAR_RANGE * np.stack(
    [np.cos(_LIDAR_ANGLES), np.sin(_LIDAR_ANGLES), np.zeros(spec.LIDAR_RAYS)], axis=1)
COS_HALF_CONE = float(np.cos(spec.VIEW_HALF_ANGLE))


@dataclass
class Kinematics:
    """Poses and velocities read from ``qpos`` / ``qvel`` (objects = boxes, then ramps)."""

    agent_pos: np.ndarray  # [A, 3]
    agent_yaw: np.ndarray  # [A] wrapped to [-pi, pi)
    agent_vel: np.ndarray  # [A, 4] vx, vy, vz, wz
    obj_pos: np.ndarray  # [O, 3]
    obj_yaw: np.ndarray  # [O]
    obj_vel: np.ndarray  # [O, 4]


def wrap_angle(a: np.ndarray) -> np.ndarray:
    return (a + np.pi) % (2 * np.pi) - np.pi


def read_kinematics(world: World) -> Kinematics:
    qpos, qvel = world.data.qpos, world.data.qvel
    aq, oq = qpos[world.agent_qpos], qpos[world.obj_qpos]
    return Kinematics(aq[:, :3], wrap_angle(aq[:, 3]), qvel[world.agent_dof],
                      oq[:, :3], wrap_angle(oq[:, 3]), qvel[world.obj_dof])


def aim_points(world: World, kin: Kinematics) -> np.ndarray:
    """World points that sight rays aim at: each object's body-frame aim point, rotated by its yaw."""
    c, s = np.cos(kin.obj_yaw), np.sin(kin.obj_yaw)
    ax, ay = world.obj_aim[:, 0], world.obj_aim[:, 1]
    return kin.obj_pos + np.stack([c * ax - s * ay, s * ax + c * ay, world.obj_aim[:, 2]], axis=1)


def in_cone(origin: np.ndarray, yaw: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """[A, T]: target inside the 135° horizontal view cone about each agent's heading."""
    d = targets[None, :, :2] - origin[:, None, :2]
    ahead = d[..., 0] * np.cos(yaw)[:, None] + d[..., 1] * np.sin(yaw)[:, None]
    return ahead >= COS_HALF_CONE * np.linalg.norm(d, axis=-1)


def cast(world: World, kin: Kinematics, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Line of sight ``[A, A + O]`` to every agent then object, and lidar ``[A, 30]``.

    ``targets[A + O, 3]`` are the agents' centres then the objects' aim points; a target is in
    sight when the first geom its ray hits belongs to the target's body.
    """
    model, data = world.model, world.data
    target_body = np.concatenate([world.agent_body, world.obj_body])
    n_a, n_t = len(kin.agent_pos), len(targets)
    n = n_t + spec.LIDAR_RAYS
    geom = np.empty(n, dtype=np.int32)
    dist = np.empty(n)
    sight = np.zeros((n_a, n_t), dtype=bool)
    lidar = np.empty((n_a, spec.LIDAR_RAYS))
    vecs = np.empty((n, 3))
    vecs[n_t:] = LIDAR_VECS
    for a in range(n_a):
        origin = kin.agent_pos[a]
        vecs[:n_t] = targets - origin
        vecs[a] = LIDAR_VECS[0]  # an agent's ray to itself is meaningless; keep the vector non-zero
        mujoco.mj_multiRay(model, data, origin, vecs.reshape(-1), RAY_GROUPS, 1, int(world.agent_body[a]),
                           geom, dist, None, n, 1e3)
        hit = geom[:n_t]
        sight[a] = (hit >= 0) & (model.geom_bodyid[np.maximum(hit, 0)] == target_body)
        d = dist[n_t:]
        lidar[a] = np.where((d < 0) | (d > 1), spec.LIDAR_RANGE, d * spec.LIDAR_RANGE)
    return sight, lidar


def footprint_gaps(agent_xy: np.ndarray, obj_xy: np.ndarray, obj_yaw: np.ndarray, obj_size: np.ndarray
                   ) -> np.ndarray:
    """[A, O] gap from each agent's disc to each object's (rotated) horizontal footprint rectangle."""
    d = agent_xy[:, None, :] - obj_xy[None, :, :]
    c, s = np.cos(obj_yaw)[None], np.sin(obj_yaw)[None]
    local = np.stack([c * d[..., 0] + s * d[..., 1], -s * d[..., 0] + c * d[..., 1]], axis=-1)
    outside = np.maximum(np.abs(local) - obj_size[None, :, :2] / 2, 0.0)
    return np.linalg.norm(outside, axis=-1) - spec.AGENT_RADIUS
