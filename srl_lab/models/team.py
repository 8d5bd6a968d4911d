"""One network per team behind the ordinary ``Policy`` interface (``PolicyConfig.mapping="per_team"``).

``TeamPolicies`` owns one sub-policy per team, all built by the same factory, and sends every row
(env x agent) to its team's network. The team of a row is read from the row's own observation by
``team_of(obs)`` (hide-and-seek: the is_hider flag of ``observation_self``), because the trainer
shuffles rows and chunks freely: no agent index survives into PPO's minibatches. Actors, policy
workers, the trainer and PPO therefore use it like any other policy:

* ``distribution_and_value(obs)`` on rows ``[N, ...]``, or ``(obs [T, B, ...], state, done)`` for
  recurrent sub-policies (each column is one agent, whose team must not change within the chunk);
* ``act`` / ``evaluate`` / ``initial_state`` / ``weights`` / ``obs_normalizer.update``.

Each team's rows only ever reach that team's network, so one team's weights cannot change the other
team's actions, and each sub-policy keeps its own critic input (the entity-attention model's critic
sees every existing entity while its policy sees only the visible ones).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn
from torch.distributions import Distribution

from srl_lab.api.env import TeamOf
from srl_lab.api.policy import Policy, TensorObs
from srl_lab.api.tree import tree_map


def _assemble(parts: list[tuple[torch.Tensor, torch.Tensor]], size: int, dim: int) -> torch.Tensor:
    """Rows ``idx`` of each ``(idx, part)`` put back at their positions along ``dim`` of a tensor of ``size``."""
    first = parts[0][1]
    shape = list(first.shape)
    shape[dim] = size
    out = first.new_zeros(shape)
    for idx, part in parts:
        out = out.index_copy(dim, idx, part)
    return out


class RoutedDistribution(Distribution):
    """The teams' distributions of one batch, read back in row order along ``dim`` (0 rows, 1 ``[T, B]``).

    ``log_prob`` takes values laid out like the batch (no extra leading sample dimensions)."""

    arg_constraints: dict = {}

    def __init__(self, parts: list[tuple[torch.Tensor, Distribution]], size: int, dim: int):
        super().__init__(validate_args=False)
        self.parts, self.size, self.dim = parts, size, dim

    def _gather(self, fn: Callable[[torch.Tensor, Distribution], torch.Tensor], dim: int) -> torch.Tensor:
        return _assemble([(idx, fn(idx, dist)) for idx, dist in self.parts], self.size, dim)

    def sample(self, sample_shape: torch.Size = torch.Size()) -> torch.Tensor:
        return self._gather(lambda idx, d: d.sample(sample_shape), self.dim + len(sample_shape))

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        return self._gather(lambda idx, d: d.log_prob(value.index_select(self.dim, idx)), self.dim)

    def entropy(self) -> torch.Tensor:
        return self._gather(lambda idx, d: d.entropy(), self.dim)

    @property
    def mode(self) -> torch.Tensor:
        return self._gather(lambda idx, d: d.mode, self.dim)


class _TeamNormalizer:
    """``obs_normalizer.update`` for PPO's ``norm_obs``: each team's statistics from its own rows."""

    def __init__(self, owner: "TeamPolicies"):
        self.owner = owner

    def update(self, obs: TensorObs) -> None:
        team = self.owner.teams_of(obs)
        for k, policy in enumerate(self.owner.teams):
            mask = team == k
            if mask.any():
                policy.obs_normalizer.update(tree_map(lambda x: x[mask], obs))


class TeamPolicies(Policy):
    """One sub-policy per team (``policies[k]`` plays team ``k``), routed by ``team_of(obs)``."""

    def __init__(self, policies: Sequence[Policy], team_of: TeamOf, team_names: Sequence[str] | None = None):
        if not policies:
            raise ValueError("TeamPolicies needs at least one sub-policy")
        super().__init__(policies[0].observation_space, policies[0].action_space)
        self.teams = nn.ModuleList(policies)
        self.team_of = team_of
        self.team_names = tuple(team_names) if team_names else tuple(f"team_{k}" for k in range(len(policies)))
        kinds = {p.recurrent for p in policies}
        if len(kinds) != 1:
            raise ValueError("TeamPolicies: every team's policy must be recurrent, or none")
        self.recurrent = kinds.pop()

    @property
    def obs_normalizer(self) -> _TeamNormalizer:
        if not all(hasattr(p, "obs_normalizer") for p in self.teams):
            raise AttributeError("obs_normalizer")  # so hasattr() says no, as PPO's norm_obs check expects
        return _TeamNormalizer(self)

    def teams_of(self, obs: TensorObs) -> torch.Tensor:
        """The team index of every row (leading dims of ``obs``), checked to name a sub-policy."""
        team = torch.as_tensor(self.team_of(obs)).long()
        if team.numel() and (int(team.min()) < 0 or int(team.max()) >= len(self.teams)):
            raise ValueError(f"team_of gave teams outside 0..{len(self.teams) - 1}")
        return team

    def initial_state(self, batch_size: int) -> torch.Tensor:
        return self.teams[0].initial_state(batch_size)

    def distribution_and_value(self, obs: TensorObs, state: torch.Tensor | None = None,
                               done: torch.Tensor | None = None
                               ) -> tuple[Distribution, torch.Tensor] | tuple[Distribution, torch.Tensor, torch.Tensor]:
        """Like the sub-policies' (``models.actor_critic``): rows, or ``[T, B]`` chunks with a state."""
        team = self.teams_of(obs)
        dim = 0 if state is None else 1
        if state is not None:
            if bool((team != team[:1]).any()):
                raise ValueError("an agent's team changed within a chunk")
            team = team[0]
        size = team.shape[0]
        dists, values, states = [], [], []
        for k, policy in enumerate(self.teams):
            idx = torch.nonzero(team == k).squeeze(-1)
            if idx.numel() == 0:
                continue
            rows = tree_map(lambda x: x.index_select(dim, idx), obs)
            if state is None:
                dist, value = policy.distribution_and_value(rows)
            else:
                dist, value, next_state = policy.distribution_and_value(rows, state.index_select(0, idx),
                                                                        done.index_select(1, idx))
                states.append((idx, next_state))
            dists.append((idx, dist))
            values.append((idx, value))
        routed, value = RoutedDistribution(dists, size, dim), _assemble(values, size, dim)
        return (routed, value) if state is None else (routed, value, _assemble(states, size, 0))

    def evaluate(self, obs: TensorObs, actions: torch.Tensor, state: torch.Tensor | None = None,
                 done: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        dist, value, *_ = self.distribution_and_value(obs, state, done)
        return dist.log_prob(actions), dist.entropy(), value

    def extra_repr(self) -> str:
        return f"teams={self.team_names}"


def team_policies(build: Callable[[], Policy], agent_teams: Sequence[int], team_of: TeamOf,
                  team_names: Sequence[str] | None = None) -> TeamPolicies:
    """``TeamPolicies`` with one ``build()`` per team named in ``agent_teams`` (team of each agent)."""
    n = max(agent_teams) + 1
    if sorted(set(agent_teams)) != list(range(n)):
        raise ValueError(f"agent_teams {tuple(agent_teams)} must use every team 0..{n - 1}")
    return TeamPolicies([build() for _ in range(n)], team_of, team_names)
