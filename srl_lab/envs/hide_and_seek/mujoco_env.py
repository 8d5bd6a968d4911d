"""Faithful hide-and-seek on MuJoCo: the ``hide_and_seek`` variant of srl_lab's one contract.

The world is built in Python with ``mujoco.MjSpec`` per episode (no XML or mesh files): a 6 m floor
under gravity -50, 0.5 m interior and 4 m outer walls with 2-cell doors, sphere agents on slide
x/y/z + hinge z joints driven by gear-100 motors, boxes and 45° wedge ramps that slide and turn
about z, grab by run-time weld equalities and lock by zero-width joint limits. Each step is 15
substeps of 5 ms. Observations, actions and episode statistics are the lite variant's, so the same
policy and dashboards run on either (see ``spec`` and ``scene``).
"""
from __future__ import annotations

import logging

import gymnasium as gym
import numpy as np

from srl_lab.api.env import StepResult

from . import doors, spec
from .mujoco_episode import Episode, prep_steps
from .mujoco_layout import generate
from .mujoco_render import render_episode
from .scene import HIDER, SEEKER, SELF_FEATURES, Scene

logger = logging.getLogger(__name__)

DEFAULT_COUNTS = {"quadrant": (2, 1), "randomwalls": (9, 2)}  # (boxes, ramps)


def observation_space(layout: spec.Layout) -> gym.spaces.Dict:
    """Per-agent observation space: float32 arrays of ``spec.observation_shapes`` (masks in [0, 1])."""
    def box(key: str, shape: tuple[int, ...]) -> gym.spaces.Box:
        low, high = (0.0, 1.0) if key.startswith("mask_") else (-np.inf, np.inf)
        return gym.spaces.Box(low, high, shape, dtype=spec.OBS_DTYPE)

    return gym.spaces.Dict({key: box(key, shape) for key, shape in spec.observation_shapes(layout).items()})


class HideAndSeekMujoco:
    """A batch of ``num_envs`` MuJoCo hide-and-seek worlds (agents: hiders, then seekers).

    ``step(actions[num_envs, num_agents, 5])`` follows ``srl_lab.api.env.EnvGroup``: episodes
    reset in the step that ends them (``final_obs`` keeps their last observation) and report
    ``spec.EPISODE_STAT_KEYS`` (its phase figures, ``spec.PHASE_STAT_KEYS``, as in the lite variant)
    plus ``return`` and ``length``.
    """

    team_names = ("hider", "seeker")  # agent_teams and team_of index these

    @staticmethod
    def team_of(obs: dict) -> np.ndarray:
        """Team of observation rows (numpy or torch leaves): 0 hider, 1 seeker, from the is_hider flag."""
        return (obs["observation_self"][..., SELF_FEATURES.index("is_hider")] < 0.5) * 1

    def __init__(self, num_envs: int, scenario: str = "quadrant", n_hiders: int = 2, n_seekers: int = 2,
                 n_boxes: int | None = None, n_ramps: int | None = None, horizon: int | None = None,
                 seed: int | None = None, hider_spawn: str = "room") -> None:
        spec.check_hider_spawn(hider_spawn)
        self.hider_spawn = hider_spawn
        if scenario not in DEFAULT_COUNTS:
            raise ValueError(f"scenario must be one of {sorted(DEFAULT_COUNTS)}, got {scenario!r}")
        if not (1 <= n_hiders <= 3 and 1 <= n_seekers <= 3):
            raise ValueError("n_hiders and n_seekers must each be 1, 2 or 3")
        boxes, ramps = DEFAULT_COUNTS[scenario]
        self.layout = spec.Layout(n_hiders, n_seekers, boxes if n_boxes is None else n_boxes,
                                  ramps if n_ramps is None else n_ramps)
        self.scenario = scenario
        self.horizon = spec.DEFAULT_HORIZON[scenario] if horizon is None else int(horizon)
        self.prep_steps = prep_steps(self.horizon)  # what the episode viewer captions
        self.num_envs = int(num_envs)
        self.num_agents = self.layout.n_agents
        self.agent_teams = (HIDER,) * n_hiders + (SEEKER,) * n_seekers  # team of each agent
        self.observation_space = observation_space(self.layout)
        self.action_space = gym.spaces.MultiDiscrete(spec.ACTION_NVEC)
        self._seed = seed
        self._rngs: list[np.random.Generator] = []
        self._episodes: list[Episode] = []
        doors.warm_up()

    # ----------------------------------------------------------------- EnvGroup
    def reset(self, seed: int | None = None) -> dict[str, np.ndarray]:
        if seed is not None or not self._rngs:
            seq = np.random.SeedSequence(self._seed if seed is None else seed)
            self._rngs = [np.random.default_rng(s) for s in seq.spawn(self.num_envs)]
        self._episodes = [self._new_episode(i) for i in range(self.num_envs)]
        return self._stack([ep.obs for ep in self._episodes])

    def step(self, actions: np.ndarray) -> StepResult:
        if not self._episodes:
            self.reset()
        actions = self._check_actions(actions)
        obs, finals, episodes = [], {}, []
        reward = np.zeros((self.num_envs, self.num_agents), dtype=np.float32)
        truncated = np.zeros(self.num_envs, dtype=bool)
        errors = 0
        for i, ep in enumerate(self._episodes):
            try:
                last, reward[i], truncated[i] = ep.step(actions[i])
            except Exception:  # e.g. unstable physics: reset the environment and count it, never fatal
                logger.exception("hide-and-seek env %d raised in step(); resetting it", i)
                errors += 1
                last, truncated[i] = ep.obs, True
            else:
                if truncated[i]:
                    episodes.append(ep.stats())
            if truncated[i]:
                finals[i] = last
                self._episodes[i] = self._new_episode(i)
            obs.append(self._episodes[i].obs)
        final_obs = None
        if finals:
            final_obs = {k: np.zeros_like(v) for k, v in self._stack(obs).items()}
            for i, last in finals.items():
                for k, v in last.items():
                    final_obs[k][i] = v
        return StepResult(self._stack(obs), reward, np.zeros(self.num_envs, dtype=bool), truncated,
                          final_obs, episodes, errors)

    def close(self) -> None:
        self._episodes = []

    # ----------------------------------------------------------------- extras
    def load_scene(self, env_index: int, scene: Scene) -> dict[str, np.ndarray]:
        """Replace environment ``env_index`` with a hand-built ``scene`` (see ``scene`` module)."""
        if not self._episodes:
            self.reset()
        self._episodes[env_index] = Episode(scene, self.layout, self.scenario, self.horizon)
        return {k: v.copy() for k, v in self._episodes[env_index].obs.items()}

    def snapshot(self, env_index: int = 0) -> Scene:
        """The current state of one environment as a top-down ``Scene``."""
        if not self._episodes:
            self.reset()
        return self._episodes[env_index].snapshot()

    def render(self, env_index: int = 0, pixels: int = 480) -> np.ndarray:
        """Top-down ``[pixels, pixels, 3]`` RGB ``uint8`` image of one environment (from the simulation state)."""
        if not self._episodes:
            self.reset()
        return render_episode(self._episodes[env_index], pixels)

    # ----------------------------------------------------------------- helpers
    def _new_episode(self, i: int) -> Episode:
        scene, room = generate(self._rngs[i], self.scenario, self.layout, self.hider_spawn)
        return Episode(scene, self.layout, self.scenario, self.horizon, room)

    def _check_actions(self, actions: np.ndarray) -> np.ndarray:
        a = np.asarray(actions, dtype=np.int64)
        shape = (self.num_envs, self.num_agents, len(spec.ACTION_NVEC))
        if a.shape != shape:
            raise ValueError(f"actions must have shape {shape}, got {a.shape}")
        if a.min() < 0 or (a >= np.asarray(spec.ACTION_NVEC)).any():
            raise ValueError(f"actions out of range for MultiDiscrete{spec.ACTION_NVEC}")
        return a

    @staticmethod
    def _stack(rows: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        return {k: np.stack([r[k] for r in rows]) for k in rows[0]}
