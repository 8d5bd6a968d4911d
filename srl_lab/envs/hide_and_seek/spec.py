"""Constants and the observation/action contract shared by both hide-and-seek variants.

Every figure here comes from the project's hide-and-seek specification (OpenAI's released
environment). Both the lite and the MuJoCo variant build their spaces from ``observation_shapes``
so the same policy, trainer and dashboards run on either.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FLOOR_SIZE = 6.0  # m
GRID_SIZE = 30  # placement grid cells per side (0.2 m)
CELL = FLOOR_SIZE / GRID_SIZE
AGENT_RADIUS = 0.15
BOX_SIZE = 0.5
ELONGATED_BOX = (1.65, 0.15, 0.5)
INTERIOR_WALL_HEIGHT = 0.5
OUTER_WALL_HEIGHT = 4.0
WALL_THICKNESS = 0.1
SUBSTEPS = 15
SUBSTEP_DT = 0.005
STEP_DT = SUBSTEPS * SUBSTEP_DT  # 0.075 s
PREP_FRACTION = 0.4
GRAB_RADIUS = 0.25
LOCK_RADIUS = 0.25
VIEW_HALF_ANGLE = np.deg2rad(67.5)  # 135 degree cone
LIDAR_RAYS = 30
LIDAR_RANGE = 6.0
FORCE_BUCKETS = 11
FORCE_SCALE = 100.0
ACTION_NVEC = (11, 11, 11, 2, 2)  # force x, force y, torque z, grab, lock
OUT_OF_BOUNDS_PENALTY = -10.0
SCENARIOS = ("quadrant", "randomwalls")
DEFAULT_HORIZON = {"quadrant": 80, "randomwalls": 240}
DEFAULT_OBJECTS = {"quadrant": (2, 1), "randomwalls": (9, 2)}  # (boxes, ramps) when not given
TEAM_SIZES = (1, 2, 3)  # hiders, and seekers, per world
# Quadrant: hiders start in the room (the original's default) or anywhere outside it too (the
# original's ``quadrant_game_hider_uniform_placement``); seekers always start outside the room.
HIDER_SPAWNS = ("room", "anywhere")

SELF_DIM = 10
AGENT_DIM = 10
ENTITY_DIM = 15  # boxes and ramps

# Which emergent phase an episode reached (exact rules in ``doors``): share of the room's doors that
# hider-locked boxes block when preparation ends, 1.0 if that is all of them (a fort), fraction of
# play steps with every hider / at least one seeker in the quadrant room, the first play step on
# which a seeker sees a hider (the play length if none does), and how many doors the room has (the
# quadrant's 1 or 2: with p=0.5 one wall has none, and a fort is harder with two), and the fraction
# of play steps on which a hider holds a box or ramp (carried as a shield, a box hides a hider that
# no fort covers). NaN where a figure is undefined: no door; the room fractions in ``randomwalls`` (no
# room stands out); the room and holding fractions without a play step.
PHASE_STAT_KEYS = (
    "doors_blocked_prep",
    "fort_prep",
    "hider_in_room",
    "seeker_in_room",
    "first_seen_step",
    "num_doors",
    "hider_holds_play",
)

EPISODE_STAT_KEYS = (
    "hider_return",
    "seeker_return",
    "hidden_fraction",
    "max_box_move_prep",
    "max_box_move",
    "num_box_lock_prep",
    "num_box_lock",
    "max_ramp_move_prep",
    "max_ramp_move",
    "num_ramp_lock_prep",
    "num_ramp_lock",
    *PHASE_STAT_KEYS,
)


def action_values(bucket: np.ndarray) -> np.ndarray:
    """Map an action bucket 0..10 to its force/torque: linspace(-0.9, 0.9) * 100."""
    return (np.asarray(bucket, dtype=np.float32) / (FORCE_BUCKETS - 1) * 1.8 - 0.9) * FORCE_SCALE


def prep_steps(horizon: int) -> int:
    """Steps of the preparation phase that opens an episode of ``horizon`` steps."""
    return round(PREP_FRACTION * horizon)


def check_choice(name: str, value: object, choices: tuple) -> None:
    """Raise the one ``ValueError`` both variants give for an argument outside its ``choices``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")


def check_hider_spawn(hider_spawn: str) -> None:
    check_choice("hider_spawn", hider_spawn, HIDER_SPAWNS)


def check_action_repeat(action_repeat: int, horizon: int) -> int:
    """``action_repeat`` as an int; ``ValueError`` unless it is an integer dividing the horizon and the
    preparation phase, so that no decision spans the end of preparation or of an episode."""
    whole = isinstance(action_repeat, (int, np.integer)) and not isinstance(action_repeat, bool)
    if not whole or action_repeat < 1 or horizon % action_repeat or prep_steps(horizon) % action_repeat:
        raise ValueError(f"action_repeat must be a positive divisor of the horizon ({horizon} steps) and of its "
                         f"preparation phase ({prep_steps(horizon)} steps), got {action_repeat!r}")
    return int(action_repeat)


@dataclass(frozen=True)
class Layout:
    """How many entities an environment has; arrays are padded to these maxima.

    The defaults are the 2v2 quadrant game's; ``for_scenario`` fills in any scenario's.
    """

    n_hiders: int = 2
    n_seekers: int = 2
    n_boxes: int = DEFAULT_OBJECTS["quadrant"][0]
    n_ramps: int = DEFAULT_OBJECTS["quadrant"][1]

    def __post_init__(self) -> None:
        check_choice("n_hiders", self.n_hiders, TEAM_SIZES)
        check_choice("n_seekers", self.n_seekers, TEAM_SIZES)
        if self.n_boxes < 0 or self.n_ramps < 0:
            raise ValueError(f"n_boxes and n_ramps must be at least 0, got {self.n_boxes} and {self.n_ramps}")

    @classmethod
    def for_scenario(cls, scenario: str, n_hiders: int, n_seekers: int, n_boxes: int | None = None,
                     n_ramps: int | None = None) -> "Layout":
        """The layout of ``scenario`` (``SCENARIOS``); absent object counts take its defaults."""
        check_choice("scenario", scenario, SCENARIOS)
        boxes, ramps = DEFAULT_OBJECTS[scenario]
        return cls(n_hiders, n_seekers, boxes if n_boxes is None else n_boxes, ramps if n_ramps is None else n_ramps)

    @property
    def n_agents(self) -> int:
        return self.n_hiders + self.n_seekers


# t / horizon, the share of the episode elapsed, for the critic only: the agents' policy never reads
# it (what they sense of time is the preparation progress in observation_self). The horizon ends the
# game, so a state's value depends on the steps left; with the clock among its inputs the critic's
# targets are a function of what it reads (a time limit is part of the state, as Pardo et al.,
# "Time Limits in Reinforcement Learning", 2018, argue).
CLOCK_KEY = "episode_time"
# The share of the room's doors blocked by hider-locked boxes as the world stands (by the rule in
# ``doors``; 0 without a door), for the critic only. A fort pays its hider in the play phase that
# follows, but a critic whose inputs do not single out a closed door learns its worth only from forts
# it sees, which a learning hider builds too rarely for that (docs/hide_and_seek_learning.md, "What
# the critic makes of a fort"). The policy never reads it: it sees the boxes and walls as they are.
DOORS_KEY = "doors_blocked"
CRITIC_ONLY_KEYS = (CLOCK_KEY, DOORS_KEY)


def observation_shapes(layout: Layout) -> dict[str, tuple[int, ...]]:
    """Per-agent observation shapes (the batched interface prepends ``[n_envs, n_agents]``).

    Every key but ``CRITIC_ONLY_KEYS`` is one of the specification's observations."""
    others = layout.n_agents - 1
    return {
        "observation_self": (SELF_DIM,),
        "agent_qpos_qvel": (others, AGENT_DIM),
        "box_obs": (layout.n_boxes, ENTITY_DIM),
        "ramp_obs": (layout.n_ramps, ENTITY_DIM),
        "lidar": (LIDAR_RAYS,),
        "mask_aa_obs": (others,),
        "mask_ab_obs": (layout.n_boxes,),
        "mask_ar_obs": (layout.n_ramps,),
        "mask_aa_obs_spoof": (others,),
        "mask_ab_obs_spoof": (layout.n_boxes,),
        "mask_ar_obs_spoof": (layout.n_ramps,),
        CLOCK_KEY: (1,),
        DOORS_KEY: (1,),
    }


OBS_DTYPE = np.float32  # every observation array, masks included (0.0 / 1.0)
