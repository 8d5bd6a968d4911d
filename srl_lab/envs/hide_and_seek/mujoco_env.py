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

import numpy as np

from srl_lab.api.env import StepResult

from . import doors
from .group import HideAndSeekGroup
from .mujoco_episode import Episode
from .mujoco_layout import generate
from .mujoco_render import render_episode
from .scene import Scene

logger = logging.getLogger(__name__)


class HideAndSeekMujoco(HideAndSeekGroup):
    """A batch of ``num_envs`` MuJoCo hide-and-seek worlds (agents: hiders, then seekers).

    ``step(actions[num_envs, num_agents, 5])`` follows ``srl_lab.api.env.EnvGroup``: episodes
    reset in the step that ends them (``final_obs`` keeps their last observation) and report
    ``spec.EPISODE_STAT_KEYS`` (its phase figures, ``spec.PHASE_STAT_KEYS``, as in the lite variant)
    plus ``return`` and ``length``.
    """

    def __init__(self, num_envs: int, scenario: str = "quadrant", n_hiders: int = 2, n_seekers: int = 2,
                 n_boxes: int | None = None, n_ramps: int | None = None, horizon: int | None = None,
                 seed: int | None = None, hider_spawn: str = "room", action_repeat: int = 1) -> None:
        super().__init__(num_envs, scenario, n_hiders, n_seekers, n_boxes, n_ramps, horizon, hider_spawn,
                         action_repeat)
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

    def _step(self, actions: np.ndarray) -> StepResult:
        if not self._episodes:
            self.reset()
        obs, finals, episodes = [], {}, []
        reward = np.zeros((self.num_envs, self.num_agents), dtype=np.float32)
        terminated = np.zeros(self.num_envs, dtype=bool)  # the horizon ends the game: no bootstrap past it
        truncated = np.zeros(self.num_envs, dtype=bool)  # cut by an error in step()
        errors = 0
        for i, ep in enumerate(self._episodes):
            try:
                last, reward[i], terminated[i] = ep.step(actions[i])
            except Exception:  # e.g. unstable physics: reset the environment and count it, never fatal
                logger.exception("hide-and-seek env %d raised in step(); resetting it", i)
                errors += 1
                last, truncated[i] = ep.obs, True
            else:
                if terminated[i]:
                    episodes.append(ep.stats())
            if terminated[i] or truncated[i]:
                finals[i] = last
                self._episodes[i] = self._new_episode(i)
            obs.append(self._episodes[i].obs)
        final_obs = None
        if finals:
            final_obs = {k: np.zeros_like(v) for k, v in self._stack(obs).items()}
            for i, last in finals.items():
                for k, v in last.items():
                    final_obs[k][i] = v
        return StepResult(self._stack(obs), reward, terminated, truncated,
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

    @staticmethod
    def _stack(rows: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        return {k: np.stack([r[k] for r in rows]) for k in rows[0]}
