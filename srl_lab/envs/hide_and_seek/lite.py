"""``hide_and_seek_lite``: a fast 2-D top-down hide-and-seek, N environments per call.

It keeps the contract of the faithful MuJoCo variant (observation keys and shapes, actions,
rewards, preparation phase, grab, team-owned locks, episode statistics) and simplifies the world:

* the world is flat: no gravity, no 3-D, so **no climbing** onto boxes or over walls and **no box
  surfing**; every height in the observations is a constant;
* boxes are axis-aligned rectangles that never rotate (elongated ones are x- or y-aligned at
  spawn and stay so); their yaw reads 0 and their angular velocity 0;
* ramps are approximated by a movable 0.5 m square footprint (``scene.RAMP_SIZE``) that agents can
  push, grab and lock like a box; the direction it rises towards is kept (``yaw``, a multiple of
  90°) for observations and rendering, but nothing can climb it;
* agents are discs: linear damping 10, force/torque from the action buckets, angular velocity =
  torque / damping (their rotational inertia is negligible); held objects follow their holder
  through a rigid offset joint rather than a weld;
* contacts are resolved by position projection (see ``lite_physics``): no restitution and no
  friction between bodies, floor friction on boxes only;
* line of sight runs centre to centre; walls, boxes and ramps block it, agents do not.

Each ended self-play episode reports ``spec.EPISODE_STAT_KEYS`` (returns, fraction hidden, box and
ramp moves and locks, then the phase figures ``spec.PHASE_STAT_KEYS``: share of the room's doors
blocked by hider-locked boxes and whether all are when preparation ends, by the rule in ``doors``;
fractions of play steps with every hider / some seeker in the quadrant room; the first play step a
hider is seen on; the number of doors; the fraction of play steps a hider holds an object), plus
``return`` and ``length``; NaN marks a figure a world leaves undefined.

The kernels are compiled with numba when it is importable and run as plain Python otherwise
(``SRL_LAB_NUMBA=0`` forces that), giving the same results.
"""
from __future__ import annotations

import math

import numpy as np

from srl_lab.api.env import StepResult
from srl_lab.envs.hide_and_seek import spec
from srl_lab.envs.hide_and_seek.group import HideAndSeekGroup
from srl_lab.envs.hide_and_seek.lite_scenarios import QUADRANT, RANDOMWALLS, ROOM
from srl_lab.envs.hide_and_seek.lite_step import (
    ACC_SIZE,
    N_STATS,
    begin_episode,
    doors_blocked_now,
    reset_envs,
    step_all,
)
from srl_lab.envs.hide_and_seek.scene import (
    HIDER,
    PLAY_AREA,
    RAMP_SIZE,
    SEEKER,
    Agent,
    Box,
    Ramp,
    Scene,
    Wall,
)

SCENARIO_CODES = {"quadrant": QUADRANT, "randomwalls": RANDOMWALLS}  # the kernels' scenario numbers
MAX_WALLS = 64  # capacity per env; generated worlds use at most 10
UNIFORMS_PER_RESET = 256


class HideAndSeekLite(HideAndSeekGroup):
    """A batch of ``num_envs`` lite hide-and-seek worlds (an ``EnvGroup``; hiders first, then seekers).

    ``random_opponents``: the fraction of envs in which one team plays uniform random actions (an
    opponent pool with the random policy in it, next to self-play); see ``_init_random_opponents``.
    """

    def __init__(self, num_envs: int, scenario: str = "quadrant", n_hiders: int = 2, n_seekers: int = 2,
                 n_boxes: int | None = None, n_ramps: int | None = None, horizon: int | None = None,
                 seed: int | None = None, hider_spawn: str = "room", random_opponents: float = 0.0,
                 action_repeat: int = 1) -> None:
        super().__init__(num_envs, scenario, n_hiders, n_seekers, n_boxes, n_ramps, horizon, hider_spawn,
                         action_repeat)
        self.hiders_anywhere = hider_spawn == "anywhere"
        self._area = PLAY_AREA[scenario]
        self._seed = seed
        n, a, o = self.num_envs, self.num_agents, self.layout.n_boxes + self.layout.n_ramps
        self._ag = np.zeros((n, a, 6))
        self._ob = np.zeros((n, o, 7))
        self._oi = np.zeros((n, o, 4), np.int64)
        self._walls = np.zeros((n, MAX_WALLS, 4))
        self._n_walls = np.zeros(n, np.int64)
        self._held = np.full((n, a), -1, np.int64)
        self._hoff = np.zeros((n, a, 2))
        self._vis = np.zeros((n, a, a + o), np.uint8)
        self._t = np.zeros(n, np.int64)
        self._ret = np.zeros((n, a))
        self._acc = np.zeros((n, ACC_SIZE))
        self._start = np.zeros((n, o, 2))
        self._rng = np.random.default_rng(seed)
        self._needs_reset = True
        self._init_random_opponents(random_opponents)

    # --- EnvGroup -------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> dict[str, np.ndarray]:
        """Start a fresh random episode in every env; ``seed`` (or the constructor's) fixes them."""
        if seed is not None or self._needs_reset:
            seed = self._seed if seed is None else seed
            self._rng = np.random.default_rng(seed)
            self._opponent_rng = np.random.default_rng(None if seed is None else [seed, 1])
        self._needs_reset = False
        obs = self._new_obs()
        self._reset_rows(np.arange(self.num_envs), obs)
        return obs

    def step(self, actions: np.ndarray) -> StepResult:
        """``HideAndSeekGroup.step``, after the first ``reset`` if none came yet."""
        if self._needs_reset:
            self.reset()
        return super().step(actions)

    def _decision_actions(self, actions: np.ndarray) -> np.ndarray:
        """Random opponents (if any) draw their actions, once per decision."""
        if not self._random_rows.any():
            return actions
        nvec = np.asarray(spec.ACTION_NVEC)
        random_actions = (self._opponent_rng.random(actions.shape) * nvec).astype(np.int64)
        return np.where(self._random_rows[..., None], random_actions, actions)

    def _step(self, actions: np.ndarray) -> StepResult:
        """One env step of every env with ``actions[num_envs, num_agents, 5]``; finished envs reset in
        place. When an episode ends, ``final_obs`` holds every env's observation before those resets
        (its rows for envs still running equal ``obs``).
        """
        n = self.num_envs
        reward = np.zeros((n, self.num_agents), np.float32)
        done = np.zeros(n, np.bool_)
        stats = np.zeros((n, N_STATS))
        doors = np.zeros(n)
        obs = self._new_obs()
        step_all(self._ag, self._ob, self._oi, self._walls, self._n_walls, self._held, self._hoff,
                 self._vis, self._t, self._ret, self._acc, self._start, actions, self.layout.n_hiders,
                 self.layout.n_boxes, self.prep_steps, self.horizon, self._area[0], self._area[1],
                 self.scenario == "quadrant", reward, done, stats, doors, *_sensed(obs))
        self._set_critic_inputs(obs, doors)
        final_obs = None
        episodes: list[dict[str, float]] = []
        ended = np.flatnonzero(done)
        if ended.size:
            final_obs = obs
            obs = {k: v.copy() for k, v in obs.items()}
            episodes = [self._episode_stats(e, stats[e]) for e in ended]
            self._reset_rows(ended, obs)
        return StepResult(obs, reward, done, np.zeros(n, np.bool_), final_obs, episodes)  # the horizon ends the game

    def close(self) -> None:
        """Nothing to release (kept for the ``EnvGroup`` protocol)."""

    # --- hand-built scenes ----------------------------------------------------------------
    def load_scene(self, env_index: int, scene: Scene) -> dict[str, np.ndarray]:
        """Replace env ``env_index``'s state by ``scene`` (see ``scene.py``); return its observation."""
        scene.validate(self.layout)
        if len(scene.walls) > MAX_WALLS:
            raise ValueError(f"a lite scene holds at most {MAX_WALLS} walls")
        if self._needs_reset:
            self.reset()
        e = env_index
        self._walls[e] = 0.0
        for w, wall in enumerate(scene.walls):
            self._walls[e, w] = wall.rect()
        self._n_walls[e] = len(scene.walls)
        self._ag[e] = 0.0
        for i, agent in enumerate(scene.agents):
            heading = (agent.heading + math.pi) % (2 * math.pi) - math.pi
            self._ag[e, i] = (agent.x, agent.y, heading, agent.vx, agent.vy, 0.0)
        self._ob[e] = 0.0
        self._oi[e] = (0, 0, -1, -1)
        n_boxes = self.layout.n_boxes
        for b, box in enumerate(scene.boxes):
            self._set_object(e, b, box.x, box.y, box.size_x / 2, box.size_y / 2, 0.0, 0, box.locked_by)
        for r, ramp in enumerate(scene.ramps):
            half = RAMP_SIZE[0] / 2
            self._set_object(e, n_boxes + r, ramp.x, ramp.y, half, half, ramp.yaw, 1, ramp.locked_by)
        self._t[e] = scene.t
        obs = self._new_obs()
        begin_episode(e, self._ag, self._ob, self._oi, self._walls, self._n_walls, self._held, self._vis,
                      self._t, self._ret, self._acc, self._start, self.layout.n_hiders, n_boxes,
                      self.prep_steps, self.scenario == "quadrant", *_sensed(obs))
        doors = doors_blocked_now(self._ob[e], self._oi[e], self._walls[e], self._n_walls[e],
                                  self.scenario == "quadrant")
        self._set_critic_inputs(obs, np.array([doors]), np.array([e]))
        return {k: v[e].copy() for k, v in obs.items()}

    def snapshot(self, env_index: int = 0) -> Scene:
        """The current state of one env as a ``Scene`` (what ``render`` draws)."""
        e = env_index
        nh = self.layout.n_hiders
        agents = [Agent(float(x), float(y), float(h), HIDER if i < nh else SEEKER, float(vx), float(vy))
                  for i, (x, y, h, vx, vy, _) in enumerate(self._ag[e])]
        walls = [_wall_from_rect(r) for r in self._walls[e, :self._n_walls[e]]]
        boxes, ramps = [], []
        for o in range(self._ob.shape[1]):
            exists, kind, team, _ = self._oi[e, o]
            if not exists:
                continue
            x, y, hx, hy, _, _, yaw = map(float, self._ob[e, o])
            locked = int(team) if team >= 0 else None
            if kind == 1:
                ramps.append(Ramp(x, y, yaw, locked))
            else:
                boxes.append(Box(x, y, 2 * hx, 2 * hy, locked))
        return Scene(agents, walls, boxes, ramps, int(self._t[e]))

    def held_object_xy(self) -> np.ndarray:
        """``[num_envs, agents, 2]``: where the object each agent holds stands, NaN where it holds none.

        What a diagnostic needs to tell box carrying apart from box pushing (``snapshot`` has no grabs).
        """
        held = self._held[:, :, None]
        xy = np.take_along_axis(self._ob[:, :, :2], np.maximum(held, 0), axis=1)
        return np.where(held >= 0, xy, np.nan)

    def render(self, env_index: int = 0, pixels: int = 480) -> np.ndarray:
        """A top-down ``[pixels, pixels, 3]`` RGB ``uint8`` image of one env."""
        from srl_lab.envs.hide_and_seek.render import render_scene

        corner = ROOM * spec.CELL
        room = (corner, corner, spec.FLOOR_SIZE, spec.FLOOR_SIZE) if self.scenario == "quadrant" else None
        return render_scene(self.snapshot(env_index), pixels=pixels,
                            prep=bool(self._t[env_index] < self.prep_steps), room=room)

    # --- internals ------------------------------------------------------------------------
    def _init_random_opponents(self, fraction: float) -> None:
        """Envs ``[0, k)``, ``k = round(fraction * num_envs)``, pit one team against uniform random
        actions drawn here: seekers in even envs, hiders in odd ones. ``trained_rows`` lists the rows
        the policy really plays (``api.env``), so the runtime trains only on those."""
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"random_opponents must be a fraction of the envs in [0, 1], got {fraction!r}")
        k = round(fraction * self.num_envs)
        self.random_team = np.full(self.num_envs, -1, np.int64)  # per env: the team acting randomly, or -1
        self.random_team[:k] = np.where(np.arange(k) % 2 == 0, SEEKER, HIDER)
        self._random_rows = self.random_team[:, None] == np.asarray(self.agent_teams)[None, :]
        self.trained_rows = np.flatnonzero(~self._random_rows.ravel()) if k else None

    def _episode_stats(self, e: int, row: np.ndarray) -> dict[str, float]:
        """One ended episode's statistics. Against a random team only the fraction hidden is kept, as
        ``hidden_fraction_vs_random_<team>``: those episodes do not mix into the self-play curves."""
        stats = dict(zip((*spec.EPISODE_STAT_KEYS, "return", "length"), map(float, row)))
        team = self.random_team[e]
        if team < 0:
            return stats
        return {f"hidden_fraction_vs_random_{self.team_names[team]}": stats["hidden_fraction"],
                "length": stats["length"]}

    def _new_obs(self) -> dict[str, np.ndarray]:
        return {k: np.empty((self.num_envs, self.num_agents, *shape), spec.OBS_DTYPE)
                for k, shape in spec.observation_shapes(self.layout).items()}

    def _reset_rows(self, envs: np.ndarray, obs: dict[str, np.ndarray]) -> None:
        uniforms = self._rng.random((envs.size, UNIFORMS_PER_RESET))
        reset_envs(envs.astype(np.int64), uniforms, SCENARIO_CODES[self.scenario], self._ag, self._ob,
                   self._oi, self._walls, self._n_walls, self._held, self._vis, self._t, self._ret,
                   self._acc, self._start, self.layout.n_hiders, self.layout.n_boxes, self.hiders_anywhere,
                   self.prep_steps, *_sensed(obs))
        self._set_critic_inputs(obs, np.zeros(envs.size), envs)  # a fresh episode has nothing locked

    def _set_critic_inputs(self, obs: dict[str, np.ndarray], doors: np.ndarray,
                           envs: np.ndarray | slice = slice(None)) -> None:
        """The critic-only keys of the rows of ``envs``: their clock and their doors blocked (``doors``)."""
        obs[spec.CLOCK_KEY][envs, :, 0] = (self._t[envs] / self.horizon)[:, None]
        obs[spec.DOORS_KEY][envs, :, 0] = doors[:, None]

    def _set_object(self, e: int, o: int, x: float, y: float, hx: float, hy: float, yaw: float,
                    kind: int, locked_by: int | None) -> None:
        self._ob[e, o] = (x, y, hx, hy, 0.0, 0.0, yaw)
        self._oi[e, o] = (1, kind, -1 if locked_by is None else locked_by, -1)


def _sensed(obs: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The arrays the step kernels fill, in ``spec.observation_shapes`` order (all but the critic's)."""
    return [array for key, array in obs.items() if key not in spec.CRITIC_ONLY_KEYS]


def _wall_from_rect(rect: np.ndarray) -> Wall:
    """The segment whose ``Wall.rect()`` is ``rect`` (outer-wall height on the floor's edges)."""
    xmin, ymin, xmax, ymax = map(float, rect)
    edges = (0.0, spec.FLOOR_SIZE)
    if xmax - xmin <= ymax - ymin:
        x = (xmin + xmax) / 2
        height = spec.OUTER_WALL_HEIGHT if x in edges else spec.INTERIOR_WALL_HEIGHT
        return Wall(x, ymin, x, ymax, height)
    y = (ymin + ymax) / 2
    height = spec.OUTER_WALL_HEIGHT if y in edges else spec.INTERIOR_WALL_HEIGHT
    return Wall(xmin, y, xmax, y, height)
