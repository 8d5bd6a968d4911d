"""What both hide-and-seek env groups share: arguments, layout, spaces, teams and the action check.

``HideAndSeekLite`` and ``HideAndSeekMujoco`` subclass ``HideAndSeekGroup``, so the two variants
accept the same arguments, declare the same spaces and teams (the optional ``EnvGroup`` attributes
of ``srl_lab.api.env.EnvExtras``) and refuse bad arguments and malformed actions with the same
messages.
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np

from srl_lab.api.env import StepResult
from srl_lab.envs.hide_and_seek import spec
from srl_lab.envs.hide_and_seek.scene import HIDER, SEEKER, SELF_FEATURES

IS_HIDER = SELF_FEATURES.index("is_hider")
ACTION_NVEC = np.asarray(spec.ACTION_NVEC)


def observation_space(layout: spec.Layout) -> gym.spaces.Dict:
    """Per-agent observation space: float32 arrays of ``spec.observation_shapes`` (masks in [0, 1])."""
    def box(key: str, shape: tuple[int, ...]) -> gym.spaces.Box:
        low, high = (0.0, 1.0) if key.startswith("mask_") else (-np.inf, np.inf)
        return gym.spaces.Box(low, high, shape, dtype=spec.OBS_DTYPE)

    return gym.spaces.Dict({key: box(key, shape) for key, shape in spec.observation_shapes(layout).items()})


class HideAndSeekGroup:
    """A batch of ``num_envs`` worlds of one layout, agents ordered hiders then seekers.

    Sets ``layout``, ``scenario``, ``hider_spawn``, ``horizon``, ``prep_steps``, ``action_repeat``,
    ``num_envs``, ``num_agents``, ``agent_teams`` and both spaces; subclasses add ``reset`` / ``_step``
    (one env step) / ``close``.

    ``action_repeat``: env steps each action acts for (one decision), rewards summed over them; the
    frame skip of Atari agents. The world still steps every 0.075 s and the episode statistics count
    env steps; a decision costs the network one call whatever it spans, so at 2 an agent learns from
    twice the episodes per trained row. A decision never spans two episodes: it divides the horizon
    and preparation, and where one env's episode ends early (a ``load_scene``, an env reset after an
    error) every env's decision ends with it.
    """

    team_names = ("hider", "seeker")  # agent_teams and team_of index these

    def __init__(self, num_envs: int, scenario: str, n_hiders: int, n_seekers: int, n_boxes: int | None,
                 n_ramps: int | None, horizon: int | None, hider_spawn: str, action_repeat: int = 1) -> None:
        self.layout = spec.Layout.for_scenario(scenario, n_hiders, n_seekers, n_boxes, n_ramps)
        spec.check_hider_spawn(hider_spawn)
        self.scenario = scenario
        self.hider_spawn = hider_spawn
        self.horizon = spec.DEFAULT_HORIZON[scenario] if horizon is None else int(horizon)
        self.prep_steps = spec.prep_steps(self.horizon)  # what the episode viewer captions
        self.action_repeat = spec.check_action_repeat(action_repeat, self.horizon)
        self.num_envs = int(num_envs)
        self.num_agents = self.layout.n_agents
        self.agent_teams = (HIDER,) * n_hiders + (SEEKER,) * n_seekers  # team of each agent
        self.observation_space = observation_space(self.layout)
        self.action_space = gym.spaces.MultiDiscrete(spec.ACTION_NVEC)

    def step(self, actions: np.ndarray) -> StepResult:
        """One decision: ``actions[num_envs, num_agents, 5]`` for ``action_repeat`` env steps (fewer
        where an episode ends); finished envs reset in place. Rewards are summed over the steps."""
        actions = self._decision_actions(self._check_actions(actions))
        result = self._step(actions)
        for _ in range(1, self.action_repeat):
            if result.terminated.any() or result.truncated.any():
                break
            previous, result = result, self._step(actions)
            result.reward += previous.reward
            result.env_errors += previous.env_errors
        return result

    def _decision_actions(self, actions: np.ndarray) -> np.ndarray:
        """The actions one decision plays, from the checked ones (a subclass may replace some rows)."""
        return actions

    def _step(self, actions: np.ndarray) -> StepResult:
        """One env step with checked ``actions`` (``_check_actions``)."""
        raise NotImplementedError

    @staticmethod
    def team_of(obs: dict) -> np.ndarray:
        """Team of observation rows (numpy or torch leaves): 0 hider, 1 seeker, from the is_hider flag."""
        return (obs["observation_self"][..., IS_HIDER] < 0.5) * 1

    def _check_actions(self, actions: np.ndarray) -> np.ndarray:
        """``actions`` as a C-contiguous int64 ``[num_envs, num_agents, 5]`` array; ValueError if malformed."""
        a = np.ascontiguousarray(actions, dtype=np.int64)
        shape = (self.num_envs, self.num_agents, len(spec.ACTION_NVEC))
        if a.shape != shape:
            raise ValueError(f"actions must have shape {shape}, got {a.shape}")
        if a.min() < 0 or (a >= ACTION_NVEC).any():
            raise ValueError(f"actions out of range for MultiDiscrete{spec.ACTION_NVEC}")
        return a
