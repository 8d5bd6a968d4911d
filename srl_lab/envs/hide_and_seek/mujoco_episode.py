"""One MuJoCo hide-and-seek episode: grab/lock rules, physics step, observations, rewards, statistics.

``HideAndSeekMujoco`` batches these; keeping one environment's rules here lets ``load_scene`` and
autoreset share a single constructor (an episode starts from any ``Scene``).
"""
from __future__ import annotations

import mujoco
import numpy as np

from . import spec
from .doors import BOX_COLUMNS, door_stats, in_room
from .mujoco_model import World, build_world, set_lock, set_weld
from .mujoco_sense import Kinematics, aim_points, cast, footprint_gaps, in_cone, read_kinematics
from .scene import HIDER, PLAY_AREA, Agent, Box, Ramp, Scene

NEUTRAL_ACTION = np.array([spec.FORCE_BUCKETS // 2] * 3 + [0, 0])
UNLOCKED = -1


class Episode:
    """State and rules of one environment from a ``Scene`` until the horizon."""

    def __init__(self, scene: Scene, layout: spec.Layout, scenario: str, horizon: int,
                 room: tuple[float, float, float, float] | None = None) -> None:
        scene.validate(layout)
        self.layout, self.scenario, self.room = layout, scenario, room
        self.shapes = spec.observation_shapes(layout)
        self.walls = list(scene.walls)
        self.wall_rects = np.array([w.rect() for w in self.walls], dtype=np.float64).reshape(-1, 4)
        self.horizon, self.prep = horizon, spec.prep_steps(horizon)
        self.world: World = build_world(scene)
        w = self.world
        n_a, n_o = len(scene.agents), len(w.obj_body)
        self.team = np.array([a.team for a in scene.agents])
        self.is_hider = self.team == HIDER
        self.others = np.array([[j for j in range(n_a) if j != i] for i in range(n_a)]).reshape(n_a, -1)
        self.t = scene.t
        self.owner = np.full(n_o, UNLOCKED)
        self.locker = np.zeros((n_o, n_a), dtype=bool)  # the agent that locked each object
        self.held = np.full(n_a, -1)
        for o, thing in enumerate(list(scene.boxes) + list(scene.ramps)):
            if thing.locked_by is not None:
                self.owner[o] = thing.locked_by
                set_lock(w, o, True)
        self.returns = np.zeros(n_a)
        self.hidden_steps = self.play_steps = 0
        self.hiders_in_room_steps = self.seeker_in_room_steps = self.hider_holds_steps = 0
        self.first_seen: int | None = None  # play step a seeker first saw a hider on
        self.bad_physics = int(w.data.warning[mujoco.mjtWarning.mjWARN_BADQACC].number)
        self.obs = self._observe()
        self.start_xy = self.kin.obj_pos[:, :2].copy()
        self.prep_xy = self.prep_locked = self.prep_doors = None
        if self.t >= self.prep:
            self._snapshot_prep()

    # ----------------------------------------------------------------- stepping
    def step(self, action: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray, bool]:
        """Apply ``action[A, 5]`` for one 0.075 s step; returns (obs, reward[A], episode over)."""
        in_prep = self.t < self.prep
        action = np.array(action, dtype=np.int64)
        if in_prep:
            action[~self.is_hider] = NEUTRAL_ACTION
        kin = self.kin
        gaps = footprint_gaps(kin.agent_pos[:, :2], kin.obj_pos[:, :2], kin.obj_yaw, self.world.obj_size)
        self._grab(action[:, 3] == 1, gaps)
        self._lock(action[:, 4] == 1, gaps)
        self.world.data.ctrl[:] = (spec.action_values(action[:, :3]) / spec.FORCE_SCALE).reshape(-1)
        mujoco.mj_step(self.world.model, self.world.data, spec.SUBSTEPS)
        if self.world.data.warning[mujoco.mjtWarning.mjWARN_BADQACC].number != self.bad_physics:
            raise FloatingPointError("MuJoCo simulation became unstable")
        self.t += 1
        self.obs = self._observe()
        reward = self._reward(in_prep)
        self.returns += reward
        if self.t == self.prep:
            self._snapshot_prep()
        return self.obs, reward.astype(np.float32), self.t >= self.horizon

    def _grab(self, want: np.ndarray, gaps: np.ndarray) -> None:
        """Hold: keep the current object while grab stays 1, else weld the closest visible one."""
        allowed = self.sees_obj & (gaps <= spec.GRAB_RADIUS)
        for a in range(len(want)):
            if not want[a]:
                if self.held[a] >= 0:
                    set_weld(self.world, a, self.held[a], False)
                    self.held[a] = -1
            elif self.held[a] < 0 and allowed[a].any():
                self.held[a] = int(np.argmin(np.where(allowed[a], gaps[a], np.inf)))
                set_weld(self.world, a, self.held[a], True)

    def _lock(self, want: np.ndarray, gaps: np.ndarray) -> None:
        """Team-owned locks: an owner-team agent in range outputting 0 unlocks, and that beats a lock."""
        allowed = self.sees_obj & (gaps <= spec.LOCK_RADIUS)  # [A, O]
        owner_team = self.team[:, None] == self.owner[None, :]
        unlock = (allowed & ~want[:, None] & owner_team).any(axis=0)
        lockers = allowed & want[:, None] & (self.owner == UNLOCKED)[None, :] & ~unlock[None, :]
        for o in np.flatnonzero(unlock):
            self.owner[o] = UNLOCKED
            self.locker[o] = False
            set_lock(self.world, o, False)
        for o in np.flatnonzero(lockers.any(axis=0)):
            first = int(np.argmax(lockers[:, o]))  # the lowest-index locker owns it for its team
            self.owner[o] = self.team[first]
            self.locker[o, first] = True
            set_lock(self.world, o, True)

    # ----------------------------------------------------------------- observing
    def _observe(self) -> dict[str, np.ndarray]:
        """Observation arrays ``[A, ...]`` (see ``scene.*_FEATURES``); also caches what agents saw."""
        w = self.world
        self.kin = kin = read_kinematics(w)
        n_a, n_b, n_r = len(self.team), w.n_boxes, w.n_ramps
        targets = np.concatenate([kin.agent_pos, aim_points(w, kin)])
        sight, lidar = cast(w, kin, targets)
        visible = sight & in_cone(kin.agent_pos, kin.agent_yaw, targets)
        self.sees_agent = visible[:, :n_a]
        self.sees_obj = visible[:, n_a:]

        agents = np.concatenate([kin.agent_pos, kin.agent_yaw[:, None], kin.agent_vel,
                                 self.is_hider[:, None], np.zeros((n_a, 1))], axis=1)
        own = agents.copy()
        own[:, 9] = min(1.0, self.t / self.prep) if self.prep > 0 else 1.0
        others = agents[self.others]
        others[..., 9] = self.team[self.others] == self.team[:, None]
        entity = self._entity_features(kin)  # [A, O, 15]
        obs = {k: np.zeros((n_a, *shape), spec.OBS_DTYPE) for k, shape in self.shapes.items()}
        obs["observation_self"][:] = own
        obs["agent_qpos_qvel"][:] = others
        obs["box_obs"][:, :n_b] = entity[:, :n_b]
        obs["ramp_obs"][:, :n_r] = entity[:, n_b:]
        obs["lidar"][:] = lidar
        obs["mask_aa_obs"][:] = self.sees_agent[np.arange(n_a)[:, None], self.others]
        obs["mask_ab_obs"][:, :n_b] = self.sees_obj[:, :n_b]
        obs["mask_ar_obs"][:, :n_r] = self.sees_obj[:, n_b:]
        obs["mask_aa_obs_spoof"][:] = 1.0  # padding beyond this episode's entities stays 0
        obs["mask_ab_obs_spoof"][:, :n_b] = 1.0
        obs["mask_ar_obs_spoof"][:, :n_r] = 1.0
        obs[spec.CLOCK_KEY][:] = self.t / self.horizon
        share, _, doors = self._door_stats()
        obs[spec.DOORS_KEY][:] = share if doors > 0 else 0.0
        return obs

    def _entity_features(self, kin: Kinematics) -> np.ndarray:
        n_a, n_o = len(self.team), len(kin.obj_yaw)
        shared = np.concatenate([kin.obj_pos, np.cos(kin.obj_yaw)[:, None], np.sin(kin.obj_yaw)[:, None],
                                 kin.obj_vel, self.world.obj_size], axis=1)  # [O, 12]
        out = np.empty((n_a, n_o, spec.ENTITY_DIM))
        out[:, :, :12] = shared[None]
        out[:, :, 12] = self.locker.T
        out[:, :, 13] = self.team[:, None] == self.owner[None, :]
        out[:, :, 14] = (self.owner != UNLOCKED)[None, :]
        return out

    # ----------------------------------------------------------------- rewards and statistics
    def _reward(self, in_prep: bool) -> np.ndarray:
        n_a = len(self.team)
        if in_prep:
            return np.zeros(n_a)
        seekers, hiders = ~self.is_hider, self.is_hider
        seen = bool(self.sees_agent[np.ix_(seekers, hiders)].any())
        self.play_steps += 1
        self.hidden_steps += not seen
        self._track_phases(seen)
        reward = np.where(self.is_hider, -1.0 if seen else 1.0, 1.0 if seen else -1.0)
        lo, hi = PLAY_AREA[self.scenario]
        outside = ((self.kin.agent_pos[:, :2] < lo) | (self.kin.agent_pos[:, :2] > hi)).any(axis=1)
        reward[outside] = spec.OUT_OF_BOUNDS_PENALTY
        if self.scenario == "quadrant":
            obj_xy = self.kin.obj_pos[:, :2]
            if ((obj_xy < lo) | (obj_xy > hi)).any():
                reward[:] = spec.OUT_OF_BOUNDS_PENALTY
        return reward

    def _track_phases(self, seen: bool) -> None:
        """Count this play step towards first sight, hiders holding and (quadrant) who is in the room."""
        if seen and self.first_seen is None:
            self.first_seen = self.play_steps - 1
        self.hider_holds_steps += bool((self.held[self.is_hider] >= 0).any())
        if self.scenario != "quadrant":
            return
        inside = np.array([in_room(float(x), float(y)) for x, y in self.kin.agent_pos[:, :2]])
        self.hiders_in_room_steps += bool(inside[self.is_hider].all())
        self.seeker_in_room_steps += bool(inside[~self.is_hider].any())

    def _snapshot_prep(self) -> None:
        self.prep_xy = self.kin.obj_pos[:, :2].copy()
        self.prep_locked = self.owner != UNLOCKED
        self.prep_doors = self._door_stats()

    def _door_stats(self) -> tuple[float, float, float]:
        """``(doors_blocked_prep, fort_prep, num_doors)`` of the current state (rule in ``doors``)."""
        n_b = self.world.n_boxes
        mine = np.flatnonzero(self.owner[:n_b] == HIDER)
        boxes = np.zeros((max(len(mine), 1), BOX_COLUMNS))
        boxes[:len(mine), :2] = self.kin.obj_pos[mine, :2]
        boxes[:len(mine), 2:4] = self.world.obj_size[mine, :2] / 2
        boxes[:len(mine), 4] = self.kin.obj_yaw[mine]
        return door_stats(self.wall_rects, len(self.wall_rects), self.scenario == "quadrant", boxes, len(mine))

    def _phase_stats(self) -> dict[str, float]:
        """``spec.PHASE_STAT_KEYS`` (room fractions NaN outside quadrant or without a play step, the
        holding fraction without a play step)."""
        blocked, fort, doors = self.prep_doors if self.prep_doors is not None else self._door_stats()
        room = self.scenario == "quadrant" and self.play_steps > 0
        play = max(self.play_steps, 1)
        return {
            "doors_blocked_prep": float(blocked),
            "fort_prep": float(fort),
            "hider_in_room": self.hiders_in_room_steps / play if room else float("nan"),
            "seeker_in_room": self.seeker_in_room_steps / play if room else float("nan"),
            "first_seen_step": float(self.play_steps if self.first_seen is None else self.first_seen),
            "num_doors": float(doors),
            "hider_holds_play": self.hider_holds_steps / play if self.play_steps else float("nan"),
        }

    def snapshot(self) -> Scene:
        """The current state as a top-down ``Scene`` (heights and box yaw are not part of a scene)."""
        kin, w = self.kin, self.world
        agents = [Agent(float(p[0]), float(p[1]), float(yaw), int(team), float(v[0]), float(v[1]))
                  for p, yaw, team, v in zip(kin.agent_pos, kin.agent_yaw, self.team, kin.agent_vel)]
        owner = [None if o == UNLOCKED else int(o) for o in self.owner]
        boxes = [Box(float(kin.obj_pos[o, 0]), float(kin.obj_pos[o, 1]), float(w.obj_size[o, 0]),
                     float(w.obj_size[o, 1]), owner[o]) for o in range(w.n_boxes)]
        ramps = [Ramp(float(kin.obj_pos[o, 0]), float(kin.obj_pos[o, 1]), float(kin.obj_yaw[o]), owner[o])
                 for o in range(w.n_boxes, w.n_boxes + w.n_ramps)]
        return Scene(agents, list(self.walls), boxes, ramps, self.t)

    def stats(self) -> dict[str, float]:
        """Episode statistics (``spec.EPISODE_STAT_KEYS`` plus ``return`` and ``length``)."""
        w = self.world
        xy = self.kin.obj_pos[:, :2]
        prep_xy = xy if self.prep_xy is None else self.prep_xy
        prep_locked = self.owner != UNLOCKED if self.prep_locked is None else self.prep_locked
        locked = self.owner != UNLOCKED
        move_prep = np.linalg.norm(prep_xy - self.start_xy, axis=1)
        move = np.linalg.norm(xy - self.start_xy, axis=1)
        boxes, ramps = slice(0, w.n_boxes), slice(w.n_boxes, None)

        def peak(v: np.ndarray) -> float:
            return float(v.max()) if v.size else 0.0

        return {
            "hider_return": float(self.returns[self.is_hider].mean()),
            "seeker_return": float(self.returns[~self.is_hider].mean()),
            "hidden_fraction": self.hidden_steps / self.play_steps if self.play_steps else 0.0,
            "max_box_move_prep": peak(move_prep[boxes]),
            "max_box_move": peak(move[boxes]),
            "num_box_lock_prep": float(prep_locked[boxes].sum()),
            "num_box_lock": float(locked[boxes].sum()),
            "max_ramp_move_prep": peak(move_prep[ramps]),
            "max_ramp_move": peak(move[ramps]),
            "num_ramp_lock_prep": float(prep_locked[ramps].sum()),
            "num_ramp_lock": float(locked[ramps].sum()),
            **self._phase_stats(),
            "return": float(self.returns.mean()),
            "length": float(self.t),
        }
