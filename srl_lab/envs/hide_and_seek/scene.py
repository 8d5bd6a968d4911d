"""Hand-built scenes: one description every hide-and-seek variant can load.

The shared invariant tests place walls, agents, boxes and ramps exactly where they want them, so
each variant (``HideAndSeekLite``, ``HideAndSeekMujoco``) implements::

    env.load_scene(env_index: int, scene: Scene) -> dict[str, np.ndarray]

which replaces the whole state of environment ``env_index`` (the others are untouched) and returns
that environment's observation, arrays ``[num_agents, ...]`` laid out as in ``spec.observation_shapes``.
What a variant must support:

* **Walls** — any number of axis-aligned segments; each becomes a static slab ``WALL_THICKNESS``
  thick whose length is exactly the segment's (so a 2-cell door is 0.4 m wide). Walls block
  movement and line of sight. The scenario's own walls are removed.
* **Agents** — exactly ``n_hiders`` hiders then ``n_seekers`` seekers (the env's layout, in agent
  order); each at ``(x, y)`` with ``heading`` (radians, world frame, 0 = +x) and velocity.
* **Boxes / ramps** — at most the env's ``n_boxes`` / ``n_ramps``; missing ones are padding
  (``*_spoof`` mask 0). A box is ``size_x × size_y`` (0.5 m tall) centred at ``(x, y)`` and
  axis-aligned; a ramp is given by its centre and the direction it rises towards (``yaw``). Either
  may start locked by a team (``locked_by``: ``HIDER`` or ``SEEKER``).
* **Time** — ``t`` steps of the episode have elapsed: the preparation phase lasts while
  ``t < round(PREP_FRACTION * horizon)``, and the game ends (the episode terminates) when ``t``
  reaches the horizon.
* The scene counts as the previous step: its visibility masks (135° cone and line of sight) are what
  grab and lock check on the next ``step``. Nothing is held after loading; episode statistics start
  over from the loaded state. Rewards follow the env's ``scenario`` (play area and penalties).

Distances for grab and lock are *gaps*: from the agent's disc surface to the object's footprint
(the closest point of its horizontal rectangle); both need a gap ≤ 0.25 m and visibility.

This module also fixes what each observation column means (``*_FEATURES``) and each scenario's play
area, so both variants fill the arrays of ``spec.observation_shapes`` the same way.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from srl_lab.envs.hide_and_seek import spec

HIDER = 0
SEEKER = 1

RAMP_SIZE = (0.5, 0.5, 0.5)  # footprint along its rise, across, height (a 45 degree wedge)

# Column meanings of the observation arrays (world frame; heading/yaw in radians, 0 = +x).
SELF_FEATURES = ("x", "y", "z", "heading", "vx", "vy", "vz", "wz", "is_hider", "prep_progress")
AGENT_FEATURES = ("x", "y", "z", "heading", "vx", "vy", "vz", "wz", "is_hider", "is_teammate")
ENTITY_FEATURES = ("x", "y", "z", "cos_yaw", "sin_yaw", "vx", "vy", "vz", "wz",
                   "size_x", "size_y", "size_z", "you_lock", "team_lock", "obj_lock")

# Agents (and in ``quadrant`` boxes/ramps) whose centre leaves [lo, hi]² are penalised.
PLAY_AREA = {"quadrant": (0.1, 5.9), "randomwalls": (-6.0, 12.0)}


@dataclass(frozen=True)
class Wall:
    """An axis-aligned wall along the segment (x0, y0)–(x1, y1)."""

    x0: float
    y0: float
    x1: float
    y1: float
    height: float = spec.INTERIOR_WALL_HEIGHT

    def __post_init__(self) -> None:
        if self.x0 != self.x1 and self.y0 != self.y1:
            raise ValueError(f"walls must be axis-aligned: {self}")

    def rect(self) -> tuple[float, float, float, float]:
        """Footprint ``(xmin, ymin, xmax, ymax)``: the segment thickened across its length."""
        h = spec.WALL_THICKNESS / 2
        hx, hy = (h, 0.0) if self.x0 == self.x1 else (0.0, h)
        return (min(self.x0, self.x1) - hx, min(self.y0, self.y1) - hy,
                max(self.x0, self.x1) + hx, max(self.y0, self.y1) + hy)


@dataclass(frozen=True)
class Agent:
    """A disc agent of team ``HIDER`` or ``SEEKER``."""

    x: float
    y: float
    heading: float = 0.0
    team: int = HIDER
    vx: float = 0.0
    vy: float = 0.0


@dataclass(frozen=True)
class Box:
    """An axis-aligned box; the default is the 0.5 m cube, ``elongated(...)`` the 1.65 × 0.15 one."""

    x: float
    y: float
    size_x: float = spec.BOX_SIZE
    size_y: float = spec.BOX_SIZE
    locked_by: int | None = None

    @staticmethod
    def elongated(x: float, y: float, along_x: bool = True, locked_by: int | None = None) -> Box:
        long_side, short_side = spec.ELONGATED_BOX[0], spec.ELONGATED_BOX[1]
        sx, sy = (long_side, short_side) if along_x else (short_side, long_side)
        return Box(x, y, sx, sy, locked_by)


@dataclass(frozen=True)
class Ramp:
    """A ramp centred at (x, y) rising towards ``yaw`` (a multiple of π/2 in the lite variant)."""

    x: float
    y: float
    yaw: float = 0.0
    locked_by: int | None = None


@dataclass(frozen=True)
class Scene:
    """A complete hand-built state for one environment (see the module docstring)."""

    agents: list[Agent]
    walls: list[Wall] = field(default_factory=list)
    boxes: list[Box] = field(default_factory=list)
    ramps: list[Ramp] = field(default_factory=list)
    t: int = 0

    def validate(self, layout: spec.Layout) -> None:
        """Raise ``ValueError`` unless the scene fits an env with this layout."""
        teams = [a.team for a in self.agents]
        expected = [HIDER] * layout.n_hiders + [SEEKER] * layout.n_seekers
        if teams != expected:
            raise ValueError(f"scene agents' teams {teams} must be hiders then seekers: {expected}")
        if len(self.boxes) > layout.n_boxes or len(self.ramps) > layout.n_ramps:
            raise ValueError(
                f"scene has {len(self.boxes)} boxes / {len(self.ramps)} ramps; the env holds at most "
                f"{layout.n_boxes} / {layout.n_ramps}"
            )
        if self.t < 0:
            raise ValueError("scene time t must be >= 0")


def outer_walls(size: float = spec.FLOOR_SIZE) -> list[Wall]:
    """The four walls around the floor ``[0, size]²`` (centred on its edges; corners closed)."""
    h = spec.WALL_THICKNESS / 2
    return [
        Wall(-h, 0.0, size + h, 0.0, spec.OUTER_WALL_HEIGHT),
        Wall(-h, size, size + h, size, spec.OUTER_WALL_HEIGHT),
        Wall(0.0, 0.0, 0.0, size, spec.OUTER_WALL_HEIGHT),
        Wall(size, 0.0, size, size, spec.OUTER_WALL_HEIGHT),
    ]
