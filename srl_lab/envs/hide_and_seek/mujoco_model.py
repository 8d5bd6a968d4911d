"""Builds one episode's MuJoCo world from a ``Scene`` with ``mujoco.MjSpec`` (no XML or mesh files).

Every body (agent, box, ramp) sits at the world origin with slide x/y/z and hinge z joints, so its
``qpos`` is its world position and yaw. Grabbing is a weld equality per (agent, object) pair that
starts inactive and is switched on at run time; locking turns on a zero-width limit on all four of
the object's joints, which freezes it where it stands. Compiling the whole scene takes about a
millisecond, so each episode gets a fresh model with exactly its walls and entities.
"""
from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from . import spec
from .scene import HIDER, RAMP_SIZE, Scene

FRICTION = (0.2, 0.005, 0.0001)  # sliding, torsional, rolling
DAMPING = 10.0
FLOOR_GROUP = 1  # the floor sits in its own geom group so sight and lidar rays can skip it
HIDER_RGBA = (0.20, 0.45, 0.90, 1.0)
SEEKER_RGBA = (0.90, 0.25, 0.20, 1.0)
BOX_RGBA = (0.85, 0.65, 0.30, 1.0)
RAMP_RGBA = (0.45, 0.75, 0.40, 1.0)
WALL_RGBA = (0.35, 0.35, 0.35, 1.0)
LOCK_SOLREF = (0.01, 1.0)  # stiff, critically damped lock limits (timeconst >= 2 substeps)
LOCK_SOLIMP = (0.99, 0.999, 0.001, 0.5, 2.0)
AXES = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))


@dataclass
class World:
    """A compiled episode plus the index arrays the env needs (objects = boxes, then ramps)."""

    model: mujoco.MjModel
    data: mujoco.MjData
    agent_body: np.ndarray  # [A] body ids
    agent_qpos: np.ndarray  # [A, 4] qpos addresses of x, y, z, yaw
    agent_dof: np.ndarray  # [A, 4] dof addresses
    obj_body: np.ndarray  # [O]
    obj_qpos: np.ndarray  # [O, 4]
    obj_dof: np.ndarray  # [O, 4]
    obj_jnt: np.ndarray  # [O, 4] joint ids (for locking)
    obj_size: np.ndarray  # [O, 3] full extents (ramps: run, width, height)
    obj_aim: np.ndarray  # [O, 3] point in the body frame that sight rays aim at (inside the object)
    weld: np.ndarray  # [A, O] equality ids
    n_boxes: int
    n_ramps: int


def _wedge_vertices() -> list[float]:
    """A 45° wedge centred on its bounding box, rising towards local +x."""
    hx, hy, hz = (s / 2 for s in RAMP_SIZE)
    verts = [(-hx, -hy, -hz), (hx, -hy, -hz), (-hx, hy, -hz), (hx, hy, -hz), (hx, -hy, hz), (hx, hy, hz)]
    return [c for v in verts for c in v]


def _add_free_planar_body(s: mujoco.MjSpec, name: str, damping: float) -> mujoco.MjsBody:
    """A body with slide x/y/z and hinge z (damping on x, y and yaw; z falls freely)."""
    body = s.worldbody.add_body(name=name)
    lock = {"solref_limit": LOCK_SOLREF, "solimp_limit": LOCK_SOLIMP}
    for axis, jname in zip(AXES, "xyz"):
        body.add_joint(name=f"{name}_{jname}", type=mujoco.mjtJoint.mjJNT_SLIDE, axis=axis,
                       damping=0.0 if jname == "z" else damping, **lock)
    body.add_joint(name=f"{name}_rz", type=mujoco.mjtJoint.mjJNT_HINGE, axis=(0, 0, 1), damping=damping,
                   **lock)
    return body


def build_spec(scene: Scene) -> mujoco.MjSpec:
    """The ``MjSpec`` of a scene: floor, walls, agents with motors, boxes, ramps and grab welds."""
    s = mujoco.MjSpec()
    s.modelname = "hide_and_seek"
    s.option.timestep = spec.SUBSTEP_DT
    s.option.gravity = (0.0, 0.0, -50.0)
    half = spec.FLOOR_SIZE / 2
    s.worldbody.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=(half, half, 0.1),
                         pos=(half, half, 0.0), friction=FRICTION, group=FLOOR_GROUP)
    for i, wall in enumerate(scene.walls):
        x0, y0, x1, y1 = wall.rect()
        s.worldbody.add_geom(name=f"wall{i}", type=mujoco.mjtGeom.mjGEOM_BOX,
                             size=((x1 - x0) / 2, (y1 - y0) / 2, wall.height / 2),
                             pos=((x0 + x1) / 2, (y0 + y1) / 2, wall.height / 2),
                             friction=FRICTION, rgba=WALL_RGBA)
    for i, agent in enumerate(scene.agents):
        body = _add_free_planar_body(s, f"agent{i}", DAMPING)
        body.add_geom(type=mujoco.mjtGeom.mjGEOM_SPHERE, size=(spec.AGENT_RADIUS, 0, 0), mass=1.0,
                      friction=FRICTION, rgba=HIDER_RGBA if agent.team == HIDER else SEEKER_RGBA)
        for jname in ("x", "y", "rz"):
            s.add_actuator(name=f"agent{i}_{jname}", target=f"agent{i}_{jname}",
                           trntype=mujoco.mjtTrn.mjTRN_JOINT, gear=(spec.FORCE_SCALE, 0, 0, 0, 0, 0),
                           ctrllimited=True, ctrlrange=(-1.0, 1.0))
    for i, box in enumerate(scene.boxes):
        body = _add_free_planar_body(s, f"box{i}", 0.0)
        body.add_geom(type=mujoco.mjtGeom.mjGEOM_BOX, mass=1.0, friction=FRICTION, rgba=BOX_RGBA,
                      size=(box.size_x / 2, box.size_y / 2, spec.BOX_SIZE / 2))
    if scene.ramps:
        s.add_mesh(name="wedge", uservert=_wedge_vertices())
    for i in range(len(scene.ramps)):
        body = _add_free_planar_body(s, f"ramp{i}", 0.0)
        body.add_geom(type=mujoco.mjtGeom.mjGEOM_MESH, meshname="wedge", mass=1.0, friction=FRICTION,
                      rgba=RAMP_RGBA)
    objects = [f"box{i}" for i in range(len(scene.boxes))] + [f"ramp{i}" for i in range(len(scene.ramps))]
    for i in range(len(scene.agents)):
        for name in objects:
            s.add_equality(name=f"grab_agent{i}_{name}", type=mujoco.mjtEq.mjEQ_WELD,
                           objtype=mujoco.mjtObj.mjOBJ_BODY, name1=f"agent{i}", name2=name, active=False)
    return s


def _addresses(model: mujoco.MjModel, names: list[str]) -> tuple[np.ndarray, ...]:
    """Body ids and the qpos / dof / joint ids of each body's x, y, z, yaw joints."""
    bodies = np.array([model.body(n).id for n in names], dtype=np.int64)
    joints = np.array([[model.joint(f"{n}_{j}").id for j in ("x", "y", "z", "rz")] for n in names],
                      dtype=np.int64).reshape(-1, 4)
    return bodies, model.jnt_qposadr[joints], model.jnt_dofadr[joints], joints


def build_world(scene: Scene) -> World:
    """Compile ``scene`` and set every body to its scene pose (agents also to their velocity)."""
    model = build_spec(scene).compile()
    data = mujoco.MjData(model)
    n_a, n_b, n_r = len(scene.agents), len(scene.boxes), len(scene.ramps)
    agent_body, agent_qpos, agent_dof, _ = _addresses(model, [f"agent{i}" for i in range(n_a)])
    names = [f"box{i}" for i in range(n_b)] + [f"ramp{i}" for i in range(n_r)]
    obj_body, obj_qpos, obj_dof, obj_jnt = _addresses(model, names)
    for i, a in enumerate(scene.agents):
        data.qpos[agent_qpos[i]] = (a.x, a.y, spec.AGENT_RADIUS, a.heading)
        data.qvel[agent_dof[i, :2]] = (a.vx, a.vy)
    sizes = [(b.size_x, b.size_y, spec.BOX_SIZE) for b in scene.boxes] + [RAMP_SIZE] * n_r
    poses = [(b.x, b.y, 0.0) for b in scene.boxes] + [(r.x, r.y, r.yaw) for r in scene.ramps]
    for i, ((x, y, yaw), size) in enumerate(zip(poses, sizes)):
        data.qpos[obj_qpos[i]] = (x, y, size[2] / 2, yaw)
    # Sight rays aim at each box's centre and at a ramp's cross-section centroid (inside the wedge).
    aim = np.zeros((n_b + n_r, 3))
    aim[n_b:] = (RAMP_SIZE[0] / 6, 0.0, -RAMP_SIZE[2] / 6)
    weld = np.arange(n_a * (n_b + n_r), dtype=np.int64).reshape(n_a, n_b + n_r)
    mujoco.mj_forward(model, data)
    return World(model, data, agent_body, agent_qpos, agent_dof, obj_body, obj_qpos, obj_dof, obj_jnt,
                 np.array(sizes, dtype=np.float64).reshape(-1, 3), aim, weld, n_b, n_r)


def set_weld(world: World, agent: int, obj: int, active: bool) -> None:
    """Switch the grab weld between ``agent`` and ``obj``, holding their current relative pose."""
    eq = world.weld[agent, obj]
    if active and not world.data.eq_active[eq]:
        d = world.data
        b1, b2 = world.agent_body[agent], world.obj_body[obj]
        rel_pos = d.xmat[b1].reshape(3, 3).T @ (d.xpos[b2] - d.xpos[b1])
        rel_quat = np.empty(4)
        inv = np.empty(4)
        mujoco.mju_negQuat(inv, d.xquat[b1])
        mujoco.mju_mulQuat(rel_quat, inv, d.xquat[b2])
        world.model.eq_data[eq, :3] = 0.0  # anchor at body2's origin
        world.model.eq_data[eq, 3:6] = rel_pos
        world.model.eq_data[eq, 6:10] = rel_quat
        world.model.eq_data[eq, 10] = 1.0  # torque scale
    world.data.eq_active[eq] = active


def set_lock(world: World, obj: int, locked: bool) -> None:
    """Freeze (zero-width joint limits at the current pose) or release object ``obj``."""
    joints = world.obj_jnt[obj]
    if locked:
        q = world.data.qpos[world.obj_qpos[obj]]
        world.model.jnt_range[joints] = np.stack([q, q], axis=1)
        world.data.qvel[world.obj_dof[obj]] = 0.0
    world.model.jnt_limited[joints] = locked
