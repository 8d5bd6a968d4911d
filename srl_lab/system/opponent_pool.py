"""Self-play against past versions: the trainer's pool of them, and the actor side that plays them.

``PoolKeeper`` (trainer, rank 0): every ``every_versions`` versions the current weights join the
pool (the oldest leaves past ``size``); the parameter service serves each under the tag
``pool/<version>`` and the list of them under ``pool``. The pool is kept in checkpoints, so a
resumed run plays against the same past versions.

``OpponentPlay`` (actor, one per env group and policy): in the first ``envs_fraction`` of the
group's envs, one team of the policy's agents (team ``e % teams`` in pool env ``e``; each agent is
its own team when the env names none) is played by a past version instead of the latest. Those rows
are never sent to the trainer. Each team's rows are a ``Seat`` with its own past version, drawn every
``swap_steps`` steps from that team's record; an episode a past version played from start to end is
recorded with that version, the team it played and its agents' return. For zero-sum games the
trained side won when that return is negative (``won``).
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable

import numpy as np

from srl_lab.api.env import extras, obs_rows
from srl_lab.api.policy import Policy
from srl_lab.config import PoolConfig
from srl_lab.system.inference import Reply, run_policy
from srl_lab.system.parameters import ParameterService

LISTING = "pool"
FRESH, LATEST, MIXED = -1, -2, -3  # who played a frozen row's episode so far, when not one past version


def pool_tag(version: int) -> str:
    return f"pool/{version}"


class PoolKeeper:
    """The trainer's past versions, served by tag and kept in checkpoints."""

    def __init__(self, config: PoolConfig, params: ParameterService):
        self.config = config
        self.params = params
        self.versions: OrderedDict[int, dict[str, np.ndarray]] = OrderedDict()

    def after_update(self, version: int, weights: dict[str, np.ndarray]) -> None:
        """Add ``version`` if it is due (version 0, the starting policy, always is)."""
        if version % self.config.every_versions == 0 and version not in self.versions:
            self.add(version, weights)

    def add(self, version: int, weights: dict[str, np.ndarray]) -> None:
        self.versions[version] = weights
        self.params.put(pool_tag(version), version, weights)
        while len(self.versions) > self.config.size:
            old, _ = self.versions.popitem(last=False)
            self.params.untag(pool_tag(old))
        self.params.put(LISTING, version, {"versions": np.array(list(self.versions), dtype=np.int64)})

    def state(self) -> dict[int, dict[str, np.ndarray]]:
        return dict(self.versions)

    def restore(self, state: dict[int, dict[str, np.ndarray]]) -> None:
        for version, weights in sorted(state.items()):
            self.add(int(version), weights)


def frozen_teams(view: Any, envs_fraction: float) -> np.ndarray:
    """int [num_envs * num_agents]: the team whose past version plays each row, -1 where the latest plays.

    In pool env ``e`` (the first ``envs_fraction`` of the envs) the agents of team ``e % teams`` are
    frozen; an env that names no teams makes each agent its own team.
    """
    n_envs, n_agents = view.num_envs, view.num_agents
    teams = np.asarray(extras(view).agent_teams or range(n_agents))
    n_teams = int(teams.max()) + 1
    pool_envs = max(1, round(envs_fraction * n_envs))
    frozen = np.full((n_envs, n_agents), -1, dtype=np.int64)
    for e in range(pool_envs):
        frozen[e] = np.where(teams == e % n_teams, teams, -1)
    return frozen.reshape(-1)


def draw(versions: list[int], sampling: str, wins: dict[int, list[int]], rng: np.random.Generator) -> int:
    """An opponent version: the newest, uniform, or by win rate (those the trained side beats least)."""
    if sampling == "latest":
        return versions[-1]
    if sampling == "uniform":
        return int(rng.choice(versions))
    rates = np.array([(wins.get(v, [0, 0])[0] + 1) / (wins.get(v, [0, 0])[1] + 2) for v in versions])
    weights = (1.0 - rates) ** 2 + 1e-3
    return int(rng.choice(versions, p=weights / weights.sum()))


class Seat:
    """One team's frozen rows of a group, played by one past version at a time.

    ``wins`` is this team's record: a version can be strong as a hider and weak as a seeker, so
    the trained side's win rate against it is kept per team it played.
    """

    def __init__(self, name: str, rows: np.ndarray, opponent: Policy):
        self.name = name
        self.rows = rows  # flat row indices of the group
        self.opponent = opponent
        self.version: int | None = None  # the past version playing now (None: the pool is empty yet)
        self.wins: dict[int, list[int]] = {}  # version -> [episodes the trained side won, episodes]


class OpponentPlay:
    """Plays a group's frozen rows with past versions, one per team, and records how those episodes went."""

    def __init__(self, config: PoolConfig, seats: list[Seat], listing: Callable[[], list[int]],
                 fetch: Callable[[int], dict[str, np.ndarray] | None], seed: int, num_rows: int):
        self.config = config
        self.seats = seats
        seat_of = np.full(num_rows, -1)
        for i, seat in enumerate(seats):
            seat_of[seat.rows] = i
        self.frozen = seat_of >= 0
        self.frozen_index = np.flatnonzero(self.frozen)
        self.seat_of = seat_of[self.frozen_index]  # the seat of each frozen row
        self.listing = listing
        self.fetch = fetch
        self.rng = np.random.default_rng(seed)
        self.steps = 0
        self.weights: dict[int, dict[str, np.ndarray]] = {}
        self.returns = np.zeros(len(self.frozen_index))
        self.playing = np.full(len(self.frozen_index), LATEST)  # the version playing each frozen row now
        self.played_by = np.full(len(self.frozen_index), FRESH)  # who played the row's episode so far
        self.results: list[dict[str, Any]] = []

    @property
    def drawn(self) -> bool:
        return all(seat.version is not None for seat in self.seats)

    def _refresh(self) -> None:
        if self.drawn and self.steps < self.config.swap_steps:
            return
        versions = self.listing()
        if not versions:
            return
        self.weights = {v: w for v, w in self.weights.items() if v in versions}
        for i, seat in enumerate(self.seats):
            version = draw(versions, self.config.sampling, seat.wins, self.rng)
            weights = self.weights.get(version) or self.fetch(version)
            if weights is not None:
                self.weights[version] = weights
                seat.opponent.load_weights(weights)
                seat.version = version
                self.playing[self.seat_of == i] = version
        self.steps = 0

    def act(self, obs: Any, reply: Reply) -> Reply:
        """``reply`` with each seat's rows' actions taken by its past version (the latest's, before any)."""
        self._refresh()
        for seat in self.seats:
            if seat.version is not None:
                actions, logp, values = run_policy(seat.opponent, obs_rows(obs, seat.rows))
                reply.actions[seat.rows], reply.logp[seat.rows], reply.values[seat.rows] = actions, logp, values
        return reply

    def record(self, rewards: np.ndarray, ended: np.ndarray) -> None:
        """After a step: add the frozen rows' rewards; an episode that ended is recorded if one version played it."""
        self.steps += 1
        frozen_rewards, frozen_ended = rewards[self.frozen_index], ended[self.frozen_index]
        self.played_by = np.where((self.played_by == FRESH) | (self.played_by == self.playing), self.playing, MIXED)
        self.returns += frozen_rewards
        for i in np.flatnonzero(frozen_ended):
            version = int(self.played_by[i])
            if version >= 0:
                seat = self.seats[self.seat_of[i]]
                won = bool(self.returns[i] < 0)
                tally = seat.wins.setdefault(version, [0, 0])
                tally[0] += won
                tally[1] += 1
                self.results.append({"opponent": version, "team": seat.name, "return": float(self.returns[i]),
                                     "won": won})
        self.returns[frozen_ended] = 0.0
        self.played_by[frozen_ended] = FRESH

    def take_results(self) -> list[dict[str, Any]]:
        results, self.results = self.results, []
        return results
